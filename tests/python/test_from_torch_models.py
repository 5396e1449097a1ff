"""tw.from_torch on today's language models (Hugging Face transformers, tiny configs, no weights)
and on the regions torch.export wraps in higher-order ops.

Each model is imported and run through ``tw.run_reference`` (the float64 interpreter) on the
model's own weights; every output must match the float64 torch forward to 1e-5 relative. Token
ids are int64 graph inputs; training these models through the compiled runtime beside torch is
test_hf_training.py.
"""

from __future__ import annotations

import copy

import pytest

import tilewise as tw

try:
    import torch
    from torch import nn
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

from test_from_torch import _transformers, assert_rel_close, op_types, run

pytestmark = pytest.mark.skipif(torch is None, reason="from_torch needs PyTorch: pip install torch==2.13.0")


def check(model, inputs, rtol=1e-5):
    """Import ``model`` on ``inputs`` (a dict of keyword inputs), run the graph, compare with torch."""
    g = tw.from_torch(model, inputs)
    assert g.num_parameters == sum(p.numel() for p in model.parameters())
    values = run(g, g.torch_import.feeds(model, inputs))
    m = copy.deepcopy(model).double()
    with torch.no_grad():
        out = m(**inputs)
    want = [o.numpy() for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    assert len(g.torch_import.outputs) == len(want)
    for name, w in zip(g.torch_import.outputs, want):
        assert_rel_close(values[name], w, rtol, what=name)
    return g


def _ids(*shape):
    return torch.randint(0, 100, shape)


# ----------------------------------------------------------------------------- wrappers


class NoGradRegion(nn.Module):
    """A no_grad region on a parameter-free path (as Llama's rotary embedding): torch.export wraps
    it in ``wrap_with_set_grad_enabled``; an autocast region becomes ``wrap_with_autocast``."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.register_buffer("freq", torch.arange(6.0) / 6)

    def forward(self, x):
        with torch.no_grad():
            angle = torch.arange(4.0)[:, None] * self.freq  # (4, 6), from constants only
            rot = torch.cos(angle)
        with torch.autocast("cpu", enabled=False):
            y = self.fc(x) * rot
        return torch.sigmoid(y) + x


def test_wrapped_regions_are_inlined():
    torch.manual_seed(0)
    model = NoGradRegion().eval()
    x = torch.randn(4, 6)
    g = tw.from_torch(model, x)
    values = run(g, g.torch_import.feeds(model, x))
    with torch.no_grad():
        want = copy.deepcopy(model).double()(x.double()).numpy()
    assert_rel_close(values[g.torch_import.outputs[0]], want, what="output")
    assert {"linear", "mul", "sigmoid", "add"} <= op_types(g)


# ----------------------------------------------------------------------------- Hugging Face models


def _llama_like(transformers, kind):
    cfg = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=100, max_position_embeddings=64, use_cache=False)
    if kind == "mistral":
        return transformers.MistralModel(transformers.MistralConfig(sliding_window=None, **cfg))
    return transformers.LlamaModel(transformers.LlamaConfig(**cfg))


@pytest.mark.parametrize("kind", ["llama", "mistral"])
def test_llama_and_mistral(kind):
    """The rotary embedding sits in a no_grad region (wrap_with_set_grad_enabled): inlined, folded to
    cos/sin constants; grouped-query attention repeats the key/value heads with expand + reshape."""
    transformers = _transformers()
    torch.manual_seed(1)
    model = _llama_like(transformers, kind).eval()
    g = check(model, {"input_ids": _ids(2, 8)})
    assert {"embedding_seq", "linear_nobias", "rsqrt", "silu", "softmax", "bmatmul_nt", "bmatmul", "concat_2",
            "neg"} <= op_types(g)
    assert g.torch_import.inputs == ["input_ids"]


def test_t5_encoder_decoder():
    """The position bias is masked with where(mask, bias, min) where the bias broadcasts (ScalarOther)."""
    transformers = _transformers()
    torch.manual_seed(2)
    cfg = transformers.T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, vocab_size=100,
                                use_cache=False)
    model = transformers.T5Model(cfg).eval()
    ids = _ids(2, 8)
    g = check(model, {"input_ids": ids, "decoder_input_ids": ids[:, :6]})
    assert g.torch_import.inputs == ["input_ids", "decoder_input_ids"]
    assert {"masked_fill", "expand", "relu"} <= op_types(g)


def test_gpt2():
    transformers = _transformers()
    torch.manual_seed(3)
    cfg = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=100, n_positions=64, use_cache=False,
                                  bos_token_id=0, eos_token_id=0)
    g = check(transformers.GPT2Model(cfg).eval(), {"input_ids": _ids(2, 8)})
    assert {"layer_norm", "matmul", "tanh", "softmax", "masked_fill"} <= op_types(g)


def test_distilbert():
    transformers = _transformers()
    torch.manual_seed(4)
    cfg = transformers.DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=100,
                                        max_position_embeddings=64)
    g = check(transformers.DistilBertModel(cfg).eval(), {"input_ids": _ids(2, 8)})
    assert {"layer_norm", "linear", "gelu", "softmax"} <= op_types(g)


def test_vit():
    transformers = _transformers()
    torch.manual_seed(6)
    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                 image_size=16, patch_size=4)
    g = check(transformers.ViTModel(cfg).eval(), {"pixel_values": torch.randn(2, 3, 16, 16)})
    assert {"conv2d", "concat_2", "layer_norm", "gelu", "softmax"} <= op_types(g)


def test_llama_training_graph_with_torch_loss_and_optimizer():
    """A training graph from torch's loss and optimizer: loss and every parameter's gradient as torch's
    (float64 interpreter; the compiled runtime: test_hf_training.py)."""
    import numpy as np
    import torch.nn.functional as F

    transformers = _transformers()
    torch.manual_seed(5)
    model = _llama_like(transformers, "llama").eval()
    inputs = {"input_ids": _ids(2, 8)}
    g = tw.from_torch(model, inputs, loss=F.mse_loss, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3))
    assert sum(op.type == "adam_weight" for op in g.ops) == len(list(model.parameters()))
    label = torch.randn(2, 8, 32, dtype=torch.float64)
    feeds = {**g.torch_import.feeds(model, inputs), "label": label.numpy()}
    for s in g.tensors_with_role("optimizer_state"):
        if s.producer is None:
            feeds[s.name] = np.zeros(s.shape)
    values = run(g, feeds)
    m = copy.deepcopy(model).double()
    loss = F.mse_loss(m(**inputs).last_hidden_state, label)
    loss.backward()
    assert values["loss"] == pytest.approx(loss.item(), rel=1e-9)
    grads = {t.grad_of.name: values[t.name] for t in g.tensors
             if t.grad_of is not None and t.grad_of.role == "parameter"}
    for name, p in m.named_parameters():
        assert_rel_close(grads[name], p.grad.numpy(), 1e-6, what=f"d {name}")

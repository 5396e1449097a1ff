"""tw.from_torch: PyTorch modules imported as graphs, checked against PyTorch itself.

The oracle is the torch module run in float64 on the same weights; the imported graph runs in
the C++ reference interpreter (float64), so outputs must agree to 1e-5 relative. Needs torch
(skipped without); the models nobody here wrote come from Hugging Face transformers (skipped
without): ResNet-50 (ResNetConfig(), torchvision's layout, 25,557,032 parameters with 1000
classes) and BERT (bert-base from BertConfig(): 109,482,240 parameters with the pooler), built
from configs, no weights downloaded. Big configs are imported for shapes only; numbers are
checked on small configs. timm's ResNet would do too, but timm does not import without
torchvision, which does not install beside this torch.
"""

from __future__ import annotations

import copy
import zlib

import numpy as np
import pytest

import tdl_ops
import tilewise as tw

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="from_torch needs PyTorch: pip install torch==2.13.0")


def _transformers():
    try:
        import transformers
    except ImportError:
        pytest.skip("needs Hugging Face transformers: pip install transformers")
    return transformers


# ----------------------------------------------------------------------------- helpers


def run(graph, feeds):
    """Every tensor's value: tw.run_reference, or op.evaluate op by op where that is missing."""
    if hasattr(tw, "run_reference"):
        return tw.run_reference(graph, feeds)
    values = dict(feeds)
    for op in graph.ops:
        values[op.output.name] = op.op.evaluate(*(values[t.name] for t in op.inputs), out=op.output.shape,
                                                **op.attrs)
    return values


def torch_outputs(model, *inputs):
    """The model's outputs in float64 (a copy of the model: its weights, and BatchNorm's buffers, stay)."""
    m = copy.deepcopy(model).double()
    args = [x.double() if x.is_floating_point() else x for x in inputs]
    with torch.no_grad():
        out = m(*args)
    # The leaves in the order torch.export flattens outputs (tuples, named tuples, HF ModelOutputs).
    return [o.numpy() for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]


def assert_rel_close(got, want, rtol=1e-5, what=""):
    """max |got - want| <= rtol * max |want| (relative to the tensor's scale, not element by element)."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, torch {want.shape}"
    scale = max(float(np.abs(want).max()), 1e-30)
    err = float(np.abs(got - want).max())
    assert err <= rtol * scale, f"{what}: max error {err:.3g} is {err / scale:.3g} of the scale {scale:.3g}"


def check_against_torch(model, *inputs, rtol=1e-5):
    """Import, count parameters, run the graph on the model's weights, compare every output with torch."""
    g = tw.from_torch(model, inputs)
    assert g.num_parameters == sum(p.numel() for p in model.parameters())
    values = run(g, g.torch_import.feeds(model, *inputs))
    want = torch_outputs(model, *inputs)
    assert len(g.torch_import.outputs) == len(want)
    for name, w in zip(g.torch_import.outputs, want):
        assert_rel_close(values[name], w, rtol, what=name)
    return g


def op_types(g) -> set:
    return {op.type for op in g.ops}


# ----------------------------------------------------------------------------- hand-written models

if torch is not None:

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 32)
            self.drop = nn.Dropout(0.25)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            return F.log_softmax(self.fc2(self.drop(torch.tanh(self.fc1(x)))), dim=-1)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                nn.AvgPool2d(2), nn.Conv2d(16, 16, 3, padding=2, dilation=2), nn.Sigmoid(),
                nn.AdaptiveAvgPool2d((1, 1)))
            self.classifier = nn.Linear(16, 10)

        def forward(self, x):
            return F.softmax(self.classifier(torch.flatten(self.features(x), 1)), dim=1)

    class Kitchen(nn.Module):
        """Many ATen ops in one model: attention, broadcasting, views, slicing, joins, reductions."""

        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 8)
            self.q = nn.Linear(8, 8)
            self.ln = nn.LayerNorm(8, elementwise_affine=False)
            self.bn = nn.BatchNorm1d(4)
            self.conv = nn.Conv1d(4, 4, 3, padding=1)
            self.dw = nn.Conv2d(4, 4, 3, padding=1, groups=4)

        def forward(self, ids, x):
            e = self.emb(ids)                                               # (2, 5, 8)
            h = self.q(e).view(2, 5, 2, 4).transpose(1, 2)                  # (2, 2, 5, 4)
            att = F.scaled_dot_product_attention(h, h, h, is_causal=True)
            s = torch.matmul(h, h.transpose(-1, -2)) / 2.0                  # (2, 2, 5, 5)
            mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
            s = s.masked_fill(mask, float("-inf")).softmax(dim=-1)
            y = (s @ h + att).permute(0, 2, 1, 3).reshape(2, 5, 8)
            y = self.ln(y) * 0.5 - 1.0
            a, b = y.chunk(2, dim=-1)                                       # (2, 5, 4) each
            z = torch.cat([a, b * 2], dim=1)                                # (2, 10, 4)
            z = z[:, 1:9:2, :] + z.mean(dim=1, keepdim=True)                # (2, 4, 4)
            c = self.conv(self.bn(x))                                       # (2, 4, 5)
            c = F.pad(c, (1, 2))[..., 1:6]
            w = torch.stack([c, c.sigmoid()], dim=1).sum(1)                 # (2, 4, 5)
            t = torch.tanh(z.sum(-1)).unsqueeze(-1) * w.var(dim=-1, keepdim=True)
            d = self.dw(w.unsqueeze(-1).expand(2, 4, 5, 5).contiguous())    # (2, 4, 5, 5)
            r = 1 - F.softmax(d, dim=1)
            r = (F.gelu(r, approximate="tanh") + F.leaky_relu(d, 0.2) + torch.clamp(d, -1, 1) + F.relu6(d)
                 + d.pow(2) + torch.rsqrt(d.abs() + 1))
            out1 = r.flatten(2).max(dim=-1).values.unsqueeze(1) + t         # (2, 4, 4)
            out2 = x.select(1, 0) * e[:, :, 0] - x.sum() / 7                # (2, 5)
            return out1, out2


    class Pantry(nn.Module):
        """The rules Kitchen leaves out: matrix products, norms, pools, splits and reductions."""

        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(6, 6))
            self.b = nn.Parameter(torch.randn(6))
            self.rms = nn.RMSNorm(6)
            self.bn = nn.BatchNorm1d(6)
            self.conv = nn.Conv2d(2, 2, 3, padding="same")
            self.pool = nn.AdaptiveAvgPool2d((2, 2))

        def forward(self, x, img):                                       # x (4, 6), img (1, 2, 4, 4)
            y = torch.addmm(self.b, x, self.w) + torch.mm(x, self.w.t())
            y = self.bn(F.hardtanh(y, -2.0, 2.0)) + F.elu(y, 0.5) + F.softplus(y) + torch.clamp(y, min=0)
            z = torch.bmm(y.view(2, 2, 6), self.w.expand(2, 6, 6))      # (2, 2, 6)
            z = torch.matmul(z, self.w) + torch.matmul(self.b, self.w) + torch.matmul(self.w, self.b)
            z = self.rms(z).cumsum(dim=1) - z.var(dim=-1, keepdim=True)
            p, q, r = torch.split(z, [1, 2, 3], dim=-1)
            u, v = z.unbind(dim=1)                                       # (2, 6) each
            m = torch.maximum(p, q.sum(-1, keepdim=True)) + r.flip(-1).amax(-1, keepdim=True)
            i = self.pool(self.conv(img)).flatten()                      # (8,)
            return m, u * v, torch.where(torch.arange(6) < 3, u, 0.5), z.argmax(-1), z.max(dim=1), i


    class LanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 6)
            self.lstm = nn.LSTM(6, 8, num_layers=2, batch_first=True)
            self.head = nn.Linear(8, 20)

        def forward(self, ids):
            out, (h, c) = self.lstm(self.emb(ids))
            return self.head(out), h, c


# ----------------------------------------------------------------------------- tests


@needs_torch
def test_mlp_parameters_names_and_numbers():
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(8, 16)
    g = check_against_torch(model, x)
    params = {t.name: t.shape for t in g.tensors_with_role("parameter")}
    assert params == {n: tuple(p.shape) for n, p in model.named_parameters()}
    assert op_types(g) == {"linear", "tanh", "log_softmax"}  # eval-mode dropout is gone
    assert g.torch_import.inputs == ["x"] and g.torch_import.dropout_masks == {}
    assert g.op("fc1.linear").inputs[1].name == "fc1.weight"
    assert g.outputs["output"].name == g.torch_import.outputs[0]


@needs_torch
def test_dropout_in_training_mode_takes_a_mask_input():
    torch.manual_seed(1)
    model = MLP().train()
    x = torch.randn(8, 16)
    g = tw.from_torch(model, x)
    (mask_name, p), = g.torch_import.dropout_masks.items()
    assert p == 0.25 and g.tensor(mask_name).role == "input" and g.tensor(mask_name).shape == (8, 32)
    feeds = g.torch_import.feeds(model, x)
    mask = (np.random.default_rng(0).uniform(size=(8, 32)) > 0.25).astype(np.float64)
    feeds[mask_name] = mask
    got = run(g, feeds)[g.torch_import.outputs[0]]
    m = copy.deepcopy(model).double()
    with torch.no_grad():
        h = torch.tanh(m.fc1(x.double())) * torch.from_numpy(mask) / 0.75
        want = F.log_softmax(m.fc2(h), dim=-1).numpy()
    assert_rel_close(got, want)


@needs_torch
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_cnn(training):
    torch.manual_seed(2)
    model = CNN().train(training)
    if not training:  # running statistics that are not the defaults
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
    g = check_against_torch(model, torch.randn(2, 3, 16, 16))
    bn = "batch_norm_train" if training else "batch_norm_inference"
    assert {"conv2d", bn, "relu", "max_pool2d", "avg_pool2d", "global_avg_pool2d", "linear", "softmax"} <= op_types(g)
    assert g.op("features.0.conv2d").attrs["padding"] == 1
    constants = g.torch_import.constants
    if training:
        assert constants == {}
    else:  # running statistics are graph inputs with their values recorded
        assert set(constants) == {f"features.{i}.running_{s}" for i in (1, 5) for s in ("mean", "var")}
        np.testing.assert_array_equal(constants["features.1.running_mean"], model.features[1].running_mean.numpy())


@needs_torch
def test_many_aten_ops_against_torch():
    torch.manual_seed(3)
    model = Kitchen()
    ids = torch.randint(0, 10, (2, 5))
    x = torch.randn(2, 4, 5)
    g = check_against_torch(model, ids, x)
    types = op_types(g)
    assert {"masked_fill", "bmatmul_nt", "bmatmul", "depthwise_conv2d", "conv1d", "batch_norm_train", "layer_norm",
            "embedding_seq", "slice_axis", "pad", "reduce_var", "max_dim"} <= types
    assert g.tensor("ids").dtype == "int64"


@needs_torch
def test_more_aten_ops_against_torch():
    torch.manual_seed(12)
    g = check_against_torch(Pantry().train(), torch.randn(4, 6), torch.randn(1, 2, 4, 4))
    assert {"matmul", "batch_matmul", "matmul_nd", "rms_norm", "cumsum", "reduce_var", "argmax", "reduce_max",
            "adaptive_avg_pool2d", "flip", "masked_fill"} <= op_types(g)


@needs_torch
def test_lstm_is_unrolled_with_step_tags():
    torch.manual_seed(13)
    g = check_against_torch(LanguageModel().eval(), torch.randint(0, 20, (2, 3)))
    cells = [op for op in g.ops if op.type == "lstm_cell"]
    assert len(cells) == 6  # 2 layers x 3 steps
    # The k-th op of every step of a layer shares an unroll key, for coarsening (Tofu 5.1): a step is
    # its rows of the input projection (select), linear of h, add, lstm_cell, lstm_hidden.
    assert {op.unroll_key for op in cells if op.name.startswith("lstm.l0.")} == {"lstm.lstm.l0/3"}
    # Each layer projects its whole input sequence in one op, outside the steps, as PyTorch does.
    projections = [op for op in g.ops if op.name.endswith("input_projection")]
    assert [(op.type, op.unroll_key) for op in projections] == [("linear", "")] * 2


@needs_torch
def test_unmappable_ops_are_listed_in_one_error():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(4, 4, 3, groups=2)
            self.b = nn.Conv2d(4, 4, 3, groups=2)

        def forward(self, x):
            y = self.b(self.a(x)).flatten(1)
            return torch.atan(y) + torch.atan(2 * y) + torch.sort(y, dim=1).values

    with pytest.raises(tw.GraphError) as err:
        tw.from_torch(Odd(), torch.randn(2, 4, 9, 9))
    msg = str(err.value)
    assert "3 kind(s) of torch op (5 node(s)) in Odd" in msg
    assert "aten.conv2d.default (2 nodes): grouped convolution (groups=2" in msg
    assert "aten.atan.default (2 nodes): no conversion rule" in msg
    assert "aten.sort.default (1 node): no conversion rule" in msg
    assert "node 'conv2d' in a (Conv2d)" in msg and "test_from_torch.py" in msg
    assert [(t, n) for t, _, n, _ in err.value.unmapped] == [("aten.conv2d.default", 2), ("aten.atan.default", 2),
                                                             ("aten.sort.default", 1)]


@needs_torch
def test_tied_weights_are_one_parameter():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.out = nn.Linear(4, 10, bias=False)
            self.out.weight = self.emb.weight

        def forward(self, ids):
            return self.out(self.emb(ids))

    torch.manual_seed(11)
    g = check_against_torch(Tied(), torch.randint(0, 10, (3,)))
    assert [t.name for t in g.tensors_with_role("parameter")] == ["emb.weight"] and g.num_parameters == 40


@needs_torch
def test_in_place_updates():
    class InPlace(nn.Module):
        def forward(self, x):
            y = x * 2
            y.add_(1)  # nothing reads add_'s result: the update must still happen
            return y.relu_().view(6) + 1

    class ThroughView(nn.Module):
        def forward(self, x):
            y = x * 2
            v = y.view(6)
            y.add_(1)  # changes v too
            return v + 1

    check_against_torch(InPlace(), torch.randn(2, 3))
    with pytest.raises(tw.GraphError, match="aten.add_.Tensor .1 node.: an in-place update of a tensor that shares"):
        tw.from_torch(ThroughView(), torch.randn(2, 3))


@needs_torch
def test_capture_errors():
    class DataDependent(nn.Module):
        def forward(self, x):
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(tw.GraphError, match="torch.export could not capture DataDependent"):
        tw.from_torch(DataDependent(), torch.randn(3))
    with pytest.raises(tw.GraphError, match="expected a torch.nn.Module"):
        tw.from_torch(lambda x: x, torch.randn(3))


@needs_torch
def test_training_graph_through_trace():
    if not hasattr(tw, "trace"):
        pytest.skip("this tilewise has no tw.trace")
    torch.manual_seed(4)
    model = MLP().eval()
    x, y = torch.randn(8, 16), torch.randn(8, 10)
    g = tw.from_torch(model, x, loss=tdl_ops.mse_loss, optimizer=tw.optim.SGD(lr=0.1))
    assert g.num_parameters == sum(p.numel() for p in model.parameters())
    feeds = g.torch_import.feeds(model, x)
    feeds["label"] = y.double().numpy()
    values = run(g, feeds)
    m = copy.deepcopy(model).double()
    loss = F.mse_loss(m(x.double()), y.double())
    loss.backward()
    assert values["loss"] == pytest.approx(loss.item(), rel=1e-9)
    updated = {t.updates.name: values[t.name] for t in g.tensors if t.updates is not None}
    for name, p in m.named_parameters():
        assert_rel_close(updated[name], (p - 0.1 * p.grad).detach().numpy(), what=name)


# ----------------------------------------------------------------------------- Hugging Face models


def _small_bert(transformers):
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                  vocab_size=100, max_position_embeddings=64)
    return transformers.BertModel(cfg)


@needs_torch
def test_bert_small_numbers():
    transformers = _transformers()
    torch.manual_seed(5)
    model = _small_bert(transformers).eval()
    ids = torch.randint(0, 100, (2, 8))
    g = check_against_torch(model, ids)  # last_hidden_state and pooler_output
    assert {"embedding_seq", "layer_norm", "linear", "bmatmul_nt", "softmax", "bmatmul", "gelu", "tanh"} <= op_types(g)
    # Position ids 0..7 read rows 0..7 of the table (a slice), token types 0 one row (broadcast):
    # no constant inputs, no all-True attention mask.
    assert g.torch_import.constants == {}
    assert [t.name for t in g.tensors_with_role("input")] == ["input_ids"]


@needs_torch
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_bert_small_with_padding_mask(attention):
    """The attention mask is an input: HF turns it into a boolean mask (sdpa) or an additive one (eager)."""
    transformers = _transformers()
    torch.manual_seed(10)
    model = _small_bert(transformers)
    model.config._attn_implementation = attention
    model.eval()
    ids = torch.randint(0, 100, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 5:] = 0
    g = check_against_torch(model, ids, mask)
    assert g.torch_import.inputs == ["input_ids", "attention_mask"] and g.torch_import.constants == {}


@needs_torch
def test_bert_small_training_gradients():
    transformers = _transformers()
    if not hasattr(tw, "trace"):
        pytest.skip("this tilewise has no tw.trace")
    torch.manual_seed(6)
    model = _small_bert(transformers).eval()
    ids = torch.randint(0, 100, (2, 8))
    g = tw.from_torch(model, ids, loss=tdl_ops.mse_loss)
    label = torch.randn(2, 8, 32)
    feeds = g.torch_import.feeds(model, ids)
    feeds["label"] = label.double().numpy()
    values = run(g, feeds)
    m = copy.deepcopy(model).double()
    loss = F.mse_loss(m(ids).last_hidden_state, label.double())
    loss.backward()
    assert values["loss"] == pytest.approx(loss.item(), rel=1e-9)
    grads = {t.grad_of.name: values[t.name] for t in g.tensors
             if t.grad_of is not None and t.grad_of.role == "parameter"}
    scale = max(float(p.grad.abs().max()) for p in m.parameters() if p.grad is not None)
    checked = 0
    for name, p in m.named_parameters():
        if p.grad is not None:  # the pooler does not reach last_hidden_state
            err = float(np.abs(grads[name] - p.grad.numpy()).max())
            assert err <= 1e-5 * scale, f"{name}: {err:.3g}"  # key biases: both ~0 (softmax shift invariance)
            checked += 1
    assert checked == 37


@needs_torch
def test_bert_base_parameter_count():
    transformers = _transformers()
    torch.manual_seed(7)
    model = transformers.BertModel(transformers.BertConfig())  # training mode: dropout masks are inputs
    g = tw.from_torch(model, torch.zeros(2, 128, dtype=torch.long))
    assert g.num_parameters == sum(p.numel() for p in model.parameters()) == 109482240
    assert g.tensor("encoder.layer.11.attention.self.query.weight").shape == (768, 768)
    assert len(g.torch_import.dropout_masks) == 37  # embeddings, 3 per layer (attention probabilities included)
    assert g.outputs["output"].shape == (2, 128, 768) and g.outputs["output_1"].shape == (2, 768)


@needs_torch
def test_resnet_small_numbers():
    transformers = _transformers()
    torch.manual_seed(8)
    cfg = transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 2], layer_type="bottleneck",
                                    num_labels=5)
    model = transformers.ResNetForImageClassification(cfg).train()
    g = check_against_torch(model, torch.randn(2, 3, 32, 32))
    assert {"conv2d", "batch_norm_train", "max_pool2d", "relu", "add", "global_avg_pool2d", "linear"} == op_types(g)


@needs_torch
def test_resnet50_parameter_count():
    transformers = _transformers()
    torch.manual_seed(9)
    model = transformers.ResNetForImageClassification(transformers.ResNetConfig(num_labels=1000))
    g = tw.from_torch(model, torch.zeros(2, 3, 224, 224))
    assert g.num_parameters == sum(p.numel() for p in model.parameters()) == 25557032
    counts = {}
    for op in g.ops:
        counts[op.type] = counts.get(op.type, 0) + 1
    assert counts["conv2d"] == counts["batch_norm_train"] == 53 and counts["linear"] == 1
    assert g.tensor("resnet.embedder.embedder.convolution.weight").shape == (64, 3, 7, 7)


# ----------------------------------------------------------------------------- torch_extra ops


_EXTRA = ("reshape", "expand", "sum_to", "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div",
          "masked_fill", "bmatmul", "bmatmul_nt", "bmatmul_tn", "matmul_nd", "matmul_nd_tn")


@pytest.mark.skipif(not hasattr(tw, "grad"), reason="this tilewise has no tw.grad")
@pytest.mark.parametrize("case", [c for c in tdl_ops.CASES if c.op in _EXTRA], ids=lambda c: c.id)
def test_torch_extra_gradients_match_finite_differences(case):
    """Each gradient rule of tdl_ops.torch_extra against central differences of the NumPy reference."""
    op = tdl_ops.ALL[case.op]
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    inputs = tdl_ops.make_inputs(case, rng)
    g = tw.Graph()
    params = [g.parameter(f"p{k}", x.shape) for k, x in enumerate(inputs)]
    out = op(*params, **case.attrs)
    target = g.input("target", out.shape)
    grads = tw.grad(g, tdl_ops.mse_loss(out, target))
    t = rng.standard_normal(out.shape)
    values = run(g, {**{f"p{k}": x for k, x in enumerate(inputs)}, "target": t})

    def loss(xs):
        return ((op.reference(*xs, **case.attrs) - t) ** 2).mean()

    differentiable = [0] if case.op == "masked_fill" else range(len(inputs))
    for k in differentiable:
        numeric = np.zeros_like(inputs[k])
        for idx in np.ndindex(inputs[k].shape):
            up = [x.copy() for x in inputs]
            down = [x.copy() for x in inputs]
            up[k][idx] += 1e-6
            down[k][idx] -= 1e-6
            numeric[idx] = (loss(up) - loss(down)) / 2e-6
        assert_rel_close(values[grads[f"p{k}"].name], numeric, rtol=1e-6, what=f"d/d{op.inputs[k]}")


def test_dot_t_and_baddbmm_as_falcon_and_bloom_write_them():
    """x @ W.T (Falcon's FalconLinear: aten.numpy_T) on matrices and a rank-3 tensor, and
    baddbmm(bias, q, k, beta, alpha) (Bloom's ALiBi attention scores), forward against torch."""

    class DotT(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(6, 5))

        def forward(self, x, z):
            return x @ self.w.T, z.T.sum(dim=0) * 1.0

    class AlibiScores(nn.Module):
        def forward(self, alibi, q, k):
            return alibi.baddbmm(batch1=q, batch2=k, beta=0.5, alpha=0.25), torch.baddbmm(alibi, q, k)

    torch.manual_seed(0)
    g = check_against_torch(DotT(), torch.randn(3, 5), torch.randn(2, 3, 4))
    assert "permute" in op_types(g) or "transpose" in op_types(g)
    check_against_torch(AlibiScores(), torch.randn(4, 1, 7), torch.randn(4, 3, 8), torch.randn(4, 8, 7))


def test_position_ids_from_the_padding_mask_as_roberta_makes_them():
    """RoBERTa's embeddings: ids.ne(pad) -> cumsum -> * mask + pad as position ids (computed in float32,
    exact for ids below 2^24), and token type ids gathered from a zero buffer by those positions
    (a constant): forward against torch, the embedding tables' gradients too."""

    class Positions(nn.Module):
        def __init__(self):
            super().__init__()
            self.positions = nn.Embedding(12, 4, padding_idx=1)
            self.words = nn.Embedding(20, 4, padding_idx=1)
            self.types = nn.Embedding(1, 4)
            self.register_buffer("type_ids", torch.zeros(1, 10, dtype=torch.long), persistent=False)

        def forward(self, ids):
            mask = ids.ne(1).int()
            pos = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + 1
            types = torch.gather(self.type_ids.expand(ids.shape[0], -1), dim=1, index=pos)
            same = ids.eq(1).float()
            return self.words(ids) + self.positions(pos) + self.types(types), same

    torch.manual_seed(0)
    ids = torch.tensor([[5, 7, 9, 1, 1], [3, 1, 4, 6, 1]])
    check_against_torch(Positions(), ids)


def test_comparisons_of_float_tensors_are_refused_not_made_nan():
    """ne/eq with a number are imported for integer ids and masks only: on floats, sign(|x - c|) would
    turn NaN into NaN where torch says True (ne) or False (eq)."""

    class FloatCompare(nn.Module):
        def forward(self, x):
            return x * x.ne(0).float()

    with pytest.raises(tw.GraphError, match="floating-point tensor"):
        tw.from_torch(FloatCompare(), (torch.randn(3),))

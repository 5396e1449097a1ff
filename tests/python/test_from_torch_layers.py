"""tw.from_torch on the layers of issue 14: GRU, GroupNorm, SiLU, Upsample (nearest, bilinear),
AdaptiveMaxPool1d, checked against torch (forward and parameter gradients) in float64 through
``tw.run_reference``."""

from __future__ import annotations

import copy

import pytest

import tdl_ops
import tilewise as tw

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

from test_from_torch import assert_rel_close, op_types, run

pytestmark = pytest.mark.skipif(torch is None, reason="from_torch needs PyTorch: pip install torch==2.13.0")


def check_forward_and_gradients(model, inputs, rtol=1e-4):
    """Forward outputs, the MSE loss of the first output against a random label, and every
    parameter's gradient, against torch in float64."""
    g = tw.from_torch(model, inputs)
    values = run(g, g.torch_import.feeds(model, *inputs))
    m = copy.deepcopy(model).double()
    out = m(*(x.double() for x in inputs))
    leaves = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    for name, w in zip(g.torch_import.outputs, leaves):
        assert_rel_close(values[name], w.detach().numpy(), rtol, what=name)

    train = tw.from_torch(model, inputs, loss=tdl_ops.mse_loss)
    label = torch.randn(leaves[0].shape, dtype=torch.float64)
    feeds = train.torch_import.feeds(model, *inputs)
    feeds["label"] = label.numpy()
    values = run(train, feeds)
    loss = F.mse_loss(leaves[0], label)
    loss.backward()
    assert values["loss"] == pytest.approx(loss.item(), rel=1e-9)
    grads = {t.grad_of.name: values[t.name] for t in train.tensors
             if t.grad_of is not None and t.grad_of.role == "parameter"}
    for name, p in m.named_parameters():
        assert_rel_close(grads[name], p.grad.numpy(), rtol, what=f"d {name}")
    return g


if torch is not None:

    class GRUModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(4, 6, num_layers=2, batch_first=True)
            self.head = nn.Linear(6, 3)

        def forward(self, x):
            out, h = self.gru(x)
            return self.head(out), h

    class UNetBlock(nn.Module):
        """Down (conv, GroupNorm, SiLU, max pool) and up (nearest and bilinear Upsample, cat, conv)."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
            self.norm1 = nn.GroupNorm(4, 8)
            self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
            self.norm2 = nn.GroupNorm(2, 8, affine=False)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.up_bilinear = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.out = nn.Conv2d(8 + 8 + 3, 4, 1)
            self.pool1d = nn.AdaptiveMaxPool1d(4)

        def forward(self, x):
            h = F.silu(self.norm1(self.conv1(x)))          # (2, 8, 8, 8)
            d = F.max_pool2d(h, 2)                           # (2, 8, 4, 4)
            d = nn.functional.silu(self.norm2(self.conv2(d)))
            u = torch.cat([self.up(d), self.up_bilinear(d), x], dim=1)  # (2, 19, 8, 8)
            y = self.out(u)
            return y, self.pool1d(y.flatten(2))              # (2, 4, 8, 8), (2, 4, 4)


def test_gru_forward_and_gradients():
    torch.manual_seed(0)
    model = GRUModel()
    g = check_forward_and_gradients(model, (torch.randn(2, 5, 4),))
    assert {"gru_cell", "linear", "select", "stack_5"} <= op_types(g)
    assert sum(op.type == "gru_cell" for op in g.ops) == 10  # 2 layers x 5 steps


def test_unet_block_forward_and_gradients():
    torch.manual_seed(1)
    model = UNetBlock()
    g = check_forward_and_gradients(model, (torch.randn(2, 3, 8, 8),))
    assert {"layer_norm", "silu", "upsample_nearest2d", "matmul_nd", "max_pool1d", "concat_3"} <= op_types(g)


@pytest.mark.parametrize("kwargs", [{"size": (6, 9)}, {"scale_factor": (1, 3)},
                                    {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True},
                                    {"size": 7, "mode": "linear"}], ids=str)
def test_upsample_sizes_and_modes(kwargs):
    torch.manual_seed(2)
    shape = (1, 2, 5) if kwargs.get("mode") == "linear" else (1, 2, 3, 3)
    model = nn.Sequential(nn.Upsample(**kwargs), nn.Tanh())
    x = torch.randn(shape)
    g = tw.from_torch(model, x)
    values = run(g, g.torch_import.feeds(model, x))
    with torch.no_grad():
        want = model.double()(x.double()).numpy()
    assert_rel_close(values[g.torch_import.outputs[0]], want, 1e-6, what="upsample")
    if kwargs == {"scale_factor": (1, 3)}:
        assert "upsample_nearest2d_hw" in op_types(g)


def test_adaptive_max_pool1d_indices_are_refused():
    class Indices(nn.Module):
        def forward(self, x):
            return F.adaptive_max_pool1d(x, 2, return_indices=True)[1].float()

    with pytest.raises(tw.GraphError, match="the indices of adaptive max pooling"):
        tw.from_torch(Indices(), torch.randn(1, 2, 4))


def test_group_norm_of_sequences_and_adaptive_max_pool2d():
    torch.manual_seed(3)
    model = nn.ModuleDict({"gn": nn.GroupNorm(3, 6), "pool": nn.AdaptiveMaxPool2d(2), "top": nn.AdaptiveMaxPool2d(1)})

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, seq, img):
            return self.m["gn"](seq), self.m["pool"](img) + self.m["top"](img)

    net = Net()
    with torch.no_grad():
        net.m["gn"].bias.normal_()
    seq, img = torch.randn(2, 6, 5), torch.randn(2, 3, 4, 4)
    g = tw.from_torch(net, (seq, img))
    values = run(g, g.torch_import.feeds(net, seq, img))
    with torch.no_grad():
        want = copy.deepcopy(net).double()(seq.double(), img.double())
    for name, w in zip(g.torch_import.outputs, want):
        assert_rel_close(values[name], w.numpy(), 1e-6, what=name)
    assert {"layer_norm", "broadcast_add", "max_pool2d", "global_max_pool2d"} <= op_types(g)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_bidirectional_recurrent_layers(kind):
    class Bi(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True)  # time first

        def forward(self, x):
            out, state = self.rnn(x)
            return out, state if kind == "GRU" else state[1]

    torch.manual_seed(4)
    g = check_forward_and_gradients(Bi(), (torch.randn(3, 2, 3),))
    assert g.outputs["output"].shape == (3, 2, 8) and g.outputs["output_1"].shape == (4, 2, 4)


def test_a_table_read_by_a_constant_index_is_a_lookup():
    """Swin's relative position bias: a parameter table read by a constant index buffer
    (``table[index]``, negative ids included) becomes an embedding lookup: forward and the table's
    gradient against torch. A boolean mask that picks elements is still refused, naming it."""

    class RelativeBias(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Parameter(torch.randn(9, 2))
            index = torch.randint(-9, 9, (4, 4))
            self.register_buffer("index", index, persistent=False)

        def forward(self, x):
            bias = self.table[self.index].permute(2, 0, 1)  # (heads, 4, 4)
            return x + bias

    torch.manual_seed(0)
    model = RelativeBias()
    check_forward_and_gradients(model, (torch.randn(3, 2, 4, 4),))
    g = tw.from_torch(model, (torch.randn(3, 2, 4, 4),))
    assert "embedding" in op_types(g)

    class Masked(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(6))
            self.register_buffer("keep", torch.tensor([True, False, True, True, False, True]), persistent=False)

        def forward(self, x):
            return x * self.w[self.keep].sum()

    with pytest.raises(tw.GraphError, match="boolean mask|gather"):
        tw.from_torch(Masked(), (torch.randn(3),))

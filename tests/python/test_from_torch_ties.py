"""tw.from_torch where torch's functions tie or clip: torch.max/min(x, dim) (the gradient to the returned
index), argmin, clamp with one bound or min=0 (dy at the bound), hardtanh (0 at its bounds), amax over
several axes and max over all (split evenly over every tied entry), maximum/minimum with a number (half
on a tie). Each against torch in float64 through the reference, and on the runtime's native kernels on
1 and 2 devices."""

from __future__ import annotations

import copy

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

pytestmark = pytest.mark.skipif(torch is None, reason="from_torch needs PyTorch: pip install torch==2.13.0")

if torch is not None:
    # Integer values with repeats: every row, column and bound below has ties.
    _W = torch.tensor([[1., 3., 3., 0., 2.], [0., 0., -1., 0., 2.], [2., 2., 2., 2., 2.], [-1., 5., 5., -1., 0.]])

    class Ties(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.w = nn.Parameter(_W.clone())
            self.f = f

        def forward(self, x):
            return self.f(self.w * x)

    _CASES = {
        "max_dim": (lambda h: torch.max(h, 1).values, "max_dim"),
        "min_dim_axis0": (lambda h: torch.min(h, 0)[0], "min_dim"),
        "max_values_times_indices": (lambda h: torch.max(h, 1)[0] * torch.max(h, 1)[1].float(), "argmax"),
        "min_values_plus_indices": (lambda h: torch.min(h, 1)[0] + torch.min(h, 1)[1].float(), "argmin"),
        "argmin": (lambda h: h.sum(1) * torch.argmin(h, 1).float(), "argmin"),
        "clamp_min_0": (lambda h: torch.clamp(h, min=0), "clip"),
        "clamp_max": (lambda h: torch.clamp(h, max=2), "clip"),
        "clamp_min_method": (lambda h: h.clamp_min(0), "clip"),
        "hardtanh": (lambda h: F.hardtanh(h, -1, 2), "hardtanh"),
        "amax_two_axes": (lambda h: h.reshape(2, 2, 5).amax(dim=(0, 2)), "reduce_max"),
        "max_of_all": (lambda h: h.max().reshape(1), "reduce_max"),
        "maximum_with_0": (lambda h: torch.maximum(h, torch.tensor(0.0)), "broadcast_maximum"),
        "minimum_with_2": (lambda h: torch.minimum(h, torch.tensor(2.0)), "broadcast_minimum"),
    }


def _torch_grad(model, x, label):
    m = copy.deepcopy(model).double()
    loss = F.mse_loss(m(x.double()), label)
    loss.backward()
    return loss.item(), m.w.grad.numpy()


@pytest.mark.parametrize("name", list(_CASES) if torch is not None else [])
def test_the_reference_takes_torchs_gradient_at_ties(name):
    f, op = _CASES[name]
    model, x = Ties(f), torch.ones(4, 5)
    out_shape = model(x).shape
    label = torch.tensor(np.random.default_rng(0).integers(-3, 4, size=out_shape), dtype=torch.float64)
    g = tw.from_torch(model, (x,), loss=tdl_ops.mse_loss)
    assert op in {o.type for o in g.ops}
    feeds = g.torch_import.feeds(model, x) | {"label": label.numpy()}
    values = tw.run_reference(g, feeds)
    loss, want = _torch_grad(model, x, label)
    assert values["loss"] == pytest.approx(loss, rel=1e-12)
    grad = next(t for t in g.tensors if t.grad_of is not None and t.grad_of.name == "w")
    np.testing.assert_allclose(values[grad.name], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("name", list(_CASES) if torch is not None else [])
def test_the_runtime_takes_torchs_gradient_at_ties(name, devices):
    f, _ = _CASES[name]
    model, x = Ties(f), torch.ones(4, 5)
    label = torch.tensor(np.random.default_rng(0).integers(-3, 4, size=model(x).shape), dtype=torch.float64)
    g = tw.from_torch(model, (x,), loss=tdl_ops.mse_loss)
    exe = tw.compile(g, tw.partition(g, devices=devices, algorithm="tofu"))
    feeds = g.torch_import.feeds(model, x) | {"label": label.numpy()}
    for t in g.tensors:
        if t.role in ("parameter", "constant") and t.name in feeds:
            exe.set(t, np.asarray(feeds.pop(t.name), np.float32))
    out = exe.step({k: np.asarray(v, np.float32) for k, v in feeds.items()})
    loss, want = _torch_grad(model, x, label)
    assert exe.stats.interpreted_ops == 0
    assert float(out["loss"]) == pytest.approx(loss, rel=1e-6)
    grad = next(t for t in g.tensors if t.grad_of is not None and t.grad_of.name == "w")
    np.testing.assert_allclose(exe.get(grad), want, rtol=1e-6, atol=1e-6)


def test_one_sided_clip_bounds_survive_a_graph_file(tmp_path):
    g = tw.Graph()
    x = g.input("x", (2, 3))
    y = tdl_ops.clip(x, lo=-np.inf, hi=0.5)
    path = tmp_path / "clip.json"
    g.save(path)
    h = tw.Graph.load(path)
    a = np.array([[-np.inf, -1.0, 0.5], [0.7, np.inf, np.nan]], np.float32)
    exe = tw.compile(h, tw.partition(h, devices=1, algorithm="data_parallel"))
    exe.step({"x": a})
    assert exe.stats.interpreted_ops == 0
    np.testing.assert_array_equal(exe.get(h.tensor(y.name)), np.clip(a, -np.inf, 0.5))

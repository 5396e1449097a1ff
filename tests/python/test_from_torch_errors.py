"""tw.from_torch failures: one tw.GraphError each, whose hint fits the cause."""

from __future__ import annotations

import pytest

import tilewise as tw

try:
    import torch
    from torch import nn
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

pytestmark = pytest.mark.skipif(torch is None, reason="from_torch needs PyTorch: pip install torch==2.13.0")

if torch is not None:

    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x, y):
            return self.fc(x) + y

    class DataDependent(nn.Module):
        def forward(self, x):
            return torch.zeros(int(x.sum().item()) + 1)

    class Unmapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            a = torch.cumprod(x, 1)
            b = torch.cumprod(self.fc(x), 1)
            return a + b + torch.fmod(x, 2.0) + torch.tanh(x)


def test_missing_argument():
    with pytest.raises(tw.GraphError, match=r"do not fit TwoInputs.forward\(x, y\): missing a required argument: 'y' "
                                            r"\(given: float32\[2, 4\]\)") as e:
        tw.from_torch(TwoInputs(), torch.randn(2, 4))
    assert "control flow" not in str(e.value)
    with pytest.raises(tw.GraphError, match=r"given: x=float32\[2, 4\], z=float32\[2, 3\]"):
        tw.from_torch(TwoInputs(), {"x": torch.randn(2, 4), "z": torch.randn(2, 3)})


def test_wrong_shape():
    with pytest.raises(tw.GraphError, match="fails on these example inputs in plain PyTorch too") as e:
        tw.from_torch(TwoInputs(), (torch.randn(2, 5), torch.randn(2, 3)))
    assert "mat1 and mat2 shapes cannot be multiplied" in str(e.value)
    assert "control flow" not in str(e.value)


def test_data_dependent_values():
    with pytest.raises(tw.GraphError, match=r"takes a size from, the value of a tensor .* control flow"):
        tw.from_torch(DataDependent(), torch.randn(3))


def test_every_unmapped_op_in_one_error_with_counts_and_lines(monkeypatch):
    from tilewise.frontends.torch import _table

    def broken(ctx, a):
        raise KeyError("submod_3")

    # A rule that breaks is listed like an unmapped op, not raised as a bare KeyError.
    monkeypatch.setitem(_table.RULES._rules, torch.ops.aten.tanh.default, broken)
    with pytest.raises(tw.GraphError) as e:
        tw.from_torch(Unmapped(), torch.randn(2, 4))
    text = str(e.value)
    assert text.startswith("from_torch: 3 kind(s) of torch op (4 node(s)) in Unmapped cannot be expressed in TDL:")
    assert "aten.cumprod.default (2 nodes): no conversion rule" in text
    assert "test_from_torch_errors.py:37 `a = torch.cumprod(x, 1)`" in text
    assert "also in the top-level Unmapped, test_from_torch_errors.py:38" in text
    assert "aten.fmod.Scalar (1 node)" in text
    assert "aten.tanh.default (1 node): its conversion rule failed (KeyError: 'submod_3')" in text
    assert [(t, n) for t, _, n, _ in e.value.unmapped] == [("aten.cumprod.default", 2), ("aten.fmod.Scalar", 1),
                                                          ("aten.tanh.default", 1)]

"""Stacked LSTMs as Tofu §7.1 (RNN-L-XK) and SwapAdvisor §5.1 (BRNN-L-XK), unrolled for 20 steps.

RNN-L-XK is L LSTM layers of hidden size X*1024 (Tofu: "4K, 6K, and 8K hidden sizes" after the
8192-unit LSTM of its ref. [20]). Tofu's Table 2 weight sizes fit 3 x 4 bytes x (weights of L
LSTM layers) in GiB (weight, gradient and optimizer history) when the first layer's input is
small: we default ``in_features`` to 1024, which reproduces the table within 1.3% (the 4K row
exactly); with in_features = hidden the 8K rows would be 5% above it.

    >>> import tilewise as tw
    >>> g = tw.models.rnn(2, hidden=32, steps=3, batch=4, in_features=16, train=False)
    >>> g.num_parameters == (4 * 32 * (16 + 32) + 8 * 32) + (4 * 32 * (32 + 32) + 8 * 32)
    True
"""

from __future__ import annotations

from .. import nn
from .._core import GraphError
from ..nn import functional as F
from ._build import build


class LSTMModel(nn.Module):
    """LSTM stack over a (steps, batch, in) sequence; output (steps, batch, dirs * hidden)."""

    def __init__(self, layers: int, hidden: int, in_features: int, bidirectional: bool = False):
        super().__init__()
        self.lstm = nn.LSTM(in_features, hidden, num_layers=layers, bidirectional=bidirectional)

    def forward(self, x):
        # Per-step lists avoid re-stacking between layers (and nn.LSTM's h_n / c_n stacks, unused
        # here): one select per step in, one stack out.
        g = x.graph
        with g.unroll(g.scoped("input")) as u:
            steps = []
            for t in range(x.shape[0]):
                with u.step(t):
                    steps.append(F.select(x, 0, t))
        outs, _ = self.lstm(steps)
        return F.stack(outs)


def _check(layers, hidden, steps, batch):
    if min(layers, hidden, steps, batch) < 1:
        raise GraphError(f"rnn: layers, hidden, steps and batch must be positive, got {layers}, {hidden}, {steps}, "
                         f"{batch}")


def rnn(layers: int = 8, hidden: int = 8192, steps: int = 20, batch: int = 128, in_features: int = 1024, *,
        train: bool = True, optimizer=None):
    """RNN-``layers``-``hidden/1024``K: an LSTM stack unrolled for ``steps``, MSE loss on its outputs."""
    _check(layers, hidden, steps, batch)
    model = LSTMModel(layers, hidden, in_features)
    return build(model, [("x", (steps, batch, in_features))], label=(steps, batch, hidden), loss="mse",
                 train=train, optimizer=optimizer, name=f"rnn-{layers}-{_k(hidden)}")


def brnn(layers: int = 4, hidden: int = 8192, steps: int = 20, batch: int = 128, in_features: int = 1024, *,
         train: bool = True, optimizer=None):
    """BRNN-``layers``-``hidden/1024``K: bidirectional layers (two sub-layers with their own weights,
    outputs concatenated: the next layer's input is 2 * hidden)."""
    _check(layers, hidden, steps, batch)
    model = LSTMModel(layers, hidden, in_features, bidirectional=True)
    return build(model, [("x", (steps, batch, in_features))], label=(steps, batch, 2 * hidden), loss="mse",
                 train=train, optimizer=optimizer, name=f"brnn-{layers}-{_k(hidden)}")


def _k(hidden: int) -> str:
    return f"{hidden // 1024}k" if hidden % 1024 == 0 else str(hidden)

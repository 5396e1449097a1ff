"""Multi-layer perceptron: ``layers`` Linear layers with ReLU between.

    >>> import tilewise as tw
    >>> g = tw.models.mlp(3, hidden=64, batch=8, in_features=32, classes=10, train=False)
    >>> g.num_parameters == (32 * 64 + 64) + (64 * 64 + 64) + (64 * 10 + 10)
    True
"""

from __future__ import annotations

from .. import nn
from .._core import GraphError
from ._build import build


class MLP(nn.Sequential):
    """Linear(in, hidden), ReLU, ..., Linear(hidden, out): ``layers`` Linear layers in all."""

    def __init__(self, layers: int, hidden: int, in_features: int, out_features: int):
        if layers < 1 or hidden < 1:
            raise GraphError(f"MLP: layers and hidden must be positive, got {layers}, {hidden}")
        mods: list[nn.Module] = []
        for i in range(layers):
            fan_in = in_features if i == 0 else hidden
            fan_out = out_features if i == layers - 1 else hidden
            mods.append(nn.Linear(fan_in, fan_out))
            if i < layers - 1:
                mods.append(nn.ReLU())
        super().__init__(*mods)


def mlp(layers: int = 4, hidden: int = 1024, batch: int = 64, in_features: int | None = None,
        classes: int | None = None, *, train: bool = True, optimizer=None):
    """MLP on (batch, in_features) input (default hidden); ``classes`` given: cross-entropy over
    that many classes, else the last layer is hidden wide and the loss is MSE."""
    in_features = in_features or hidden
    out = classes or hidden
    model = MLP(layers, hidden, in_features, out)
    return build(model, [("x", (batch, in_features))], label=(batch, out),
                 loss="cross_entropy" if classes else "mse", train=train, optimizer=optimizer,
                 name=f"mlp-{layers}-{hidden}")

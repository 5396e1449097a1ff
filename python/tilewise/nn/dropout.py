"""Dropout: the random 0/1 mask is a graph input named after the module (``<path>.mask``).

    >>> import tilewise as tw
    >>> g = tw.Graph()
    >>> net = tw.nn.Sequential(tw.nn.Linear(4, 4), tw.nn.Dropout(0.1))
    >>> _ = net(g.input("x", (2, 4)))
    >>> g.tensor("1.mask").role
    'input'
"""

from __future__ import annotations

from .._core import GraphError
from . import functional as F
from .module import Module


class Dropout(Module):
    """x * mask / (1 - p) in training mode; the identity (no op) in eval mode or for p = 0."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise GraphError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"

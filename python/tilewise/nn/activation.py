"""Activation modules: ReLU, GELU, Tanh, Sigmoid, Softmax.

    >>> import tilewise as tw
    >>> g = tw.Graph()
    >>> tw.nn.ReLU()(g.input("x", (2, 3))).producer.type
    'relu'
"""

from __future__ import annotations

from . import functional as F
from .module import Module


class ReLU(Module):
    def __init__(self, inplace: bool = False):  # inplace is accepted for PyTorch compatibility; graphs are SSA
        super().__init__()

    def forward(self, x):
        return F.relu(x)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)


class Tanh(Module):
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return F.sigmoid(x)


class Softmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)

"""Linear (PyTorch weight layout (out, in)), Identity and Flatten.

    >>> import tilewise as tw
    >>> fc = tw.nn.Linear(16, 4)
    >>> [(n, p.shape) for n, p in fc.named_parameters()]
    [('weight', (4, 16)), ('bias', (4,))]
"""

from __future__ import annotations

from .._core import GraphError
from . import functional as F
from .module import Module, Parameter


class Linear(Module):
    """y = x @ W^T + b with W (out_features, in_features); x of any rank (..., in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        if in_features <= 0 or out_features <= 0:
            raise GraphError(f"Linear: features must be positive, got in={in_features}, out={out_features}")
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter((out_features, in_features))
        self.register_parameter("bias", Parameter((out_features,)) if bias else None)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input (no op)."""

    def forward(self, x):
        return x


class Flatten(Module):
    """(n, c, h, w) -> (n, c*h*w), as ``torch.nn.Flatten()``."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return F.flatten(x, self.start_dim, self.end_dim)

"""BatchNorm2d (training-mode batch statistics; running stats are buffers, outside the training
graph) and LayerNorm (last axis).

    >>> import tilewise as tw
    >>> bn = tw.nn.BatchNorm2d(8)
    >>> [n for n, _ in bn.named_parameters()], [n for n, _ in bn.named_buffers()]
    (['weight', 'bias'], ['running_mean', 'running_var'])
"""

from __future__ import annotations

from .._core import GraphError, ShapeError
from . import functional as F
from .module import Buffer, Module, Parameter


class BatchNorm2d(Module):
    """Batch norm over the channels of NCHW input.

    In training mode (the default) the batch statistics are computed in the graph and the
    running statistics are not touched (they are not part of the training step). In eval mode
    the running statistics are graph inputs ``<path>.running_mean`` / ``<path>.running_var``.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True):
        super().__init__()
        if not affine:
            raise GraphError("BatchNorm2d: affine=False is not supported")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.weight = Parameter((num_features,))
        self.bias = Parameter((num_features,))
        self.running_mean = Buffer((num_features,))
        self.running_var = Buffer((num_features,))

    def forward(self, x):
        if x.ndim == 4 and x.shape[1] != self.num_features:
            raise ShapeError(f"BatchNorm2d: input {x.shape} has {x.shape[1]} channels, expected {self.num_features}")
        if self.training:
            return F.batch_norm(x, None, None, self.weight, self.bias, True, self.momentum, self.eps)
        g = x.graph
        stats = []
        for name in ("running_mean", "running_var"):
            try:
                stats.append(g.tensor(g.scoped(name)))
            except KeyError:
                stats.append(g.input(name, (self.num_features,)))
        return F.batch_norm(x, stats[0], stats[1], self.weight, self.bias, False, self.momentum, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}"


class LayerNorm(Module):
    """Layer norm over the last axis with weight and bias of that extent."""

    def __init__(self, normalized_shape, eps: float = 1e-5):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        if len(shape) != 1:
            raise GraphError(f"LayerNorm: only a single normalized extent (the last axis) is supported, got {shape}")
        self.normalized_shape, self.eps = shape, eps
        self.weight = Parameter(shape)
        self.bias = Parameter(shape)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}"

"""Conv2d (NCHW, weight (out, in, kh, kw)), with stride, padding, dilation, groups 1 or depthwise.

    >>> import tilewise as tw
    >>> conv = tw.nn.Conv2d(3, 8, 3, padding=1, bias=False)
    >>> conv.weight.shape
    (8, 3, 3, 3)
"""

from __future__ import annotations

from .._core import GraphError
from . import functional as F
from .module import Module, Parameter


class Conv2d(Module):
    """2-D convolution. ``groups`` is 1, or ``in_channels == out_channels`` for a depthwise one."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True):
        super().__init__()
        kh, kw = F._pair("Conv2d", "kernel_size", kernel_size)
        if min(in_channels, out_channels, kh, kw) <= 0:
            raise GraphError(f"Conv2d: channels and kernel size must be positive, got {in_channels}, "
                             f"{out_channels}, {kernel_size}")
        if groups != 1 and not (groups == in_channels == out_channels):
            raise GraphError(f"Conv2d: groups={groups} is not supported (1, or in_channels == out_channels == groups)")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = (kh, kw)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = Parameter((out_channels, in_channels // groups, kh, kw))
        self.register_parameter("bias", Parameter((out_channels,)) if bias else None)

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"padding={self.padding}" + (f", groups={self.groups}" if self.groups != 1 else "")
                + (", bias=False" if self.bias is None else ""))

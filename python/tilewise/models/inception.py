"""Inception-v4 (Szegedy et al. 2017; the layout of timm / Cadene's ``inceptionv4``) with a wide scale.

SwapAdvisor §5.1 ("Inception-X") enlarges Inception-V4 "by adding a wide scale parameter
similar to WResNet": every convolution's channels are multiplied by ``width`` (the image's 3
input channels excepted). Width 1 is the original network (~42.7M parameters).
Differences from timm: average pools count padded zeros (count_include_pad=True; parameter
counts are unaffected).

    >>> import tilewise as tw
    >>> g = tw.models.inception_v4(width=1, batch=1, train=False)
    >>> round(g.num_parameters / 1e6, 1)
    42.7
"""

from __future__ import annotations

from .. import nn
from .._core import GraphError
from ..nn import functional as F
from ._build import build


class BasicConv2d(nn.Module):
    """Convolution (no bias), batch norm (eps 1e-3), ReLU."""

    def __init__(self, cin: int, cout: int, kernel, stride: int = 1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


class _Branches(nn.Module):
    """Runs each branch on the input and concatenates the results along channels."""

    def forward(self, x):
        return F.cat([b(x) for b in self.branches()], dim=1)

    def branches(self):
        return list(self.children())


def _seq(*mods):
    return nn.Sequential(*mods)


class Mixed3a(_Branches):
    def __init__(self, w):
        super().__init__()
        self.maxpool = nn.MaxPool2d(3, stride=2)
        self.conv = BasicConv2d(64 * w, 96 * w, 3, stride=2)


class Mixed4a(_Branches):
    def __init__(self, w):
        super().__init__()
        self.branch0 = _seq(BasicConv2d(160 * w, 64 * w, 1), BasicConv2d(64 * w, 96 * w, 3))
        self.branch1 = _seq(BasicConv2d(160 * w, 64 * w, 1), BasicConv2d(64 * w, 64 * w, (1, 7), padding=(0, 3)),
                            BasicConv2d(64 * w, 64 * w, (7, 1), padding=(3, 0)), BasicConv2d(64 * w, 96 * w, 3))


class Mixed5a(_Branches):
    def __init__(self, w):
        super().__init__()
        self.conv = BasicConv2d(192 * w, 192 * w, 3, stride=2)
        self.maxpool = nn.MaxPool2d(3, stride=2)


class InceptionA(_Branches):
    def __init__(self, w):
        super().__init__()
        c = 384 * w
        self.branch0 = BasicConv2d(c, 96 * w, 1)
        self.branch1 = _seq(BasicConv2d(c, 64 * w, 1), BasicConv2d(64 * w, 96 * w, 3, padding=1))
        self.branch2 = _seq(BasicConv2d(c, 64 * w, 1), BasicConv2d(64 * w, 96 * w, 3, padding=1),
                            BasicConv2d(96 * w, 96 * w, 3, padding=1))
        self.branch3 = _seq(nn.AvgPool2d(3, stride=1, padding=1), BasicConv2d(c, 96 * w, 1))


class ReductionA(_Branches):
    def __init__(self, w):
        super().__init__()
        c = 384 * w
        self.branch0 = BasicConv2d(c, 384 * w, 3, stride=2)
        self.branch1 = _seq(BasicConv2d(c, 192 * w, 1), BasicConv2d(192 * w, 224 * w, 3, padding=1),
                            BasicConv2d(224 * w, 256 * w, 3, stride=2))
        self.branch2 = nn.MaxPool2d(3, stride=2)


class InceptionB(_Branches):
    def __init__(self, w):
        super().__init__()
        c = 1024 * w
        self.branch0 = BasicConv2d(c, 384 * w, 1)
        self.branch1 = _seq(BasicConv2d(c, 192 * w, 1), BasicConv2d(192 * w, 224 * w, (1, 7), padding=(0, 3)),
                            BasicConv2d(224 * w, 256 * w, (7, 1), padding=(3, 0)))
        self.branch2 = _seq(BasicConv2d(c, 192 * w, 1), BasicConv2d(192 * w, 192 * w, (7, 1), padding=(3, 0)),
                            BasicConv2d(192 * w, 224 * w, (1, 7), padding=(0, 3)),
                            BasicConv2d(224 * w, 224 * w, (7, 1), padding=(3, 0)),
                            BasicConv2d(224 * w, 256 * w, (1, 7), padding=(0, 3)))
        self.branch3 = _seq(nn.AvgPool2d(3, stride=1, padding=1), BasicConv2d(c, 128 * w, 1))


class ReductionB(_Branches):
    def __init__(self, w):
        super().__init__()
        c = 1024 * w
        self.branch0 = _seq(BasicConv2d(c, 192 * w, 1), BasicConv2d(192 * w, 192 * w, 3, stride=2))
        self.branch1 = _seq(BasicConv2d(c, 256 * w, 1), BasicConv2d(256 * w, 256 * w, (1, 7), padding=(0, 3)),
                            BasicConv2d(256 * w, 320 * w, (7, 1), padding=(3, 0)),
                            BasicConv2d(320 * w, 320 * w, 3, stride=2))
        self.branch2 = nn.MaxPool2d(3, stride=2)


class InceptionC(nn.Module):
    def __init__(self, w):
        super().__init__()
        c = 1536 * w
        self.branch0 = BasicConv2d(c, 256 * w, 1)
        self.branch1_0 = BasicConv2d(c, 384 * w, 1)
        self.branch1_1a = BasicConv2d(384 * w, 256 * w, (1, 3), padding=(0, 1))
        self.branch1_1b = BasicConv2d(384 * w, 256 * w, (3, 1), padding=(1, 0))
        self.branch2_0 = BasicConv2d(c, 384 * w, 1)
        self.branch2_1 = BasicConv2d(384 * w, 448 * w, (3, 1), padding=(1, 0))
        self.branch2_2 = BasicConv2d(448 * w, 512 * w, (1, 3), padding=(0, 1))
        self.branch2_3a = BasicConv2d(512 * w, 256 * w, (1, 3), padding=(0, 1))
        self.branch2_3b = BasicConv2d(512 * w, 256 * w, (3, 1), padding=(1, 0))
        self.branch3 = _seq(nn.AvgPool2d(3, stride=1, padding=1), BasicConv2d(c, 256 * w, 1))

    def forward(self, x):
        x1 = self.branch1_0(x)
        x2 = self.branch2_2(self.branch2_1(self.branch2_0(x)))
        return F.cat([self.branch0(x), F.cat([self.branch1_1a(x1), self.branch1_1b(x1)], dim=1),
                      F.cat([self.branch2_3a(x2), self.branch2_3b(x2)], dim=1), self.branch3(x)], dim=1)


class InceptionV4(nn.Module):
    def __init__(self, width: int = 1, classes: int = 1000):
        super().__init__()
        if not isinstance(width, int) or width < 1:
            raise GraphError(f"Inception-v4 width must be a positive integer, got {width!r}")
        w = width
        self.features = nn.Sequential(
            BasicConv2d(3, 32 * w, 3, stride=2), BasicConv2d(32 * w, 32 * w, 3),
            BasicConv2d(32 * w, 64 * w, 3, padding=1),
            Mixed3a(w), Mixed4a(w), Mixed5a(w),
            *[InceptionA(w) for _ in range(4)], ReductionA(w),
            *[InceptionB(w) for _ in range(7)], ReductionB(w),
            *[InceptionC(w) for _ in range(3)])
        self.global_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.last_linear = nn.Linear(1536 * w, classes)

    def forward(self, x):
        return self.last_linear(self.flatten(self.global_pool(self.features(x))))


def inception_v4(width: int = 1, batch: int = 64, image: int = 299, classes: int = 1000, *, train: bool = True,
                 optimizer=None):
    """Inception-``width`` (SwapAdvisor's Inception-X) on (batch, 3, image, image), cross-entropy loss."""
    if image < 75:
        raise GraphError(f"inception_v4: image must be at least 75 pixels, got {image}")
    return build(InceptionV4(width, classes), [("x", (batch, 3, image, image))], label=(batch, classes),
                 loss="cross_entropy", train=train, optimizer=optimizer, name=f"inception-{width}")

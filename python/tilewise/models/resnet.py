"""Bottleneck ResNet-50/101/152 (torchvision's architecture and names) and Wide ResNet as Tofu §7.1.

Tofu widens *every* convolution's channels by the widening scalar W ("the model size grows
quadratically as each weight tensor is widened on both the input and output channel"), on
224x224 ImageNet input: WResNet-152-10 has ~100x the convolution weights of ResNet-152. This is
not torchvision's ``wide_resnet50_2``, which widens only the bottleneck's inner channels.

    >>> import tilewise as tw
    >>> g = tw.models.wresnet(50, width=1, batch=1, train=False)
    >>> g.num_parameters                       # torchvision resnet50
    25557032
"""

from __future__ import annotations

from .. import nn
from .._core import GraphError
from ..nn import functional as F
from ._build import build

BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


class Bottleneck(nn.Module):
    """1x1 -> 3x3 (stride here, as torchvision's ResNet v1.5) -> 1x1 x4, BN after each, residual add."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU()
        self.downsample = downsample

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(F.add(out, identity))


class ResNet(nn.Module):
    """Bottleneck ResNet of ``depth`` 50, 101 or 152 with all convolution channels times ``width``."""

    def __init__(self, depth: int = 50, width: int = 1, classes: int = 1000):
        super().__init__()
        if depth not in BLOCKS:
            raise GraphError(f"ResNet depth must be one of {sorted(BLOCKS)}, got {depth}")
        if not isinstance(width, int) or width < 1:
            raise GraphError(f"ResNet width must be a positive integer, got {width!r}")
        self.depth, self.width = depth, width
        self.inplanes = 64 * width
        self.conv1 = nn.Conv2d(3, self.inplanes, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        for i, (n, planes) in enumerate(zip(BLOCKS[depth], (64, 128, 256, 512))):
            setattr(self, f"layer{i + 1}", self._layer(planes * width, n, stride=1 if i == 0 else 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(512 * width * Bottleneck.expansion, classes)

    def _layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * Bottleneck.expansion:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes * Bottleneck.expansion, 1, stride=stride,
                                                 bias=False), nn.BatchNorm2d(planes * Bottleneck.expansion))
        layers = [Bottleneck(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * Bottleneck.expansion
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.flatten(self.avgpool(x)))


def wresnet(depth: int = 152, width: int = 10, batch: int = 8, image: int = 224, classes: int = 1000, *,
            train: bool = True, optimizer=None):
    """WResNet-``depth``-``width`` on (batch, 3, image, image) input with a cross-entropy loss.

    ``width=1`` is ResNet-50/101/152 (25.6M / 44.5M / 60.2M parameters).
    """
    if image < 32:
        raise GraphError(f"wresnet: image must be at least 32 pixels (five stride-2 stages), got {image}")
    model = ResNet(depth, width, classes)
    return build(model, [("x", (batch, 3, image, image))], label=(batch, classes), loss="cross_entropy",
                 train=train, optimizer=optimizer, name=f"wresnet-{depth}-{width}")


def resnet(depth: int = 50, batch: int = 32, image: int = 224, classes: int = 1000, *, train: bool = True,
           optimizer=None):
    """ResNet-``depth`` (torchvision's resnet50/101/152): ``wresnet`` with width 1."""
    g = wresnet(depth, 1, batch, image, classes, train=train, optimizer=optimizer)
    g.name = f"resnet-{depth}"
    return g

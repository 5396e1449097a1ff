"""VGG-16 (torchvision's ``vgg16``: 138,357,544 parameters).

    >>> import tilewise as tw
    >>> tw.models.vgg16(batch=1, train=False).num_parameters
    138357544
"""

from __future__ import annotations

from .. import nn
from ._build import build

CFG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


class VGG(nn.Module):
    def __init__(self, cfg=CFG16, classes: int = 1000, dropout: float = 0.5):
        super().__init__()
        layers: list[nn.Module] = []
        c = 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU()]
                c = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4096, 4096), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(self.flatten(self.avgpool(self.features(x))))


def vgg16(batch: int = 64, image: int = 224, classes: int = 1000, *, train: bool = True, optimizer=None):
    """VGG-16 on (batch, 3, image, image); image must be a multiple of 224 (adaptive 7x7 pooling)."""
    return build(VGG(CFG16, classes), [("x", (batch, 3, image, image))], label=(batch, classes),
                 loss="cross_entropy", train=train, optimizer=optimizer, name="vgg16")

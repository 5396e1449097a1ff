"""AlexNet (torchvision's ``alexnet``: 61,100,840 parameters).

    >>> import tilewise as tw
    >>> tw.models.alexnet(batch=1, train=False).num_parameters
    61100840
"""

from __future__ import annotations

from .. import nn
from ._build import build


class AlexNet(nn.Module):
    def __init__(self, classes: int = 1000, dropout: float = 0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(4096, 4096), nn.ReLU(),
            nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(self.flatten(self.avgpool(self.features(x))))


def alexnet(batch: int = 64, image: int = 224, classes: int = 1000, *, train: bool = True, optimizer=None):
    """AlexNet on (batch, 3, image, image) (224 gives the 6x6 feature map the classifier expects)."""
    return build(AlexNet(classes), [("x", (batch, 3, image, image))], label=(batch, classes),
                 loss="cross_entropy", train=train, optimizer=optimizer, name="alexnet")

"""A NASNet-A-style cell network (Zoph et al. 2018), the irregular model of SwapAdvisor §5.1.

Cells take the two previous cells' outputs and combine them through five pairs of operations
(separable convolutions, pools, identities) whose results are added; a cell's output is the
concatenation of its unused states. The pairs are NASNet-A's (TF-slim ``nasnet_utils``):

* Normal cell: sep5(cur)+sep3(prev), sep5(prev)+sep3(prev), avg3(cur)+prev, avg3(prev)+avg3(prev),
  sep3(cur)+cur; output = concat(prev, the five sums): 6 x filters channels.
* Reduction cell (stride 2 on the cell inputs): s0 = sep5(cur)+sep7(prev), s1 = max3(cur)+sep7(prev),
  s2 = avg3(cur)+sep5(prev), s3 = s1 + avg3(s0), s4 = sep3(s0) + max3(cur); output concat(s1..s4).

SwapAdvisor's NasNet-R repeats the normal cell ``R`` times in each of three stacks (3R normal
cells); ``nasnet(cells=R)``. Layout: a 3x3 stride-2 stem convolution, two reduction cells (the
ImageNet stem), then N normal, reduction (filters x2), N normal, reduction (x2), N normal,
ReLU, global average pool, classifier. Simplifications (this is "in the spirit of" NASNet-A, its
parameter count is not the paper's): a previous-cell input of a different spatial size is
reduced by ReLU, stride-2 1x1 convolution, batch norm (NASNet's factorized reduction uses two
shifted half-width paths); no auxiliary head, no drop-path.

    >>> import tilewise as tw
    >>> g = tw.models.nasnet(cells=1, filters=8, batch=1, image=64, train=False)
    >>> g.tensors[-1].shape
    (1, 1000)
"""

from __future__ import annotations

from .. import nn
from .._core import GraphError
from ..nn import functional as F
from ._build import build


class SepConv(nn.Module):
    """NASNet's separable_kxk_2: twice (ReLU, depthwise kxk, pointwise 1x1, batch norm); stride on the first."""

    def __init__(self, c: int, k: int, stride: int = 1):
        super().__init__()
        self.relu = nn.ReLU()
        self.depthwise1 = nn.Conv2d(c, c, k, stride=stride, padding=k // 2, groups=c, bias=False)
        self.pointwise1 = nn.Conv2d(c, c, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c, eps=0.001)
        self.depthwise2 = nn.Conv2d(c, c, k, padding=k // 2, groups=c, bias=False)
        self.pointwise2 = nn.Conv2d(c, c, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c, eps=0.001)

    def forward(self, x):
        x = self.bn1(self.pointwise1(self.depthwise1(self.relu(x))))
        return self.bn2(self.pointwise2(self.depthwise2(self.relu(x))))


class ReLUConvBN(nn.Module):
    """ReLU, 1x1 convolution (stride 1 or 2), batch norm: adjusts a cell input to ``cout`` channels."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x):
        return self.bn(self.conv(self.relu(x)))


def _op(kind: str, c: int, stride: int) -> nn.Module:
    if kind.startswith("sep"):
        return SepConv(c, int(kind[3:]), stride)
    if kind == "avg3":
        return nn.AvgPool2d(3, stride=stride, padding=1)
    if kind == "max3":
        return nn.MaxPool2d(3, stride=stride, padding=1)
    if kind == "none":
        return nn.Identity()
    raise GraphError(f"unknown NASNet operation {kind!r}")


# (left op, left input, right op, right input); inputs: 0 = cur, 1 = prev, 2+ = this cell's sums.
NORMAL = [("sep5", 0, "sep3", 1), ("sep5", 1, "sep3", 1), ("avg3", 0, "none", 1), ("avg3", 1, "avg3", 1),
          ("sep3", 0, "none", 0)]
NORMAL_OUT = [1, 2, 3, 4, 5, 6]
REDUCTION = [("sep5", 0, "sep7", 1), ("max3", 0, "sep7", 1), ("avg3", 0, "sep5", 1), ("none", 3, "avg3", 2),
             ("sep3", 2, "max3", 0)]
REDUCTION_OUT = [3, 4, 5, 6]


class Cell(nn.Module):
    """One NASNet-A cell on (cur, prev) with ``filters`` channels per state."""

    def __init__(self, c_cur: int, c_prev: int, filters: int, reduction: bool, prev_reduced: bool):
        super().__init__()
        self.reduction = reduction
        self.plan, self.outputs = (REDUCTION, REDUCTION_OUT) if reduction else (NORMAL, NORMAL_OUT)
        self.cur = ReLUConvBN(c_cur, filters)
        # A previous output of twice the spatial size (a reduction came between) is halved.
        self.prev = ReLUConvBN(c_prev, filters, stride=2 if prev_reduced else 1)
        self.ops = nn.ModuleList()
        for left, li, right, ri in self.plan:
            for kind, src in ((left, li), (right, ri)):
                stride = 2 if reduction and src < 2 else 1
                self.ops.append(_op(kind, filters, stride))
        self.out_channels = filters * len(self.outputs)

    def forward(self, cur, prev):
        states = [self.cur(cur), self.prev(prev)]
        for i, (_, li, _, ri) in enumerate(self.plan):
            states.append(F.add(self.ops[2 * i](states[li]), self.ops[2 * i + 1](states[ri])))
        return F.cat([states[k] for k in self.outputs], dim=1)


class NASNet(nn.Module):
    """Stem, two stem reduction cells, three stacks of ``cells`` normal cells with reductions between."""

    def __init__(self, cells: int = 6, filters: int = 168, stem_filters: int = 96, classes: int = 1000):
        super().__init__()
        if cells < 1 or filters < 1 or stem_filters < 1:
            raise GraphError(f"NASNet: cells, filters, stem_filters must be positive, got {cells}, {filters}, "
                             f"{stem_filters}")
        self.conv0 = nn.Conv2d(3, stem_filters, 3, stride=2, bias=False)
        self.bn0 = nn.BatchNorm2d(stem_filters, eps=0.001)
        self.cells = nn.ModuleList()
        # (channels, spatial scale) of the last two outputs, to size each cell's inputs.
        cur, prev = (stem_filters, 1), (stem_filters, 1)
        plan = [("reduction", filters // 4), ("reduction", filters // 2)]
        for stack in range(3):
            f = filters * 2 ** stack
            plan += [("normal", f)] * cells
            if stack < 2:
                plan.append(("reduction", 2 * f))
        for kind, f in plan:
            reduction = kind == "reduction"
            cell = Cell(cur[0], prev[0], max(f, 1), reduction, prev_reduced=prev[1] != cur[1])
            self.cells.append(cell)
            prev, cur = cur, (cell.out_channels, cur[1] * (2 if reduction else 1))
        self.relu = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = nn.Flatten()
        self.last_linear = nn.Linear(cur[0], classes)

    def forward(self, x):
        x = self.bn0(self.conv0(x))
        cur, prev = x, x
        for cell in self.cells:
            cur, prev = cell(cur, prev), cur
        return self.last_linear(self.flatten(self.avgpool(self.relu(cur))))


def nasnet(cells: int = 25, filters: int = 168, batch: int = 64, image: int = 331, classes: int = 1000, *,
           train: bool = True, optimizer=None):
    """NasNet-``cells`` (3 x cells normal cells); filters 168 and 331x331 images as NASNet-A Large."""
    if image < 32:
        raise GraphError(f"nasnet: image must be at least 32 pixels, got {image}")
    return build(NASNet(cells, filters, classes=classes), [("x", (batch, 3, image, image))], label=(batch, classes),
                 loss="cross_entropy", train=train, optimizer=optimizer, name=f"nasnet-{cells}")

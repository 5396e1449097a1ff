"""Tilings and names: the geometry a plan and its pictures share.

A plan over ``k = k1*k2*...`` devices has one recursion step per factor; a device's coordinates are
mixed-radix over those parts, the first step most significant (``device_coords``). A tensor's cut
at a step splits one dimension like ``numpy.array_split`` or replicates it; ``tile_box`` is the
tile a device owns. ``lookup`` finds a plan's tensors and ops by name or handle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import _core
from .._core import PlanError
from .._util import did_you_mean
from ..graph.graph import GOp, Graph, GTensor


class UnknownNameError(PlanError, KeyError):
    """No tensor or op of that name in the plan's graph: both a ``tw.PlanError`` and a ``KeyError``."""

    __str__ = BaseException.__str__  # KeyError's str() would quote the whole message


@dataclass(frozen=True)
class Cut:
    """One recursion step of a tiling: ``dim`` is split into ``parts`` pieces (None: replicated)."""

    dim: int | None
    parts: int

    @property
    def replicated(self) -> bool:
        return self.dim is None


def _ints(name: str, values) -> list[int]:
    try:
        out = [int(v) for v in values]
    except (TypeError, ValueError):
        raise PlanError(f"{name} must be a sequence of ints, got {values!r}") from None
    if any(not isinstance(v, (int, np.integer)) or isinstance(v, bool) for v in values):
        raise PlanError(f"{name} must be a sequence of ints, got {values!r}")
    return out


def _check(shape=None, cuts=None, parts=None, coords=None, rank=None) -> None:
    """The arguments of the geometry below, checked before C++ sees them."""
    if parts is not None and any(p < 1 for p in parts):
        raise PlanError(f"parts must be positive, got {parts}")
    if shape is not None and any(n < 0 for n in shape):
        raise PlanError(f"shape must not be negative, got {shape}")
    if cuts is not None:
        if parts is not None and len(cuts) != len(parts):
            raise PlanError(f"a tiling needs one cut per step: {len(cuts)} cuts for parts {parts}")
        if rank is not None and any(not -1 <= c < rank for c in cuts):
            raise PlanError(f"cuts must be dimensions 0..{rank - 1} or -1 (replicated), got {cuts}")
    if coords is not None and parts is not None:
        if len(coords) > len(parts) or any(not 0 <= c < p for c, p in zip(coords, parts)):
            raise PlanError(f"coordinates {coords} do not lie in parts {parts}")


def tiling_str(cuts, rank: int) -> str:
    """"R C" for matrices, "P0 P2" for other ranks, "r" for replication (``cost::tiling_str``)."""
    cuts = _ints("cuts", cuts)
    _check(cuts=cuts, rank=int(rank))
    return _core.tiling_str(cuts, int(rank))


def device_coords(d: int, parts) -> list[int]:
    """Mixed-radix coordinates of device ``d`` over ``parts``, the first step most significant
    (``cost::device_coords``)."""
    parts = _ints("parts", parts)
    _check(parts=parts)
    if not 0 <= d < math.prod(parts):
        raise PlanError(f"device {d} is not one of the {math.prod(parts)} devices of parts {parts}")
    return _core.device_coords(int(d), parts)


def tile_box(shape, cuts, parts, coords) -> tuple[tuple[int, int], ...]:
    """The tile (inclusive ``(lo, hi)`` per dimension) a device with ``coords`` owns (``cost::tile_box``):
    each cut splits the current range of its dimension like numpy.array_split; replicated steps keep it."""
    shape, cuts, parts, coords = (_ints(n, v) for n, v in (("shape", shape), ("cuts", cuts), ("parts", parts),
                                                          ("coords", coords)))
    _check(shape=shape, cuts=cuts[:len(coords)], parts=parts[:len(coords)], coords=coords, rank=len(shape))
    return tuple(_core.tile_box(shape, cuts, parts, coords))


def tile_boxes(shape, cuts, parts) -> list[tuple[tuple[int, int], ...]]:
    """Every device's tile, in device order (one C++ call)."""
    shape, cuts, parts = (_ints(n, v) for n, v in (("shape", shape), ("cuts", cuts), ("parts", parts)))
    _check(shape=shape, cuts=cuts, parts=parts, rank=len(shape))
    return [tuple(b) for b in _core.tile_boxes(shape, cuts, parts)]


def lookup(graph: Graph, item, what: str):
    """A GTensor / GOp of ``graph`` from a handle or a name, with close matches for unknown names."""
    cls = GTensor if what == "tensor" else GOp
    if isinstance(item, cls):
        if item.graph is not graph:
            raise PlanError(f"{item!r} belongs to graph {item.graph.name!r}, not to the plan's graph {graph.name!r}")
        return item
    if isinstance(item, str):
        find = graph._g.find_tensor if what == "tensor" else graph._g.find_op
        i = find(item)
        if i >= 0:
            return cls(graph, i)
        n = graph._g.num_tensors if what == "tensor" else graph._g.num_ops
        node = graph._g.tensor if what == "tensor" else graph._g.op
        hint = did_you_mean(item, (node(k).name for k in range(n)))
        if not hint and what == "tensor" and graph._g.find_op(item) >= 0:
            hint = " (there is an op of that name: plan.strategies / plan.splits take ops)"
        if not hint and what == "op" and graph._g.find_tensor(item) >= 0:
            hint = " (there is a tensor of that name: plan.tiling / plan.cuts take tensors)"
        raise UnknownNameError(f"no {what} named {item!r} in graph {graph.name!r}{hint}")
    article = "a tensor" if what == "tensor" else "an op"
    if isinstance(item, GOp if what == "tensor" else GTensor):
        raise TypeError(f"expected {article} (a name or a {cls.__name__}), got {item!r}")
    raise TypeError(f"expected {article} name or a {cls.__name__}, not {type(item).__name__}")

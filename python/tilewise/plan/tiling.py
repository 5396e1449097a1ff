"""Tilings and names: the geometry a plan and its pictures share.

A plan over ``k = k1*k2*...`` devices has one recursion step per factor; a device's coordinates are
mixed-radix over those parts, the first step most significant (``device_coords``). A tensor's cut
at a step splits one dimension like ``numpy.array_split`` or replicates it; ``tile_box`` is the
tile a device owns. ``lookup`` finds a plan's tensors and ops by name or handle.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def tiling_str(cuts, rank: int) -> str:
    """As cost::tiling_str: "R C" for matrices, "P0 P2" for other ranks, "r" for replication."""
    tokens = []
    for c in cuts:
        if c < 0:
            tokens.append("r")
        elif rank == 2:
            tokens.append("R" if c == 0 else "C")
        else:
            tokens.append(f"P{c}")
    return " ".join(tokens)


def device_coords(d: int, parts) -> list[int]:
    """Mixed-radix coordinates of device ``d`` over ``parts``, the first step most significant."""
    coords = [0] * len(parts)
    for i in range(len(parts) - 1, -1, -1):
        coords[i] = d % parts[i]
        d //= parts[i]
    return coords


def _split_range(n: int, k: int, w: int) -> tuple[int, int]:
    base, extra = divmod(n, k)
    start = w * base + min(w, extra)
    return start, start + base + (1 if w < extra else 0) - 1


def tile_box(shape, cuts, parts, coords) -> tuple[tuple[int, int], ...]:
    """The tile (inclusive ``(lo, hi)`` per dimension) a device with ``coords`` owns, as
    ``cost::tile_box``: each cut splits the current range of its dimension like numpy.array_split;
    replicated steps keep it."""
    box = [(0, s - 1) for s in shape]
    for i, c in enumerate(coords):
        dim = cuts[i]
        if dim < 0:
            continue
        lo, hi = box[dim]
        a, b = _split_range(hi - lo + 1, parts[i], c)
        box[dim] = (lo + a, lo + b)
    return tuple(box)


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

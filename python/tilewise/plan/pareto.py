"""Cost frontiers of plain decision problems (TensorOpt §3): ``tw.pareto.solve(nodes, edges)``.

Each node takes one of its configurations, each costing ``(time, memory)``; each edge ``(u, v)``
adds the ``(time, memory)`` of its table entry ``[i][j]`` for u in configuration i and v in
configuration j; costs add (TensorOpt Eq. 3). ``solve`` returns every Pareto-optimal
``(time, memory)`` with a choice of configurations reaching it: a ``Frontier``. Nothing here knows
about DL; the graph-level frontier builds such a problem from ops and a cluster.

    f = tw.pareto.solve({"a": [(1.0, 4), (3.0, 1)], "b": [(2.0, 2), (1.0, 5)]},
                        {("a", "b"): [[0.5, 0.0], [(0.1, 1), 2.0]]})
    f.points[0].time, f.points[0].memory, f.points[0].choice   # lightest point first

The search is the C++ variable-elimination engine over the frontier semiring (docs/FRONTIERS.md):
exact (on a chain it is TensorOpt's LDP), with conditioning where a table would pass
``max_table``; the GIL is released while it runs.
"""

from __future__ import annotations

import html
import math
import numbers
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import _core
from .._util import check_int, did_you_mean, fmt_bytes, json_text

__all__ = ["Elimination", "Frontier", "FrontierPoint", "FrontierStats", "reduce", "solve"]

#: Entries a table may have before the search conditions on a variable (``max_table=None``).
DEFAULT_MAX_TABLE = 1 << 18
# With the heuristic: tables past 2^14 entries fix a class (the Table-1-size models' benchmark setting; a
# 2^18 threshold let wresnet-50-2's search pass the 4 GiB budget after 263 s, docs/FRONTIERS.md).
HEURISTIC_MAX_TABLE = 1 << 14
DEFAULT_MAX_BYTES = 4 << 30  # what the search's tables may take


@dataclass(frozen=True)
class FrontierPoint:
    """One point of a frontier: its costs and the configuration index chosen for every node."""

    time: float
    memory: float
    choice: Mapping[str, int]

    def to_dict(self) -> dict:
        return {"time": self.time, "memory": self.memory, "choice": dict(self.choice)}


class Elimination(NamedTuple):
    """One eliminated node: the entries of its table (configurations of its neighbours) and the
    frontier sizes in them (largest and total)."""

    node: str
    entries: int
    max_points: int
    total_points: int


@dataclass(frozen=True)
class FrontierStats:
    """How the search went. ``heuristic_eliminations`` is 0 unless ``heuristic=True`` met a table
    past ``max_table``; ``conditioned`` nodes were enumerated instead (exact); the frontier is exact
    up to ``memory_error_bound`` bytes of memory (0 without ``memory_bucket``). ``tied_ops``: op classes
    a coarsened graph-level search (``tw.frontier(..., coarsen=True)``) tied to their input's tiling."""

    largest_table: int
    heuristic_eliminations: int
    heuristic_fixed: Mapping[str, int]
    conditioned: tuple[str, ...]
    subproblems: int
    eliminations: tuple[Elimination, ...]
    memory_error_bound: float
    seconds: float
    incumbents: int = 0
    tied_ops: int = 0
    #: tw.frontier(tensor_reuse=True) with the heuristic or buckets: frontier points that came from the
    #: search without reuse, merged in (the reuse search fixes other classes and can do worse).
    merged_points: int = 0

    @property
    def largest_frontier(self) -> int:
        """Most points in one table entry over the search."""
        return max((e.max_points for e in self.eliminations), default=0)

    def to_dict(self) -> dict:
        return {"largest_table": self.largest_table, "heuristic_eliminations": self.heuristic_eliminations,
                "heuristic_fixed": dict(self.heuristic_fixed), "conditioned": list(self.conditioned),
                "subproblems": self.subproblems, "eliminations": [e._asdict() for e in self.eliminations],
                "memory_error_bound": self.memory_error_bound, "seconds": self.seconds,
                "incumbents": self.incumbents, "tied_ops": self.tied_ops,
                "merged_points": self.merged_points}


class Frontier:
    """A cost frontier: ``points`` by increasing memory, time strictly decreasing; ``stats``."""

    def __init__(self, points: Sequence[FrontierPoint], stats: FrontierStats):
        self.points: tuple[FrontierPoint, ...] = tuple(points)
        self.stats = stats

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self) -> Iterator[FrontierPoint]:
        return iter(self.points)

    def __getitem__(self, i):
        return self.points[i]

    def to_dict(self) -> dict:
        return {"format": "tilewise-pareto/1", "points": [p.to_dict() for p in self.points],
                "stats": self.stats.to_dict()}

    def to_json(self, path=None) -> str:
        """The frontier as JSON (written to ``path`` when given)."""
        return json_text(self.to_dict(), path)

    def _range(self) -> str:
        if not self.points:
            return "no feasible point"
        lo, hi = self.points[0], self.points[-1]
        return (f"{len(self.points)} points, memory {fmt_bytes(lo.memory)} .. {fmt_bytes(hi.memory)}, "
                f"time {lo.time:.4g} .. {hi.time:.4g} s")

    def __repr__(self):
        s = self.stats
        return (f"<tw.pareto.Frontier: {self._range()}; largest table {s.largest_table:,}, "
                f"{s.heuristic_eliminations} heuristic eliminations, {len(s.conditioned)} conditioned, "
                f"{s.seconds:.3g} s>")

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{i}</td><td style='text-align:right'>{p.time:.6g}</td>"
            f"<td style='text-align:right'>{html.escape(fmt_bytes(p.memory))}</td>"
            f"<td>{html.escape(', '.join(f'{k}={v}' for k, v in list(p.choice.items())[:8]))}"
            f"{' ...' if len(p.choice) > 8 else ''}</td></tr>"
            for i, p in enumerate(self.points[:50]))
        more = f"<p>... {len(self.points) - 50} more points</p>" if len(self.points) > 50 else ""
        return (f"<p><b>Cost frontier</b>: {html.escape(self._range())}</p>"
                f"<table><tr><th>#</th><th>time (s)</th><th>memory</th><th>choice</th></tr>{rows}</table>{more}"
                f"<p>{html.escape(repr(self))}</p>")

    def plot(self, ax=None, **kwargs):
        """The frontier as a staircase of memory (x) against time (y), points marked; returns the Axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        xs = [p.memory for p in self.points]
        ys = [p.time for p in self.points]
        kwargs.setdefault("marker", "o")
        kwargs.setdefault("where", "post")
        ax.step(xs, ys, **kwargs)
        ax.set_xlabel("memory (bytes)")
        ax.set_ylabel("time (s)")
        ax.set_title(f"cost frontier ({len(self.points)} points)")
        return ax


# ----- arguments ----------------------------------------------------------------------------------


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _check_array(a: np.ndarray, what: str) -> np.ndarray:
    """A numeric array's costs as float64, ValueError naming the first bad index."""
    if a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise TypeError(f"{what} must hold numbers (time, memory), not {a.dtype} values")
    a = a.astype(np.float64)
    bad = ~np.isfinite(a) | (a < 0)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = "".join(f"[{i}]" for i in idx[:-1])
        raise ValueError(f"{what} {where} {('time', 'memory')[idx[-1]]} is {float(a[idx])!r}; "
                         "valid: a finite number >= 0")
    return a


def _cost(entry, what: str) -> tuple[float, float]:
    """One ``(time, memory)`` pair, or a bare time (memory 0)."""
    if _is_number(entry):
        pair = (entry, 0.0)
    elif isinstance(entry, (Sequence, np.ndarray)) and not isinstance(entry, (str, bytes)) and len(entry) == 2:
        pair = tuple(entry)
    else:
        raise TypeError(f"{what} must be a (time, memory) pair or a bare time, not {type(entry).__name__} "
                        f"({entry!r})")
    out = []
    for v, part in zip(pair, ("time", "memory")):
        if not _is_number(v):
            raise TypeError(f"{what} {part} must be a number, not {type(v).__name__} ({v!r})")
        x = float(v)
        if not math.isfinite(x) or x < 0:
            raise ValueError(f"{what} {part} is {x!r}; valid: a finite number >= 0")
        out.append(x)
    return out[0], out[1]


def _configurations(name: str, configs) -> np.ndarray:
    what = f"node {name!r}"
    if isinstance(configs, np.ndarray):
        if configs.ndim == 1:
            configs = np.stack([configs, np.zeros_like(configs)], axis=1)
        if configs.ndim != 2 or configs.shape[1] != 2:
            raise ValueError(f"{what}: an array of configurations must have shape (K, 2) or (K,), got {configs.shape}")
        arr = _check_array(configs, f"{what} configuration")
    elif isinstance(configs, Sequence) and not isinstance(configs, (str, bytes)):
        arr = np.array([_cost(c, f"{what} configuration {i}") for i, c in enumerate(configs)], dtype=np.float64)
    else:
        raise TypeError(f"{what} must map to a list of configurations (time, memory), not {type(configs).__name__}")
    if len(arr) == 0:
        raise ValueError(f"{what} has no configuration; valid: at least one (time, memory)")
    return arr.reshape(-1, 2)


def _table(key, table, rows: int, cols: int, names: tuple[str, str]) -> np.ndarray:
    what = f"edge {key!r}"
    valid = f"valid: {rows} x {cols} (configurations of {names[0]!r} x of {names[1]!r})"
    if isinstance(table, np.ndarray):
        if table.ndim == 2:
            table = np.stack([table, np.zeros_like(table)], axis=2)
        if table.ndim != 3 or table.shape != (rows, cols, 2):
            raise ValueError(f"{what}: table has shape {table.shape}; {valid}, each (time, memory) or a bare time")
        return _check_array(table, f"{what} entry").reshape(-1, 2)
    if not isinstance(table, Sequence) or isinstance(table, (str, bytes)):
        raise TypeError(f"{what}: the table must be a list of rows, not {type(table).__name__}")
    if len(table) != rows:
        raise ValueError(f"{what}: table has {len(table)} rows; {valid}")
    out = []
    for i, row in enumerate(table):
        if not isinstance(row, (Sequence, np.ndarray)) or isinstance(row, (str, bytes)):
            raise TypeError(f"{what}: row {i} must be a list of entries, not {type(row).__name__}")
        if len(row) != cols:
            raise ValueError(f"{what}: row {i} has {len(row)} entries; {valid}")
        out.extend(_cost(c, f"{what} entry [{i}][{j}]") for j, c in enumerate(row))
    return np.array(out, dtype=np.float64).reshape(-1, 2)


def _seconds(time_limit) -> float:
    if time_limit is None:
        return 0.0
    if not _is_number(time_limit):
        raise TypeError(f"time_limit must be a number of seconds or None, not {type(time_limit).__name__}")
    if math.isnan(time_limit) or time_limit <= 0:
        raise ValueError(f"time_limit must be a positive number of seconds (or None for no limit), got {time_limit}")
    return 0.0 if math.isinf(time_limit) else float(time_limit)


def _progress_bar(progress):
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return None, lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        raise ImportError("progress=True needs tqdm: pip install 'tilewise[progress]' (or tqdm)") from None
    bar = tqdm(total=1, desc="frontier", leave=False)

    def report(done: int, total: int) -> None:
        if total != bar.total:
            bar.reset(total=total)
        bar.n = done
        bar.refresh()

    return report, bar.close


# ----- the search ---------------------------------------------------------------------------------


def default_max_table(heuristic: bool) -> int:
    """The table limit when none is given: 2**18 for the exact search, 2**14 with the heuristic."""
    return HEURISTIC_MAX_TABLE if heuristic else DEFAULT_MAX_TABLE


def _binary_bytes(b: float) -> str:
    """Bytes in binary units (the engine's own message counts MiB): 4 * 2**30 -> '4 GiB'."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{int(b)} bytes"


def _advice(heuristic: bool, max_table: int, memory_bucket: float, graph: bool, coarsen: bool | None) -> tuple:
    """The search's settings as a user would write them, and what would make it smaller."""
    table = f"2**{max_table.bit_length() - 1}" if max_table & (max_table - 1) == 0 else str(max_table)
    bucket = (_binary_bytes(memory_bucket) if graph else f"{memory_bucket:g}") if memory_bucket else None
    used = f"heuristic={heuristic}, max_table={table}, memory_bucket={bucket}"
    tries = []
    if not heuristic:
        tries.append("heuristic=True (TensorOpt Eq. 7; max_table 2**14 then)")
    else:
        tries.append("a smaller max_table (each factor of 4 fixes more classes and shrinks the tables"
                     + ("; 2**12 fits the Table-1-size zoo models in 4 GiB)" if graph else ")"))
    if not memory_bucket:
        tries.append("memory_bucket=16 * 2**20 (fewer points per table)" if graph else "a memory_bucket")
    if coarsen is not None:
        used += f", coarsen={coarsen}"
        if not coarsen:
            tries.append("coarsen=True (element-wise ops follow their input's tiling)")
    return used, tries


def too_large(error: Exception, heuristic: bool, max_table: int, memory_bucket: float, max_bytes: int,
              graph: bool = False) -> Exception:
    """``error`` (the engine's SearchTooLarge) with what the search used and what to change next; ``graph``:
    raised by ``tw.frontier`` (memory in bytes, the zoo's measured settings apply)."""
    used, tries = _advice(heuristic, max_table, memory_bucket, graph, None)
    used += f", max_bytes={_binary_bytes(max_bytes)}"
    tries.append(f"a larger max_bytes (now {_binary_bytes(max_bytes)})")
    msg = str(error).split("; a memory bucket")[0]
    return _core.SearchTooLarge(f"{msg} with {used}; try {', or '.join(tries)}")


def too_slow(error: Exception, heuristic: bool, max_table: int, memory_bucket: float, time_limit: float,
             graph: bool = False, coarsen: bool | None = None) -> Exception:
    """``error`` (the engine's SearchTimeout, raised in the search) with what the search used and what would
    make it faster."""
    used, tries = _advice(heuristic, max_table, memory_bucket, graph, coarsen)
    tries.append(f"a longer time_limit (now {time_limit:g} s)" if _is_number(time_limit) else "a longer time_limit")
    return _core.SearchTimeout(f"{error} with {used}; try {', or '.join(tries)}")


def solve(nodes: Mapping[str, Sequence], edges: Mapping[tuple[str, str], Sequence] | None = None, *,
          time_limit: float | None = None, max_table: int | None = None, heuristic: bool = False,
          memory_bucket: float | None = None, threads: int | None = None,
          progress: bool | Callable[[int, int], None] = False, bound: bool = True,
          max_bytes: int | None = None) -> Frontier:
    """The exact cost frontier of a decision problem.

    ``nodes``: name (str) -> list of configurations, each ``(time, memory)`` (a bare number is a
    time with memory 0), or an array of shape (K, 2) or (K,). ``edges``: ``(u, v)`` -> table
    ``[i][j]`` for u in configuration i and v in configuration j, each entry ``(time, memory)`` or
    a bare time, or an array of shape (K_u, K_v, 2) or (K_u, K_v). Costs are seconds and bytes:
    finite, >= 0.

    ``max_table``: entries a table may reach before the search enumerates (conditions on) a
    neighbour's configurations instead, staying exact (default 2**18). ``heuristic=True`` fixes a
    neighbour to one configuration instead (TensorOpt Eq. 7: fast, not exact; counted in
    ``stats.heuristic_eliminations``; ``max_table`` then defaults to 2**14). ``memory_bucket``: bytes within
    which memories count as equal (smaller frontiers; every exact point stays within
    ``stats.memory_error_bound`` bytes of a returned one, no slower; the least-memory point stays exact).
    ``bound``: first solve weighted sums of time and memory (nine weights, five with ``heuristic``; cheap
    scalar searches, in one pass) and drop every partial strategy one of their solutions beats however it is
    completed (exact: the same frontier; ``stats.incumbents`` counts them; False for the plain search). With
    ``heuristic`` the weighted sums search the heuristic's own restricted space (its fixed values): the same
    frontier, which pays where tables hold large frontiers (the Table-1-size RNN 1.9x faster) and costs a
    few per cent where they hold few points. ``max_bytes``: memory the search's tables may take (default
    4 GiB), then
    ``tw.SearchTooLarge`` rather than exhausting the machine's memory.
    ``time_limit``: seconds, then ``tw.SearchTimeout``. ``threads``: None
    for every core. ``progress``: True for a tqdm bar, or a callable ``(done, total)``.
    """
    if not isinstance(nodes, Mapping):
        raise TypeError(f"nodes must be a mapping name -> configurations, not {type(nodes).__name__}")
    edges = {} if edges is None else edges
    if not isinstance(edges, Mapping):
        raise TypeError(f"edges must be a mapping (u, v) -> table, not {type(edges).__name__}")
    names = list(nodes)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"node names must be str, not {type(name).__name__} ({name!r})")
    index = {name: i for i, name in enumerate(names)}
    node_costs = [_configurations(name, nodes[name]) for name in names]
    edge_costs, seen = [], {}
    for key, table in edges.items():
        if not isinstance(key, tuple) or len(key) != 2:
            raise TypeError(f"edge keys must be (u, v) pairs of node names, not {key!r}")
        for end in key:
            if end not in index:
                hint = did_you_mean(end, names) if isinstance(end, str) else ""
                valid = ", ".join(map(repr, names[:10])) + (f" ... ({len(names)} nodes)" if len(names) > 10 else "")
                raise ValueError(f"edge {key!r} names an unknown node {end!r}{hint}; valid: {valid}")
        u, v = key
        if u == v:
            raise ValueError(f"edge {key!r} joins {u!r} to itself; valid: two different nodes (a node's own "
                             f"costs go in its configurations)")
        pair = frozenset(key)
        if pair in seen:
            raise ValueError(f"edges {seen[pair]!r} and {key!r} join the same nodes; give one table (add the costs)")
        seen[pair] = key
        table = _table(key, table, len(node_costs[index[u]]), len(node_costs[index[v]]), (u, v))
        edge_costs.append((index[u], index[v], table))
    limit = _seconds(time_limit)
    if not isinstance(heuristic, bool):
        raise TypeError(f"heuristic must be True or False, not {type(heuristic).__name__}")
    max_table = default_max_table(heuristic) if max_table is None else check_int(
        "max_table", max_table, minimum=1, maximum=2**62, error=ValueError)
    max_bytes = DEFAULT_MAX_BYTES if max_bytes is None else check_int("max_bytes", max_bytes, minimum=1,
                                                                    maximum=2**62, error=ValueError)
    bucket = 0.0
    if memory_bucket is not None:
        if not _is_number(memory_bucket):
            raise TypeError(f"memory_bucket must be a number of bytes or None, not {type(memory_bucket).__name__}")
        bucket = float(memory_bucket)
        if not math.isfinite(bucket) or bucket <= 0:
            raise ValueError(f"memory_bucket must be a positive number of bytes (or None), got {memory_bucket}")
    threads = 0 if threads is None else check_int("threads", threads, minimum=1, maximum=4096, error=ValueError)
    report, close = _progress_bar(progress)
    try:
        sol = _core.pareto_solve(node_costs, edge_costs, max_table=max_table, heuristic=heuristic,
                                 memory_bucket=bucket, threads=threads, time_limit=limit, progress=report,
                                 bound=bool(bound), max_bytes=max_bytes)
    except _core.SearchTooLarge as e:
        raise too_large(e, heuristic, max_table, bucket, max_bytes) from None
    except _core.SearchTimeout as e:
        raise too_slow(e, heuristic, max_table, bucket, time_limit) from None
    finally:
        close()
    points = [FrontierPoint(t, m, types.MappingProxyType(dict(zip(names, c))))
              for t, m, c in zip(sol.times, sol.memories, sol.choices)]
    stats = FrontierStats(
        largest_table=sol.largest_table, heuristic_eliminations=len(sol.heuristic_fixed),
        heuristic_fixed=types.MappingProxyType({names[v]: x for v, x in sol.heuristic_fixed}),
        conditioned=tuple(names[v] for v in sol.conditioned), subproblems=sol.subproblems,
        eliminations=tuple(Elimination(names[v], e, mp, tp) for v, e, mp, tp in sol.steps),
        memory_error_bound=sol.memory_error_bound, seconds=sol.seconds, incumbents=sol.incumbents)
    return Frontier(points, stats)


def reduce(points, memory_bucket: float | None = None) -> list[int]:
    """TensorOpt Algorithm 1: the indices of the ``(time, memory)`` points on their frontier, by
    increasing memory. Sorted by (memory, time, position), a point is kept only when its time is
    strictly below every kept one: of equal memories the fastest stays, of equal points the first.
    With ``memory_bucket`` b, of the frontier points in one bucket ``[j·b, (j+1)·b)`` only the fastest
    stays, and the lightest point of all."""
    arr = points if isinstance(points, np.ndarray) else np.array(
        [_cost(p, f"point {i}") for i, p in enumerate(points)], dtype=np.float64).reshape(-1, 2)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"points must have shape (n, 2) of (time, memory), got {arr.shape}")
    arr = _check_array(arr, "point")
    bucket = 0.0 if memory_bucket is None else float(memory_bucket)
    if not math.isfinite(bucket) or bucket < 0:
        raise ValueError(f"memory_bucket must be a positive number of bytes (or None), got {memory_bucket}")
    return list(_core.pareto_reduce(arr, memory_bucket=bucket))

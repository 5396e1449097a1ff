"""The graph-level cost frontier (TensorOpt §3-4): ``tw.frontier(graph, cluster, devices)``.

Every parallelisation strategy of a training graph that no other beats in both per-iteration time
and per-device memory, each with a plan ``tw.compile`` runs:

    f = tw.frontier(tw.models.mlp(), "tensoropt", devices=16)
    f.points[0].memory, f.points[-1].time          # the least memory, the least time
    plan = f.best(memory_limit=16 * 2**30).plan      # mini-time under a budget (TensorOpt §4.1)
    f.turning_point; f.plot(); f.simulate(f.points[0])

Configurations and costs come from the planners' problem and the cluster's time model
(``cpp/frontier/graph_frontier.*``, docs/FRONTIERS.md "Graph-level frontier"); the search is the
exact frontier engine of ``tw.pareto``. A point's (time, memory) is the additive model of TensorOpt
Eq. 1-3, the search's proxy; ``simulate`` re-evaluates its plan with the program simulator.
"""

from __future__ import annotations

import html
import itertools
import math
import numbers
import time as _time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import _core
from .._util import check_int, fmt_bytes, json_text
from ..graph.graph import Graph
from .pareto import DEFAULT_MAX_BYTES, Elimination, FrontierStats, default_max_table, too_large, too_slow
from .pareto import reduce as _reduce_points
from .plan import Plan

__all__ = ["Baseline", "Frontier", "Parallelism", "StrategyPoint", "frontier", "min_devices", "profile_parallelism"]

#: TensorOpt §4.1: the share of device memory a strategy may plan to use (unmodelled memory).
DEFAULT_MARGIN = 1 / 1.1


@dataclass(frozen=True)
class StrategyPoint:
    """A frontier point: time (compute + network, seconds per iteration), memory (bytes on the busiest
    device), and the configuration of every class (``choice``, indices into the pruned configurations)."""

    index: int
    time: float
    memory: float
    compute: float
    network: float
    choice: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"index": self.index, "time": self.time, "memory": self.memory, "compute": self.compute,
                "network": self.network}


@dataclass(frozen=True)
class Baseline:
    """A single-strategy baseline costed like the frontier (same model, same parts)."""

    name: str
    time: float
    memory: float
    compute: float
    network: float
    plan: Plan | None

    def to_dict(self) -> dict:
        return {"name": self.name, "time": self.time, "memory": self.memory, "compute": self.compute,
                "network": self.network}


def _progress(progress):
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            raise ImportError("progress=True needs tqdm: pip install 'tilewise[progress]' (or tqdm)") from None
        bar = tqdm(total=1, desc="frontier", leave=False)

        def report(what: str, done: int, total: int) -> None:
            if total != bar.total:
                bar.reset(total=max(total, 1))
            bar.set_description(what, refresh=False)
            bar.n = done
            bar.refresh()

        return report, bar.close
    if progress is False or progress is None:
        return None, None
    if callable(progress):
        return progress, None
    raise TypeError(f"progress must be a bool or a callable (what, done, total), not {type(progress).__name__}")


def _seconds(name: str, value) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return 0.0 if math.isinf(value) else float(value)


class Frontier:
    """The cost frontier of a graph on a cluster: ``points`` by increasing memory, time strictly
    decreasing, each with a plan (``to_plan``); baselines costed alike; search statistics."""

    def __init__(self, graph: Graph, cluster, model, solution, stats: FrontierStats, baselines: dict,
                 mesh_points: list[tuple[float, float]], build_seconds: float, search_graph: Graph | None = None):
        self.graph = graph
        #: The graph searched: ``graph`` itself, or with ``tensor_reuse`` a copy before every candidate
        #: consumer (graph/reuse.py); points' plans keep only the copies they tile apart from the source.
        self.search_graph = graph if search_graph is None else search_graph
        self.cluster = cluster
        self._model = model
        self.devices: int = model.devices
        self.parts: list[int] = list(model.parts)
        self.stats = stats
        self.build_seconds = build_seconds
        self.baselines: dict[str, Baseline] = baselines
        self.mesh_points: list[tuple[float, float]] = mesh_points
        points = []
        for i, c in enumerate(solution.choices):
            t, m, comp, net = model.costs(c)
            points.append(StrategyPoint(i, t, m, comp, net, tuple(c)))
        self.points: tuple[StrategyPoint, ...] = tuple(points)
        self._plans: dict[int, Plan] = {}

    def __len__(self) -> int:
        return len(self.points)

    def __iter__(self):
        return iter(self.points)

    def __getitem__(self, i):
        return self.points[i]

    # ----- configurations -----

    def configurations(self) -> list[dict]:
        """Per class (tensor classes, then op classes): a member's name, and K before and after pruning.
        With ``tensor_reuse`` the copy ops' classes are of kind "copy" (priced with their tensors, K = 1)."""
        g = self.search_graph._g
        nt = self._model.num_tensor_classes
        copies = set(self.search_graph.copies)
        rows = []
        for v, (rep, before, after) in enumerate(zip(self._model.representatives, self._model.configs_before,
                                                     self._model.configs_after)):
            if v < nt:
                rows.append({"kind": "tensor", "name": g.tensor(rep).name, "before": before, "after": after})
            else:
                op = g.op(rep)
                kind = "copy" if op.name in copies else "op"  # tensor reuse: no variable
                rows.append({"kind": kind, "name": op.name, "type": op.type, "before": before, "after": after})
        return rows

    def configurations_table(self) -> str:
        """K per op class (before / after pruning), as text."""
        rows = [r for r in self.configurations() if r["kind"] == "op"]
        width = max((len(r["name"]) for r in rows), default=4)
        lines = [f"{'op class':<{width}}  {'type':<24} K  pruned K"]
        lines += [f"{r['name']:<{width}}  {r['type']:<24} {r['before']:<2} {r['after']}" for r in rows]
        return "\n".join(lines)

    # ----- points -----

    def _point(self, point) -> StrategyPoint:
        if isinstance(point, StrategyPoint):
            return point
        if isinstance(point, numbers.Integral) and not isinstance(point, bool):
            return self.points[int(point)]
        raise TypeError(f"a point is a StrategyPoint of this frontier or its index, not {type(point).__name__}")

    def to_plan(self, point) -> Plan:
        """The plan of a point (a ``StrategyPoint`` or its index): every tensor's tiling and op's
        split, bytes per step recounted; ``tw.compile`` runs it."""
        p = self._point(point)
        if p.index not in self._plans:
            if self.search_graph is self.graph:
                self._plans[p.index] = Plan(self.graph, self._model.plan(list(p.choice)))
            else:
                self._plans[p.index] = _plan_with_kept_copies(self.graph, self.search_graph, self._model, p.choice)
        return self._plans[p.index]

    def kept_copies(self, point) -> list[tuple[str, str]]:
        """Tensor reuse's keep-both at a point: (tensor, consumer op) whose consumer's copy is kept for
        backward in another tiling than the tensor's (empty without ``tensor_reuse``)."""
        if self.search_graph is self.graph:
            return []
        return [(self.graph._g.tensor(t).name, self.graph._g.op(c).name)
                for t, c in _kept_pairs(self.graph, self.search_graph, self._model, self._point(point).choice)]

    def without_copies(self, point) -> Plan:
        """The point's strategy with every reuse copy left out (on ``graph``: the consumers read the
        tensor again in backward): ``f.evaluate`` of it against the point is what keep-both buys."""
        plan = self.to_plan(point)
        return plan if plan.graph is self.graph else _moved(plan._core, plan.graph, self.graph)

    def _budget(self, memory_limit, margin) -> float:
        """memory_limit × margin, checked (memory_limit None: the cluster's device memory)."""
        if memory_limit is None:
            memory_limit = self.cluster.device.memory or math.inf
        if isinstance(memory_limit, bool) or not isinstance(memory_limit, numbers.Real) or memory_limit <= 0:
            raise ValueError(f"memory_limit must be a positive number of bytes, got {memory_limit!r}")
        if isinstance(margin, bool) or not isinstance(margin, numbers.Real) or not 0 < margin <= 1:
            raise ValueError(f"margin must be in (0, 1], got {margin!r}")
        return memory_limit * margin

    def best(self, memory_limit: float | None = None, margin: float = DEFAULT_MARGIN) -> StrategyPoint | None:
        """Mini-time (TensorOpt §4.1): the fastest point whose memory fits ``memory_limit × margin``
        (``memory_limit``: bytes, default the cluster's device memory; ``margin`` leaves room for
        memory the model does not count). None when no point fits."""
        budget = self._budget(memory_limit, margin)
        fits = [p for p in self.points if p.memory <= budget]
        return fits[-1] if fits else None

    @property
    def turning_point(self) -> StrategyPoint | None:
        """The knee: with memory and time each scaled to [0, 1] over the frontier, the point farthest
        below the chord from the least-memory point to the least-time point (None for an empty
        frontier; the only point when there is one). Left of it, a little more memory buys much time;
        right of it, much memory buys little (TensorOpt Fig. 6)."""
        if not self.points:
            return None
        if len(self.points) < 3:
            return self.points[0]
        first, last = self.points[0], self.points[-1]
        dm, dt = last.memory - first.memory, first.time - last.time
        if dm <= 0 or dt <= 0:
            return self.points[0]

        def below(p):  # distance below the chord in normalised units (the chord is x + y = 1)
            x, y = (p.memory - first.memory) / dm, (p.time - last.time) / dt
            return (1 - x - y) / math.sqrt(2)

        return max(self.points, key=lambda p: (below(p), -p.index))

    def simulate(self, point, *, op_times=None) -> dict:
        """A point re-evaluated by the program simulator (``plan.predict(cluster)``) beside its
        additive cost: {"time", "memory" (the search's proxy), "predicted_time", "predicted_memory"
        (peak bytes over devices), "prediction" (the ``tw.Prediction``)}."""
        p = self._point(point)
        pred = self.to_plan(p).predict(self.cluster, op_times=op_times)
        return {"time": p.time, "memory": p.memory, "predicted_time": pred.step_seconds,
                "predicted_memory": max(pred.memory_per_device), "prediction": pred}

    def simulated(self, *, op_times=None, limit: int | None = None) -> list[dict]:
        """The points re-evaluated by the program simulator (the search ranks by an additive proxy
        that does not see link contention or the arena's peak): one ``simulate`` row per point, or
        per ``limit`` points spread evenly along the frontier, in memory order, each with ``pareto``:
        True where no other simulated row is at most as slow and as large, and better in one. The
        rows with ``pareto`` are the frontier as the simulator sees it."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, numbers.Integral) or limit < 1):
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        picks = list(range(len(self.points)))
        if limit is not None and limit < len(picks):
            picks = sorted({round(k * (len(picks) - 1) / max(limit - 1, 1)) for k in range(limit)})
        rows = []
        for i in picks:
            row = self.simulate(i, op_times=op_times)
            row["index"] = i
            rows.append(row)
        def key(r):
            return r["predicted_time"], r["predicted_memory"]

        for r in rows:
            r["pareto"] = not any(o is not r and all(a <= b for a, b in zip(key(o), key(r))) and key(o) != key(r)
                                  for o in rows)
        return rows

    def best_simulated(self, memory_limit: float | None = None, margin: float = DEFAULT_MARGIN, *,
                       op_times=None, limit: int | None = None) -> StrategyPoint | None:
        """``best`` by the simulator: of the ``simulated`` points whose predicted peak memory fits
        ``memory_limit × margin``, the one with the least predicted step time (None when none fits)."""
        budget = self._budget(memory_limit, margin)
        fits = [r for r in self.simulated(op_times=op_times, limit=limit) if r["predicted_memory"] <= budget]
        return self.points[min(fits, key=lambda r: (r["predicted_time"], r["index"]))["index"]] if fits else None

    def evaluate(self, plan: Plan) -> Baseline:
        """Any plan on this frontier's parts (e.g. ``tw.partition(..., parts=f.parts)``) costed like the
        points: its (time, memory, compute, network) under the same model."""
        core = plan._core
        if self.search_graph is not self.graph:
            core = _on_search_graph(plan, self.search_graph)
        t, m, c, n = self._model.evaluate(core)
        return Baseline(plan.algorithm, t, m, c, n, plan)

    # ----- presenting -----

    def _point_dict(self, p: StrategyPoint) -> dict:
        d = p.to_dict()
        if self.search_graph is not self.graph:
            d["kept_copies"] = [list(pair) for pair in self.kept_copies(p)]
        return d

    def _range(self) -> str:
        if not self.points:
            return "no feasible point"
        lo, hi = self.points[0], self.points[-1]
        return (f"{len(self.points)} points, memory {fmt_bytes(lo.memory)} .. {fmt_bytes(hi.memory)}, "
                f"time {lo.time * 1e3:.4g} .. {hi.time * 1e3:.4g} ms")

    def __repr__(self):
        return (f"<tw.Frontier of {self.graph.name!r} on {self.devices} devices of '{self.cluster.name}' "
                f"(parts {self.parts}): {self._range()}; search {self.stats.seconds:.3g} s>")

    def to_dict(self) -> dict:
        return {
            "format": "tilewise-frontier/1", "graph": self.graph.name, "cluster": self.cluster.name,
            "devices": self.devices, "parts": self.parts, "points": [self._point_dict(p) for p in self.points],
            "tensor_reuse": self.search_graph is not self.graph,
            "turning_point": None if self.turning_point is None else self.turning_point.index,
            "baselines": {k: b.to_dict() for k, b in self.baselines.items()},
            "mesh_tensorflow": [{"time": t, "memory": m} for t, m in self.mesh_points],
            "configurations": self.configurations(), "stats": self.stats.to_dict(),
            "build_seconds": self.build_seconds,
        }

    def to_json(self, path=None) -> str:
        """The frontier as JSON (written to ``path`` when given)."""
        return json_text(self.to_dict(), path)

    def _repr_html_(self) -> str:
        tp = self.turning_point
        rows = "".join(
            f"<tr><td>{p.index}{' (turning point)' if tp is not None and p.index == tp.index else ''}</td>"
            f"<td style='text-align:right'>{p.time * 1e3:.4g}</td><td style='text-align:right'>"
            f"{p.compute * 1e3:.4g}</td><td style='text-align:right'>{p.network * 1e3:.4g}</td>"
            f"<td style='text-align:right'>{html.escape(fmt_bytes(p.memory))}</td></tr>"
            for p in self.points[:40])
        more = f"<p>... {len(self.points) - 40} more points</p>" if len(self.points) > 40 else ""
        base = "".join(f"<li>{html.escape(k)}: {b.time * 1e3:.4g} ms, {html.escape(fmt_bytes(b.memory))}</li>"
                       for k, b in self.baselines.items())
        return (f"<p><b>Cost frontier</b> of {html.escape(self.graph.name)} on {self.devices} devices of "
                f"'{html.escape(self.cluster.name)}': {html.escape(self._range())}</p>"
                "<table><tr><th>#</th><th>time ms</th><th>compute ms</th><th>network ms</th><th>memory</th></tr>"
                f"{rows}</table>{more}<ul>{base}</ul><p>{html.escape(repr(self))}</p>")

    def plot(self, ax=None):
        """TensorOpt Fig. 6: the frontier (memory in GiB against time in s), its compute and network
        time dotted, the baselines as points, the Mesh-TensorFlow frontier; returns the Axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        gib = 2**30
        xs = [p.memory / gib for p in self.points]
        ax.step(xs, [p.time for p in self.points], where="post", marker=".", label="frontier (tilewise)")
        ax.plot(xs, [p.compute for p in self.points], ":", label="compute time")
        ax.plot(xs, [p.network for p in self.points], ":", label="network time")
        if self.mesh_points:
            ax.step([m / gib for _, m in self.mesh_points], [t for t, _ in self.mesh_points], where="post",
                    linestyle="--", label="Mesh-TensorFlow frontier")
        for (name, b), marker in zip(self.baselines.items(), "s^Dvo"):
            ax.plot([b.memory / gib], [b.time], marker, label=name.replace("_", " "))
        tp = self.turning_point
        if tp is not None:
            ax.plot([tp.memory / gib], [tp.time], "*", markersize=12, label="turning point")
        ax.set_xlabel("memory per device (GiB)")
        ax.set_ylabel("time per iteration (s)")
        ax.set_title(f"{self.graph.name}: {self.devices} devices of {self.cluster.name}")
        ax.legend(fontsize="small")
        return ax


def _resolve(cluster, devices):
    from ..sim.cluster import Cluster

    if isinstance(cluster, str):
        base = Cluster.preset(cluster)
        devices = base.devices if devices is None else check_int("devices", devices, minimum=1)
        return base if devices == base.devices else Cluster.preset(cluster, devices=devices), devices
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a tw.Cluster or a preset name ({', '.join(Cluster.presets())}), "
                        f"got {type(cluster).__name__}")
    devices = cluster.devices if devices is None else check_int("devices", devices, minimum=1)
    if devices > cluster.devices:
        raise ValueError(f"{devices} devices asked but cluster '{cluster.name}' has {cluster.devices}; "
                         f"use cluster.with_devices({devices})")
    return cluster, devices


def _copies_of(search: Graph) -> list[tuple[int, int, int]]:
    """Per reuse copy op of the searched graph: (copy op id, source tensor id, copy tensor id)."""
    g = search._g
    out = []
    for name in search.copies:
        o = g.find_op(name)
        out.append((o, g.op(o).inputs[0], g.op(o).output))
    return out


def _kept_pairs(graph: Graph, search: Graph, model, choice) -> list[tuple[int, int]]:
    """(tensor id, consumer op id) of ``graph`` whose copy ``choice`` (of ``model``, on ``search``) tiles
    apart from the tensor."""
    g, sg = graph._g, search._g
    kept = []
    for o in model.kept_copy_ops(list(choice)):
        copy = sg.op(o)
        consumer = sg.tensor(copy.output).consumers[0]  # the forward consumer comes first (reuse.py)
        kept.append((g.find_tensor(sg.tensor(copy.inputs[0]).name), g.find_op(sg.op(consumer).name)))
    return kept


def _plan_with_kept_copies(graph: Graph, search: Graph, model, choice) -> Plan:
    """The plan of ``choice`` (of ``model``, on ``search``) on ``graph`` with only the copies it tiles
    apart (the others are the source itself), bytes recounted."""
    from ..graph.reuse import with_copies

    core = model.plan(list(choice), count_bytes=False)  # _moved recounts on the plan's own graph
    kept = _kept_pairs(graph, search, model, choice)
    return _moved(core, search, with_copies(graph, kept) if kept else graph)


def _moved(core, source: Graph, target: Graph) -> Plan:
    """The tilings and splits of ``core`` (a plan on ``source``) given to the tensors and ops of ``target``
    of the same names, bytes recounted."""
    tg, sg = target._g, source._g
    all_tilings, all_splits = core.tilings, core.splits  # each read converts the whole list: once
    tilings = [all_tilings[sg.find_tensor(tg.tensor(t).name)] for t in range(tg.num_tensors)]
    splits = [all_splits[sg.find_op(tg.op(o).name)] for o in range(tg.num_ops)]
    draft = _core.Plan(core.algorithm, core.devices, list(core.parts), tilings, splits,
                       [0] * len(core.parts), 0, 0.0)
    cost = _core.evaluate_plan(tg, draft, 0)
    return Plan(target, _core.Plan(core.algorithm, core.devices, list(core.parts), tilings, splits,
                                   list(cost.step_bytes), cost.comm_bytes, 0.0))


def _on_search_graph(plan: Plan, search: Graph):
    """``plan`` (on the frontier's graph, or on it with some reuse copies) as a core plan on the searched
    graph: a copy the plan does not have is tiled like its source (no copy)."""
    pg, sg = plan.graph._g, search._g
    core = plan._core
    all_tilings, all_splits = core.tilings, core.splits  # each read converts the whole list: once
    tilings, splits = [], []
    for t in range(sg.num_tensors):
        i = pg.find_tensor(sg.tensor(t).name)
        if i < 0:
            node = sg.tensor(t)
            producer = sg.op(node.producer) if node.producer >= 0 else None
            if producer is None or producer.name not in search.copies:
                raise _core.PlanError(f"the plan's graph has no tensor '{node.name}': "
                                      "not a plan of this frontier's graph")
            i = pg.find_tensor(sg.tensor(producer.inputs[0]).name)
        tilings.append(all_tilings[i])
    for o in range(sg.num_ops):
        i = pg.find_op(sg.op(o).name)
        if i < 0 and sg.op(o).name not in search.copies:
            raise _core.PlanError(f"the plan's graph has no op '{sg.op(o).name}': not a plan of this frontier's graph")
        splits.append(all_splits[i] if i >= 0 else [("replicate", -1, "Sum")] * len(core.parts))
    return _core.Plan(core.algorithm, core.devices, list(core.parts), tilings, splits, list(core.step_bytes),
                      core.comm_bytes, 0.0)


def frontier(graph: Graph, cluster="tensoropt", devices: int | None = None, time_limit: float | None = None,
             progress: bool | Callable[[str, int, int], None] = False, *, parts: Sequence[int] | None = None,
             baselines: bool = True, heuristic: bool = False, max_table: int | None = None,
             memory_bucket: float | None = None, prune: bool = True, batch_split_inputs: bool = False,
             bound: bool = True, max_bytes: int | None = None, coarsen: bool = False,
             threads: int | None = None, tensor_reuse: bool = False) -> Frontier:
    """The cost frontier of ``graph`` over ``devices`` devices of ``cluster`` (a ``tw.Cluster`` or a
    preset name; ``devices=None``: all of them).

    ``parts``: the recursion steps' part counts (default: one step per link level of the cluster,
    ``_core.hierarchy_parts``: 16 devices of 2 x 8 -> [2, 8]). ``baselines``: also cost data
    parallelism and the ``tofu`` plan (on the same parts) and the Mesh-TensorFlow frontier.
    ``heuristic``, ``max_table``, ``memory_bucket``, ``bound``, ``max_bytes``: as ``tw.pareto.solve``
    (exact by default).
    ``coarsen``: search the space where every element-wise op takes the split that follows its input's
    tiling (Tofu §5.1's coalescing; the op then joins its input's class): far fewer variables and
    narrower tables, a restriction of the space (docs/FRONTIERS.md "Coarsening": on the zoo's RNNs and
    MLP within 0.6 % of the exact frontier's time at equal memory). Points are costed on the full model.
    ``batch_split_inputs``: TensorOpt §4.2's data loading, inputs and labels arrive split along the
    batch (their first dimension) and are re-laid out for consumers that want otherwise (priced).
    ``tensor_reuse``: TensorOpt §4.2's keep-both, for a tensor that its producer's (or another reader's)
    backward and a consumer's backward both read: the consumer's copy, tiled as it wants, may be kept
    for backward beside the tensor (memory for no re-fetch in backward). One more variable per such
    (tensor, consumer); a point's plan holds the copies it keeps (``kept_copies``), ``tw.compile``
    runs it. It pays most with ``batch_split_inputs`` (consumers keep their copies of the inputs); with
    ``heuristic`` or ``memory_bucket`` the search without reuse runs too and its points join
    (``stats.merged_points``), so the frontier is never worse. ``time_limit`` (seconds) bounds costing
    and search (``tw.SearchTimeout`` past it)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"frontier takes a tw.Graph, not {type(graph).__name__}")
    cluster, devices = _resolve(cluster, devices)
    limit = _seconds("time_limit", time_limit)
    threads = 0 if threads is None else check_int("threads", threads, minimum=1, maximum=4096)
    if not isinstance(heuristic, bool):
        raise TypeError(f"heuristic must be True or False, not {type(heuristic).__name__}")
    max_table = default_max_table(heuristic) if max_table is None else check_int("max_table", max_table, minimum=1)
    max_bytes = DEFAULT_MAX_BYTES if max_bytes is None else check_int("max_bytes", max_bytes, minimum=1, maximum=2**62)
    if not isinstance(coarsen, bool):
        raise TypeError(f"coarsen must be a bool, not {type(coarsen).__name__}")
    if not isinstance(tensor_reuse, bool):
        raise TypeError(f"tensor_reuse must be a bool, not {type(tensor_reuse).__name__}")
    search = graph
    if tensor_reuse:
        from ..graph.reuse import reuse_candidates, with_copies

        pairs = reuse_candidates(graph)
        if pairs:
            search = with_copies(graph, pairs)
    bucket = 0.0 if memory_bucket is None else float(memory_bucket)
    if parts is None:
        parts = list(_core.hierarchy_parts(cluster._core, devices))
    else:
        parts = [check_int("parts[]", k, minimum=2) for k in parts]
        if math.prod(parts) != devices:
            raise ValueError(f"parts {parts} multiply to {math.prod(parts)}, not to {devices} devices")
    report, close = _progress(progress)
    start = _time.monotonic()
    try:
        copy_ops = [o for o, _, _ in _copies_of(search)] if search is not graph else []
        model = _core.FrontierModel(search._g, cluster._core, parts, threads=threads, time_limit=limit, prune=prune,
                                    batch_split_inputs=bool(batch_split_inputs), progress=report, copy_ops=copy_ops)
        left = 0.0 if not limit else max(limit - (_time.monotonic() - start), 1e-3)
        solve_report = None if report is None else (lambda d, t: report("frontier search", d, t))
        try:
            sol = model.solve(max_table=max_table, heuristic=heuristic, memory_bucket=bucket, threads=threads,
                              time_limit=left, progress=solve_report, bound=bool(bound), max_bytes=max_bytes,
                              coarsen=coarsen)
            choices, merged = [list(c) for c in sol.choices], 0
            if search is not graph and (heuristic or bucket > 0):
                # Not exact: the reuse search eliminates in another order and can fix worse classes (on
                # rnn-12-16k 16x slower at equal memory), so the search without reuse runs too and its
                # points join (as choices with every copy tiled like its source).
                plain = _core.FrontierModel(graph._g, cluster._core, parts, threads=threads, time_limit=limit,
                                            prune=prune, batch_split_inputs=bool(batch_split_inputs))
                left = 0.0 if not limit else max(limit - (_time.monotonic() - start), 1e-3)
                psol = plain.solve(max_table=max_table, heuristic=heuristic, memory_bucket=bucket, threads=threads,
                                   time_limit=left, bound=bool(bound), max_bytes=max_bytes, coarsen=coarsen)
                for c in psol.choices:
                    try:
                        core = plain.plan(list(c), count_bytes=False)  # tilings and strategies suffice
                        choices.append(list(model.choice_of(_on_search_graph(Plan(graph, core), search))))
                    except _core.PlanError:
                        continue  # a configuration the reuse model pruned: a point of it dominates this one
                keep = _reduce_points([model.costs(c)[:2] for c in choices])
                merged = sum(1 for i in keep if i >= len(sol.choices))
                choices = [choices[i] for i in keep]
        except _core.SearchTooLarge as e:
            raise too_large(e, heuristic, max_table, bucket, max_bytes, graph=True) from None
        except _core.SearchTimeout as e:
            raise too_slow(e, heuristic, max_table, bucket, time_limit, graph=True, coarsen=bool(coarsen)) from None
    finally:
        if close is not None:
            close()
    nt = model.num_tensor_classes
    names = [f"tensor class {v}" if v < nt else f"op class {v - nt}" for v in range(nt + model.num_op_classes)]
    stats = FrontierStats(
        largest_table=sol.largest_table, heuristic_eliminations=len(sol.heuristic_fixed),
        heuristic_fixed=types.MappingProxyType({names[v]: x for v, x in sol.heuristic_fixed}),
        conditioned=tuple(names[v] for v in sol.conditioned), subproblems=sol.subproblems,
        eliminations=tuple(Elimination(names[v], e, mp, tp) for v, e, mp, tp in sol.steps),
        memory_error_bound=sol.memory_error_bound, seconds=sol.seconds, incumbents=sol.incumbents,
        tied_ops=model.tied_ops if coarsen else 0, merged_points=merged)
    base: dict[str, Baseline] = {}
    mesh: list[tuple[float, float]] = []
    f = Frontier(graph, cluster, model, types.SimpleNamespace(choices=choices), stats, base, mesh, model.build_seconds,
                 search)
    if baselines and parts:
        for name in ("data_parallel", "tofu"):
            try:
                core = _core.partition(graph._g, devices, name, threads=threads, parts=parts)
                b = f.evaluate(Plan(graph, core))
            except (_core.SearchTooLarge, _core.PlanError):
                continue  # too large to plan, or outside the space (batch_split_inputs)
            base[name] = Baseline(name, b.time, b.memory, b.compute, b.network, b.plan)
        if f.points:
            p = f.points[-1]
            base["min_time"] = Baseline("min_time", p.time, p.memory, p.compute, p.network, None)
        candidates = []
        for layout in itertools.product((0, 1, -1), repeat=len(parts)):
            s = model.solve_mesh(list(layout), threads=threads)
            candidates += list(zip(s.times, s.memories))
        mesh[:] = [candidates[i] for i in _reduce_points(candidates)]
    return f


def min_devices(graph: Graph, cluster="tensoropt", memory_limit: float | None = None,
                candidates: Sequence[int] | None = None, margin: float = DEFAULT_MARGIN,
                **kwargs) -> tuple[int, StrategyPoint, Frontier] | None:
    """Mini-parallelism (TensorOpt §4.1): the fewest devices whose frontier has a point within
    ``memory_limit × margin`` (default the cluster's device memory): (devices, that point, its
    frontier), or None when no candidate fits. ``candidates``: device counts to try in order
    (default 1, 2, 4, ... up to the cluster's). ``kwargs`` go to ``frontier``."""
    cluster, total = _resolve(cluster, None)
    if candidates is None:
        candidates = [1 << i for i in range(total.bit_length()) if 1 << i <= total]
    kwargs.setdefault("baselines", False)
    for k in candidates:
        f = frontier(graph, cluster, devices=k, **kwargs)
        p = f.best(memory_limit, margin)
        if p is not None:
            return k, p, f
    return None


class Parallelism:
    """TensorOpt Fig. 8 (profiling): per device count, the least time of its frontier, overall and
    within the memory limit. ``rows``: dicts of devices, min_time, min_time_fitting, min_memory, points."""

    def __init__(self, graph: Graph, cluster, rows: list[dict], frontiers: dict[int, Frontier]):
        self.graph = graph
        self.cluster = cluster
        self.rows = rows
        self.frontiers = frontiers

    def table(self) -> str:
        lines = ["devices  min time ms  fitting ms  min memory  points"]
        for r in self.rows:
            fit = "-" if r["min_time_fitting"] is None else f"{r['min_time_fitting'] * 1e3:.4g}"
            lines.append(f"{r['devices']:>7}  {r['min_time'] * 1e3:>11.4g}  {fit:>10}  "
                         f"{fmt_bytes(r['min_memory']):>10}  {r['points']:>6}")
        return "\n".join(lines)

    def __repr__(self):
        return f"<tw.Parallelism of {self.graph.name!r} on '{self.cluster.name}'>\n{self.table()}"

    def to_json(self, path=None) -> str:
        return json_text({"format": "tilewise-parallelism/1", "graph": self.graph.name,
                          "cluster": self.cluster.name, "rows": self.rows}, path)

    def plot(self, ax=None):
        """Minimum time per device count (and within the memory limit); returns the Axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        ks = [r["devices"] for r in self.rows]
        ax.plot(ks, [r["min_time"] for r in self.rows], "o-", label="min time")
        fit = [(r["devices"], r["min_time_fitting"]) for r in self.rows if r["min_time_fitting"] is not None]
        if fit:
            ax.plot(*zip(*fit), "s--", label="min time within memory")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("devices")
        ax.set_ylabel("time per iteration (s)")
        ax.set_title(f"{self.graph.name} on {self.cluster.name}")
        ax.legend(fontsize="small")
        return ax


def profile_parallelism(graph: Graph, cluster="tensoropt", devices: Sequence[int] = (2, 4, 8, 16),
                        memory_limit: float | None = None, margin: float = DEFAULT_MARGIN,
                        **kwargs) -> Parallelism:
    """Profiling (TensorOpt §4.1, Fig. 8): the frontier at each device count; a table and a plot of
    the least time per count, overall and within ``memory_limit × margin``."""
    cluster, total = _resolve(cluster, None)
    kwargs.setdefault("baselines", False)
    rows, fronts = [], {}
    for k in devices:
        f = frontier(graph, cluster, devices=k, **kwargs)
        fronts[k] = f
        fit = f.best(memory_limit, margin)
        rows.append({"devices": k, "min_time": f.points[-1].time if f.points else math.inf,
                     "min_time_fitting": None if fit is None else fit.time,
                     "min_memory": f.points[0].memory if f.points else math.inf, "points": len(f.points)})
    return Parallelism(graph, cluster, rows, fronts)

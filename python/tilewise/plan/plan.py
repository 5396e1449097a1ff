"""Partition plans (Tofu §5.2, SoyBean §4): which device holds which tile of every tensor, and how
every op splits its work.

    plan = tw.partition(g, devices=8, algorithm="tofu")     # g: a training graph (plan/search.py)
    plan.comm_bytes                                        # bytes moved per iteration, all devices
    plan.tiling("layer1.0.conv1.weight")                   # 'P0 P1 r': one token per recursion step
    plan.strategies("layer1.0.conv1.conv2d")               # ['output b/2', 'reduce ci/2 (Sum)', ...]
    print(plan.summary()); plan.draw(); plan.save("plan.json")

A plan covers ``k = k1*k2*...`` devices, one recursion step per factor, the first step most
significant in a device's mixed-radix coordinates. A tensor's tiling has one cut per step: a
dimension split into ``k_i`` parts like ``numpy.array_split``, or ``r`` (replicated at that step).
An op's split has one basic strategy per step (Tofu §4.2): split an output variable, split a
reduction variable (partial outputs combined with the reducer), or replicate. Every figure comes
from one cost model (``cpp/cost``), so ``tw.evaluate(g, plan)`` recomputes any plan's bytes, per op
and per device, from the tilings alone.
"""

from __future__ import annotations

import html
import json
import pathlib

from .. import _core
from .._core import PlanError
from .._util import check_int, fmt_bytes, json_kind, parse_json, short_repr
from ..graph.graph import GOp, Graph, GTensor
from ..graph.reuse import with_copies
from .tiling import Cut, lookup, tile_boxes, tiling_str

FORMAT = "tilewise.plan/1"
_KINDS = ("output", "reduce", "replicate")
_REDUCERS = ("Sum", "Max", "Min", "Prod")


def _strategy_dict(op: GOp, s, parts: int) -> dict:
    kind, var, reducer = s
    names = op.desc.var_names
    return {
        "kind": kind,
        "var": names[var] if kind != "replicate" and 0 <= var < len(names) else None,
        "index": var if kind != "replicate" else -1,
        "parts": parts,
        "reducer": reducer if kind == "reduce" else None,
    }


def _strategy_str(d: dict) -> str:
    if d["kind"] == "replicate":
        return "replicate"
    text = f"{d['kind']} {d['var']}/{d['parts']}"
    return f"{text} ({d['reducer']})" if d["kind"] == "reduce" else text


# ----- evaluation ---------------------------------------------------------------------------------


class PlanCost:
    """A plan's figures recomputed from its tilings and strategies (``tw.evaluate``).

    ``comm_bytes``: bytes moved per iteration, summed over devices; ``step_bytes``: what each
    recursion step adds; ``per_op``: per op (graph order) its bytes, per input tensor and for the
    output conversion; ``memory_per_device`` (peak bytes), ``resident_per_device`` (tiles alive all
    iteration), ``peak_op_per_device`` (op name at the peak), ``flops_per_device``.
    """

    def __init__(self, graph: Graph, core):
        self.graph = graph
        self.comm_bytes: int = core.comm_bytes
        self.step_bytes: list[int] = list(core.step_bytes)
        mem = core.memory
        self.memory_per_device: list[int] = list(mem.peak)
        self.resident_per_device: list[int] = list(mem.resident)
        g = graph._g
        self.peak_op_per_device: list[str | None] = [g.op(o).name if o >= 0 else None for o in mem.peak_op]
        self.flops_per_device: list[int] = list(core.flops_per_device)
        self.per_op: list[dict] = []
        for oid, (ins, out) in enumerate(core.per_op):
            node = g.op(oid)
            inputs: dict[str, int] = {}
            for t, b in zip(node.inputs, ins):  # an op may read one tensor twice (x * x)
                name = g.tensor(t).name
                inputs[name] = inputs.get(name, 0) + b
            self.per_op.append({"op": node.name, "type": node.type, "phase": node.phase,
                                "bytes": sum(ins) + out, "inputs": inputs, "output": out})

    def breakdown(self, top: int | None = None) -> list[dict]:
        """``per_op`` sorted by bytes, largest first (graph order among equals); ``top`` keeps the first."""
        rows = sorted(self.per_op, key=lambda r: -r["bytes"])  # stable: graph order among ties
        if top is not None:
            rows = rows[:check_int("top", top, minimum=0)]
        return [dict(r, inputs=dict(r["inputs"])) for r in rows]  # copies: the cached figures stay intact

    def to_dict(self) -> dict:
        return {
            "comm_bytes": self.comm_bytes, "step_bytes": self.step_bytes,
            "memory_per_device": self.memory_per_device, "resident_per_device": self.resident_per_device,
            "peak_op_per_device": self.peak_op_per_device, "flops_per_device": self.flops_per_device,
            "per_op": self.per_op,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def __repr__(self):
        mem = self.memory_per_device
        peak = f", peak memory {fmt_bytes(max(mem))}/device" if mem else ""
        return f"<tw.PlanCost of {self.graph.name!r}: {self.comm_bytes:,} bytes moved{peak}>"


def evaluate(graph: Graph, plan: Plan, *, threads: int | None = None) -> PlanCost:
    """Recompute ``plan``'s bytes (in total, per step, per op), memory and FLOPs per device on
    ``graph`` (C++, GIL released). ``graph`` may be another build of the plan's graph (same tensor
    and op names and shapes); PlanError otherwise."""
    if not isinstance(graph, Graph):
        raise TypeError(f"evaluate takes a tw.Graph, not {type(graph).__name__}")
    if not isinstance(plan, Plan):
        raise TypeError(f"evaluate takes a tw.Plan (from tw.partition or Plan.load), not {type(plan).__name__}")
    threads = 0 if threads is None else check_int("threads", threads, minimum=1, maximum=4096)
    if graph is not plan.graph:
        _check_graph(plan._graph_description(), graph)
    return PlanCost(graph, _core.evaluate_plan(graph._g, plan._core, threads))


# ----- the plan -----------------------------------------------------------------------------------


class Plan:
    """A partition plan of a graph over ``devices`` devices: per tensor a tiling, per op a split.

    Get one from ``tw.partition`` or ``Plan.load``. Tensors and ops are given by name or as
    ``GTensor`` / ``GOp`` handles of the plan's graph.
    """

    def __init__(self, graph: Graph, core: _core.Plan, *, largest_table: int | None = None,
                 evaluated: int | None = None, duplication_used: int | None = None, timed_out: bool | None = None):
        self.graph = graph
        self._core = core
        self._tilings: list[list[int]] = core.tilings
        self._splits: list[list[tuple[str, int, str]]] = core.splits
        # Figures the core constructor does not take (plans loaded from JSON keep them here).
        self._largest_table = core.largest_table if largest_table is None else largest_table
        self._evaluated = core.evaluated if evaluated is None else evaluated
        self._duplication_used = core.duplication_used if duplication_used is None else duplication_used
        self._timed_out = core.timed_out if timed_out is None else timed_out
        self._cost: PlanCost | None = None

    @classmethod
    def one_device(cls, graph: Graph) -> Plan:
        """The trivial plan: one device holds every tensor whole and runs every op (no recursion step,
        nothing moved); what a one-device search returns, without searching."""
        g = graph._g
        core = _core.Plan("one_device", 1, [], [[] for _ in range(g.num_tensors)], [[] for _ in range(g.num_ops)],
                          [], 0, 0.0)
        return cls(graph, core)

    # ----- figures -----

    @property
    def algorithm(self) -> str:
        return self._core.algorithm

    @property
    def devices(self) -> int:
        return self._core.devices

    @property
    def parts(self) -> list[int]:
        """Part counts of the recursion steps, ``k = k1*k2*...`` (empty for one device)."""
        return list(self._core.parts)

    @property
    def comm_bytes(self) -> int:
        """Bytes moved per training iteration, summed over devices, as the planner found them."""
        return self._core.comm_bytes

    @property
    def step_bytes(self) -> list[int]:
        """Bytes each recursion step adds."""
        return list(self._core.step_bytes)

    @property
    def search_seconds(self) -> float:
        return self._core.search_seconds

    @property
    def largest_table(self) -> int:
        """Entries of the largest dynamic-programming table the search built (0 for greedy planners)."""
        return self._largest_table

    @property
    def evaluated(self) -> int:
        """Assignments brute force tried (0 for other planners)."""
        return self._evaluated

    @property
    def duplication_used(self) -> int:
        """Spartan: bytes per device spent on replicated tensors."""
        return self._duplication_used

    @property
    def timed_out(self) -> bool:
        """True when the search's ``time_limit`` passed during refinement: this is the best complete plan
        found by then (a search with no complete plan at the limit raises ``tw.SearchTimeout``)."""
        return self._timed_out

    def predict(self, cluster="this-machine", *, op_times=None):
        """One step of this plan simulated on ``cluster`` (a ``tw.Cluster`` or a preset name: "this-machine",
        "tofu", "tensoropt", "swapadvisor"...): a ``tw.Prediction`` with step seconds (compute,
        communication, idle per device), peak memory per device and bytes per link level. The programs
        simulated are the ones ``tw.compile`` runs. ``op_times`` (``tw.measure_ops(graph)``) prices each
        op from what it measured on one device of this machine (docs/TIME_MODEL.md)."""
        from ..sim.prediction import resolve_cluster, simulate_lowered

        c = resolve_cluster(cluster, self.devices)
        keep = [t.id for t in self.graph.results().values()]
        names = [op.name for op in self.graph.ops]
        return simulate_lowered(
            lambda core, seconds, work, shares: _core.simulate_plan(self.graph._g, self._core, core, keep, seconds,
                                                                   work, shares),
            c, names, op_times)

    def evaluate(self) -> PlanCost:
        """The plan's figures recomputed on its graph (computed once, then cached)."""
        if self._cost is None:
            self._cost = evaluate(self.graph, self)
        return self._cost

    @property
    def memory_per_device(self) -> list[int]:
        """Peak bytes on each device over the iteration (tiles alive plus communication buffers)."""
        return self.evaluate().memory_per_device

    @property
    def resident_per_device(self) -> list[int]:
        """Bytes of tiles alive the whole iteration (parameters, optimizer state, inputs) per device."""
        return self.evaluate().resident_per_device

    @property
    def flops_per_device(self) -> list[int]:
        return self.evaluate().flops_per_device

    # ----- tensors and ops -----

    def cuts(self, tensor: str | GTensor) -> list[Cut]:
        """The tensor's cut at each recursion step."""
        t = lookup(self.graph, tensor, "tensor")
        return [Cut(None if c < 0 else c, k) for c, k in zip(self._tilings[t.id], self._core.parts)]

    def tiling(self, tensor: str | GTensor) -> str:
        """One token per step: "R"/"C" (rows/columns) for rank-2 tensors, "P<dim>" for other ranks,
        "r" where the step replicates the tensor; e.g. "R C r". Empty for one device."""
        t = lookup(self.graph, tensor, "tensor")
        return tiling_str(self._tilings[t.id], len(t.shape))

    def tiles(self, tensor: str | GTensor) -> list[tuple[tuple[int, int], ...]]:
        """The tile each device holds: per device, an inclusive ``(lo, hi)`` range per dimension."""
        t = lookup(self.graph, tensor, "tensor")
        parts = self._core.parts
        return tile_boxes(t.shape, self._tilings[t.id], parts)

    def splits(self, op: str | GOp) -> list[dict]:
        """Per step: ``{"kind", "var", "index", "parts", "reducer"}``; ``var`` is the split variable's
        name in the op's description (``index`` its position), None when replicated; ``reducer`` only
        for "reduce"."""
        o = lookup(self.graph, op, "op")
        return [_strategy_dict(o, s, k) for s, k in zip(self._splits[o.id], self._core.parts)]

    def strategies(self, op: str | GOp) -> list[str]:
        """Per step, e.g. "output b/2", "reduce ci/2 (Sum)", "replicate"."""
        return [_strategy_str(d) for d in self.splits(op)]

    def breakdown(self, top: int | None = None) -> list[dict]:
        """Bytes per op, largest first: ``{"op", "type", "phase", "bytes", "inputs": {tensor: bytes},
        "output"}`` (``output``: bytes converting computed outputs to the output's tiling)."""
        return self.evaluate().breakdown(top)

    # ----- presentation -----

    def _parts_str(self) -> str:
        return " x ".join(map(str, self._core.parts)) or "1"

    def summary(self, top: int = 10) -> str:
        """Algorithm, devices, bytes (total and per step), search time, memory, the ``top`` ops by bytes."""
        top = check_int("top", top, minimum=0)
        cost = self.evaluate()
        g = self.graph
        lines = [f"Plan: {self.algorithm} on {self.devices} devices (parts {self._parts_str()}), graph "
                 f"{g.name!r} ({g._g.num_ops} ops, {g._g.num_tensors} tensors)"]
        lines.append(f"  communication: {self.comm_bytes / 1e9:.3f} GB per iteration ({self.comm_bytes:,} bytes)")
        if self.step_bytes:
            steps = ", ".join(f"{i + 1}: {fmt_bytes(b)}" for i, b in enumerate(self.step_bytes))
            lines.append(f"  by step: {steps}")
        search = f"  search: {self.search_seconds:.3f} s"
        if self.largest_table:
            search += f", largest table {self.largest_table:,} entries"
        if self.evaluated:
            search += f", {self.evaluated:,} assignments tried"
        if self.duplication_used:
            search += f", {fmt_bytes(self.duplication_used)} per device on replicas"
        if self.timed_out:
            search += " (time limit reached: best plan found by then)"
        lines.append(search)
        mem, res = cost.memory_per_device, cost.resident_per_device
        if mem:
            lines.append(f"  peak memory per device: min {fmt_bytes(min(mem))}, max {fmt_bytes(max(mem))} "
                         f"(resident: min {fmt_bytes(min(res))}, max {fmt_bytes(max(res))})")
        rows = [r for r in cost.breakdown(top) if r["bytes"] > 0]
        if rows:
            lines.append(f"  top {len(rows)} ops by bytes:")
            width = max(len(fmt_bytes(r["bytes"])) for r in rows)
            for r in rows:
                share = 100 * r["bytes"] / self.comm_bytes if self.comm_bytes else 0
                lines.append(f"    {fmt_bytes(r['bytes']):>{width}} {share:5.1f}%  {r['op']} ({r['type']}): "
                             f"{', '.join(self.strategies(r['op'])) or 'whole'}")
        return "\n".join(lines) + "\n"

    def __repr__(self):
        return (f"<tw.Plan {self.algorithm} on {self.devices} devices ({self._parts_str()}) of {self.graph.name!r}: "
                f"{self.comm_bytes:,} bytes moved, searched in {self.search_seconds:.3f} s"
                f"{' (time limit reached)' if self.timed_out else ''}>")

    def _repr_html_(self) -> str:
        rows = []
        for r in self.breakdown(20):
            ins = ", ".join(f"{html.escape(n)}: {html.escape(self.tiling(n)) or '-'}" for n in r["inputs"])
            rows.append(f"<tr><td>{html.escape(r['op'])}</td><td>{html.escape(r['type'])}</td>"
                        f"<td style='text-align:right'>{r['bytes']:,}</td>"
                        f"<td>{html.escape(', '.join(self.strategies(r['op'])))}</td><td>{ins}</td></tr>")
        return (f"<pre>{html.escape(self.summary(top=0))}</pre><table><tr><th>op</th><th>type</th><th>bytes</th>"
                f"<th>strategies</th><th>input tilings</th></tr>{''.join(rows)}</table>")

    def draw(self, ax=None, ops=None, max_ops: int = 12):
        """Tilings in the style of Tofu Fig. 11 (matplotlib): per selected op, its weight (top row)
        and its input activation (bottom row), tiles coloured by device; returns the Axes.
        ``ops``: names or GOps (default: forward convolutions / linear / matmul ops, evenly sampled
        up to ``max_ops``)."""
        from .plot import draw_plan

        return draw_plan(self, ax=ax, ops=ops, max_ops=max_ops)

    # ----- serialization -----

    def _graph_description(self) -> dict:
        g = self.graph
        return {"name": g.name, "tensors": [[t.name, list(t.shape)] for t in g.tensors],
                "ops": [[o.name, list(o.desc.var_names)] for o in g.ops]}

    def to_dict(self) -> dict:
        """Plain data: figures, per tensor its cuts (and tiling string), per op its strategies with
        variable names and indices."""
        g = self.graph._g
        tensors = []
        for tid, cuts in enumerate(self._tilings):
            node = g.tensor(tid)
            tensors.append({"tensor": node.name, "shape": list(node.shape), "cuts": list(cuts),
                            "tiling": tiling_str(cuts, len(node.shape))})
        ops = []
        for oid, split in enumerate(self._splits):
            op = GOp(self.graph, oid)
            steps = []
            for s, k in zip(split, self._core.parts):
                d = _strategy_dict(op, s, k)
                steps.append({"kind": d["kind"], "var": d["var"], "index": d["index"], "reducer": s[2]})
            ops.append({"op": op.name, "type": op.type, "strategies": steps})
        return {
            "format": FORMAT,
            "graph": {"name": self.graph.name, "tensors": g.num_tensors, "ops": g.num_ops},
            "algorithm": self.algorithm,
            "devices": self.devices,
            "parts": self.parts,
            "comm_bytes": self.comm_bytes,
            "step_bytes": self.step_bytes,
            "search_seconds": self.search_seconds,
            "largest_table": self.largest_table,
            "evaluated": self.evaluated,
            "duplication_used": self.duplication_used,
            "timed_out": self.timed_out,
            "tilings": tensors,
            "splits": ops,
            **({"reuse_copies": reuse_pairs(self.graph)} if self.graph.copies else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def save(self, path) -> None:
        pathlib.Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path, graph: Graph) -> Plan:
        return cls.from_json(pathlib.Path(path).read_bytes(), graph)

    @classmethod
    def from_json(cls, text: str, graph: Graph) -> Plan:
        """The plan saved with ``to_json``, on ``graph``; PlanError if it was made for another graph
        (tensor or op counts, names, shapes or variable names differ).

        The file is validated, not trusted: every field's type, parts multiplying to the devices,
        cuts per step and dimensions in range, strategies the op has, updates tiled like the tensor
        they replace, and the recorded bytes equal to a re-evaluation. What does not fit is a
        PlanError naming the field (``tilings[3].cuts[1]``) and what would be valid.
        """
        if not isinstance(graph, Graph):
            raise TypeError(f"Plan.from_json needs the tw.Graph the plan was made for, not {type(graph).__name__}")
        data = parse_json(text, PlanError, "plan", "Plan.from_json")
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            got = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise PlanError(f"not a tilewise plan (format {short_repr(got)}, expected {FORMAT!r})")
        return _PlanLoader(data, graph).build(cls)


_INT64_MAX = 2**63 - 1


class _PlanLoader:
    """Checks a parsed ``tilewise.plan/1`` document against its graph field by field; every
    complaint is a PlanError that starts with the field's path."""

    def __init__(self, data: dict, graph: Graph):
        self.data = data
        self.graph = graph
        self.valid: dict = {}  # per (op type, attributes, input ranks): its strategies

    @staticmethod
    def fail(path: str, message: str):
        raise PlanError(f"plan JSON {path}: {message}")

    def field(self, obj, path: str, key: str, kind, valid: str, default=None, required: bool = True):
        if not isinstance(obj, dict):
            self.fail(path, f"is {json_kind(obj)}; expected an object")
        if key not in obj:
            if not required:
                return default
            self.fail(f"{path}.{key}", f"missing; expected {valid}")
        v = obj[key]
        if kind is int:
            ok = isinstance(v, int) and not isinstance(v, bool) and -_INT64_MAX <= v <= _INT64_MAX
        elif kind is float:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")
        else:
            ok = isinstance(v, kind)
        if not ok:
            self.fail(f"{path}.{key}", f"is {json_kind(v)} ({short_repr(v)}); expected {valid}")
        return v

    def count(self, obj, path: str, key: str, required: bool = True) -> int:
        v = self.field(obj, path, key, int, "a non-negative integer", 0, required)
        if v < 0:
            self.fail(f"{path}.{key}", f"is {v}; expected a non-negative integer")
        return v

    def copies(self, graph: Graph) -> Graph:
        """``graph`` with the reuse copies the plan keeps (``reuse_copies``: a frontier point's plan, see
        graph/reuse.py); ``graph`` itself when the plan keeps none or ``graph`` has them already."""
        pairs = self.data.get("reuse_copies") if isinstance(self.data, dict) else None
        if pairs is None:
            return graph
        if not isinstance(pairs, list) or not all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs):
            self.fail(".reuse_copies", f"is {short_repr(pairs)}; expected a list of [tensor name, consumer op name]")
        if graph.copies:
            if reuse_pairs(graph) != pairs:
                self.fail(".reuse_copies", f"are {short_repr(pairs)}, but graph {graph.name!r} has the copies "
                          f"{short_repr(reuse_pairs(graph))}")
            return graph
        ids = []
        for i, (tensor, consumer) in enumerate(pairs):
            t, c = graph._g.find_tensor(tensor), graph._g.find_op(consumer)
            if t < 0 or c < 0:
                self.fail(f".reuse_copies[{i}]", f"names {tensor!r} and {consumer!r}, not a tensor and an op of "
                          f"graph {graph.name!r}")
            ids.append((t, c))
        try:
            return with_copies(graph, ids)
        except ValueError as e:
            self.fail(".reuse_copies", str(e))

    def build(self, cls) -> Plan:
        data = self.data
        graph = self.graph = self.copies(self.graph)
        g = graph._g
        meta = self.field(data, "", "graph", dict, "an object with the graph's name")
        made_for = self.field(meta, ".graph", "name", str, "the graph's name")
        tensors = self.field(data, "", "tilings", list, "a list with one tiling per tensor")
        ops = self.field(data, "", "splits", list, "a list with one split per op")
        for i, t in enumerate(tensors):
            self.field(t, f".tilings[{i}]", "tensor", str, "the tensor's name")
            shape = self.field(t, f".tilings[{i}]", "shape", list, "the tensor's shape")
            if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
                self.fail(f".tilings[{i}].shape", f"is {short_repr(shape)}; expected a list of integers")
        _check_graph({"name": made_for, "tensors": [[t["tensor"], t["shape"]] for t in tensors], "ops": None}, graph)
        if len(ops) != g.num_ops:
            raise PlanError(f"the plan has {len(ops)} ops, graph {graph.name!r} has {g.num_ops}: it was made for "
                            f"graph {made_for!r}")
        algorithm = self.field(data, "", "algorithm", str, "the planner's name")
        devices = self.field(data, "", "devices", int, "a positive device count")
        if not 1 <= devices <= 2**20:
            self.fail(".devices", f"is {devices}; expected a device count in [1, 2^20]")
        parts = self.field(data, "", "parts", list, "a list of part counts, one per recursion step")
        product = 1
        for j, k in enumerate(parts):
            if not isinstance(k, int) or isinstance(k, bool) or not 2 <= k <= devices:
                self.fail(f".parts[{j}]", f"is {short_repr(k)}; expected a part count in [2, {devices}] (devices)")
            product *= k
        if product != devices:
            self.fail(".parts", f"{parts} multiply to {product}, not to the plan's {devices} devices")
        steps = len(parts)
        tilings = []
        for tid, t in enumerate(tensors):
            path = f".tilings[{tid}]"
            cuts = self.field(t, path, "cuts", list, f"a list of {steps} cuts (one per step)")
            rank = len(g.tensor(tid).shape)
            if len(cuts) != steps:
                self.fail(f"{path}.cuts", f"has {len(cuts)} cuts; the plan has {steps} steps (parts {parts})")
            for j, c in enumerate(cuts):
                if not isinstance(c, int) or isinstance(c, bool) or not -1 <= c < rank:
                    self.fail(f"{path}.cuts[{j}]", f"is {short_repr(c)}; expected -1 (replicated) or a dimension in "
                              f"[0, {rank - 1}] of tensor {t['tensor']!r} {tuple(t['shape'])}" if rank else
                              f"is {short_repr(c)}; expected -1: tensor {t['tensor']!r} is a scalar")
            text = self.field(t, path, "tiling", str, "the tiling string", None, required=False)
            if text is not None and text != tiling_str(cuts, rank):
                self.fail(f"{path}.tiling", f"is {text!r}, but the cuts {cuts} give {tiling_str(cuts, rank)!r}")
            tilings.append(cuts)
        for tid in range(g.num_tensors):  # an updated value is stored in place of its tensor
            u = g.tensor(tid).updates
            if u >= 0 and tilings[tid] != tilings[u]:
                self.fail(f".tilings[{tid}].cuts", f"are {tilings[tid]}, but tensor {g.tensor(tid).name!r} updates "
                          f"{g.tensor(u).name!r} (cuts {tilings[u]}) in place: an update is tiled like its tensor")
        splits = []
        for oid, o in enumerate(ops):
            path = f".splits[{oid}]"
            node = g.op(oid)
            name = self.field(o, path, "op", str, "the op's name")
            if name != node.name:
                raise PlanError(f"op {oid} is {name!r} in the plan but {node.name!r} in graph {graph.name!r}: "
                                f"the plan was made for graph {made_for!r}")
            strategies = self.field(o, path, "strategies", list, f"a list of {steps} strategies (one per step)")
            if len(strategies) != steps:
                self.fail(f"{path}.strategies", f"has {len(strategies)} strategies; the plan has {steps} steps")
            key = (node.type, node.attrs_json, tuple(len(g.tensor(t).shape) for t in node.inputs))
            valid = self.valid.get(key)
            if valid is None:
                valid = self.valid[key] = valid_strategies(node)
            split = []
            for j, s in enumerate(strategies):
                split.append(self.strategy(f"{path}.strategies[{j}]", s, node, valid))
            splits.append(split)
        step_bytes = self.field(data, "", "step_bytes", list, f"a list of {steps} byte counts")
        if len(step_bytes) != steps:
            self.fail(".step_bytes", f"has {len(step_bytes)} entries; the plan has {steps} steps")
        for j, b in enumerate(step_bytes):
            if not isinstance(b, int) or isinstance(b, bool) or not 0 <= b <= _INT64_MAX:
                self.fail(f".step_bytes[{j}]", f"is {short_repr(b)}; expected a non-negative integer")
        comm = self.count(data, "", "comm_bytes")
        seconds = self.field(data, "", "search_seconds", float, "a finite number of seconds")
        if seconds < 0:
            self.fail(".search_seconds", f"is {seconds}; expected a non-negative number")
        extra = {k: self.count(data, "", k, required=False) for k in ("largest_table", "evaluated", "duplication_used")}
        core = _core.Plan(algorithm, devices, parts, tilings, splits, step_bytes, comm, float(seconds))
        timed_out = data.get("timed_out", False)
        if not isinstance(timed_out, bool):
            self.fail(".timed_out", f"is {short_repr(timed_out)}; expected true or false")
        plan = cls(graph, core, timed_out=timed_out, **extra)
        # The bytes the file records must be the plan's: a stale or edited figure is an error.
        cost = plan.evaluate()
        if cost.comm_bytes != comm:
            self.fail(".comm_bytes", f"is {comm:,}, but the plan's tilings and strategies move {cost.comm_bytes:,} "
                      "bytes (re-evaluated): the figure is stale or the plan was edited")
        if cost.step_bytes != list(step_bytes):
            self.fail(".step_bytes", f"are {step_bytes}, but re-evaluation gives {cost.step_bytes}")
        return plan

    def strategy(self, path: str, s, node, valid: dict) -> tuple:
        kind = self.field(s, path, "kind", str, "one of " + ", ".join(_KINDS))
        if kind not in _KINDS:
            self.fail(f"{path}.kind", f"is {kind!r}; expected one of {', '.join(_KINDS)}")
        if kind == "replicate":
            return ("replicate", -1, self.reducer(path, s, "Sum"))
        index = self.field(s, path, "index", int, "the split variable's index")
        names = list(node.desc.var_names)
        if not 0 <= index < len(names):
            var = short_repr(s.get("var"))
            self.fail(f"{path}.index", f"op {node.name!r} splits variable {var} (index {index}) in "
                      f"the plan, but its variables are {', '.join(names)} (indices 0..{len(names) - 1})")
        var = s.get("var")
        if var != names[index]:
            self.fail(f"{path}.var", f"op {node.name!r} splits variable {short_repr(var)} (index {index}) in the plan, "
                      f"but variable {index} is {names[index]!r}: the plan was made for another graph")
        reducer = self.reducer(path, s, valid.get((kind, index), "Sum"))
        if (kind, index) not in valid:
            ok = ", ".join(f"{k} {names[v]}" for k, v in valid) or "replicate only"
            self.fail(path, f"op {node.name!r} ({node.type}) has no strategy '{kind} {names[index]}'; its strategies: "
                      f"{ok}, replicate")
        if kind == "reduce" and reducer != valid[(kind, index)]:
            self.fail(f"{path}.reducer", f"is {reducer!r}, but op {node.name!r} reduces {names[index]} with "
                      f"{valid[(kind, index)]}")
        return (kind, index, reducer)

    def reducer(self, path: str, s: dict, default: str) -> str:
        r = s.get("reducer")
        if r is None:
            return default
        if r not in _REDUCERS:
            self.fail(f"{path}.reducer", f"is {short_repr(r)}; expected one of {', '.join(_REDUCERS)} or null")
        return r


def valid_strategies(node) -> dict:
    """(kind, variable index) -> reducer of every split strategy the op's description has."""
    names = list(node.desc.var_names)
    out = {}
    for s in node.desc.symbolic_strategies(2):
        if s["kind"] != "replicate" and s["dim"] in names:
            out[(s["kind"], names.index(s["dim"]))] = s.get("reducer") or "Sum"
    return out


def reuse_pairs(graph: Graph) -> list[list[str]]:
    """[tensor, consumer op] of each reuse copy of ``graph`` (graph/reuse.py), in graph order."""
    pairs = []
    for name in graph.copies:
        out = graph.op(name).output
        pairs.append([graph.op(name).inputs[0].name, out.consumers[0].name])
    return pairs


def _check_graph(desc: dict, graph: Graph) -> None:
    """PlanError unless ``graph`` has the tensors (names, shapes) and ops (names, variables) of ``desc``."""
    g = graph._g
    made_for = f"it was made for graph {desc['name']!r}"
    tensors = desc["tensors"]
    if len(tensors) != g.num_tensors or (desc["ops"] is not None and len(desc["ops"]) != g.num_ops):
        nops = "" if desc["ops"] is None else f" and {len(desc['ops'])} ops"
        raise PlanError(f"the plan has {len(tensors)} tensors{nops}; graph {graph.name!r} has {g.num_tensors} tensors "
                        f"and {g.num_ops} ops: {made_for}")
    for tid, (name, shape) in enumerate(tensors):
        node = g.tensor(tid)
        if node.name != name or tuple(node.shape) != tuple(shape):
            raise PlanError(f"tensor {tid} is {name!r} {tuple(shape)} in the plan but {node.name!r} "
                            f"{tuple(node.shape)} in graph {graph.name!r}: {made_for}")
    for oid, (name, var_names) in enumerate(desc["ops"] or ()):
        node = g.op(oid)
        if node.name != name or list(node.desc.var_names) != list(var_names):
            raise PlanError(f"op {oid} is {name!r} in the plan but {node.name!r} in graph {graph.name!r}: {made_for}")

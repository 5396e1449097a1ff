"""Swapped execution (SwapAdvisor §4.3, issue 17): ``tw.compile(graph, swap_plan)`` runs a training
graph on one CPU device whose memory is the swap plan's pool.

The C++ side (cpp/exec/swap_lowering.*, swap_runtime.*) lowers the plan onto the graph's one-device
program: ops in the plan's schedule on a "compute" stream, swap-ins and swap-outs on their own
streams with events for the plan's control edges; every tensor on the device lives at its memory
object's offset in one pool of ``memory_bytes``; a host store holds parameters and whatever is
swapped out; one copy worker thread per copy stream. ``exe.predict()`` times the same program with
the one simulator of programs (swaps on the cluster's host link). docs/SWAP.md, "Swapped execution".
"""

from __future__ import annotations

import functools

from .. import _core
from .._core import ExecError
from .._util import fmt_bytes
from ..graph.graph import Graph
from ..plan.swapping import in_place_sums, problem_buffers
from ..swap import SearchResult, SwapPlan
from .executable import Executable


class SwapStats:
    """What the last swapped step measured, beside the plan."""

    def __init__(self, exe: SwapExecutable):
        core = exe._core.stats
        self.steps: int = core.steps
        self.step_seconds: float = core.step_seconds
        """Wall time of the last step: until the compute stream and both copy streams ended."""
        self.compute_seconds: float = core.device_seconds[0]
        """When the compute stream ended (the copies out after the last op may run past it)."""
        self.op_seconds = {op.name: s for op, s in zip(exe.graph.ops, core.op_seconds, strict=True)}
        self.memory_bytes: int = exe._core.memory_bytes
        """The pool: the one block the device holds (its measured footprint)."""
        self.capacity: int = exe.capacity
        self.peak_memory: int = core.peak_bytes[0]
        """Bytes the device holds: the pool's block (nothing is allocated outside it)."""
        self.pool_peak_bytes: int = core.pool_peak_bytes
        """Most bytes of tensors in the pool at once, as the streams ran (<= memory_bytes)."""
        self.scratch_bytes: int = core.scratch_bytes[0]
        """Interpreter scratch (float64 copies of ops without a native kernel), outside the pool."""
        self.swapped_bytes = {"in": core.swapped_in_bytes, "out": core.swapped_out_bytes}
        """Bytes copied host -> device and device -> host in the last step."""
        self.planned_swapped_bytes = exe.swap_plan.swapped_bytes
        """The plan's: the bytes of its swap-ins and swap-outs."""
        self.native_ops = sum(core.op_native)
        self.interpreted_ops = len(core.op_native) - self.native_ops
        self._exe = exe

    @functools.cached_property
    def prediction(self):
        """The simulated step of the swapped program on this machine (``exe.predict()``)."""
        return self._exe.predict()

    @property
    def predicted_step_seconds(self) -> float:
        return self.prediction.step_seconds

    def to_dict(self, predict: bool = True) -> dict:
        out = dict(steps=self.steps, step_seconds=self.step_seconds, compute_seconds=self.compute_seconds,
                   memory_bytes=self.memory_bytes, capacity=self.capacity, peak_memory=self.peak_memory,
                   pool_peak_bytes=self.pool_peak_bytes, scratch_bytes=self.scratch_bytes,
                   swapped_bytes=self.swapped_bytes, planned_swapped_bytes=self.planned_swapped_bytes,
                   native_ops=self.native_ops, interpreted_ops=self.interpreted_ops)
        if predict:
            out["predicted_step_seconds"] = self.predicted_step_seconds
        return out

    def summary(self, predict: bool = True) -> str:
        lines = [
            f"step: {self.step_seconds * 1e3:.2f} ms measured"
            + (f", {self.predicted_step_seconds * 1e3:.2f} ms simulated on this-machine" if predict else ""),
            f"device memory: pool {fmt_bytes(self.memory_bytes)} of {fmt_bytes(self.capacity)}; tensors in it at "
            f"most {fmt_bytes(self.pool_peak_bytes)}; interpreter scratch {fmt_bytes(self.scratch_bytes)}",
            f"swapped: in {fmt_bytes(self.swapped_bytes['in'])}, out {fmt_bytes(self.swapped_bytes['out'])} "
            f"(plan: {fmt_bytes(self.planned_swapped_bytes['in'])}, {fmt_bytes(self.planned_swapped_bytes['out'])})",
        ]
        return "\n".join(lines)

    def __repr__(self):
        return (f"<tw.SwapStats: step {self.step_seconds * 1e3:.2f} ms, pool {fmt_bytes(self.memory_bytes)}, "
                f"swapped in {fmt_bytes(self.swapped_bytes['in'])} out {fmt_bytes(self.swapped_bytes['out'])}>")


class SwapExecutable(Executable):
    """A training graph run under a swap plan on one CPU device (``tw.compile(graph, swap_plan)``).
    ``step``, ``set``, ``get``, ``initialize``, ``state_dict``... as ``tw.Executable``; ``stats`` is a
    ``SwapStats``; ``predict()`` simulates the swapped program."""

    def __init__(self, graph: Graph, plan: SwapPlan, capacity: int | None = None, *, profile: bool = False,
                 timeout: float = 300.0):
        self.graph = graph
        self.swap_plan = plan
        self.plan = None
        problem = plan._problem
        self.capacity = int(problem.capacity if capacity is None else capacity)
        self._results = graph.results()
        buffer_of, op_of, in_place = swap_index_maps(graph, plan)
        self._core_in_place = in_place
        self._core = _core.SwapExecutable(graph._g, plan._core, buffer_of, op_of, self.capacity,
                                          [t.id for t in self._results.values()], self._opaque_calls(),
                                          float(timeout), in_place)
        self._core.set_profile(bool(profile))
        self.profile = bool(profile)
        self._fed: set[str] = set()
        self._check_finite = False

    @property
    def stats(self) -> SwapStats:
        if self._core.stats.steps == 0:
            raise ValueError("no step has run yet")
        return SwapStats(self)

    @property
    def swap_bytes(self) -> dict[str, int]:
        """Bytes of the program's swap-in and swap-out instructions (per step)."""
        return {"in": self._core.swap_in_bytes, "out": self._core.swap_out_bytes}

    def predict(self, cluster="this-machine", *, op_times=None):
        """One step of the swapped program simulated on ``cluster`` (default this machine, whose host link
        is a calibrated memcpy): a ``tw.Prediction``. ``op_times``: ``tw.measure_ops(graph)``."""
        from ..sim.prediction import resolve_cluster, simulate_lowered

        c = resolve_cluster(cluster, 1)
        names = [op.name for op in self.graph.ops]
        return simulate_lowered(
            lambda core, seconds, work, _shares: _core.simulate_swapped(self.graph._g, self._core, core, seconds,
                                                                       work),  # one device: shares are whole ops
            c, names, op_times)

    def __repr__(self):
        return (f"<tw.SwapExecutable '{self.graph.name}' on one CPU device, pool "
                f"{fmt_bytes(self._core.memory_bytes)} of {fmt_bytes(self.capacity)}>")


def _core_buffer_bytes(graph: Graph, in_place=()):
    """(buffer id, bytes) of the graph's one-device program."""
    keep = [t.id for t in graph.results().values()]
    return [(b, nbytes) for b, _, _, _, _, nbytes in _core.swap_buffers(graph._g, keep, list(in_place))]


def _in_place_sums(graph: Graph, problem) -> list[int]:
    """Ids of the gradient sums a plan stores in their running total: those of ``in_place_sums``
    the problem does not name (a plan made without in-place sums names every one)."""
    return [graph.tensor(out).id for out in in_place_sums(graph) if out not in problem._tensor_index]


def compile_swapped(graph: Graph, plan, *, memory: int | None = None, profile: bool = False,
                    timeout: float = 300.0) -> SwapExecutable:
    """``tw.compile(graph, swap_plan)``: ``plan`` is a ``tw.swap.SwapPlan`` or the ``SearchResult`` of
    ``tw.swap_plan(graph, ...)``; ``memory``: the device's bytes (default the plan's capacity); a pool
    larger raises ``tw.OutOfMemory``."""
    plan = runnable_swap_plan(plan)
    if memory is not None and memory <= 0:
        raise ExecError(f"memory must be a positive number of bytes, got {memory}")
    return SwapExecutable(graph, plan, memory, profile=profile, timeout=timeout)


def swap_index_maps(graph: Graph, plan: SwapPlan) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """What a swap plan's names are in the graph's one-device program: per problem tensor its buffer,
    per problem op the graph op, and the (sum, running total) pairs stored in place. ExecError when the
    plan is another graph's."""
    problem = plan._problem
    # A plan made with in-place sums (swap_problem(accumulate_in_place=True)) names each running
    # total once: the sums stored in it are computed in its buffer.
    in_place = [(out, graph.tensors[out].producer.inputs[0].id) for out in _in_place_sums(graph, problem)]
    buffers, _ = problem_buffers(graph, in_place)
    sizes = dict(_core_buffer_bytes(graph, in_place))
    buffer_of = []
    for name in problem._tensor_names:
        if name not in buffers:
            raise ExecError(f"swap plan: tensor '{name}' is neither a tensor nor a region of graph "
                            f"'{graph.name}' (a plan of another graph?)")
        if sizes[buffers[name]] != problem._tensors[name][0]:
            raise ExecError(f"swap plan: tensor '{name}' has {problem._tensors[name][0]} bytes in the plan but "
                            f"{sizes[buffers[name]]} in graph '{graph.name}' (a plan of another graph?)")
        buffer_of.append(buffers[name])
    summed = {out for out, _ in in_place}
    unplaced = [t.name for t in graph.tensors
                if t.updates is None and t.name not in problem._tensor_index and t.id not in summed]
    if unplaced:
        raise ExecError(f"swap plan: tensor '{unplaced[0]}' of graph '{graph.name}' is not a tensor of the plan "
                        "(a plan of another graph?)")
    op_ids = {op.name: op.id for op in graph.ops}
    missing = [name for name in problem._op_names if name not in op_ids]
    if missing:
        raise ExecError(f"swap plan: op '{missing[0]}' is not an op of graph '{graph.name}' "
                        "(a plan of another graph?)")
    return buffer_of, [op_ids[name] for name in problem._op_names], in_place


def runnable_swap_plan(plan) -> SwapPlan:
    """The SwapPlan a swapped executable runs (a SearchResult's best plan); TypeError for anything
    else, ExecError for an ODSwap plan (a simulator baseline: its blocks are placed on demand)."""
    if isinstance(plan, SearchResult):
        plan = plan.plan
    if not isinstance(plan, SwapPlan):
        raise TypeError(f"swapped execution needs a tw.swap.SwapPlan or SearchResult, got {type(plan).__name__}")
    if plan.method == "odswap":
        raise ExecError("swapped execution runs SwapAdvisor plans (a pool of objects); ODSwap's plan is a "
                        "baseline for the simulator (its buddy blocks are placed on demand)")
    return plan

"""``SwapPlan``: a swap plan (the augmented dataflow graph of SwapAdvisor §4.3) with its simulated times.

Rows name tensors and ops; ``timeline()`` is a ``tw.Timeline`` (table, Gantt plot, Perfetto trace)
with the thesis's three streams: compute, swap-in, swap-out (Fig. 4.1's rows).
"""

from __future__ import annotations

import html
import json

from .._util import fmt_bytes
from ..sim.timeline import Timeline

#: Stream names of a plan's timeline, in the thesis's order.
STREAMS = ("compute", "swap-in", "swap-out")


class SwapPlan:
    """What ``Problem.plan``, ``.ideal``, ``.odswap`` and the searches return.

    ``makespan`` (seconds, simulated), ``ideal_time`` and ``fraction_of_ideal``; ``schedule`` (op
    names), ``pool`` ((CLS, CNT); None for ODSwap, which allocates from a buddy allocator);
    ``compute``, ``swap_ins``, ``swap_outs`` (rows: dicts with start and end); ``swap_pairs`` (who
    left memory for whom, Fig. 4.3's "W1 -> W3"); ``stays`` (each tensor's time in each object);
    ``peak_memory``; ``timeline()``; ``to_dict()`` / ``to_json()``.
    """

    def __init__(self, problem, core):
        self._problem = problem
        self._core = core
        t = problem._tensor_names
        ops = problem._op_names
        tensors = problem._tensors
        self.method: str = core.method
        """ "swapadvisor" (the swap planner), "odswap" or "ideal"."""
        self.makespan: float = float(core.makespan)
        """Simulated seconds of the iteration."""
        self.schedule: list[str] = [ops[o] for o in core.schedule]
        self.double_pass: bool = bool(core.double_pass)
        self.pool: tuple[list[int], list[int]] | None = (list(core.cls), list(core.cnt)) if core.cls else None
        """(CLS, CNT), CLS 1-based over ``Problem.sizes``; None for ODSwap."""
        self.memory_bytes: int = int(core.memory_bytes)
        """Bytes of the pool's objects (ODSwap: what its buddy allocator manages)."""
        self.peak_memory: int = int(core.peak_memory)
        """Most bytes of memory objects holding a tensor at one time (simulated)."""
        self.peak_tensor_bytes: int = int(core.peak_tensor_bytes)
        """Most bytes of tensors in memory at one time (objects may be larger than their tensors)."""
        self.initial_residents: list[str] = [t[i] for i in core.initial_residents]
        """Parameters in memory when an iteration starts (the double pass keeps them there at its end)."""
        starts, ends = core.op_start.tolist(), core.op_end.tolist()
        self.compute: list[dict] = [{"op": ops[o], "start": a, "end": b}
                                    for o, a, b in zip(core.schedule, starts, ends)]
        objects = core.objects
        self.objects: list[dict] = [{"offset": off, "bytes": b, "size_class": c} for off, b, c in objects]
        """Memory objects: pool objects by class (size_class 1-based), or ODSwap's buddy blocks (0)."""
        position_op = [ops[o] for o in core.schedule]
        self.swap_ins: list[dict] = [
            {"tensor": t[x], "bytes": tensors[t[x]][0], "object": obj, "for": position_op[k], "start": a, "end": b}
            for (x, obj, k), a, b in zip(core.swap_ins, core.in_start.tolist(), core.in_end.tolist())]
        self.swap_outs: list[dict] = [
            {"tensor": t[x], "bytes": tensors[t[x]][0], "object": obj, "after": position_op[k] if k >= 0 else None,
             "start": a, "end": b}
            for (x, obj, k), a, b in zip(core.swap_outs, core.out_start.tolist(), core.out_end.tolist())]
        self.swap_pairs: list[dict] = [
            {"victim": t[v], "newcomer": t[n] if n >= 0 else None,
             "op": position_op[k] if 0 <= k < len(position_op) else None, "copied": j >= 0}
            for v, n, k, j in core.evictions]
        """Evictions: ``victim`` left its object for ``newcomer`` (None: copied out at the iteration's end,
        so that the next one finds it on the host) when ``op`` needed room; ``copied``: a swap-out ran
        (False: dropped, the host had it)."""
        self.stays: list[dict] = [{"tensor": t[x], "object": obj, "start": a, "end": b}
                                  for (x, obj), a, b in zip(core.stays, core.stay_start.tolist(),
                                                            core.stay_end.tolist())]
        """Each tensor's time in each object: start (swap-in or production) to end (its copy out, last
        use, or the end of the iteration)."""

    # ----- figures ------------------------------------------------------------------------------

    @property
    def ideal_time(self) -> float:
        """The iteration with unlimited memory: every op's seconds summed."""
        return self._problem.ideal_time

    @property
    def fraction_of_ideal(self) -> float:
        """ideal_time / makespan: the fraction of full speed (SwapAdvisor Fig. 5.1's normalised throughput)."""
        return self.ideal_time / self.makespan if self.makespan > 0 else 1.0

    @property
    def swapped_bytes(self) -> dict[str, int]:
        """Bytes moved per iteration: {"in": host to device, "out": device to host}."""
        return {"in": sum(r["bytes"] for r in self.swap_ins), "out": sum(r["bytes"] for r in self.swap_outs)}

    @property
    def busy(self) -> dict[str, float]:
        """Seconds each stream works: compute, swap-in, swap-out."""
        return dict(zip(STREAMS, (float(b) for b in self._core.stream_busy)))

    # ----- presentation -------------------------------------------------------------------------

    def timeline(self) -> Timeline:
        """The plan as a ``tw.Timeline``: a task per op ("op:<name>"), per swap-in ("in:<tensor>") and
        swap-out ("out:<tensor>"; "#2", "#3"... when a tensor moves again), on the streams compute,
        swap-in and swap-out, with fields kind, tensor or op, and bytes."""
        names, streams, starts, ends, extra = [], [], [], [], []
        seen: dict[str, int] = {}

        def add(name, stream, row, fields):
            count = seen[name] = seen.get(name, 0) + 1
            names.append(name if count == 1 else f"{name}#{count}")
            streams.append(stream)
            starts.append(row["start"])
            ends.append(row["end"])
            extra.append(fields)

        for row in self.compute:
            add(f"op:{row['op']}", "compute", row, {"kind": "compute", "op": row["op"]})
        for row in self.swap_ins:
            add(f"in:{row['tensor']}", "swap-in", row,
                {"kind": "swap-in", "tensor": row["tensor"], "bytes": row["bytes"], "for": row["for"]})
        for row in self.swap_outs:
            add(f"out:{row['tensor']}", "swap-out", row,
                {"kind": "swap-out", "tensor": row["tensor"], "bytes": row["bytes"]})
        return Timeline(names, streams, starts, ends, extra_fields=extra, peak_memory={0: self.peak_memory})

    def to_dict(self) -> dict:
        """Everything above as plain Python values."""
        return {"format": "tilewise-swap-plan/1", "method": self.method, "makespan": self.makespan,
                "ideal_time": self.ideal_time, "fraction_of_ideal": self.fraction_of_ideal,
                "schedule": list(self.schedule), "pool": None if self.pool is None else [list(p) for p in self.pool],
                "double_pass": self.double_pass, "memory_bytes": self.memory_bytes, "peak_memory": self.peak_memory,
                "peak_tensor_bytes": self.peak_tensor_bytes, "initial_residents": list(self.initial_residents),
                "compute": self.compute, "swap_ins": self.swap_ins, "swap_outs": self.swap_outs,
                "swap_pairs": self.swap_pairs, "stays": self.stays, "objects": self.objects}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def _summary(self) -> str:
        moved = self.swapped_bytes
        return (f"{self.method}: {self.makespan:.6g} s ({self.fraction_of_ideal:.1%} of ideal), "
                f"{len(self.swap_ins)} swap-ins ({fmt_bytes(moved['in'])}), {len(self.swap_outs)} swap-outs "
                f"({fmt_bytes(moved['out'])}), peak {fmt_bytes(self.peak_memory)} of "
                f"{'unlimited memory' if self.method == 'ideal' else fmt_bytes(self._problem.capacity)}")

    def __repr__(self) -> str:
        return f"<tw.swap.SwapPlan {self._summary()}>"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{html.escape(s)}</td><td style='text-align:right'>{b:.6g}</td></tr>"
                       for s, b in self.busy.items())
        pool = "buddy allocator" if self.pool is None else f"CLS {self.pool[0]}, CNT {self.pool[1]}"
        return (f"<p><b>tw.swap.SwapPlan</b> {html.escape(self._summary())}; pool: {html.escape(pool)}</p>"
                f"<table><tr><th>stream</th><th>busy (s)</th></tr>{rows}</table>")

"""``tw.OpTimes``: a graph's ops as measured on one device (SwapAdvisor §4.2: the simulator uses
measured computation time for each operator; TensorOpt §3.2: op times are profiled).

Per op: its measured seconds at full size, the kernel kind that prices it and its work (FLOPs or
bytes). The simulator prices a share of an op at the kind's curve for the share's work, scaled by
how far that curve was off for the whole op: ``scale = measured / kernel_seconds(kind, work)``.
A share takes the op's measured seconds times g(share's work) / g(op's work), with g(w) = a + w/R
from the kind's profile (a: its smallest call's time, R: its best rate): the op keeps what the
kind's curve cannot know (its shape, its memory pattern), and only shares small enough for
per-call costs to matter get relatively slower. Measured by ``tw.measure_ops(graph)``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from .._util import json_text


class OpTimes:
    """``{op name: (seconds, kind, work)}`` measured on one device of ``cluster_name``."""

    def __init__(self, ops: Mapping[str, tuple[float, str, float]], cluster_name: str = "this-machine"):
        self.ops: dict[str, tuple[float, str, float]] = {}
        for name, entry in ops.items():
            try:
                seconds, kind, work = entry
            except (TypeError, ValueError):
                raise ValueError(f"op times: entry for '{name}' must be (seconds, kind, work), got {entry!r}") from None
            for what, v in (("seconds", seconds), ("work", work)):
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                    raise ValueError(f"op times: '{name}' {what} must be a finite number >= 0, got {v!r}")
            if not isinstance(kind, str) or not kind:
                raise ValueError(f"op times: '{name}' kind must be a kernel kind name, got {kind!r}")
            self.ops[str(name)] = (float(seconds), kind, float(work))
        self.cluster = cluster_name

    def columns(self, op_names, cluster) -> tuple[list[float], list[float]]:
        """Per op (in ``op_names`` order): measured seconds and work at full size (0: not measured),
        for the simulator. Refused for a cluster other than the one measured (a V100's op times
        are not this CPU's)."""
        if not _same_machine(self.cluster, cluster.name):
            raise ValueError(f"op times were measured on '{self.cluster}'; they cannot price cluster "
                             f"'{cluster.name}' (predict without op_times there)")
        seconds, work = [], []
        for name in op_names:
            s, _, w = self.ops.get(name, (0.0, "", 0.0))
            seconds.append(s)
            work.append(w)
        return seconds, work

    @classmethod
    def median(cls, rounds) -> OpTimes:
        """Per op, the median seconds over several measurements of one graph on one cluster (op
        times measured at moments apart, e.g. between other measurements: a shared machine's speed
        drifts by tens of percent within seconds). Kind and work must agree across the rounds."""
        rounds = list(rounds)
        if not rounds or not all(isinstance(r, OpTimes) for r in rounds):
            raise TypeError("OpTimes.median: expected a non-empty sequence of tw.OpTimes")
        first = rounds[0]
        for r in rounds[1:]:
            if r.cluster != first.cluster or set(r.ops) != set(first.ops):
                raise ValueError("OpTimes.median: the rounds must time the same ops on the same cluster")
            for name, (_, kind, work) in r.ops.items():
                if (kind, work) != first.ops[name][1:]:
                    raise ValueError(f"OpTimes.median: op '{name}' has kind/work {(kind, work)} in one round "
                                     f"and {first.ops[name][1:]} in another")
        ops = {name: (statistics.median(r.ops[name][0] for r in rounds), kind, work)
               for name, (_, kind, work) in first.ops.items()}
        return cls(ops, first.cluster)

    @property
    def total_seconds(self) -> float:
        return sum(s for s, _, _ in self.ops.values())

    def to_dict(self) -> dict:
        return {"format": "tilewise-op-times", "version": 1, "cluster": self.cluster,
                "ops": {k: list(v) for k, v in self.ops.items()}}

    def to_json(self, path=None) -> str:
        return json_text(self.to_dict(), path)

    @classmethod
    def from_dict(cls, data) -> OpTimes:
        if not isinstance(data, dict) or data.get("format") != "tilewise-op-times" or data.get("version") != 1:
            raise ValueError("op times: expected an object with format 'tilewise-op-times' and version 1")
        ops = data.get("ops")
        if not isinstance(ops, dict):
            raise ValueError("op times: 'ops' must be an object of op name: [seconds, kind, work]")
        return cls(ops, str(data.get("cluster", "this-machine")))

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self):
        return f"<tw.OpTimes: {len(self.ops)} ops, {self.total_seconds * 1e3:.2f} ms on one device of '{self.cluster}'>"


def _same_machine(measured: str, target: str) -> bool:
    """The threads and the MPI ranks of this machine share its cores and kernels."""
    mine = ("this-machine", "this-machine-mpi")
    return measured == target or (measured in mine and target in mine)

"""``tw.OpTimes``: a graph's ops as measured on one device (SwapAdvisor §4.2: the simulator uses
measured computation time for each operator; TensorOpt §3.2: op times are profiled).

Per op: its measured seconds at full size, the kernel kind that prices it and its work (FLOPs or
bytes). The simulator prices a share of an op at the kind's curve for the share's work, scaled by
how far that curve was off for the whole op: ``scale = measured / kernel_seconds(kind, work)``.
A share takes the op's measured seconds times g(share's work) / g(op's work), with g(w) = a + w/R
from the kind's profile (a: its smallest call's time, R: its best rate): the op keeps what the
kind's curve cannot know (its shape, its memory pattern), and only shares small enough for
per-call costs to matter get relatively slower. Measured by ``tw.measure_ops(graph)``.

``tw.measure_ops(graph, plans=[...])`` also times each plan's shares (each device's part of each op,
as its kernel runs it alone) beside the whole op timed the same way (FlexFlow and OptCNN measure an
op once per parallel configuration): a share found there takes the op's measured seconds times that
ratio. What g cannot know shows there: a GEMM on half the rows still packs all of its weights (0.55-0.60x
the time on this machine, not 0.5x), a share's shape picks another kernel.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping

from .._util import json_text


class OpTimes:
    """``{op name: (seconds, kind, work)}`` measured on one device of ``cluster_name``; ``shares``:
    ``{op name: {share signature: share seconds / whole seconds}}``, both timed alone."""

    def __init__(self, ops: Mapping[str, tuple[float, str, float]], cluster_name: str = "this-machine",
                 shares: Mapping[str, Mapping[str, float]] | None = None):
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
        self.shares: dict[str, dict[str, float]] = {}
        for name, table in (shares or {}).items():
            if name not in self.ops or not isinstance(table, Mapping):
                raise ValueError(f"op times: shares of '{name}' must be an object of signature: ratio for a "
                                 f"measured op")
            for sig, ratio in table.items():
                if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) \
                        or ratio <= 0:
                    raise ValueError(f"op times: share '{sig}' of '{name}' must be a finite ratio > 0, got {ratio!r}")
            self.shares[str(name)] = {str(k): float(v) for k, v in table.items()}

    def columns(self, op_names, cluster) -> tuple[list[float], list[float], list[dict[str, float]]]:
        """Per op (in ``op_names`` order): measured seconds and work at full size (0: not measured),
        and its timed shares (empty: none; all empty when no plan's shares were timed), for the
        simulator. Refused for a cluster other than the one measured (a V100's op times are not this
        CPU's)."""
        if not _same_machine(self.cluster, cluster.name):
            raise ValueError(f"op times were measured on '{self.cluster}'; they cannot price cluster "
                             f"'{cluster.name}' (predict without op_times there)")
        seconds, work = [], []
        for name in op_names:
            s, _, w = self.ops.get(name, (0.0, "", 0.0))
            seconds.append(s)
            work.append(w)
        shares = [self.shares.get(name, {}) for name in op_names] if self.shares else []
        return seconds, work, shares

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
        # Shares: per signature, the median ratio over the rounds that timed it.
        seen: dict[str, dict[str, list[float]]] = {}
        for r in rounds:
            for name, table in r.shares.items():
                for sig, ratio in table.items():
                    seen.setdefault(name, {}).setdefault(sig, []).append(ratio)
        shares = {name: {sig: statistics.median(v) for sig, v in table.items()} for name, table in seen.items()}
        return cls(ops, first.cluster, shares)

    @property
    def total_seconds(self) -> float:
        return sum(s for s, _, _ in self.ops.values())

    def to_dict(self) -> dict:
        out = {"format": "tilewise-op-times", "version": 1, "cluster": self.cluster,
               "ops": {k: list(v) for k, v in self.ops.items()}}
        if self.shares:
            out["shares"] = {k: dict(v) for k, v in self.shares.items()}
        return out

    def to_json(self, path=None) -> str:
        return json_text(self.to_dict(), path)

    @classmethod
    def from_dict(cls, data) -> OpTimes:
        if not isinstance(data, dict) or data.get("format") != "tilewise-op-times" or data.get("version") != 1:
            raise ValueError("op times: expected an object with format 'tilewise-op-times' and version 1")
        ops = data.get("ops")
        if not isinstance(ops, dict):
            raise ValueError("op times: 'ops' must be an object of op name: [seconds, kind, work]")
        shares = data.get("shares", {})
        if not isinstance(shares, dict):
            raise ValueError("op times: 'shares' must be an object of op name: {signature: ratio}")
        return cls(ops, str(data.get("cluster", "this-machine")), shares)

    def __len__(self) -> int:
        return len(self.ops)

    def __repr__(self):
        timed = sum(len(v) for v in self.shares.values())
        extra = f", {timed} shares timed" if timed else ""
        return (f"<tw.OpTimes: {len(self.ops)} ops, {self.total_seconds * 1e3:.2f} ms on one device of "
                f"'{self.cluster}'{extra}>")


def _same_machine(measured: str, target: str) -> bool:
    """The threads and the MPI ranks of this machine share its cores and kernels."""
    mine = ("this-machine", "this-machine-mpi")
    return measured == target or (measured in mine and target in mine)

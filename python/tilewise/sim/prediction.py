"""``tw.Prediction``: one step of a plan's per-device programs simulated on a cluster.

What ``plan.predict(cluster)`` and ``exe.predict()`` return: the step time split into compute,
communication and idle per device, peak memory per device (the arena's plan of the same
allocations), bytes per link level, and the timeline of every instruction (a ``tw.Timeline``:
Gantt plot, Chrome/Perfetto trace). Built from the C++ simulation (cpp/sim/program_sim.h).
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from .._util import fmt_bytes
from .timeline import Timeline


class Prediction:
    """A simulated step: ``.step_seconds``, ``.compute_seconds`` / ``.comm_seconds`` /
    ``.idle_seconds`` (per device), ``.memory_per_device``, ``.bytes_per_link``,
    ``.timeline`` (a ``tw.Timeline``), ``.op_seconds`` (per op, the busiest device's)."""

    def __init__(self, core, cluster_name: str, op_names: Sequence[str], *, scaled: bool = False):
        self.cluster = cluster_name
        self.step_seconds = float(core.step_seconds)
        self.compute_seconds = [float(s) for s in core.compute_seconds]
        self.comm_seconds = [float(s) for s in core.comm_seconds]
        self.idle_seconds = [float(s) for s in core.idle_seconds]
        self.memory_per_device = [int(b) for b in core.peak_memory]
        self.bytes_per_link = {"intra": int(core.intra_bytes), "inter": int(core.inter_bytes)}
        if core.host_bytes:  # swapped programs: both directions over the host link
            self.bytes_per_link["host"] = int(core.host_bytes)
        self.op_times_used = bool(scaled)
        self._streams = list(core.streams)
        self._tasks = core.tasks()
        self._op_names = list(op_names)
        self._timeline: Timeline | None = None

    @property
    def devices(self) -> int:
        return len(self.memory_per_device)

    @property
    def timeline(self) -> Timeline:
        """Every simulated task: one row per device stream and per link direction."""
        if self._timeline is None:
            names, streams, starts, ends, extra = [], [], [], [], []
            for stream, start, end, device, instr, op, kind, priced, work, nbytes in self._tasks:
                names.append(f"d{device}:{instr}:{kind}")
                streams.append(self._streams[stream])
                starts.append(start)
                ends.append(end)
                extra.append({"device": device, "kind": kind, "op": self._op_names[op] if op >= 0 else "",
                              "priced": priced, "work": work, "bytes": nbytes})
            self._timeline = Timeline(names, streams, starts, ends, extra)
        return self._timeline

    def instruction_seconds(self) -> dict[tuple[int, int], float]:
        """(device, instruction index) -> simulated seconds of that instruction (links excluded)."""
        return {(d, i): e - s for _, s, e, d, i, _, kind, *_ in self._tasks if kind != "link"}

    @property
    def op_seconds(self) -> dict[str, float]:
        """Per op: the busiest device's simulated seconds in the op's compute."""
        per: dict[tuple[int, int], float] = {}
        for _, s, e, d, _, op, kind, *_ in self._tasks:
            if kind == "compute" and op >= 0:
                per[(op, d)] = per.get((op, d), 0.0) + (e - s)
        out: dict[str, float] = {}
        for (op, _), s in per.items():
            name = self._op_names[op]
            out[name] = max(out.get(name, 0.0), s)
        return out

    def plot(self, ax=None):
        """Gantt chart of the step (one row per device stream and link); returns the Axes."""
        return self.timeline.plot(ax=ax)

    def to_trace(self, path=None) -> dict:
        """The simulated step as a Chrome/Perfetto trace (written as JSON to ``path`` when given)."""
        return self.timeline.to_trace(path)

    def to_dict(self) -> dict:
        return dict(cluster=self.cluster, step_seconds=self.step_seconds, compute_seconds=self.compute_seconds,
                    comm_seconds=self.comm_seconds, idle_seconds=self.idle_seconds,
                    memory_per_device=self.memory_per_device, bytes_per_link=self.bytes_per_link,
                    op_times_used=self.op_times_used)

    def summary(self) -> str:
        lines = [f"predicted step on '{self.cluster}': {self.step_seconds * 1e3:.2f} ms"
                 + (" (kernel model scaled by measured op times)" if self.op_times_used else "")]
        for d in range(self.devices):
            lines.append(f"  device {d}: compute {self.compute_seconds[d] * 1e3:.2f} ms, communication "
                         f"{self.comm_seconds[d] * 1e3:.2f} ms, idle {self.idle_seconds[d] * 1e3:.2f} ms, "
                         f"peak memory {fmt_bytes(self.memory_per_device[d])}")
        lines.append("  bytes over links: " + ", ".join(f"{k} {v:,}" for k, v in self.bytes_per_link.items()))
        return "\n".join(lines)

    def __repr__(self):
        return (f"<tw.Prediction on '{self.cluster}': {self.step_seconds * 1e3:.2f} ms per step, {self.devices} "
                f"devices, peak {fmt_bytes(max(self.memory_per_device, default=0))}>")

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{d}</td><td>{self.compute_seconds[d] * 1e3:.2f}</td><td>{self.comm_seconds[d] * 1e3:.2f}</td>"
            f"<td>{self.idle_seconds[d] * 1e3:.2f}</td>"
            f"<td>{html.escape(fmt_bytes(self.memory_per_device[d]))}</td></tr>"
            for d in range(self.devices))
        return (f"<p><b>Predicted step on '{html.escape(self.cluster)}': {self.step_seconds * 1e3:.2f} ms</b></p>"
                "<table><tr><th>device</th><th>compute ms</th><th>communication ms</th><th>idle ms</th>"
                f"<th>peak memory</th></tr>{rows}</table>")


def resolve_cluster(cluster, devices: int):
    """A ``tw.Cluster`` for ``devices`` devices: a preset by name (sized to the plan), or the given
    cluster when it has enough devices (ValueError naming both counts otherwise)."""
    from .cluster import Cluster

    if isinstance(cluster, str):
        return Cluster.preset(cluster, devices=devices)
    if not isinstance(cluster, Cluster):
        raise TypeError(f"cluster must be a tw.Cluster or a preset name ({', '.join(Cluster.presets())}), "
                        f"got {type(cluster).__name__}")
    if cluster.devices < devices:
        raise ValueError(f"the plan runs on {devices} devices but cluster '{cluster.name}' has {cluster.devices}; "
                         f"use cluster.with_devices({devices})")
    return cluster


def simulate_lowered(simulate, cluster, op_names: Sequence[str], op_times=None) -> Prediction:
    """Runs ``simulate(core_cluster, op_seconds, op_work, op_shares)`` (a bound C++ simulation of some
    programs) and wraps the result; ``op_times`` (a ``tw.OpTimes``) prices the ops it measured."""
    seconds, work, shares = op_times.columns(op_names, cluster) if op_times is not None else ([], [], [])
    return Prediction(simulate(cluster._core, seconds, work, shares), cluster.name, op_names, scaled=bool(seconds))

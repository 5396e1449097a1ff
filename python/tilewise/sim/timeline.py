"""``tw.Timeline``: when each task of a simulation (or of a measured run) ran, on which stream.

Generic on purpose: built from names, stream names, start and end times and any extra fields per task
("device", "kind", "bytes"...), so the simulator and the per-device programs of a plan share one
result type. Shows itself as a table (Jupyter), a Gantt chart (matplotlib) and a Chrome/Perfetto trace.
"""

from __future__ import annotations

import html
import json
import math
import pathlib
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from .._util import did_you_mean

# Fields every task dict has; extra fields may not shadow them.
_OWN_FIELDS = ("name", "stream", "start", "end")


class Timeline:
    """When each task ran: ``tl.makespan``, ``tl.tasks``, ``tl["name"]``, ``tl.busy(stream)``,
    ``tl.to_trace()``, ``tl.plot()``.

    ``Timeline(names, streams, starts, ends, extra_fields=None, peak_memory=None)``: per task its
    unique name, its stream (any hashable; streams are listed in order of first appearance), start
    and end in seconds, and optionally a dict of extra fields passed through to ``tl.tasks`` (kept
    as given, not copied).
    ``peak_memory`` maps a memory pool to its peak bytes.
    """

    def __init__(self, names: Sequence[str], streams: Sequence[Hashable], starts, ends,
                 extra_fields: Sequence[Mapping] | None = None, peak_memory: Mapping | None = None):
        n = len(names)
        self._start = np.asarray(starts, dtype=np.float64).reshape(-1)
        self._end = np.asarray(ends, dtype=np.float64).reshape(-1)
        sizes = {"streams": len(streams), "starts": len(self._start), "ends": len(self._end)}
        if extra_fields is not None:
            sizes["extra_fields"] = len(extra_fields)
        wrong = {k: v for k, v in sizes.items() if v != n}
        if wrong:
            raise ValueError(f"Timeline: {n} names but {', '.join(f'{v} {k}' for k, v in wrong.items())}; "
                             "every column needs one entry per task")
        if np.any(self._end < self._start):
            i = int(np.argmax(self._end < self._start))
            raise ValueError(f"Timeline: task {names[i]!r} ends at {self._end[i]} before it starts at {self._start[i]}")
        self._names = list(names)
        self._index: dict[str, int] = {}
        for i, name in enumerate(self._names):
            if name in self._index:
                raise ValueError(f"Timeline: tasks {self._index[name]} and {i} are both named {name!r}; names "
                                 "must be unique")
            self._index[name] = i
        self._task_stream = list(streams)
        try:
            self._streams = list(dict.fromkeys(self._task_stream))
        except TypeError:
            bad = next(s for s in self._task_stream if not isinstance(s, Hashable))
            raise TypeError(f"Timeline: stream names must be hashable (str, int, tuple...), got {bad!r}") from None
        # Kept, not copied (a plan's timeline has 10^5 tasks); the Timeline never changes them.
        self._extra = list(extra_fields) if extra_fields is not None else None
        for i, extra in enumerate(self._extra or ()):
            clash = [f for f in _OWN_FIELDS if f in extra]
            if clash:
                raise ValueError(f"Timeline: task {self._names[i]!r} has extra fields {clash} that the "
                                 f"timeline sets itself ({', '.join(_OWN_FIELDS)})")
        self.peak_memory: dict = dict(peak_memory or {})
        """Memory pool -> highest bytes allocated at once (empty when no task allocates)."""
        self.makespan = float(self._end.max()) if n else 0.0
        """The latest end, in seconds (0 without tasks)."""
        self._busy: dict | None = None

    # ----- per task ---------------------------------------------------------------------------

    def _task(self, i: int) -> dict:
        d = {"name": self._names[i], "stream": self._task_stream[i], "start": float(self._start[i]),
             "end": float(self._end[i])}
        if self._extra is not None:
            d.update(self._extra[i])
        return d

    @property
    def tasks(self) -> list[dict]:
        """One dict per task, in the order given: name, stream, start, end, then the extra fields."""
        return [self._task(i) for i in range(len(self._names))]

    def __getitem__(self, name: str) -> dict:
        """The task dict of ``name`` (a KeyError, with close names, for an unknown one)."""
        i = self._index.get(name)
        if i is None:
            raise KeyError(f"no task named {name!r} in this timeline{did_you_mean(str(name), self._index)}")
        return self._task(i)

    def __contains__(self, name) -> bool:
        return name in self._index

    def __len__(self) -> int:
        return len(self._names)

    @property
    def starts(self) -> np.ndarray:
        """Start of every task, seconds (a copy)."""
        return self._start.copy()

    @property
    def ends(self) -> np.ndarray:
        """End of every task, seconds (a copy)."""
        return self._end.copy()

    # ----- per stream -------------------------------------------------------------------------

    @property
    def streams(self) -> list:
        """Stream names, in order of first appearance among the tasks."""
        return list(self._streams)

    def _busy_seconds(self) -> dict:
        # The union of a stream's intervals: tasks of one simulated stream never overlap, but a
        # measured or hand-built timeline may have them overlap, and busy time must not exceed makespan.
        if self._busy is None:
            by_stream: dict = {s: [] for s in self._streams}
            for s, a, b in zip(self._task_stream, self._start.tolist(), self._end.tolist()):
                by_stream[s].append((a, b))
            self._busy = {}
            for s, spans in by_stream.items():
                total, reach = 0.0, -math.inf
                for a, b in sorted(spans):
                    if b > reach:
                        total += b - max(a, reach)
                        reach = b
                self._busy[s] = total
        return self._busy

    def _check_stream(self, stream):
        if stream not in self._busy_seconds():
            raise KeyError(f"no stream {stream!r} in this timeline; its streams are {self._streams}")

    def busy(self, stream) -> float:
        """Seconds during which ``stream`` runs a task."""
        self._check_stream(stream)
        return self._busy_seconds()[stream]

    def idle(self, stream) -> float:
        """Seconds of the makespan during which ``stream`` runs nothing."""
        return self.makespan - self.busy(stream)

    # ----- export -----------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """Makespan, streams with their busy seconds, tasks and peak memory, as plain Python values."""
        return {"makespan": self.makespan,
                "streams": [{"name": s, "busy": self.busy(s), "idle": self.idle(s)} for s in self._streams],
                "tasks": self.tasks, "peak_memory": dict(self.peak_memory)}

    def to_json(self) -> str:
        """``to_dict()`` as JSON (values JSON lacks, such as tuples of stream names, become lists or strings)."""
        return json.dumps(_jsonable(self.to_dict()))

    def to_trace(self, path=None) -> dict:
        """The Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev): one complete event per task
        (ts and dur in microseconds), a process per "device" field (0 without one), a thread per
        stream; written as JSON to ``path`` when given."""
        extras = self._extra if self._extra is not None else [{}] * len(self)
        devices = [_device_key(e.get("device", 0)) for e in extras]
        unique = list(dict.fromkeys(devices))
        # Trace pids are integers: int devices are their own pids, any other naming is numbered.
        if all(isinstance(d, int) and not isinstance(d, bool) for d in unique):
            pids = {d: d for d in unique}
        else:
            pids = {d: k for k, d in enumerate(unique)}
        tids = {s: k for k, s in enumerate(self._streams)}
        meta = [{"name": "process_name", "ph": "M", "pid": pids[d], "tid": 0, "args": {"name": f"device {d}"}}
                for d in unique]
        threads = dict.fromkeys(zip(devices, self._task_stream))
        meta += [{"name": "thread_name", "ph": "M", "pid": pids[d], "tid": tids[s], "args": {"name": str(s)}}
                 for d, s in threads]
        events = []
        for i, extra in enumerate(extras):
            event = {"name": self._names[i], "ph": "X", "pid": pids[devices[i]], "tid": tids[self._task_stream[i]],
                     "ts": float(self._start[i]) * 1e6, "dur": float(self._end[i] - self._start[i]) * 1e6}
            if "kind" in extra:
                event["cat"] = str(extra["kind"])
            if extra:
                event["args"] = _jsonable(extra)
            events.append(event)
        trace = {"traceEvents": meta + events, "displayTimeUnit": "ms"}
        if path is not None:
            pathlib.Path(path).write_text(json.dumps(trace))
        return trace

    def plot(self, ax=None):
        """A Gantt chart (matplotlib): a row per stream, a bar per task, coloured by the "kind" field
        when tasks have one; returns the Axes (a new figure when ``ax`` is None); never shows it."""
        import matplotlib
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch

        if ax is None:
            _, ax = plt.subplots(figsize=(10, 1 + 0.5 * len(self._streams)))
        kinds = [(self._extra[i].get("kind") if self._extra is not None else None) for i in range(len(self))]
        palette = matplotlib.colormaps["tab10"]
        colour = {k: palette(j % 10) for j, k in enumerate(dict.fromkeys(kinds))}
        row = {s: r for r, s in enumerate(self._streams)}
        bars: dict = {}  # (row, kind) -> [(start, duration)]: one broken_barh call per group
        for i, kind in enumerate(kinds):
            bars.setdefault((row[self._task_stream[i]], kind), []).append(
                (float(self._start[i]), float(self._end[i] - self._start[i])))
        for (r, kind), spans in bars.items():
            ax.broken_barh(spans, (r - 0.4, 0.8), facecolors=colour[kind], edgecolor="black", linewidth=0.3)
        ax.set_yticks(range(len(self._streams)), [str(s) for s in self._streams])
        ax.set_ylim(len(self._streams) - 0.5, -0.5)  # first stream on top
        ax.set_xlim(0, self.makespan or 1.0)
        ax.set_xlabel("seconds")
        ax.set_title(f"makespan {self.makespan:.4g} s")
        if any(k is not None for k in colour):
            ax.legend(handles=[Patch(color=c, label=str(k)) for k, c in colour.items()], loc="upper right",
                      fontsize="small")
        return ax

    # ----- presentation -----------------------------------------------------------------------

    def __repr__(self) -> str:
        return (f"<tw.Timeline of {len(self)} tasks on {len(self._streams)} streams: "
                f"makespan {self.makespan:.6g} s>")

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(str(s))}</td><td style='text-align:right'>{self.busy(s):.6g}</td>"
            f"<td style='text-align:right'>{self.idle(s):.6g}</td>"
            f"<td style='text-align:right'>{100 * self.busy(s) / self.makespan if self.makespan else 0:.1f}%</td></tr>"
            for s in self._streams[:100])
        more = f"<p>… {len(self._streams) - 100} more streams</p>" if len(self._streams) > 100 else ""
        memory = "".join(f"<br>peak memory of {html.escape(str(p))}: {b:,} bytes" for p, b in self.peak_memory.items())
        return (f"<p>tw.Timeline: {len(self)} tasks, makespan {self.makespan:.6g} s{memory}</p>"
                f"<table><tr><th>stream</th><th>busy (s)</th><th>idle (s)</th><th>busy</th></tr>{rows}</table>{more}")


def _device_key(d):
    """A device as a dict key: itself when hashable, else its text."""
    try:
        hash(d)
    except TypeError:
        return str(d)
    return d


def _jsonable(v):
    """``v`` with only JSON's types: tuples become lists, NumPy scalars numbers, other objects strings."""
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)

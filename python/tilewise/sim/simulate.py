"""``tw.simulate``: time tasks on streams that share links and other resources (the C++ discrete-event
simulator of cpp/sim/simulator.h). Every field is checked here first, so that a mistake is reported by
task name and field; the core then runs once, without the GIL.

The model: a task starts when the task before it on its stream (list order) and its ``after`` tasks
have ended. It spends its fixed ``seconds`` alone, then does its ``work`` at
``min(max_rate, capacity / sharers for each of its resources)``, sharers counting the tasks in their
work phase on that resource at each moment (equal sharing, not max-min fairness: a task held below
its share does not give the slack to others). Ties at one time do not change the result. Memory
(``"memory"`` bytes counted against ``"memory_pool"`` at a task's start): frees before allocations
at one time.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

from .. import _core
from .._util import did_you_mean
from .timeline import Timeline


class SimulationError(ValueError):
    """Tasks, links or resources that ``tw.simulate`` cannot run; the message names the task and field."""


class SimulationTypeError(SimulationError, TypeError):
    """A field of the wrong type: a bool or a string where a number is expected, a name that is not a str."""


# Set by the simulator, so a task may not bring its own.
_RESERVED = ("start", "end")
_LINK_FIELDS = ("bandwidth", "latency", "shared")


def simulate(tasks: Sequence[Mapping], links: Mapping | None = None, resources: Mapping | None = None) -> Timeline:
    """Simulate ``tasks`` and return their :class:`Timeline`.

    Each task is a dict: ``"name"`` (unique str) and ``"stream"`` (any hashable; streams run their
    tasks one at a time in list order) are required; ``"seconds"`` (fixed time, default 0) and
    ``"after"`` (names of tasks that must end first, default none) are optional, and so are
    ``"link"`` + ``"bytes"`` (a transfer on a link of ``links``), ``"resources"`` (names in
    ``resources``), ``"work"`` and ``"max_rate"`` (work units at up to max_rate per second; 0 =
    unbounded), ``"memory"`` + ``"memory_pool"`` (bytes allocated, or freed when negative, at the
    start). Every other field ("device", "kind"...) passes through to the timeline's task dicts.

    ``links``: name -> bandwidth in bytes/s, or ``{"bandwidth": B, "latency": s, "shared": bool}``.
    A transfer of n bytes takes latency + n / B alone; on a shared link (the default) concurrent
    transfers split B equally, on an unshared one each has B to itself.
    ``resources``: name -> capacity (work units per second in total, shared equally).
    """
    link_table = _links(links)
    capacities = {name: spec[0] for name, spec in link_table.items() if spec[2]}
    for name, capacity in _resources(resources).items():
        if name in capacities or name in link_table:
            raise SimulationError(f"{name!r} is both a link and a resource; give them different names")
        capacities[name] = capacity
    resource_index = {name: r for r, name in enumerate(capacities)}
    if isinstance(tasks, (str, bytes, Mapping)) or not isinstance(tasks, Sequence):
        raise SimulationTypeError(f"tasks must be a list of dicts, not {type(tasks).__name__}")

    names = _names(tasks)
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    stream_ids: dict = {}
    pool_ids: dict = {}
    # Python lists while filling (NumPy item assignment is slower), arrays for the call.
    stream, seconds, work, max_rate = [0] * n, [0.0] * n, [0.0] * n, [0.0] * n
    memory, memory_pool = [0] * n, [-1] * n
    res_offsets, res_indices, after_offsets, after_indices = [0], [], [0], []
    task_streams, extras = [], []
    for i, task in enumerate(tasks):
        where = f"task {names[i]!r}"
        s = task.get("stream", _MISSING)
        if s is _MISSING:
            raise SimulationError(f"{where} has no 'stream' (any hashable name; its tasks run one at a time)")
        try:
            stream[i] = stream_ids.setdefault(s, len(stream_ids))
        except TypeError:
            raise SimulationTypeError(f"{where}: 'stream' must be hashable (str, int, tuple...), got {s!r}") from None
        task_streams.append(s)
        sec = _number(task.get("seconds", 0), f"{where}: 'seconds'")
        res = [resource_index[r] for r in _names_in(task, "resources", resource_index, where, "resources")]
        latency, work[i], max_rate[i] = _work(task, where, res, link_table, resource_index)
        seconds[i] = sec + latency
        res_indices += res
        res_offsets.append(len(res_indices))
        after_indices += [index[a] for a in _names_in(task, "after", index, where, "tasks")]
        after_offsets.append(len(after_indices))
        if "memory" in task or "memory_pool" in task:
            memory[i], memory_pool[i] = _memory(task, where, pool_ids)
        clash = [f for f in _RESERVED if f in task]
        if clash:
            raise SimulationError(f"{where} has {clash}: start and end are what the simulator computes")
        extra = dict(task)  # a copy: the caller's dicts stay theirs
        del extra["name"], extra["stream"]
        extras.append(extra)

    try:
        core = _core.simulate_tasks(
            names, np.asarray(stream, dtype=np.int32), np.asarray(seconds), np.asarray(work), np.asarray(max_rate),
            np.asarray(res_offsets, dtype=np.int64), np.asarray(res_indices, dtype=np.int32),
            np.asarray(after_offsets, dtype=np.int64), np.asarray(after_indices, dtype=np.int32),
            np.asarray(memory, dtype=np.int64), np.asarray(memory_pool, dtype=np.int32), len(stream_ids),
            list(capacities), list(capacities.values()))
    except ValueError as e:  # a dependency cycle: the core finds it while it runs
        raise SimulationError(str(e)) from None
    peaks = core.peak_memory.tolist()
    return Timeline(names, task_streams, core.start, core.end, extras,
                    peak_memory={pool: peaks[p] for pool, p in pool_ids.items()})


_MISSING = object()


def _work(task: Mapping, where: str, res: list, link_table: dict, resource_index: dict) -> tuple[float, float, float]:
    """(latency, work, max_rate) of a task: a transfer's from its link and bytes (a shared link joins
    ``res``), any other task's from "work" and "max_rate"."""
    link = task.get("link")
    if link is None:
        if "bytes" in task:
            raise SimulationError(f"{where}: 'bytes' needs a 'link' to go over (links: {list(link_table)})")
        work = _number(task.get("work", 0), f"{where}: 'work'")
        max_rate = _number(task.get("max_rate", 0), f"{where}: 'max_rate'")
        if work > 0 and max_rate == 0 and not res:
            raise SimulationError(f"{where}: 'work' {task['work']!r} needs a 'max_rate' > 0 or 'resources' "
                                  "to bound its rate (it has neither)")
        return 0.0, work, max_rate
    if link not in link_table:
        raise SimulationError(f"{where}: unknown link {link!r}{did_you_mean(str(link), link_table)}; "
                              f"links: {list(link_table)}")
    for field in ("work", "max_rate"):
        if field in task:
            raise SimulationError(f"{where}: a transfer (with 'link') takes 'bytes', not '{field}': its work is "
                                  "its bytes and its rate the link's bandwidth")
    if "bytes" not in task:
        raise SimulationError(f"{where}: a transfer on link {link!r} needs 'bytes'")
    bandwidth, latency, shared = link_table[link]
    if shared:
        if resource_index[link] in res:
            raise SimulationError(f"{where}: link {link!r} is also listed in 'resources'")
        res.append(resource_index[link])
    return latency, _number(task["bytes"], f"{where}: 'bytes'"), bandwidth


def _number(value, what: str, *, positive: bool = False) -> float:
    """``value`` as a finite float >= 0 (> 0 when ``positive``); bools and strings are type errors."""
    # The exact types first: the ABC check costs more than the rest of a task's validation.
    if type(value) is not float and type(value) is not int and (
            isinstance(value, bool) or not isinstance(value, numbers.Real)):
        raise SimulationTypeError(f"{what} must be a number, not {type(value).__name__} ({value!r})")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise SimulationError(f"{what} must be a {'positive' if positive else 'non-negative'} finite number, "
                              f"got {value!r}")
    return v


def _names(tasks) -> list[str]:
    """Every task's name, checked: dicts with a unique str "name"."""
    names, first = [], {}
    for i, task in enumerate(tasks):
        if type(task) is not dict and not isinstance(task, Mapping):
            raise SimulationTypeError(f"task {i} must be a dict with 'name' and 'stream', not {type(task).__name__}")
        name = task.get("name", _MISSING)
        if name is _MISSING:
            raise SimulationError(f"task {i} has no 'name' (fields: {sorted(map(str, task))})")
        if not isinstance(name, str):
            raise SimulationTypeError(f"task {i}: 'name' must be a str, not {type(name).__name__} ({name!r})")
        if name in first:
            raise SimulationError(f"tasks {first[name]} and {i} are both named {name!r}; names must be unique")
        first[name] = i
        names.append(name)
    return names


def _names_in(task: Mapping, field: str, known: Mapping, where: str, what: str) -> list:
    """The names listed in ``task[field]`` (a list or tuple), each one of ``known``."""
    listed = task.get(field, ())
    if listed == ():
        return []
    if isinstance(listed, (str, bytes)) or not isinstance(listed, (list, tuple)):
        raise SimulationTypeError(f"{where}: '{field}' must be a list of names, not {type(listed).__name__} "
                                  f"({listed!r})")
    for name in listed:
        if not isinstance(name, str):
            raise SimulationTypeError(f"{where}: '{field}' holds {name!r}, not a name (str)")
        if name not in known:
            hint = did_you_mean(name, known) or (f"; {what}: {list(known)}" if len(known) <= 20 else "")
            raise SimulationError(f"{where}: '{field}' names {name!r}, which is not one of the {what}{hint}")
    return list(listed)


def _memory(task: Mapping, where: str, pool_ids: dict) -> tuple[int, int]:
    """(bytes, pool id) of a task's "memory" and "memory_pool"; pools numbered as they appear."""
    mem = task.get("memory", 0)
    if isinstance(mem, bool) or not isinstance(mem, numbers.Integral):
        raise SimulationTypeError(f"{where}: 'memory' must be an int (bytes; negative frees), not "
                                  f"{type(mem).__name__} ({mem!r})")
    if not -2**63 <= mem < 2**63:
        raise SimulationError(f"{where}: 'memory' {mem} does not fit in 64 bits")
    if "memory_pool" not in task:
        raise SimulationError(f"{where}: 'memory' needs a 'memory_pool' (the device it counts against)")
    pool = task["memory_pool"]
    try:
        p = pool_ids.setdefault(pool, len(pool_ids))
    except TypeError:
        raise SimulationTypeError(f"{where}: 'memory_pool' must be hashable, got {pool!r}") from None
    return int(mem), p


def _links(links) -> dict[str, tuple[float, float, bool]]:
    """Link name -> (bandwidth, latency, shared)."""
    out = {}
    for name, spec in _mapping(links, "links").items():
        where = f"link {name!r}"
        if isinstance(spec, Mapping):
            unknown = [k for k in spec if k not in _LINK_FIELDS]
            if unknown:
                raise SimulationError(f"{where}: unknown fields {unknown}; a link has {list(_LINK_FIELDS)}")
            if "bandwidth" not in spec:
                raise SimulationError(f"{where} has no 'bandwidth' (bytes per second)")
            shared = spec.get("shared", True)
            if not isinstance(shared, bool):
                raise SimulationTypeError(f"{where}: 'shared' must be True or False, not {shared!r}")
            out[name] = (_number(spec["bandwidth"], f"{where}: 'bandwidth'", positive=True),
                         _number(spec.get("latency", 0), f"{where}: 'latency'"), shared)
        else:
            out[name] = (_number(spec, f"{where}: bandwidth", positive=True), 0.0, True)
    return out


def _resources(resources) -> dict[str, float]:
    return {name: _number(c, f"resource {name!r}: capacity", positive=True)
            for name, c in _mapping(resources, "resources").items()}


def _mapping(m, what: str) -> dict:
    """``m`` (None: empty) as a dict with str keys."""
    if m is None:
        return {}
    if not isinstance(m, Mapping):
        raise SimulationTypeError(f"{what} must be a dict of name -> value, not {type(m).__name__}")
    for name in m:
        if not isinstance(name, str):
            raise SimulationTypeError(f"{what}: names must be str, got {name!r}")
    return dict(m)

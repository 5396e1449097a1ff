"""This machine's profile for the time model (issue 12; TensorOpt §3.2, SwapAdvisor §4.2).

``measure()`` runs a fixed suite of small training graphs through the thread executor with
per-instruction timing and fits, per kernel kind (``_core.native_kernel_kinds()``: gemm, conv,
elementwise, reduction, norm, layout, embedding; plus the interpreter fallback and the runtime's
box copies and combines), the rate of one call as a function of its work (FLOPs or bytes), as
measured at sizes binned by powers of two (medians per bin). The in-process link is a ping-pong
through the thread executor's own communicator. The host link (swapped execution: the host store
is this machine's memory too) is a memcpy between two buffers at sizes 2^10..2^26. Devices that
run at once: the cores.

The profile is stored as JSON in the user's cache folder (``$TILEWISE_CACHE_DIR``, else
``$XDG_CACHE_HOME/tilewise``, else ``~/.cache/tilewise``) and reused while the machine, the
tilewise version and the BLAS are the same. ``profile_ops(graph)`` measures a graph's own ops once
on one device: per op, how far the kind's curve is off (the simulator's ``OpScales``).
"""

from __future__ import annotations

import functools
import gc
import json
import math
import os
import pathlib
import platform
import statistics
import time
import warnings
from collections import defaultdict

import numpy as np

from . import _core
from .graph.feeds import example_feeds
from .graph.graph import Graph
from .plan.plan import Plan
from .sim.cluster import register_this_machine

FORMAT = "tilewise-calibration"
VERSION = 6  # 2: the host link (swapped execution's copies); 3: large copies measured cold; 4: the host
#             link capped at the streaming rate, others_busy; 5: the last-level cache, paired bus ratios;
#             6: copies from a cached source ("*_cached")
# Kinds priced per FLOP (the others per byte read and written): as cpp/sim/program_sim.cpp.
FLOP_KINDS = ("gemm", "conv", "interpreter")
_STEPS = 3


def cache_dir() -> pathlib.Path:
    """Where the profile is kept."""
    if os.environ.get("TILEWISE_CACHE_DIR"):
        return pathlib.Path(os.environ["TILEWISE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "tilewise"


@functools.lru_cache(maxsize=1)
def _machine_key() -> tuple:
    info = _core.build_info()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return (("host", platform.node()), ("cpu", cpu), ("cores", os.cpu_count() or 1),
            ("tilewise", str(info.get("version", ""))), ("blas", str(info.get("blas", ""))))


def machine_key() -> dict:
    """What a stored profile must match to be reused (read once per process: every prediction on
    "this-machine" checks the stored profile against it)."""
    return dict(_machine_key())


# ----------------------------------------------------------------------------------------- suite


def _suite(quick: bool):
    """(label, graph builder): small graphs covering every kernel kind at a range of sizes, run on
    one device; and (label, graph builder) run on two devices (``_two_device_suite``) for messages."""
    from . import models

    yield "mlp-256", lambda: models.mlp(layers=3, hidden=256, batch=64)
    yield "mlp-1024", lambda: models.mlp(layers=3, hidden=1024, batch=128)
    yield "wresnet-50-1", lambda: models.wresnet(depth=50, width=1, batch=2, image=32, classes=10)
    yield "lstm-256", lambda: models.rnn(layers=1, hidden=256, steps=4, batch=16, in_features=128)
    yield "transformer-128", lambda: models.transformer(layers=1, hidden=128, heads=4, seq=32, batch=4)
    if not quick:
        yield "mlp-2048", lambda: models.mlp(layers=2, hidden=2048, batch=256)
        yield "wresnet-50-2", lambda: models.wresnet(depth=50, width=2, batch=4, image=32, classes=10)
        yield "lstm-1024", lambda: models.rnn(layers=1, hidden=1024, steps=4, batch=32, in_features=256)
        yield "transformer-512", lambda: models.transformer(layers=1, hidden=512, heads=8, seq=64, batch=8)


def _two_device_suite():
    """Graphs whose 2-device plans send, copy and combine boxes of many shapes and sizes."""
    from . import models

    yield "mlp-1024 x2", lambda: models.mlp(layers=3, hidden=1024, batch=128), "tofu"
    yield "transformer-128 x2", lambda: models.transformer(layers=1, hidden=128, heads=4, seq=32, batch=4), "tofu"
    yield "wresnet-50-1 x2", lambda: models.wresnet(depth=50, width=1, batch=2, image=32, classes=10), "kcuts"


def instruction_kind(graph: Graph, ins: dict, kinds: dict[str, str]) -> str | None:
    """The kind pricing one instruction of a program's JSON, as the simulator prices it."""
    k = ins["kind"]
    if k == "compute":
        op = graph.op(ins["op"])
        return kinds.get(op.op.kernel or "", "interpreter")
    return {"send": "send", "copy": "copy", "combine": "combine"}.get(k)


def instruction_work(kind: str, ins: dict) -> float:
    if ins["kind"] == "compute":
        return float(ins["flops"]) if kind in FLOP_KINDS else float(ins["bytes"])
    return (3.0 if ins["kind"] == "combine" else 2.0) * float(ins["bytes"])


def timed_instructions(graph: Graph, plan: Plan, steps: int = _STEPS, seed: int = 0, warmup: int = 3,
                       statistic=statistics.median):
    """Per device, per instruction: (program JSON instruction, ``statistic`` of its seconds over
    ``steps`` profiled steps after ``warmup`` steps), and the median step seconds. Warm-up: the
    first step plans the arenas; the communicator's message buffers grow over the next few.
    ``statistic="median step"``: every instruction's seconds in the step whose time was the median
    (the instructions then add up to a step as measured, not to a sum of separate medians)."""
    from .exec.executable import compile as compile_plan

    exe = compile_plan(graph, plan, profile=True).initialize(seed)
    feeds = example_feeds(graph, seed)
    for _ in range(max(warmup, 1)):
        exe.step(feeds)
    per: dict[tuple[int, int], list[float]] = defaultdict(list)
    step = []
    for _ in range(steps):
        exe.step(feeds)
        step.append(exe._core.stats.step_seconds)
        for d, timings in enumerate(exe._core.stats.profile):
            for i, (a, b) in enumerate(timings):
                per[(d, i)].append(b - a)
    out = per_instruction(per, step, [exe.program(d) for d in range(plan.devices)], statistic)
    del exe
    gc.collect()  # executables hold reference cycles (opaque calls): free this one before the next
    return out, statistics.median(step)


def per_instruction(per: dict, steps: list[float], programs, statistic=statistics.median) -> list:
    """Per device, per instruction of its program (a ``_core.Program``): (its JSON, ``statistic`` of
    the seconds ``per[(device, index)]`` holds, one per step); ``statistic="median step"``: its seconds
    in the step whose time (``steps``) was the median."""
    middle = sorted(range(len(steps)), key=lambda k: steps[k])[len(steps) // 2]
    pick = (lambda xs: xs[middle]) if statistic == "median step" else statistic
    return [[(ins, pick(per[(d, i)])) for i, ins in enumerate(json.loads(prog.to_json())["instructions"])]
            for d, prog in enumerate(programs)]


def add_compute_samples(graph: Graph, timed: list, kinds: dict[str, str], samples: dict) -> None:
    """(work, seconds) of each compute instruction of one device's timed program, by kernel kind."""
    for ins, seconds in timed:
        kind = instruction_kind(graph, ins, kinds)
        if kind is not None and ins["kind"] == "compute":
            samples[kind].append((instruction_work(kind, ins), seconds))


def op_seconds(graph: Graph, timed: list, kinds: dict[str, str]) -> dict[str, tuple[float, str, float]]:
    """Per op: (seconds, kind, work) summed over its compute instructions in one device's timed
    program (the entries of a ``tw.OpTimes``)."""
    ops: dict[str, list] = {}
    for ins, seconds in timed:
        if ins["kind"] != "compute":
            continue
        kind = instruction_kind(graph, ins, kinds)
        entry = ops.setdefault(graph.op(ins["op"]).name, [0.0, kind, 0.0])
        entry[0] += seconds
        entry[2] += instruction_work(kind, ins)
    return {k: tuple(v) for k, v in ops.items()}


def rate_points(data: dict) -> dict:
    """A profile's kernels as a ``tw.DeviceProfile`` takes them: {kind: ({work: rate}, overhead)}."""
    kernels = {}
    for kind, k in data["kernels"].items():
        points: dict[int, float] = {}
        for size, rate in zip(k["sizes"], k["rates"], strict=True):
            points.setdefault(max(1, round(size)), rate)  # sizes are whole FLOPs or bytes
        kernels[kind] = (points, float(k.get("overhead", 0.0)))
    return kernels


def fit_rates(samples: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """(work, seconds) samples -> a rate profile: per power-of-two bin of work, the median work and
    the median rate (work per second), then a running median over neighbouring bins (a bin with one
    odd sample must not set the curve); ascending sizes."""
    bins: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for w, s in samples:
        if w > 0 and s > 0:
            bins[round(math.log2(w))].append((w, w / s))
    sizes, rates = [], []
    for b in sorted(bins):
        size = float(statistics.median(w for w, _ in bins[b]))
        if not sizes or size > sizes[-1]:  # medians of neighbouring bins can cross
            sizes.append(size)
            rates.append(float(statistics.median(r for _, r in bins[b])))
    smooth = [statistics.median(rates[max(0, i - 1):i + 2]) for i in range(len(rates))]
    return sizes, smooth


def fit_copies(samples: list[tuple[float, float]], large: list[tuple[float, float]]) -> tuple[list[float],
                                                                                             list[float]]:
    """(work, seconds) of box copies -> a rate profile from seconds = overhead + work / bandwidth
    (robust: the overhead is the median time of the smallest copies, the bandwidth the median over
    the larger ones), at 2^4..2^28 bytes; past the caches (``large``: copies of 4 MiB and more,
    measured alone) the measured rate where it is lower."""
    pts = sorted((w, t) for w, t in samples if w > 0 and t > 0)
    if not pts:
        return [], []
    small = [t for w, t in pts[: max(3, len(pts) // 10)]]
    # 0.9: a stated margin, so that samples barely above the typical small-copy time still leave
    # positive time for their bytes in the bandwidth estimate below
    overhead = statistics.median(small) * 0.9
    big = [w / (t - overhead) for w, t in pts if w >= 2**16 and t > overhead]
    bandwidth = statistics.median(big) if big else max(w / t for w, t in pts)
    # The large copies' rates from their first size on: interpolated in log2 size between them, the
    # last one held beyond (a rate at their sizes alone would leave the fit's between them: zig-zags).
    cold = sorted((math.log2(w), w / t) for w, t in large if w > 0 and t > 0)
    sizes, rates = [], []
    for e in range(4, 29):
        w = float(2**e)
        r = w / (overhead + w / bandwidth)
        if cold and e >= cold[0][0]:
            r = min(r, float(np.interp(e, [x for x, _ in cold], [y for _, y in cold])))
        sizes.append(w)
        rates.append(r)
    return sizes, rates


# Above this share of the cores taken by other processes while calibrating, the profile is flagged.
BUSY_WARNING = 0.15


class CalibrationWarning(UserWarning):
    """The machine was busy while it was calibrated: the profile's rates are likely low."""


def _cpu_ticks() -> tuple[float, float] | None:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat; None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
        tick = float(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None
    if len(fields) < 5:
        return None
    idle = fields[3] + fields[4]  # idle, iowait
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest counted in user)
    return (total - idle) / tick, total / tick


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _others_busy(before: tuple[float, float] | None, own_before: float) -> float | None:
    """Share of the machine's CPU time that other processes used since ``before`` (0..1)."""
    after = _cpu_ticks()
    if before is None or after is None or after[1] <= before[1]:
        return None
    others = (after[0] - before[0]) - (_own_cpu_seconds() - own_before)
    return min(1.0, max(0.0, others / (after[1] - before[1])))


def measure(*, quick: bool = False, progress: bool = False) -> dict:
    """Measure this machine (about 10-30 s): the profile as a JSON-ready dict. Records how much of
    the cores other processes took meanwhile (``others_busy``, from /proc/stat) and warns
    (``CalibrationWarning``) past 15 %: a busy machine's rates come out low (measured here: a 2-core VM
    loaded by two other jobs gave sends at 5.6 GB/s instead of 15.4 and a memory-bus concurrency
    of 1.10 instead of 1.63, and the simulator then over-predicted random plans by 37-52 %)."""
    t0 = time.perf_counter()
    ticks0, own0 = _cpu_ticks(), _own_cpu_seconds()
    kinds = _core.native_kernel_kinds()
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    suite = list(_suite(quick))
    pairs = list(_two_device_suite())
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(suite) + len(pairs) + 1, desc="calibrate")
    for label, build in suite:
        g = build()
        timed, _ = timed_instructions(g, Plan.one_device(g))
        add_compute_samples(g, timed[0], kinds, samples)
        if bar:
            bar.update(1)
            bar.set_postfix_str(label)
    # Messages, local copies and combines as 2-device programs run them (boxes of every shape; a
    # send pays the hand-over to the receiving thread besides its copy).
    from .plan.search import partition

    for label, build, algorithm in pairs:
        g = build()
        timed, _ = timed_instructions(g, partition(g, devices=2, algorithm=algorithm))
        for prog in timed:
            for ins, seconds in prog:
                kind = instruction_kind(g, ins, kinds)
                if ins["kind"] in ("send", "copy", "combine"):
                    samples[kind].append((instruction_work(kind, ins), seconds))
        if bar:
            bar.update(1)
            bar.set_postfix_str(label)
    # Past the caches: the runtime's own copy_box/combine_box on contiguous and half-column boxes of
    # 1-64 MiB (the suite's messages are smaller), from buffers out of the caches: in a step, a copy
    # this large reads a tensor written many ops before (measured: a 4 MiB copy inside a step runs at
    # the cold rate, 5-9 GB/s here, not the 30-48 GB/s of the same copy repeated).
    # The same copies from a source in the caches into a destination out of them ("*_cached": a tensor
    # just computed, copied into a buffer not touched for a while; the simulator picks these where its
    # reuse distance says the source is cached). Measured: the 2 MiB halves of a data-parallel MLP's
    # gradients, copied right after their GEMM, ran at 8-24 GB/s, priced at 7.6 from memory.
    large: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for kind, factor in (("copy", 2.0), ("combine", 3.0)):
        for cached in (False, True):
            for e in (20, 22, 24, 26):
                seconds = statistics.median(_core.box_copy_seconds(2**e, strided, kind == "combine", 3, cold=True,
                                                                   warm_source=cached)
                                            for strided in (False, True))
                large[kind + ("_cached" if cached else "")].append((factor * 2**e, seconds))
    large["send"], large["send_cached"] = large["copy"], large["copy_cached"]
    kernels = {}
    for kind, pts in sorted(samples.items()):
        sizes, rates = fit_copies(pts, large[kind]) if kind in ("copy", "send", "combine") else fit_rates(pts)
        if sizes:
            kernels[kind] = {"sizes": sizes, "rates": rates, "overhead": 0.0, "samples": len(pts)}
        if kind in ("copy", "send", "combine"):
            sizes, rates = fit_copies(pts, large[kind + "_cached"])
            if sizes:
                kernels[kind + "_cached"] = {"sizes": sizes, "rates": rates, "overhead": 0.0, "samples": len(pts)}
    # The in-process link: ping-pong through the mailbox communicator (packing included: the
    # simulator prices packing and unpacking as copies, so the link keeps the latency alone).
    latency = _core.mailbox_one_way_seconds(4, 2000, 5)
    # The memory bus: what all cores copying at once get, over one core alone (64 MiB each: past
    # the caches). Measured in back-to-back pairs and the median ratio taken: on a VM whose memory
    # bandwidth neighbours share, the ratio of two separate best-of-5 runs ranged 1.08-1.63 in four
    # calibrations minutes apart (pairs' medians: 1.22-1.44).
    cores = os.cpu_count() or 1
    ratios = []
    for _ in range(11 if cores > 1 else 0):
        together = _core.parallel_copy_rate(cores, 64 * 2**20, 1)
        ratios.append(together / _core.parallel_copy_rate(1, 64 * 2**20, 1))
    memory_concurrency = min(float(cores), max(1.0, statistics.median(ratios) if ratios else 1.0))
    if bar:
        bar.update(1)
        bar.close()
    links = {"in-process": {"latency": latency}, "host": measure_host_link()}
    mpi_profile = measure_mpi()
    if mpi_profile is not None:
        links["mpi"] = mpi_profile
    busy = _others_busy(ticks0, own0)
    if busy is not None and busy > BUSY_WARNING:
        warnings.warn(f"other processes used {busy:.0%} of this machine's CPU time while it was calibrated: the "
                      "measured rates are likely low and the predicted step times high; run `tilewise calibrate "
                      "--force` again when the machine is quiet", CalibrationWarning, stacklevel=2)
    return {"format": FORMAT, "version": VERSION, "machine": machine_key(), "kernels": kernels,
            "links": links, "cores": cores,
            "memory_concurrency": memory_concurrency, "seconds": time.perf_counter() - t0,
            "quick": bool(quick), "others_busy": busy, "cache_bytes": last_level_cache_bytes()}


def last_level_cache_bytes() -> int:
    """Bytes of the largest cache of CPU 0 (Linux sysfs: /sys/devices/system/cpu/cpu0/cache/index*),
    the last-level cache its cores share; 0 where it cannot be read."""
    best = 0
    for index in pathlib.Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        digits = text[:-1] if text[-1:] in "KMG" else text
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best


def measure_host_link(repeats: int = 5) -> dict:
    """The host link of a CPU device: a swap copies a tensor between the device's pool and the host
    store, both this machine's memory, so it is a memcpy of one buffer into another (``box_copy_seconds``
    of a contiguous box, the median of ``repeats``): ``{"sizes": [bytes], "bandwidth": [bytes/s]}``.
    Each size's rate is capped by the streaming rate of copies out of the caches (4-64 MiB, both
    buffers evicted first): the host store holds every swapped tensor, so its side of a swap is not in
    the caches, and a swap runs no faster than memory streams (measured on an LSTM swapped through a
    36 MiB pool: 11-13 GB/s for its 0.25-4 MiB swaps, where the same copy repeated in cache runs at
    48 GB/s and the streaming rate is 9-10 GB/s)."""
    stream = statistics.median(2**e / s for e in (22, 24, 26)
                               if (s := _core.box_copy_seconds(2**e, False, False, repeats, 128, True)) > 0)
    sizes, bandwidth = [], []
    for e in range(10, 27, 2):
        seconds = _core.box_copy_seconds(2**e, False, False, repeats)
        if seconds > 0:
            sizes.append(float(2**e))
            bandwidth.append(min(2**e / seconds, stream))
    return {"sizes": sizes, "bandwidth": bandwidth}


def measure_mpi(timeout: float = 120.0) -> dict | None:
    """The MPI point-to-point profile, when this build has the MPI backend and its launcher (``mpirun``
    of the MPI it was built against, ``tilewise.exec.mpi.launcher()``) exists: ``{"sizes": [bytes],
    "seconds": [one-way seconds]}`` from ``mpirun -np 2 python -m tilewise.exec.mpi_probe``; None
    without MPI or when the run fails (calibration goes on)."""
    import subprocess
    import sys

    from .exec import mpi

    mpirun = mpi.launcher()
    inside_mpi = any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))
    if mpirun is None or not mpi.available() or inside_mpi:  # no mpirun started from inside a rank
        return None
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [mpirun, "-np", "2", "--oversubscribe", sys.executable, "-m", "tilewise.exec.mpi_probe"]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        data = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return None
    if not isinstance(data, dict) or len(data.get("sizes", [])) != len(data.get("seconds", [])) or not data["sizes"]:
        return None
    return {"sizes": [float(x) for x in data["sizes"]], "seconds": [float(x) for x in data["seconds"]]}


def _path() -> pathlib.Path:
    return cache_dir() / "this-machine.json"


def load_profile() -> dict | None:
    """The stored profile when it exists, is valid and matches this machine; else None."""
    p = _path()
    try:
        if p.stat().st_size > 4 * 2**20:
            return None
        data = json.loads(p.read_text())
    except (OSError, ValueError, RecursionError):  # a stored file nested past the parser's depth too
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        return None
    if data.get("machine") != machine_key():
        return None
    try:
        _check_profile(data)
    except ValueError:
        return None
    return data


def _check_profile(data: dict) -> None:
    kernels = data.get("kernels")
    if not isinstance(kernels, dict) or not kernels:
        raise ValueError("calibration profile: 'kernels' must be a non-empty object")
    for kind, k in kernels.items():
        sizes, rates = k.get("sizes"), k.get("rates")
        if not (isinstance(sizes, list) and isinstance(rates, list) and len(sizes) == len(rates) and sizes):
            raise ValueError(f"calibration profile: kernels.{kind} needs equal-length 'sizes' and 'rates'")
        if any(not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0 or not math.isfinite(v)
               for v in sizes + rates):
            raise ValueError(f"calibration profile: kernels.{kind} has a size or rate that is not positive")
    host = data.get("links", {}).get("host", {})
    if not isinstance(host, dict) or not host.get("sizes") or len(host["sizes"]) != len(host.get("bandwidth", [])):
        raise ValueError("calibration profile: links.host needs equal-length 'sizes' and 'bandwidth'")
    llc = data.get("cache_bytes", 0)
    if not isinstance(llc, (int, float)) or isinstance(llc, bool) or not 0 <= llc < 2**50:
        raise ValueError("calibration profile: cache_bytes must be bytes >= 0")
    lat = data.get("links", {}).get("in-process", {}).get("latency")
    if not isinstance(lat, (int, float)) or isinstance(lat, bool) or not 0 <= lat < 1:
        raise ValueError("calibration profile: links.in-process.latency must be seconds in [0, 1)")


def this_machine_profile(*, recalibrate: bool = False, quick: bool = False, progress: bool = False) -> dict:
    """The stored profile, measured (and stored) first when missing, stale or ``recalibrate``."""
    data = None if recalibrate else load_profile()
    if data is None:
        data = measure(quick=quick, progress=progress)
        try:
            _path().parent.mkdir(parents=True, exist_ok=True)
            tmp = _path().with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1))
            tmp.replace(_path())  # atomic: a reader never sees half a file
        except OSError:
            pass  # a read-only home still gets a profile, measured each process
    return data


# ------------------------------------------------------------------------- the cluster and op times


def this_machine(devices: int | None = None, *, backend: str = "threads", recalibrate: bool = False):
    """``tw.Cluster.preset("this-machine", devices)``: CPU devices of this machine (one core each;
    ``devices`` defaults to the cores) with the measured profile. Devices beyond the cores share
    them; memory-bound calls share the memory bus (``memory_concurrency``). ``backend="mpi"``:
    devices are MPI ranks, messages priced by the measured MPI profile (cluster "this-machine-mpi",
    what an MPI executable's ``predict()`` uses)."""
    if backend not in ("threads", "mpi"):
        raise ValueError(f"backend must be 'threads' or 'mpi', got {backend!r}")
    from .sim.cluster import Cluster, DeviceProfile, Link

    data = this_machine_profile(recalibrate=recalibrate)
    cores = int(data.get("cores") or os.cpu_count() or 1)
    n = cores if devices is None else devices
    kernels = rate_points(data)
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 0
    device = DeviceProfile("this machine's core", int(ram), kernels, concurrent_streams=False)
    # Messages between in-process devices: the packing and unpacking are priced as "copy" calls on
    # the two devices; the link adds the hand-over's latency (bandwidth: not the bottleneck).
    intra = Link("intra", bandwidth=1e13, latency=float(data["links"]["in-process"]["latency"]), duplex=True,
                 shared=False)
    # The host link: a memcpy per swap; both directions at once share the memory bus (the bus's
    # measured concurrency, at most 2 copies)
    h = data["links"]["host"]
    host_bandwidth = {max(1, round(size)): bw for size, bw in zip(h["sizes"], h["bandwidth"], strict=True)}
    # past the caches (the largest size); small copies in cache run faster alone, and a Link's two
    # directions together carry at least what one carries alone
    both = max(max(host_bandwidth.values()),
               host_bandwidth[max(host_bandwidth)] * min(2.0, max(1.0, float(data.get("memory_concurrency", 1.0)))))
    host = Link("host memcpy", bandwidth=host_bandwidth, latency=0.0, duplex=True, duplex_bandwidth=both, shared=False)
    name = "this-machine"
    if backend == "mpi":
        if "mpi" not in data["links"]:
            raise RuntimeError("no MPI profile was measured on this machine (needs the MPI backend and mpirun); "
                               "run `tilewise calibrate --force` where MPI is installed")
        intra, name = _mpi_link(data["links"]["mpi"], device), "this-machine-mpi"
    m = data["machine"]
    return Cluster(name, n, n, device=device, intra=intra if n > 1 else None, host=host, concurrent_devices=cores,
                   memory_concurrency=float(data.get("memory_concurrency", 0.0)),
                   cache_bytes=float(data.get("cache_bytes", 0) or 0),
                   source=f"measured by tilewise calibrate on {m['host']} ({m['cpu']}, {cores} cores, "
                          f"BLAS {m['blas']}) in {data.get('seconds', 0):.1f} s{_busy_note(data)}")


def _busy_note(data: dict) -> str:
    busy = data.get("others_busy")
    if not isinstance(busy, (int, float)) or isinstance(busy, bool):
        return ""
    flag = "; rates likely low: recalibrate on a quiet machine" if busy > BUSY_WARNING else ""
    return f", other processes {busy:.0%} busy{flag}"


def _mpi_link(profile: dict, device):
    """The MPI transport as a link: the measured one-way time less the packing and unpacking the
    simulator prices on the two devices ("send" and "copy" calls), as latency + bytes/bandwidth."""
    from .sim.cluster import Link

    sizes, seconds = profile["sizes"], profile["seconds"]
    def copies(size: float) -> float:  # packing on the sender, unpacking on the receiver
        return device.kernel_seconds("send", 2 * size) + device.kernel_seconds("copy", 2 * size)

    latency = max(0.0, seconds[0] - copies(sizes[0]))
    bandwidth = {}
    for size, t in zip(sizes, seconds, strict=True):
        transport = t - latency - copies(size)
        # the transport cannot be faster than memory: where the copies' model already covers the
        # measured time, keep the bandwidth of the next larger size
        bandwidth[int(size)] = size / transport if transport > 0 else 0.0
    good = [b for b in bandwidth.values() if b > 0]
    fill = max(good) if good else 1e12
    bandwidth = {s: (b if b > 0 else fill) for s, b in bandwidth.items()}
    return Link("intra", bandwidth=bandwidth, latency=latency, duplex=True, shared=False)


def measure_ops(graph: Graph, *, plans=(), steps: int = 7, warmup: int = 2, share_repeats: int = 5):
    """``tw.OpTimes``: every op of ``graph`` timed on one device of this machine, in the median one of
    ``steps`` profiled steps (so the ops add up to a step as it is measured: the median of several),
    with the kernel kind and work that price it. ``plans``: each plan's shares (every device's part of
    every op with a native kernel) are timed as their kernels run them alone, ``share_repeats`` times
    each (the median), beside the whole ops timed the same way; the simulator prices a share at the
    op's measured seconds times that ratio (``OpTimes.shares``)."""
    from .sim.op_times import OpTimes

    kinds = _core.native_kernel_kinds()
    timed, _ = timed_instructions(graph, Plan.one_device(graph), steps=steps, warmup=warmup,
                                  statistic="median step")
    ops = op_seconds(graph, timed[0], kinds)
    shares = _time_shares(graph, list(plans), share_repeats) if plans else {}
    return OpTimes(ops, "this-machine", {k: v for k, v in shares.items() if k in ops})


def _time_shares(graph: Graph, plans, repeats: int) -> dict[str, dict[str, float]]:
    """Per op name: {share signature: share seconds / whole seconds}, every share of ``plans`` timed
    alone in turns with the whole op (exec/share_timing.h)."""
    if repeats < 1:
        raise ValueError(f"measure_ops: share_repeats must be >= 1, got {repeats}")
    for plan in plans:
        if not isinstance(plan, Plan) or (plan.graph is not graph and
                                          [o.name for o in plan.graph.ops] != [o.name for o in graph.ops]):
            raise ValueError("measure_ops: plans must be tw.Plan objects of this graph")
    out: dict[str, dict[str, float]] = {}
    # Each share timed in turns with its whole op, so both see the machine as it is then.
    for op, sig, ratio in _core.time_share_ratios(graph._g, Plan.one_device(graph)._core,
                                                  [plan._core for plan in plans], repeats):
        out.setdefault(graph.ops[op].name, {})[sig] = ratio
    return out


register_this_machine(lambda devices: this_machine(devices))
register_this_machine(lambda devices: this_machine(devices, backend="mpi"), "this-machine-mpi")

"""A GPU's profile for the time model (issue 18: ``tilewise calibrate --gpu``, the cluster "this-gpu").

The same method as this machine's CPU profile (``calibration.py``), on a GPU through the CUDA backend:
a suite of training graphs runs on one GPU with every launch timed by CUDA events
(``_cuda.Executable.step(timed=True)``), and each kernel kind's rate is fitted per power-of-two bin
of work (``fit_rates``: medians, then a running median). The backend's copy and sum kernels, the
host link through pinned memory (each direction alone and both at once: SwapAdvisor's shared duplex
PCIe link) and, with two GPUs, a peer copy are timed by probes (``cpp/exec/cuda/probes.*``).

What runs the measurements is a probe object (``GpuProbe``: the GPU; ``HostProbe``: the same launch
plans on the host through ``_cuda.HostExecutable``, and this CPU's copies; it checks the pipeline
where no GPU is, and its figures describe this CPU). The profile is stored as ``this-gpu.json``
beside this machine's profile and reused while the host, the GPU, the driver, the libraries and the
tilewise version are the same. ``measure_ops_gpu(graph)`` times a graph's own ops on the GPU (a
``tw.OpTimes`` for "this-gpu").
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import time
from collections import defaultdict

from . import _core, calibration
from ._util import parse_json
from .calibration import add_compute_samples, cache_dir, fit_copies, fit_rates, op_seconds, per_instruction, rate_points
from .graph.feeds import example_feeds
from .graph.graph import Graph
from .plan.plan import Plan
from .sim.cluster import register_this_machine

FORMAT = "tilewise-gpu-calibration"
VERSION = 1
NAME = "this-gpu"
_STEPS = 5
# Kinds any suite measures (a profile without them cannot price a training step); the others (conv,
# norm, layout, embedding) come with the graphs that have them.
REQUIRED_KINDS = frozenset({"gemm", "elementwise", "reduction", "copy", "combine", "send"})
# The sizes the copy kernels and the host link are timed at (bytes): 1 KiB .. 256 MiB.
COPY_SIZES = tuple(2**e for e in range(10, 29, 2))
LINK_SIZES = tuple(2**e for e in range(10, 29, 2))


def gpu_suite(quick: bool):
    """(label, graph builder): training graphs covering every kernel kind the backend translates, at
    sizes where a GPU's kernels go from launch-bound to their full rate."""
    from . import models

    yield "mlp-1024", lambda: models.mlp(layers=3, hidden=1024, batch=128)
    yield "wresnet-50-1", lambda: models.wresnet(depth=50, width=1, batch=8, image=32, classes=10)
    yield "lstm-512", lambda: models.rnn(layers=1, hidden=512, steps=4, batch=32, in_features=256)
    yield "transformer-256", lambda: models.transformer(layers=1, hidden=256, heads=4, seq=64, batch=8)
    if not quick:
        yield "mlp-4096", lambda: models.mlp(layers=2, hidden=4096, batch=512)
        yield "wresnet-50-2", lambda: models.wresnet(depth=50, width=2, batch=64, image=32, classes=10)
        yield "lstm-2048", lambda: models.rnn(layers=1, hidden=2048, steps=4, batch=64, in_features=1024)
        yield "transformer-1024", lambda: models.transformer(layers=1, hidden=1024, heads=16, seq=128, batch=16)


# ------------------------------------------------------------------------------------------ probes


def _initial_values(graph: Graph, plan: Plan, seed: int) -> dict:
    """Every tensor a step is fed or holds from the start: the CPU runtime's initial parameters and
    constants for ``seed``, and example inputs and labels (optimizer state starts at zero)."""
    from .exec.executable import compile as compile_plan

    cpu = compile_plan(graph, Plan.one_device(graph) if plan.devices > 1 else plan).initialize(seed)
    return {**cpu.state_dict(), **example_feeds(graph, seed)}


class GpuProbe:
    """Measurements on GPU ``gpu`` of this machine (``tilewise._cuda``): ``tw.CudaError`` where none
    is visible."""

    def __init__(self, gpu: int = 0):
        from .exec import cuda

        self.gpu = int(gpu)
        self._cuda = cuda.load()
        cuda.require_device()

    def info(self) -> dict:
        """name, memory (bytes), capability, gpus (visible), and the versions."""
        count, _ = self._cuda.device_count()
        return {**self._cuda.device_info(self.gpu), "gpus": count, **self._cuda.versions()}

    def executable(self, graph: Graph, plan: Plan):
        keep = [t.id for t in graph.results().values()]
        return self._cuda.Executable(graph._g, plan._core, 0, keep)

    def copy_seconds(self, nbytes: int, strided: bool, combine: bool) -> float:
        return self._cuda.device_copy_seconds(self.gpu, int(nbytes), strided, combine, 1024, 5)

    def host_link_seconds(self, nbytes: int, direction: str) -> float:
        return self._cuda.host_link_seconds(self.gpu, int(nbytes), direction, 5)

    def peer_seconds(self, nbytes: int) -> float | None:
        count, _ = self._cuda.device_count()
        return self._cuda.peer_copy_seconds(0, 1, int(nbytes), 5) if count > 1 else None


class HostProbe(GpuProbe):
    """The pipeline without a GPU: the CUDA launch plans run on the host (``_cuda.HostExecutable``),
    copies and the host link as this CPU's memcpy. For tests; its figures describe this CPU."""

    def __init__(self):
        from .exec import cuda

        self.gpu = 0
        self._cuda = cuda.load()

    def info(self) -> dict:
        try:
            import os
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            memory = 2**34
        return {"name": "host (CUDA launch plans run on the CPU)", "memory": int(memory), "capability": 0,
                "gpus": 1, **self._cuda.versions()}

    def executable(self, graph: Graph, plan: Plan):
        return self._cuda.HostExecutable(graph._g, plan._core, [t.id for t in graph.results().values()])

    def copy_seconds(self, nbytes: int, strided: bool, combine: bool) -> float:
        return _core.box_copy_seconds(int(nbytes), strided, combine, 3)

    def host_link_seconds(self, nbytes: int, direction: str) -> float:
        one = _core.box_copy_seconds(int(nbytes), False, False, 3)
        return one if direction != "both" else 2 * one  # one memcpy after the other

    def peer_seconds(self, nbytes: int) -> float | None:
        return None


def timed_launches(probe: GpuProbe, graph: Graph, plan: Plan, *, steps: int = _STEPS, warmup: int = 2, seed: int = 0,
                   statistic: str = "median"):
    """Per device, per instruction: (program JSON instruction, seconds of its launch), and the median
    step seconds (wall time, the synchronisation included). ``statistic``: "median" per instruction
    over ``steps`` timed steps, or "median step" (every instruction's seconds in the step whose time
    was the median, so that they add up to a step as measured)."""
    from .exec.cuda import CudaExecutable

    exe = CudaExecutable(graph, plan, probe.executable(graph, plan))
    for name, value in _initial_values(graph, plan, seed).items():
        exe.set(name, value)
    for _ in range(max(warmup, 1)):  # the first steps pay cuDNN's algorithm queries, lazy module loading
        exe.step()
    per: dict[tuple[int, int], list[float]] = defaultdict(list)
    walls = []
    for _ in range(max(steps, 1)):
        t0 = time.perf_counter()
        exe._core.step(timed=True)
        walls.append(time.perf_counter() - t0)
        for d, row in enumerate(exe._core.instruction_seconds):
            for i, (a, b) in enumerate(row):
                per[(d, i)].append(b - a)
    programs = [exe._core.program(d) for d in range(plan.devices)]
    pick = statistic if statistic == "median step" else statistics.median
    return per_instruction(per, walls, programs, pick), statistics.median(walls)


# --------------------------------------------------------------------------------------- measuring


def measure_gpu(probe: GpuProbe | None = None, *, quick: bool = False, suite=None, progress: bool = False) -> dict:
    """Measure a GPU (the default probe: GPU 0): the profile as a JSON-ready dict. ``suite``: (label,
    graph builder) pairs instead of ``gpu_suite(quick)``."""
    probe = GpuProbe() if probe is None else probe
    t0 = time.perf_counter()
    kinds = _core.native_kernel_kinds()
    samples: dict[str, list[tuple[float, float]]] = defaultdict(list)
    suite = list(gpu_suite(quick) if suite is None else suite)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(suite) + 2, desc="calibrate GPU")
    steps = {}
    for label, build in suite:
        g = build()
        timed, steps[label] = timed_launches(probe, g, Plan.one_device(g))
        add_compute_samples(g, timed[0], kinds, samples)
        if bar:
            bar.update(1)
            bar.set_postfix_str(label)
    kernels = {}
    for kind, pts in sorted(samples.items()):
        sizes, rates = fit_rates(pts)
        if sizes:
            kernels[kind] = {"sizes": sizes, "rates": rates, "overhead": 0.0, "samples": len(pts)}
    # The backend's copy and sum kernels (box copies, a Send's packing, a Recv's unpacking, Combine),
    # contiguous and strided, as overhead + bytes / bandwidth.
    for kind, factor, combine in (("copy", 2.0, False), ("combine", 3.0, True)):
        pts = [(factor * n, probe.copy_seconds(n, strided, combine)) for n in COPY_SIZES for strided in (False, True)]
        sizes, rates = fit_copies(pts, [])
        kernels[kind] = {"sizes": sizes, "rates": rates, "overhead": 0.0, "samples": len(pts)}
    kernels["send"] = dict(kernels["copy"])
    if bar:
        bar.update(1)
    host = {"sizes": [], "host_to_device": [], "device_to_host": [], "both": []}
    for n in LINK_SIZES:
        host["sizes"].append(float(n))
        for direction in ("host_to_device", "device_to_host", "both"):
            host[direction].append(float(probe.host_link_seconds(n, direction)))
    links = {"host": host}
    peer = [(n, probe.peer_seconds(n)) for n in LINK_SIZES]
    if all(s is not None for _, s in peer):
        links["peer"] = {"sizes": [float(n) for n, _ in peer], "seconds": [float(s) for _, s in peer]}
    if bar:
        bar.update(1)
        bar.close()
    info = probe.info()
    return {"format": FORMAT, "version": VERSION, "machine": machine_key(info), "device": info, "kernels": kernels,
            "links": links, "suite_steps": steps, "seconds": time.perf_counter() - t0, "quick": bool(quick)}


def machine_key(info: dict) -> dict:
    """What a stored GPU profile must match to be reused."""
    return {"host": platform.node(), "gpu": str(info.get("name", "")), "driver": str(info.get("cuda_driver", "")),
            "runtime": str(info.get("cuda_runtime", "")), "cublas": str(info.get("cublas", "")),
            "cudnn": str(info.get("cudnn", "")), "tilewise": str(_core.build_info().get("version", ""))}


def check_profile(data) -> None:
    """ValueError naming what is wrong with a GPU profile (a stored file is read through this)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        raise ValueError(f"GPU profile: expected format {FORMAT!r} version {VERSION}")

    def obj(what: str, value) -> dict:
        if not isinstance(value, dict):
            raise ValueError(f"GPU profile: {what} must be an object")
        return value

    def positive(what: str, values, ascending: bool = False) -> list:
        if not isinstance(values, list) or not values or len(values) > 4096 or any(
                isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v < 1e30
                for v in values):
            raise ValueError(f"GPU profile: {what} must be a non-empty list of positive numbers")
        if ascending and any(b <= a for a, b in zip(values, values[1:])):
            raise ValueError(f"GPU profile: {what} must ascend")
        return values

    kernels = obj("kernels", data.get("kernels"))
    if not kernels:
        raise ValueError("GPU profile: 'kernels' must be a non-empty object")
    known = set(_core.native_kernel_kinds().values()) | {"copy", "combine", "send"}
    missing = sorted(REQUIRED_KINDS - set(kernels))
    if missing:
        raise ValueError(f"GPU profile: kernels lacks {', '.join(missing)} (every suite measures them)")
    for kind, k in kernels.items():
        if kind not in known:
            raise ValueError(f"GPU profile: unknown kernel kind {kind!r}")
        k = obj(f"kernels.{kind}", k)
        sizes = positive(f"kernels.{kind}.sizes", k.get("sizes"), ascending=True)
        if len(positive(f"kernels.{kind}.rates", k.get("rates"))) != len(sizes):
            raise ValueError(f"GPU profile: kernels.{kind} needs equal-length 'sizes' and 'rates'")
        overhead = k.get("overhead", 0.0)
        if isinstance(overhead, bool) or not isinstance(overhead, (int, float)) or not 0 <= overhead < 1:
            raise ValueError(f"GPU profile: kernels.{kind}.overhead must be seconds in [0, 1)")
    links = obj("links", data.get("links"))
    host = obj("links.host", links.get("host"))
    sizes = positive("links.host.sizes", host.get("sizes"), ascending=True)
    for what in ("host_to_device", "device_to_host", "both"):
        if len(positive(f"links.host.{what}", host.get(what))) != len(sizes):
            raise ValueError(f"GPU profile: links.host.{what} must have one figure per size")
    if links.get("peer") is not None:
        peer = obj("links.peer", links["peer"])
        if len(positive("links.peer.seconds", peer.get("seconds"))) != len(
                positive("links.peer.sizes", peer.get("sizes"), ascending=True)):
            raise ValueError("GPU profile: links.peer needs one time per size")
    device = obj("device", data.get("device"))
    memory = device.get("memory")
    if isinstance(memory, bool) or not isinstance(memory, int) or not 0 < memory < 2**50:
        raise ValueError("GPU profile: device.memory must be bytes > 0")
    gpus = device.get("gpus", 1)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 64:
        raise ValueError("GPU profile: device.gpus must be the GPUs visible, 1..64")
    machine = obj("machine", data.get("machine"))
    if not all(isinstance(v, str) for v in list(machine.values()) + [device.get("name", "")]):
        raise ValueError("GPU profile: machine and device.name must be strings")
    seconds = data.get("seconds", 0.0)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e9:
        raise ValueError("GPU profile: seconds must be the calibration's seconds")


def parse_profile(text: str | bytes) -> dict:
    """A GPU profile from its JSON text, checked (``check_profile``); ValueError naming what is wrong,
    also for text that is not JSON or nests deeper than the parser goes."""
    data = parse_json(text, ValueError, "GPU profile", "parse_profile")
    check_profile(data)
    return data


def _path():
    return cache_dir() / f"{NAME}.json"


def load_profile(info: dict | None = None) -> dict | None:
    """The stored GPU profile when it exists, is valid and (given the device's ``info``) matches it."""
    p = _path()
    try:
        if p.stat().st_size > 4 * 2**20:
            return None
        data = parse_profile(p.read_bytes())
    except (OSError, ValueError):
        return None
    if info is not None and data.get("machine") != machine_key(info):
        return None
    return data


def this_gpu_profile(*, recalibrate: bool = False, quick: bool = False, progress: bool = False) -> dict:
    """The stored profile of GPU 0, measured (and stored) first when missing, stale or ``recalibrate``;
    ``tw.CudaError`` where no GPU is visible and none is stored."""
    from .exec import cuda

    count = cuda.load().device_count()[0] if cuda.available() else 0
    info = GpuProbe().info() if count else None
    data = None if recalibrate else load_profile(info)
    if data is not None:
        return data
    if not count:
        raise _core.CudaError("no GPU profile is stored and no GPU is visible to measure one: run `tilewise calibrate "
                              "--gpu` on the machine with the GPU (the profile is then kept in "
                              f"{_path()})")
    data = measure_gpu(GpuProbe(), quick=quick, progress=progress)
    try:
        _path().parent.mkdir(parents=True, exist_ok=True)
        tmp = _path().with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(_path())
    except OSError:
        pass
    return data


# ----------------------------------------------------------------------------------------- the cluster


def cluster_from_profile(data: dict, devices: int | None = None):
    """``tw.Cluster`` "this-gpu" from a GPU profile: ``devices`` GPUs (default: those visible when it
    was measured) with the measured kernel rates, concurrent streams (compute and the two copy streams
    overlap), the measured host link (one direction's bandwidth per size, both directions together
    capped at their measured sum) and, measured with two GPUs, the peer link between them."""
    check_profile(data)
    try:
        return _cluster(data, devices)
    except TypeError as e:  # a value the cluster's own checks refuse (a stored file edited by hand)
        raise ValueError(f"GPU profile: {e}") from None


def _cluster(data: dict, devices: int | None):
    from .sim.cluster import Cluster, DeviceProfile, Link

    info = data["device"]
    n = int(info.get("gpus") or 1) if devices is None else int(devices)
    device = DeviceProfile(f"{info.get('name', 'GPU')} (measured)", int(info["memory"]), rate_points(data),
                           concurrent_streams=True)
    h = data["links"]["host"]
    one_way = {max(1, round(s)): s / max(a, b)
               for s, a, b in zip(h["sizes"], h["host_to_device"], h["device_to_host"], strict=True)}
    both = max(2 * s / t for s, t in zip(h["sizes"], h["both"], strict=True))
    both = max(both, max(one_way.values()))  # together at least what one direction carries alone
    host = Link("host link (measured, pinned)", bandwidth=one_way, latency=0.0, duplex=True, duplex_bandwidth=both,
                shared=False)
    intra = None
    if n > 1:
        peer = data["links"].get("peer")
        if peer is None:
            raise ValueError(f"the GPU profile was measured with one GPU visible: the link between GPUs was not "
                             f"measured, so it cannot describe {n} GPUs (calibrate again with two GPUs visible)")
        intra = Link("peer copy (measured)", bandwidth={max(1, round(s)): s / t for s, t in
                                                         zip(peer["sizes"], peer["seconds"], strict=True)},
                     latency=0.0, duplex=True, shared=False)
    return Cluster(NAME, n, n, device=device, intra=intra, host=host,
                   source=f"measured by tilewise calibrate --gpu on {data['machine']['host']} ({info.get('name')}, "
                          f"driver {info.get('cuda_driver', '?')}, cuBLAS {info.get('cublas', '?')}, cuDNN "
                          f"{info.get('cudnn', '?')}) in {data.get('seconds', 0):.1f} s")


def this_gpu(devices: int | None = None, *, recalibrate: bool = False):
    """``tw.Cluster.preset("this-gpu", devices)``: this machine's GPUs with the measured profile."""
    return cluster_from_profile(this_gpu_profile(recalibrate=recalibrate), devices)


# -------------------------------------------------------------------------------------------- op times


def measure_ops(graph: Graph, *, plans=(), steps: int = 7, warmup: int = 2, share_repeats: int = 5,
                backend: str = "cpu"):
    """``tw.measure_ops``: a graph's ops timed on one device of this machine, a CPU core
    (``backend="cpu"``, ``calibration.measure_ops``: op times for "this-machine", plans' shares) or GPU 0
    (``backend="cuda"``, ``measure_ops_gpu``: op times for "this-gpu", whole ops only)."""
    if backend == "cpu":
        return calibration.measure_ops(graph, plans=plans, steps=steps, warmup=warmup, share_repeats=share_repeats)
    if backend != "cuda":
        raise ValueError(f"measure_ops: backend must be 'cpu' or 'cuda', got {backend!r}")
    if plans:
        raise ValueError("measure_ops(backend='cuda') times whole ops only: plans' shares are timed on the CPU")
    return measure_ops_gpu(graph, steps=steps, warmup=warmup)



def measure_ops_gpu(graph: Graph, *, probe: GpuProbe | None = None, steps: int = 7, warmup: int = 2):
    """``tw.OpTimes`` for "this-gpu": every op of ``graph`` timed on one GPU (its launches' CUDA-event
    times, summed per op, in the median one of ``steps`` timed steps)."""
    from .sim.op_times import OpTimes

    probe = GpuProbe() if probe is None else probe
    kinds = _core.native_kernel_kinds()
    timed, _ = timed_launches(probe, graph, Plan.one_device(graph), steps=steps, warmup=warmup,
                              statistic="median step")
    return OpTimes(op_seconds(graph, timed[0], kinds), NAME)


register_this_machine(lambda devices: this_gpu(devices), NAME)

"""The CUDA backend, host side: ``tw.compile(graph, plan, backend="cuda")`` and ``tilewise info``.

What exists today (docs/CUDA.md): the build (``TILEWISE_WITH_CUDA``, nvcc with the cuBLAS, cuDNN
and NCCL wheels), the library versions, the devices visible, device arenas laid out by the CPU
arena's static planner, the translation of programs to cuBLAS/cuDNN calls and the backend's own
kernels (checked on the host against the CPU kernels), and an executor that has never run on a GPU:
``compile(..., backend="cuda")`` raises ``tw.CudaError`` naming the ops without a CUDA kernel, or
the failing device call.

``tilewise._cuda`` is a separate extension, built only where CMake found CUDA, so ``import
tilewise`` never loads libcublas, libcudnn or libnccl (cudart is linked statically into
``_cuda``); it is imported here on first use.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import time
from typing import Any

import numpy as np

from .._core import CudaError, ExecError, OutOfMemory

BUILD_HINT = ("tilewise._cuda was not built (CMake found no nvcc or no cuBLAS/cuDNN/NCCL wheels when tilewise "
              "was built): pip install nvidia-cublas nvidia-cudnn-cu13 nvidia-nccl-cu13, put nvcc on PATH and "
              "reinstall tilewise (pip install .; -DTILEWISE_WITH_CUDA=ON makes a build without them fail "
              "instead of skipping the backend; docs/CUDA.md)")

_module = None


def available() -> bool:
    """Whether this build has the CUDA backend (without importing it, so without loading cuBLAS)."""
    return importlib.util.find_spec("tilewise._cuda") is not None


def load():
    """``tilewise._cuda``, imported on first use; ``tw.CudaError`` when it was not built."""
    global _module
    if _module is None:
        try:
            _module = importlib.import_module("tilewise._cuda")
        except ImportError as e:
            raise CudaError(f"{BUILD_HINT} ({e})") from None
    return _module


def report() -> dict[str, Any]:
    """What ``tilewise info`` shows: ``backend`` (the module was built), the library versions
    (``cuda_runtime``, ``cuda_driver``, ``cublas``, ``cudnn``, ``nccl``; empty strings when not
    built), ``devices`` and ``device_error`` (why none are visible). Imports ``tilewise._cuda``."""
    out: dict[str, Any] = dict(backend=available(), cuda_runtime="", cuda_driver="", cublas="", cudnn="", nccl="",
                               devices=0, device_error="")
    if not out["backend"]:
        out["device_error"] = "tilewise._cuda not built"
        return out
    cuda = load()
    out.update(cuda.versions())
    out["devices"], out["device_error"] = cuda.device_count()
    return out


def require_device() -> int:
    """The number of CUDA devices visible; ``tw.CudaError`` naming why when there is none."""
    cuda = load()
    count, error = cuda.device_count()
    if count == 0:
        raise CudaError(f"no CUDA device is visible to tilewise._cuda: {error or 'cudaGetDeviceCount returned 0'}")
    return count


def coverage(graph, plan) -> list[dict]:
    """Per op the plan computes: its native kernel, the CUDA library chosen for it (``cublas``,
    ``cudnn``, ``kernel``: the backend's own) or ``why_not`` (host only, no device needed)."""
    return load().coverage(graph._g, plan._core)


class CudaExecutable:
    """A plan on one or several GPUs of this process (``tilewise._cuda.Executable``; NCCL between
    them): tensors set and read by name (each device's tile), steps run on the devices. Compiled in
    CI, not run on a GPU yet (docs/CUDA.md); ``tilewise._cuda.HostExecutable`` runs the same launch
    plans on the host."""

    def __init__(self, graph, plan, core, *, profile: bool = False, swapped: bool = False):
        self.graph, self.plan, self._core = graph, plan, core
        self.swapped = bool(swapped)
        self.profile = bool(profile)
        self.step_seconds: float | None = None
        """Wall time of the last step (its launches and the synchronisation that ends it)."""

    def set(self, name: str, value) -> None:
        t = self.graph.tensor(name)
        dtype = DTYPES[t.dtype]
        self._core.set_tensor(t.id, np.ascontiguousarray(value, dtype=dtype).reshape(t.shape))

    def get(self, name: str) -> np.ndarray:
        """The full tensor. Under ``mpirun`` (one rank per device) collective, as the MPI backend's: the
        ranks' tiles gathered on rank 0 and broadcast, so every rank gets the whole tensor."""
        t = self.graph.tensor(name)
        if self.rank < 0:
            return self._core.get_tensor(t.id, list(t.shape))
        from . import mpi as mpi_backend

        try:
            full = self.gather(name)
            message = b"" if full is None else b"\x01" + full.tobytes()
        except ExecError as e:  # rank 0 could not assemble it: every rank raises, none waits
            if self.rank != 0:
                raise
            message = b"\x00" + str(e).encode()
        data = mpi_backend.load().broadcast_bytes(message, 0)
        if data[:1] != b"\x01":
            raise ExecError(data[1:].decode(errors="replace"))
        return np.frombuffer(data[1:], dtype=DTYPES[t.dtype]).reshape(t.shape).copy()

    def gather(self, name: str) -> np.ndarray | None:
        """Under ``mpirun``: the full tensor on rank 0, ``None`` on the other ranks (collective: every
        rank calls it; each sends its device's tiles). In one process: ``get(name)``."""
        t = self.graph.tensor(name)
        if self.rank < 0:
            return self.get(name)
        from . import mpi as mpi_backend

        parts = mpi_backend.load().gather_bytes(pack_tiles(self._core.local_tiles(t.id)), 0)
        if parts is None:
            return None
        return assemble_tiles(name, t.shape, DTYPES[t.dtype], [tile for part in parts for tile in unpack_tiles(part)])

    def parameters(self) -> dict[str, np.ndarray] | None:
        """Every parameter by name: under ``mpirun`` gathered on rank 0 (collective; ``None`` on the other
        ranks), else read from the GPUs."""
        out = {t.name: self.gather(t.name) for t in self.graph.tensors if t.role == "parameter"}
        return None if self.rank > 0 else out

    @property
    def rank(self) -> int:
        """The plan device this process drives under ``mpirun`` (its MPI rank); -1: every device."""
        return int(getattr(self._core, "rank", -1))

    def step(self) -> None:
        """One step on the GPUs. Compiled with ``profile=True``, every launch is timed with CUDA events
        (``instruction_seconds``)."""
        t0 = time.perf_counter()
        self._core.step(timed=self.profile)
        self.step_seconds = time.perf_counter() - t0

    @property
    def instruction_seconds(self) -> list[list[tuple[float, float]]]:
        """Per device, per instruction of its program (``program(d)``): (start, end) seconds after the
        last step began on that GPU, by CUDA events; (0, 0) for instructions that launch nothing. Needs
        ``tw.compile(..., backend="cuda", profile=True)``."""
        if not self.profile:
            raise ValueError("compile with tw.compile(..., backend='cuda', profile=True) to time the launches")
        if self.step_seconds is None:
            raise ValueError("no step has run yet")
        return [list(map(tuple, row)) for row in self._core.instruction_seconds]

    def program(self, device: int = 0):
        """Device ``device``'s program (``tilewise._core.Program``): what its launch plan translates."""
        return self._core.program(device)

    def predict(self, cluster="this-gpu", *, op_times=None):
        """One step of these programs simulated on ``cluster`` (default "this-gpu": this machine's GPU,
        measured by ``tilewise calibrate --gpu``): a ``tw.Prediction`` to set beside ``step_seconds``.
        ``op_times``: ``tw.measure_ops(graph, backend="cuda")``. A swap plan's program simulates with
        its swaps on the cluster's host link."""
        if not self.swapped:
            return self.plan.predict(cluster, op_times=op_times)
        from ..sim.prediction import resolve_cluster, simulate_lowered

        c = resolve_cluster(cluster, 1)
        names = [op.name for op in self.graph.ops]
        return simulate_lowered(lambda core, seconds, work, _shares: self._core.simulate(self.graph._g, core, seconds,
                                                                                         work), c, names, op_times)


DTYPES = {"float32": np.float32, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


def pack_tiles(tiles) -> bytes:
    """[(box as [(lo, hi)] inclusive, row-major bytes)] as one message: per tile its rank, its ranges
    and its byte count (int64, little-endian), then its bytes."""
    out = [np.asarray([len(tiles)], "<i8").tobytes()]
    for ranges, data in tiles:
        out.append(np.asarray([len(ranges), *[v for r in ranges for v in r], len(data)], "<i8").tobytes())
        out.append(bytes(data))
    return b"".join(out)


def unpack_tiles(message: bytes) -> list[tuple[list[tuple[int, int]], bytes]]:
    """``pack_tiles``'s message back; ExecError for a message that does not parse."""
    def ints(at: int, n: int) -> list[int]:
        if at + 8 * n > len(message):
            raise ExecError(f"a gathered tile message is cut short ({len(message)} bytes)")
        return np.frombuffer(message, "<i8", count=n, offset=at).tolist()

    count, at, out = ints(0, 1)[0], 8, []
    for _ in range(count):
        rank = ints(at, 1)[0]
        if not 0 <= rank <= 32:
            raise ExecError(f"a gathered tile has rank {rank}")
        head = ints(at + 8, 2 * rank + 1)
        at += 8 * (2 * rank + 2)
        nbytes = head[-1]
        if nbytes < 0 or at + nbytes > len(message):
            raise ExecError(f"a gathered tile message is cut short ({len(message)} bytes)")
        out.append(([(head[2 * i], head[2 * i + 1]) for i in range(rank)], message[at:at + nbytes]))
        at += nbytes
    if at != len(message):
        raise ExecError(f"a gathered tile message has {len(message) - at} bytes past its tiles")
    return out


def assemble_tiles(name: str, shape, dtype, tiles) -> np.ndarray:
    """The full tensor from tiles (box, bytes) that cover it (replicas hold equal values); ExecError when
    none is given (the tensor is not held after a step) or a tile does not fit the tensor."""
    out = np.zeros(tuple(shape), dtype=dtype)
    if not tiles:
        raise ExecError(f"'{name}' is not held after a step on any rank")
    for ranges, data in tiles:
        if len(ranges) != out.ndim or any(not 0 <= lo <= hi < n for (lo, hi), n in zip(ranges, out.shape, strict=True)):
            raise ExecError(f"a tile {ranges} of '{name}' does not fit its shape {tuple(shape)}")
        box = tuple(hi - lo + 1 for lo, hi in ranges)
        want = int(np.prod(box, dtype=np.int64)) * out.itemsize
        if len(data) != want:
            raise ExecError(f"a tile {ranges} of '{name}' has {len(data)} bytes, not {want}")
        out[tuple(slice(lo, hi + 1) for lo, hi in ranges)] = np.frombuffer(data, dtype=dtype).reshape(box)
    return out


# The launchers' environment: Open MPI (OMPI_*), MPICH and Intel MPI (PMI_*, MPI_LOCALRANKID).
_WORLD_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")
_LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")


def launched_ranks() -> int:
    """The ranks of the MPI job this process was started in by ``mpirun`` (1 when it was not), read
    from the launcher's environment without loading MPI."""
    for var in _WORLD_VARS:
        value = os.environ.get(var, "")
        if value.isdigit():
            return int(value)
    return 1


def compile_cuda(graph, plan, memory_per_device, *, profile: bool, timeout: float):
    """``tw.compile(..., backend="cuda")``. In order, each failure a ``tw.CudaError``: the module was
    not built; an op has no CUDA kernel (translation, on the host: ``name`` "Untranslatable", the ops
    in ``ops``); the first device call fails (no driver, no device). Plans over several GPUs run in
    one process over NCCL, or, under ``mpirun -np plan.devices``, one rank per device over NCCL
    (``compile_rank``); swapped execution runs on GPU 0 (``compile_cuda_swapped``)."""
    del timeout
    cuda = load()
    for d in range(plan.devices):
        cuda.translate(graph._g, plan._core, d)
    if launched_ranks() > 1:
        return compile_rank(graph, plan, memory_per_device, profile=profile)
    return CudaExecutable(graph, plan, cuda.Executable(graph._g, plan._core, memory_per_device or 0), profile=profile)


def compile_rank(graph, plan, memory_per_device, *, profile: bool = False):
    """This rank's device of ``plan`` under ``mpirun -np plan.devices`` (every rank calls it, as with
    ``backend="mpi"``): plan device = MPI rank, on the GPU of the rank's local index (modulo the GPUs
    visible), one NCCL communicator over the ranks with the id rank 0 makes, broadcast over MPI.

    Collective and fail-together: rank 0's failure to make the id is every rank's ``tw.CudaError``; a
    rank that cannot open its GPU (no device, memory) raises its error and the others a ``tw.CudaError``
    saying another rank failed, all before NCCL's collective initialisation, which would wait for it.
    Tensors are set and read per rank: its device's tiles only."""
    from . import mpi as mpi_backend

    cuda, mpi = load(), mpi_backend.load()
    if mpi.size() != plan.devices:
        raise ExecError(f"the plan has {plan.devices} devices but the MPI job {mpi.size()} ranks: run it under "
                        f"mpirun -np {plan.devices} (one rank per device)")
    rank = mpi.rank()
    made = b""
    if rank == 0:
        try:
            made = b"\x01" + cuda.nccl_unique_id()
        except CudaError as e:
            made = b"\x00" + str(e).encode()
    made = mpi.broadcast_bytes(made, 0)
    if made[:1] != b"\x01":
        raise CudaError(f"rank 0 could not make an NCCL id: {made[1:].decode(errors='replace')}")
    local = next((int(os.environ[v]) for v in _LOCAL_RANK_VARS if os.environ.get(v, "").isdigit()), rank)
    count, _ = cuda.device_count()
    failure = None
    try:
        core = cuda.Executable.for_rank(graph._g, plan._core, rank, local % count if count else local,
                                    memory_per_device or 0)
    except (CudaError, OutOfMemory, ExecError) as e:
        failure = e
    if not mpi.all_ok(failure is None):
        if failure is not None:
            raise failure
        raise CudaError(f"rank {rank}: another rank could not open its GPU (its own error says why); stopping "
                        "before NCCL's initialisation, which would wait for it")
    core.connect(made[1:])
    return CudaExecutable(graph, plan, core, profile=profile)


def compile_cuda_swapped(graph, plan, memory, *, profile: bool = False):
    """``tw.compile(graph, swap_plan, backend="cuda")``: the swap plan on GPU 0, whose memory is the
    plan's pool (``memory`` caps it: ``tw.OutOfMemory`` when the pool is larger), a pinned host store,
    swaps on the copy streams. Translation first (``tw.CudaError`` "Untranslatable"), then the device."""
    from .swapped import runnable_swap_plan, swap_index_maps
    plan = runnable_swap_plan(plan)
    cuda = load()
    buffer_of, op_of, in_place = swap_index_maps(graph, plan)
    keep = [t.id for t in graph.results().values()]
    capacity = int(plan._problem.capacity if memory is None else memory)
    return CudaExecutable(graph, plan, cuda.Executable.swapped(graph._g, plan._core, buffer_of, op_of, capacity, keep,
                                                               in_place), profile=profile, swapped=True)

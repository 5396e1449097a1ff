"""Run partition plans on CPU devices: ``exe = tw.compile(graph, plan)``, ``exe.step(feeds)``.

The C++ runtime (cpp/exec) lowers the plan into one program per device (``exe.program(d)``:
instructions on named streams, two-sided sends and receives), runs each on a persistent worker
thread with its own memory arena, moves exactly the regions the cost model counts, and reports
what it measured beside what the plan predicted (docs/RUNTIME.md).
"""

from __future__ import annotations

import functools
import importlib
import json
import pathlib
from collections.abc import Mapping

import numpy as np

from .. import _core
from .._core import ExecError
from .._util import check_int
from ..graph.graph import Graph, GTensor
from ..plan.plan import Plan
from ..swap import SearchResult, SwapPlan

OutOfMemory = _core.OutOfMemory
CommunicationError = _core.CommunicationError
Program = _core.Program
BACKENDS = ("cpu", "mpi", "cuda")
_RESIDENT = ("input", "label", "parameter", "optimizer_state", "constant")


class ExecStats:
    """What the last step measured, beside the plan's predictions."""

    def __init__(self, exe: Executable):
        core = exe._core.stats
        plan = exe.plan
        self.steps = core.steps
        self.bytes_moved = core.bytes_moved
        self.bytes_per_device = list(core.bytes_received)
        self.bytes_received_per_device = list(core.bytes_received)
        self.bytes_sent_per_device = list(core.bytes_sent)
        self.predicted_bytes_sent_per_device, self.predicted_bytes_received_per_device = exe._predicted_traffic()
        self.step_seconds_per_device = list(core.device_seconds)
        self.scratch_bytes_per_device = list(core.scratch_bytes)
        self.undo_bytes_per_device = list(core.undo_bytes)  # atomic steps: copies of updated tensors
        self.message_buffer_bytes = core.message_bytes
        self.peak_memory_per_device = list(core.peak_bytes)
        self.step_seconds = core.step_seconds
        self.op_seconds = {op.name: s for op, s in zip(exe.graph.ops, core.op_seconds, strict=True)}
        self.native_ops = sum(core.op_native)
        self.interpreted_ops = len(core.op_native) - self.native_ops
        self.predicted_bytes = plan.comm_bytes
        # The programs' own allocations through the arena's planner: what the runtime holds.
        self.predicted_memory_per_device = exe._predicted_memory()
        self._plan = plan
        self._exe = exe

    @functools.cached_property
    def prediction(self):
        """The simulator's step on this machine ("this-machine" profile; ``exe.predict()``)."""
        return self._exe.predict()

    @property
    def predicted_step_seconds(self) -> float:
        """The simulated step time of these programs on this machine (``exe.predict()``)."""
        return self.prediction.step_seconds

    @property
    def memory_error(self) -> float:
        """Largest relative error of the predicted peak memory over devices."""
        return max(abs(m - p) / p for m, p in zip(self.peak_memory_per_device, self.predicted_memory_per_device,
                                                   strict=True) if p) if self.predicted_memory_per_device else 0.0

    @property
    def per_device(self) -> list[dict]:
        """Per device: bytes sent and received (and the plan's predictions), peak memory (and the
        plan's), interpreter scratch outside the arena, its program's seconds in the last step."""
        return [dict(device=d, bytes_sent=self.bytes_sent_per_device[d],
                     predicted_bytes_sent=self.predicted_bytes_sent_per_device[d],
                     bytes_received=self.bytes_received_per_device[d],
                     predicted_bytes_received=self.predicted_bytes_received_per_device[d],
                     peak_memory=self.peak_memory_per_device[d],
                     predicted_memory=self.predicted_memory_per_device[d],
                     scratch_bytes=self.scratch_bytes_per_device[d],
                     step_seconds=self.step_seconds_per_device[d])
                for d in range(len(self.peak_memory_per_device))]

    def to_dict(self) -> dict:
        return dict(steps=self.steps, bytes_moved=self.bytes_moved, predicted_bytes=self.predicted_bytes,
                    bytes_per_device=self.bytes_per_device, per_device=self.per_device,
                    message_buffer_bytes=self.message_buffer_bytes,
                    peak_memory_per_device=self.peak_memory_per_device,
                    predicted_memory_per_device=self.predicted_memory_per_device, memory_error=self.memory_error,
                    step_seconds=self.step_seconds, predicted_step_seconds=self.predicted_step_seconds,
                    native_ops=self.native_ops,
                    interpreted_ops=self.interpreted_ops)

    def summary(self, predict: bool = True) -> str:
        """The figures as lines; ``predict=False`` leaves out the simulated step (which calibrates this
        machine the first time)."""
        mem = ", ".join(f"{m / 2**20:.1f}" for m in self.peak_memory_per_device)
        pred = ", ".join(f"{m / 2**20:.1f}" for m in self.predicted_memory_per_device)
        sent = ", ".join(f"{b:,}" for b in self.bytes_sent_per_device)
        sent_plan = ", ".join(f"{b:,}" for b in self.predicted_bytes_sent_per_device)
        secs = ", ".join(f"{t:.3f}" for t in self.step_seconds_per_device)
        return "\n".join([
            f"bytes moved: {self.bytes_moved:,} (plan: {self.predicted_bytes:,})",
            f"bytes sent per device: {sent} (plan: {sent_plan})",
            f"seconds per device: {secs}",
            f"peak memory per device (MiB): {mem} (programs: {pred}; largest error {self.memory_error:.1%})",
            f"step: {self.step_seconds:.3f} s"
            + (f" (simulated on this-machine: {self.predicted_step_seconds:.3f} s)" if predict else "") + "; "
            f"ops on native kernels: {self.native_ops}, "
            f"on the interpreter: {self.interpreted_ops}",
        ])

    def __repr__(self):
        return (f"<tw.ExecStats: {self.bytes_moved:,} bytes moved (plan {self.predicted_bytes:,}), "
                f"step {self.step_seconds:.3f} s>")


class Executable:
    """A plan lowered onto CPU devices. Feed parameters (or ``initialize``), then ``step``."""

    atomic = False  # tw.compile(..., atomic=True): failed steps are undone, in-place updates included

    def __init__(self, graph: Graph, plan: Plan, memory_per_device: int | None = None, *, profile: bool = False,
                 timeout: float = 300.0, atomic: bool = False):
        self.graph, self.plan = graph, plan
        self._results = graph.results()
        self._core = self._core_class()(graph._g, plan._core, int(memory_per_device or 0),
                                      [t.id for t in self._results.values()], self._opaque_calls(), float(timeout))
        self._core.set_profile(bool(profile))
        self._core.set_atomic(bool(atomic))
        self.atomic = bool(atomic)
        self.profile = bool(profile)
        self._fed: set[str] = set()
        self._check_finite = False
        self._traffic: tuple[list[int], list[int]] | None = None
        self._memory: list[int] | None = None

    @staticmethod
    def _core_class():
        return _core.Executable

    @property
    def devices(self) -> int:
        return self._core.devices

    def program(self, device: int) -> Program:
        """What ``device`` runs in a step: ``.text()`` prints it, ``.to_json()`` serialises it,
        ``.bytes_sent``/``.bytes_received``/``.flops`` sum its instructions."""
        if not isinstance(device, int) or not 0 <= device < self.devices:
            raise ValueError(f"device must be one of 0..{self.devices - 1}, got {device!r}")
        return self._core.program(device)

    def _predicted_memory(self) -> list[int]:
        """Per device: the peak bytes of its program (resident + the arena's planned block)."""
        if self._memory is None:
            keep = [t.id for t in self._results.values()]
            self._memory = list(_core.predicted_peak_memory(self.graph._g, self.plan._core, keep))
        return self._memory

    def _predicted_traffic(self) -> tuple[list[int], list[int]]:
        """The plan's bytes sent and received per device (cost/transfers.h enumerated)."""
        if self._traffic is None:
            sent, received = _core.predicted_traffic(self.graph._g, self.plan._core)
            self._traffic = (list(sent), list(received))
        return self._traffic

    def predict(self, cluster="this-machine", *, op_times=None):
        """One step of these programs simulated on ``cluster`` (a ``tw.Cluster`` or preset name; default
        this machine, calibrated once and cached): a ``tw.Prediction`` to set beside ``exe.stats``.
        ``op_times`` (``tw.measure_ops(graph)``) scales the kernel model per op. The programs are the
        plan's lowering, the same for every backend (``plan.predict``)."""
        return self.plan.predict(cluster, op_times=op_times)

    def trace(self, path: str | pathlib.Path | None = None) -> dict:
        """The last step's per-instruction timings as a Chrome/Perfetto trace (``chrome://tracing``,
        ui.perfetto.dev): one process per device, one thread per stream. Needs
        ``tw.compile(..., profile=True)``. Writes JSON to ``path`` when given; returns the dict."""
        if not self.profile:
            raise ValueError("compile with tw.compile(..., profile=True) to record instruction timings")
        core = self._core.stats
        if core.steps == 0:
            raise ValueError("no step has run yet")
        events = []
        for d, timings in enumerate(core.profile):
            events += program_events(self._core.program(d), d, timings, f"device {d}")
        return write_trace(events, path)

    def _opaque_calls(self) -> list:
        """Per op: None, or the callable running its opaque functions (embedding lookups...)."""
        calls = []
        for gop in self.graph.ops:
            opaques = gop.op._opaques(tuple(len(t.shape) for t in gop.inputs), gop.attrs)
            if not opaques:
                calls.append(None)
                continue

            def call(fid, args, opaques=opaques, name=gop.op.name):
                f = opaques[fid]
                if f.fn is None:
                    raise ExecError(f"op '{name}': opaque function '{f.name}' has no implementation")
                return np.asarray(f.fn(*args), dtype=np.float64)

            calls.append(call)
        return calls

    def _resident(self) -> list[GTensor]:
        return [t for t in self.graph.tensors if t.producer is None]

    def initialize(self, seed: int = 0) -> Executable:
        """Deterministic random parameters (uniform in +-1/sqrt(fan-in)), zero optimizer state."""
        rng = np.random.default_rng(seed)
        for t in self._resident():
            if t.role == "parameter":
                fan_in = int(np.prod(t.shape[1:])) if len(t.shape) > 1 else t.shape[0] if t.shape else 1
                bound = 1.0 / np.sqrt(max(fan_in, 1))
                self.set(t, rng.uniform(-bound, bound, size=t.shape).astype(np.float32))
            elif t.role == "optimizer_state":
                self.set(t, np.zeros(t.shape, np.float32))
        return self

    def set(self, tensor: GTensor | str, value) -> None:
        """Scatter a value into the devices' tiles (tensors without a producer only). ``value``: an
        array-like or a torch tensor (detached and copied to the host), converted to the tensor's
        dtype: float32, or int64/int32 (token ids, class labels: whole numbers) or bool (masks: 0/1)."""
        t = self.graph.tensor(tensor) if isinstance(tensor, str) else tensor
        self._core.set_tensor(t.id, self._checked(t, value))
        self._fed.add(t.name)

    def _checked(self, t: GTensor, value) -> np.ndarray:
        """``value`` as the array ``t`` holds (dtype and shape), or an error naming ``t``."""
        value = _as_array(value, t.name, t.dtype)
        if value.shape != tuple(t.shape):
            raise ValueError(f"'{t.name}' has shape {tuple(t.shape)}; got an array of shape {value.shape}")
        return value

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters and constants (frozen buffers, running statistics) by name, as
        ``torch.nn.Module.state_dict`` names them for a ``tw.from_torch`` graph."""
        return {t.name: self._core.get_tensor(t.id, list(t.shape)) for t in self._resident()
                if t.role in ("parameter", "constant")}

    def load_state_dict(self, state: Mapping, strict: bool = True) -> None:
        """Sets parameters and constants from ``state`` (arrays or torch tensors by name; e.g. a
        torch module's ``state_dict()``). Everything is checked before anything is set, so a bad
        entry leaves the executable as it was. ``strict``: names missing from ``state`` or not in the
        graph are an error (ExecError listing them); else they are skipped."""
        if not isinstance(state, Mapping):
            raise TypeError(f"load_state_dict takes a mapping of name: array, not {type(state).__name__}")
        wanted = {t.name: t for t in self._resident() if t.role in ("parameter", "constant")}
        unknown = sorted(set(state) - set(wanted))
        missing = sorted(set(wanted) - set(state))
        if strict and (unknown or missing):
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}")
            if unknown:
                parts.append(f"not in graph '{self.graph.name}': {', '.join(unknown[:8])}"
                             f"{' ...' if len(unknown) > 8 else ''}")
            raise ExecError("load_state_dict: " + "; ".join(parts) + " (strict=False skips them)")
        values = {}
        for name, value in state.items():
            if name not in wanted:
                continue
            t = wanted[name]
            array = _as_array(value, name, t.dtype)
            if array.shape != tuple(t.shape):
                raise ExecError(f"load_state_dict: '{name}' has shape {tuple(t.shape)} in the graph; got "
                                f"{array.shape}")
            if not np.all(np.isfinite(array)):
                raise ExecError(f"load_state_dict: '{name}' holds NaN or Inf")
            values[name] = array
        for name, array in values.items():
            self.set(wanted[name], array)

    def save(self, path) -> pathlib.Path:
        """Parameters, optimizer state (the step count too) and constants to a safetensors file,
        written atomically, with the graph's hash, the plan and a checksum (``exec/checkpoint.py``)."""
        from .checkpoint import save

        return save(self, path)

    def load(self, path) -> dict:
        """Parameters, optimizer state and constants from a checkpoint of this graph (saved under any
        plan, on any number of devices); ``tw.CheckpointError`` for another graph or a corrupted file,
        nothing set then. Returns the checkpoint's metadata."""
        from .checkpoint import load

        return load(self, path)

    def step(self, feeds: Mapping | None = None, *, check_finite: bool = False) -> dict[str, np.ndarray]:
        """One training iteration: feeds (inputs, labels; parameters too) by name or GTensor.
        Returns the graph's named outputs (e.g. ``loss``, ``output``) as NumPy arrays.

        ``check_finite``: every op's output (and every sum of partials) is looked at for NaN and Inf
        as it is computed (a pass over each output); the first found raises ``tw.NumericalError``
        naming the op, its tensor and the device (attributes ``op``, ``tensor``, ``device``, ``nan``,
        ``inf``), and the step is taken back: parameters and optimizer state as before it (always
        with ``atomic=True``; otherwise unless an in-place update is the first op to overflow, after
        which the executable refuses further steps, as after any failed update)."""
        if not isinstance(check_finite, bool):
            raise TypeError(f"check_finite must be True or False, got {check_finite!r}")
        if check_finite != self._check_finite:
            if not hasattr(self._core, "set_check_finite"):
                raise ExecError(f"check_finite is not supported by {type(self).__name__}")
            self._core.set_check_finite(check_finite)
            self._check_finite = check_finite
        # Every feed is checked before any is set: a bad one leaves the executable as it was.
        checked = []
        for k, v in (feeds or {}).items():
            name = k.name if isinstance(k, GTensor) else k
            if self.graph._g.find_tensor(name) < 0:
                raise KeyError(f"feed '{name}' is not a tensor of graph '{self.graph.name}'")
            t = self.graph.tensor(name)
            if t.producer is not None:
                raise ValueError(f"'{name}' is computed by op '{t.producer.name}'; "
                                 "feed only tensors without a producer")
            checked.append((t, self._checked(t, v)))
        for t, array in checked:
            self._core.set_tensor(t.id, array)
            self._fed.add(t.name)
        missing = [t.name for t in self._resident() if t.name not in self._fed and t.role != "optimizer_state"]
        if missing:
            raise ValueError(f"not fed yet: {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''} "
                             "(feed them, or call initialize() for parameters)")
        self._core.step()
        try:
            return {k: self._core.get_tensor(t.id, list(t.shape)) for k, t in self._results.items()}
        except Exception:
            # The results could not be read (MPI: a rank stopped before the broadcast): the step failed
            # for the caller, so an atomic step takes back its updates too.
            if self.atomic:
                self._core.restore_updates()
            raise

    def time_steps(self, feeds: Mapping, steps: int = 7, warmup: int = 3) -> list[float]:
        """Runs ``warmup`` steps, then ``steps`` more, and returns those steps' seconds (the runtime's
        own clock: feeding and reading results are not in it). Parameters are trained meanwhile."""
        steps = check_int("steps", steps, minimum=1, error=ExecError)
        warmup = check_int("warmup", warmup, minimum=0, error=ExecError)
        for _ in range(warmup):
            self.step(feeds)
        out = []
        for _ in range(steps):
            self.step(feeds)
            out.append(self._core.stats.step_seconds)
        return out

    def parameters(self) -> dict[str, np.ndarray]:
        """Current values of the parameters (after the steps run so far)."""
        return {t.name: self._core.get_tensor(t.id, list(t.shape)) for t in self.graph.tensors
                if t.role == "parameter" and t.producer is None}

    def get(self, tensor: GTensor | str) -> np.ndarray:
        t = self.graph.tensor(tensor) if isinstance(tensor, str) else tensor
        return self._core.get_tensor(t.id, list(t.shape))

    @property
    def stats(self) -> ExecStats:
        if self._core.stats.steps == 0:
            raise ValueError("no step has run yet")
        return ExecStats(self)

    def __repr__(self):
        return f"<tw.Executable '{self.graph.name}' on {self.devices} CPU devices ({self.plan.algorithm})>"


def compile(graph: Graph, plan: Plan, backend: str = "cpu", *, memory_per_device: int | None = None,  # noqa: A001
            profile: bool = False, timeout: float = 300.0, atomic: bool = False) -> Executable:
    """Lower ``plan`` for ``graph`` onto ``plan.devices`` CPU devices (worker threads).

    ``plan`` may also be a swap plan (a ``tw.swap.SwapPlan``, or the ``SearchResult`` of
    ``tw.swap_plan(graph, ...)``): the graph then runs on one CPU device whose memory is the plan's
    pool, swapping tensors to and from a host store (``tilewise.exec.swapped``; ``memory_per_device``
    defaults to the plan's capacity).

    ``backend``: ``"cpu"`` (worker threads of this process) or ``"mpi"`` (one MPI rank per device:
    run the same script under ``mpirun -np plan.devices``; see ``tilewise.exec.mpi``) or ``"cuda"``
    (GPUs of this process, over NCCL; a swap plan on GPU 0; compiled, never run on a GPU yet: where
    none is visible it raises ``tw.CudaError`` naming why; docs/CUDA.md).

    ``memory_per_device``: each device's arena capacity in bytes (None = unlimited); an allocation
    past it raises ``tw.OutOfMemory`` naming the device, the tensor and the bytes.
    ``profile``: time every instruction of every step (``exe.trace("step.json")``).
    ``timeout``: seconds a device waits for a message before ``tw.CommunicationError``.
    ``atomic``: a step that fails anywhere (a bad id, a lost peer, in the updates too) leaves the
    parameters and optimizer state as they were: each device keeps a copy of what a step updates in
    place (``exe.stats.undo_bytes``, outside the planned memory). Without it a step is undone only
    when it fails before its first in-place update; later the executable refuses further steps. Swapped
    execution undoes failed steps from its host store either way."""
    if not isinstance(graph, Graph):
        raise TypeError(f"compile() needs a tw.Graph, got {type(graph).__name__}")
    if isinstance(plan, (SwapPlan, SearchResult)):
        if backend == "cuda":  # on GPU 0, its memory the plan's pool (docs/CUDA.md)
            cuda = importlib.import_module(".cuda", __package__)
            return cuda.compile_cuda_swapped(graph, plan, memory_per_device, profile=profile)
        if backend != "cpu":
            raise ExecError(f"swapped execution runs on the cpu or cuda backend, not '{backend}'")
        # exec/swapped.py builds on this module (a SwapExecutable is an Executable): loaded by name.
        swapped = importlib.import_module(".swapped", __package__)
        return swapped.compile_swapped(graph, plan, memory=memory_per_device, profile=profile, timeout=timeout)
    if not isinstance(plan, Plan):
        raise TypeError(f"compile() needs a tw.Plan (from tw.partition), got {type(plan).__name__}")
    if plan.graph is not graph and plan.graph.derived_from is graph:
        graph = plan.graph  # a frontier point keeping reuse copies (graph/reuse.py): the same model plus copies
    if backend not in BACKENDS:
        raise ExecError(f"unknown backend '{backend}'; available: {', '.join(BACKENDS)}")
    if memory_per_device is not None and memory_per_device <= 0:
        raise ExecError(f"memory_per_device must be a positive number of bytes, got {memory_per_device}")
    if not timeout > 0:
        raise ExecError(f"timeout must be a positive number of seconds, got {timeout}")
    if backend == "mpi":
        # exec/mpi.py builds on this module (MpiExecutable is an Executable) and is loaded only
        # here, when asked for: it imports tilewise._mpi, which loads libmpi.
        mpi = importlib.import_module(".mpi", __package__)
        return mpi.MpiExecutable(graph, plan, memory_per_device, profile=profile, timeout=timeout, atomic=atomic)
    if backend == "cuda":
        # exec/cuda.py imports tilewise._cuda (cuBLAS, cuDNN, NCCL) only when asked for: it raises
        # tw.CudaError naming why the backend cannot run (not built, no device, no kernels yet).
        cuda = importlib.import_module(".cuda", __package__)
        return cuda.compile_cuda(graph, plan, memory_per_device, profile=profile, timeout=timeout)
    return Executable(graph, plan, memory_per_device, profile=profile, timeout=timeout, atomic=atomic)


def program_events(prog: Program, device: int, timings, label: str) -> list[dict]:
    """Chrome/Perfetto events of one device's program: a process per device, a thread per stream,
    one complete event per timed instruction (record/wait are bookkeeping, not shown)."""
    events = [dict(name="process_name", ph="M", pid=device, tid=0, args=dict(name=label))]
    for i, stream in enumerate(prog.streams):
        events.append(dict(name="thread_name", ph="M", pid=device, tid=i, args=dict(name=stream)))
    streams = {name: i for i, name in enumerate(prog.streams)}
    for (kind, stream, op, text, nbytes, flops), (start, end) in zip(prog.instructions(), timings, strict=True):
        if kind in ("record", "wait"):
            continue
        events.append(dict(name=f"{kind} {op}" if op else kind, cat=kind, ph="X", pid=device, tid=streams[stream],
                           ts=start * 1e6, dur=max(end - start, 0.0) * 1e6,
                           args=dict(instruction=text, bytes=nbytes, flops=flops)))
    return events


_NUMPY_DTYPES = {"float32": np.float32, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


def _as_array(value, name: str, dtype: str = "float32") -> np.ndarray:
    """A NumPy array of ``dtype`` from an array-like or a torch tensor (without importing torch).
    Integer tensors take whole numbers in their range, bool tensors 0/1 (or bools); anything else is
    an ExecError naming the tensor, never a silent rounding or wrap-around."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor, perhaps requiring grad
        value = value.detach().cpu().numpy()
    if dtype not in _NUMPY_DTYPES:
        raise ExecError(f"'{name}' is {dtype}; the runtime holds float32, int64, int32 and bool tensors")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"'{name}': expected an array-like of numbers, got {type(value).__name__} ({e})") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"'{name}': expected an array-like of real numbers, got {array.dtype} values")
    if dtype == "float32":
        if array.dtype.kind == "f" and array.dtype.itemsize > 4 and array.size:
            # Finite values past float32's range would become Inf silently (NaN and Inf pass: data may hold them).
            big = np.isfinite(array) & (np.abs(array) > np.finfo(np.float32).max)
            if big.any():
                raise ExecError(f"'{name}' is float32: {float(array[big].flat[0])!r} is past float32's range "
                                f"(+-{float(np.finfo(np.float32).max):.4g})")
        return np.asarray(array, dtype=np.float32)
    target = np.dtype(_NUMPY_DTYPES[dtype])
    if array.dtype == target:
        return array
    if dtype == "bool":
        if array.size and not np.isin(array, (0, 1)).all():
            raise ExecError(f"'{name}' is a bool mask: values must be 0 or 1 (or bools)")
        return array.astype(np.bool_)
    info = np.iinfo(target)
    if array.dtype.kind == "f":
        whole = np.isfinite(array) & (array == np.floor(array))
        if not whole.all():
            bad = float(array[~whole].flat[0])
            raise ExecError(f"'{name}' is {dtype}: {bad} is not a whole number")
    # As Python numbers: exact comparisons, no cast of the bounds into a narrow float type.
    if array.size and (array.min().item() < info.min or array.max().item() > info.max):
        raise ExecError(f"'{name}' is {dtype}: values must lie in [{info.min}, {info.max}]")
    return array.astype(target)


def write_trace(events: list[dict], path) -> dict:
    """The trace document; written as JSON to ``path`` when given."""
    trace = dict(traceEvents=events, displayTimeUnit="ms")
    if path is not None:
        pathlib.Path(path).write_text(json.dumps(trace))
    return trace

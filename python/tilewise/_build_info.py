"""What this build of tilewise contains, and loading its BLAS before the extension.

``preload_blas()`` runs in ``tilewise/__init__.py`` before ``_core`` is imported; ``build_info()``
asks ``_core``. This module must not import ``_core`` at import time.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
from typing import Any

#: Keys of the dict build_info() returns (the fields of C++ tilewise::kernels::BuildInfo).
BUILD_INFO_KEYS = (
    "version",
    "compiler",
    "build_type",
    "blas",
    "blas_threads",
    "openmp",
    "openmp_max_threads",
    "mpi",
    "mpi_version",
    "mpi_backend",
    "mpi_launcher",
    "mpi_ulfm",
    "cuda_backend",
    "cuda",
    "cuda_version",
    "hardware_threads",
)

# The loaded BLAS library: kept so that it is never unloaded while _core may use it.
_blas_library: ctypes.CDLL | None = None


def _preload_package() -> str | None:
    """The Python package whose BLAS library _core needs loaded first, or None.

    cmake/blas.cmake writes ``tilewise/_blas_config.py`` with the answer. A tree without that file
    (a hand-made build) is assumed to use the default BLAS, scipy-openblas32.
    """
    try:
        from . import _blas_config
    except ImportError:
        return "scipy_openblas32"
    return _blas_config.BLAS_PRELOAD


def preload_blas() -> None:
    """Load the BLAS shared library that ``tilewise._core`` links against, before importing it.

    The wheel installs ``tilewise/`` next to ``scipy_openblas32/`` in one site-packages, and
    ``_core`` carries the RPATH ``$ORIGIN/../scipy_openblas32/lib``. Where the two live apart (a
    venv with ``--system-site-packages``, a user site, an editable install), that path misses, so
    the library is loaded here by its absolute path, with ``RTLD_GLOBAL``; the dynamic linker then
    resolves ``_core``'s dependency on ``libscipy_openblas.so`` by its soname to this copy.

    A no-op when the build linked a system BLAS, when scipy-openblas32 is not installed (importing
    ``_core`` will then say which library is missing), on Windows (importing scipy_openblas32 adds
    its DLL directory) and when called again. Never raises: a failure here leaves the RPATH to work.
    """
    global _blas_library
    if _blas_library is not None:
        return
    package = _preload_package()
    if package is None:
        return
    try:
        blas = importlib.import_module(package)
    except ImportError:
        return
    if sys.platform == "win32":
        return
    try:
        path = os.path.join(blas.get_lib_dir(), blas.get_library(fullname=True))
        _blas_library = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except (OSError, AttributeError, IndexError):
        return


def build_info() -> dict[str, Any]:
    """What this build of tilewise contains: a new dict with the keys in ``BUILD_INFO_KEYS``.

    ``version``, ``compiler`` and ``build_type`` describe the build; ``blas`` names the linked BLAS
    and ``blas_threads`` the threads it uses per call; ``openmp`` / ``openmp_max_threads``, ``mpi`` /
    ``mpi_version`` and ``cuda`` / ``cuda_version`` say whether each optional feature was compiled
    in or found at configure time (``cuda``: nvcc and the cuBLAS/cuDNN/NCCL wheels); ``mpi_backend``
    / ``cuda_backend`` whether ``tilewise._mpi`` / ``tilewise._cuda`` was built (found without importing
    them, so without loading libmpi or cuBLAS); ``mpi_launcher`` is the mpiexec of the MPI ``_mpi`` was
    built against ("" without it) and ``mpi_ulfm`` whether that MPI has ULFM fault tolerance (survivors
    of a killed rank raise under ``mpi_launcher --with-ft ulfm``); ``hardware_threads`` is what the
    machine offers (0 if unknown).
    """
    import importlib.util

    from . import _core

    info = dict(_core.build_info())
    info["mpi_backend"] = importlib.util.find_spec("tilewise._mpi") is not None
    info["cuda_backend"] = importlib.util.find_spec("tilewise._cuda") is not None
    try:  # written by cmake/mpi.cmake beside _mpi; plain Python, no libmpi
        from . import _mpi_config

        info["mpi_launcher"], info["mpi_ulfm"] = str(_mpi_config.LAUNCHER), bool(_mpi_config.ULFM)
    except ImportError:
        info["mpi_launcher"], info["mpi_ulfm"] = "", False
    return info

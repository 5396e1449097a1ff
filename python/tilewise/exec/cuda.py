"""The CUDA backend, host side: ``tw.compile(graph, plan, backend="cuda")`` and ``tilewise info``.

What exists today (docs/CUDA.md): the build (``TILEWISE_WITH_CUDA``, nvcc with the cuBLAS, cuDNN
and NCCL wheels), the library versions, the devices visible, and device arenas laid out by the CPU
arena's static planner. Programs do not run on a GPU yet: ``compile(..., backend="cuda")`` raises
``tw.CudaError`` saying why (the module was not built, no device is visible, or the kernels are not
written yet), never "available: cpu".

``tilewise._cuda`` is a separate extension, built only where CMake found CUDA, so ``import
tilewise`` never loads libcublas, libcudnn or libnccl (cudart is linked statically into
``_cuda``); it is imported here on first use.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from .._core import CudaError

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


def compile_cuda(graph, plan, memory_per_device, *, profile: bool, timeout: float):
    """``tw.compile(..., backend="cuda")``: raises ``tw.CudaError`` naming what is missing. The
    executor (streams, kernels, swapping, NCCL) is not written yet; the checks come first so that
    the message says the most basic reason (no module, then no device)."""
    del graph, memory_per_device, profile, timeout
    devices = require_device()
    if plan.devices > devices:
        raise CudaError(f"the plan is for {plan.devices} devices but {devices} CUDA device(s) are visible")
    raise CudaError("the CUDA backend does not execute programs yet (issue 18: kernels, streams and NCCL are "
                    "not written; docs/CUDA.md); use backend='cpu'")

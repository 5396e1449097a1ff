"""This machine's figures for the step-time prediction (``ExecStats.predicted_step_seconds``).

Measured once per process: one device's (one core's) float32 GEMM rate, through the runtime itself
on a 512^3 matmul, and the copy bandwidth between buffers (NumPy copy of 32 MiB). The matmul runs
on the trivial one-device plan built directly (``Plan.one_device``): the runtime needs no planner.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from .. import _core
from ..graph.graph import Graph
from ..plan.plan import Plan
from ..tdl.registry import ops

_N = 512  # the GEMM's size: 512^3 multiply-adds


@functools.lru_cache(maxsize=1)
def calibration() -> dict[str, float]:
    """``{"flops_per_second", "bytes_per_second"}``: one device's float32 GEMM rate (2 * 512^3 FLOPs
    over the fastest of three runtime steps) and the copy bandwidth (32 MiB, mean of three copies)."""
    g = Graph("calibration")
    out = ops.matmul(g.input("a", (_N, _N)), g.input("b", (_N, _N)))
    plan = Plan.one_device(g)
    exe = _core.Executable(g._g, plan._core, 0, [out.id], [None] * g._g.num_ops)
    ones = np.ones((_N, _N), np.float32)
    exe.set_tensor(g.tensor("a").id, ones)
    exe.set_tensor(g.tensor("b").id, ones)
    exe.step()  # first step: arenas, kernels prepared
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        exe.step()
        exe.get_tensor(out.id, [_N, _N])  # as Executable.step, which returns the result
        times.append(time.perf_counter() - t0)
    a = np.ones(32 * 2**20 // 4, np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)  # first touch of b's pages is not the bandwidth
    t0 = time.perf_counter()
    for _ in range(3):
        np.copyto(b, a)
    copy = (time.perf_counter() - t0) / 3
    return {"flops_per_second": 2 * _N**3 / min(times), "bytes_per_second": a.nbytes / copy}

"""Timing shared by the benchmarks: the median of several runs (the machine is shared and noisy)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], runs: int) -> float:
    """Median wall time of ``runs`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)

"""GEMM throughput: tilewise's BLAS-backed ``_core.gemm`` beside ``numpy.matmul``.

Square float32 products C = A @ B for n = 256, 512, 1024, 2048; each timing is the median of
``--repeats`` calls after one warm-up call. Prints GFLOP/s (2 n^3 / seconds) side by side with the
ratio ours / numpy, and writes the same as JSON (default ``benchmarks/out/gemm.json``). There is no
paper figure for this one: it checks that the linked BLAS is as fast as the one NumPy ships.

    python benchmarks/bench_gemm.py [--sizes 256 512 ...] [--repeats 5] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import tilewise
from tilewise import _core


def _seconds(fn: Callable[[], object], repeats: int) -> list[float]:
    # Two OpenBLAS copies share this process (NumPy's scipy_openblas64_ and ours): each keeps its
    # worker threads spinning for a moment after a call, so let the other's settle first.
    time.sleep(0.2)
    fn()  # warm-up: thread pool start, page faults of the output
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _numpy_blas() -> str:
    try:
        config = np.show_config(mode="dicts")
        blas = config["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except (TypeError, KeyError, AttributeError):  # older NumPy: no dict mode
        return "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run(sizes: list[int], repeats: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    info = tilewise.build_info() if hasattr(tilewise, "build_info") else _core.build_info()
    rows = []
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        # Same answer first: a benchmark of a wrong result is worthless.
        np.testing.assert_allclose(_core.gemm(a, b), a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(n))
        ours_times = _seconds(lambda a=a, b=b: _core.gemm(a, b), repeats)
        numpy_times = _seconds(lambda a=a, b=b: np.matmul(a, b), repeats)
        ours, theirs = statistics.median(ours_times), statistics.median(numpy_times)
        flops = 2.0 * n**3
        rows.append(
            {
                "n": n,
                "ours_s": ours,
                "numpy_s": theirs,
                "ours_gflops": flops / ours / 1e9,
                "numpy_gflops": flops / theirs / 1e9,
                "ratio": theirs / ours,  # ours GFLOP/s over NumPy's: > 1 means ours is faster
                "ours_all_s": ours_times,
                "numpy_all_s": numpy_times,
            }
        )
    return {
        "benchmark": "gemm",
        "dtype": "float32",
        "repeats": repeats,
        "statistic": "median",
        "machine": {
            "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        },
        "ours": {"blas": info["blas"], "blas_threads": info["blas_threads"]},
        "numpy": {"version": np.__version__, "blas": _numpy_blas()},
        "results": rows,
    }


def print_table(report: dict) -> None:
    print(
        f"GEMM float32, median of {report['repeats']} on {report['machine']['cpu']} "
        f"({report['machine']['cpu_count']} CPUs)"
    )
    print(f"  ours : {report['ours']['blas']}, {report['ours']['blas_threads']} thread(s)")
    print(f"  numpy: {report['numpy']['version']} with {report['numpy']['blas']}")
    print(f"{'n':>6} {'ours GFLOP/s':>13} {'numpy GFLOP/s':>14} {'ours/numpy':>11}")
    for r in report["results"]:
        print(f"{r['n']:>6} {r['ours_gflops']:>13.1f} {r['numpy_gflops']:>14.1f} {r['ratio']:>11.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out" / "gemm.json")
    args = parser.parse_args(argv)
    report = run(args.sizes, args.repeats)
    print_table(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

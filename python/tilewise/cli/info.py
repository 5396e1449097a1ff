"""``tilewise info``: what this build contains (BLAS, OpenMP, MPI, CUDA) and the machine."""

from __future__ import annotations

import argparse
import json
import platform
from typing import Any


def _found(found: bool, detail: str = "") -> str:
    if not found:
        return "not found"
    return f"found ({detail})" if detail else "found"


def add_info(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "info",
        help="show what this build contains (BLAS, OpenMP, MPI, CUDA) and the machine",
        description="Show the tilewise version, the BLAS it is linked against and its threads, "
        "whether OpenMP, MPI and CUDA were found at build time, hardware threads, and the "
        "Python and NumPy versions.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(run=run_info)


def run_info(args: argparse.Namespace) -> int:
    import numpy

    from .._build_info import build_info

    info = build_info()
    info["python"] = platform.python_version()
    info["python_implementation"] = platform.python_implementation()
    info["numpy"] = numpy.__version__
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0

    openmp = f"compiled in ({info['openmp_max_threads']} threads)" if info["openmp"] else "not compiled in"
    rows = [
        ("tilewise", f"{info['version']} ({info['build_type']}, {info['compiler']})"),
        ("BLAS", f"{info['blas']}, {info['blas_threads']} thread(s)"),
        ("OpenMP", openmp),
        # CUDA is detected at build time only; no backend uses it yet.
        ("MPI", _found(info["mpi"], f"MPI {info['mpi_version']}" if info["mpi_version"] else "")),
        ("MPI backend", "tilewise._mpi built (tw.compile(..., backend=\"mpi\") under mpirun)"
         if info["mpi_backend"] else "not built (needs MPI at build time)"),
        (
            "CUDA compiler",
            _found(info["cuda"], f"toolkit {info['cuda_version']}" if info["cuda_version"] else ""),
        ),
        ("hardware threads", str(info["hardware_threads"] or "unknown")),
        ("Python", f"{info['python']} ({info['python_implementation']})"),
        ("NumPy", info["numpy"]),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0

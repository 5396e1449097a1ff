"""``tilewise info``: what this build contains (BLAS, OpenMP, MPI, CUDA) and the machine."""

from __future__ import annotations

import argparse
import json
import platform
from typing import Any


def _mpi_backend(info: dict) -> str:
    if not info["mpi_backend"]:
        return "not built (needs MPI at build time)"
    ft = ("ULFM: survivors of a killed rank raise under --with-ft ulfm" if info["mpi_ulfm"]
          else "no ULFM: a killed rank ends the job")
    return f"tilewise._mpi built (tw.compile(..., backend=\"mpi\") under {info['mpi_launcher'] or 'mpirun'}; {ft})"


def _found(found: bool, detail: str = "") -> str:
    if not found:
        return "not found"
    return f"found ({detail})" if detail else "found"


def _cuda_rows(info: dict[str, Any]) -> list[tuple[str, str]]:
    """The CUDA toolkit, the libraries' versions and the devices, when the backend was built."""
    if not info["cuda_backend"]:
        return []
    lib = info["cuda_libraries"]
    devices = (f"{lib['devices']} visible (driver {lib['cuda_driver']})" if lib["devices"]
               else f"none visible ({lib['device_error']})")
    return [
        ("CUDA", f"runtime {lib['cuda_runtime']} (toolkit {info['cuda_version']})"),
        ("cuBLAS", lib["cublas"]),
        ("cuDNN", lib["cudnn"]),
        ("NCCL", lib["nccl"]),
        ("CUDA devices", devices),
    ]


def add_info(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "info",
        help="show what this build contains (BLAS, OpenMP, MPI, CUDA) and the machine",
        description="Show the tilewise version, the BLAS it is linked against and its threads, "
        "whether OpenMP, MPI and CUDA were found at build time (with CUDA: the CUDA, cuBLAS, cuDNN and NCCL "
        "versions and the devices visible), hardware threads, and the "
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
    if info["cuda_backend"]:
        # Only here, for this report: imports tilewise._cuda (cuBLAS, cuDNN, NCCL; no device needed).
        from ..exec.cuda import report

        info["cuda_libraries"] = report()
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0

    openmp = f"compiled in ({info['openmp_max_threads']} threads)" if info["openmp"] else "not compiled in"
    rows = [
        ("tilewise", f"{info['version']} ({info['build_type']}, {info['compiler']})"),
        ("BLAS", f"{info['blas']}, {info['blas_threads']} thread(s)"),
        ("OpenMP", openmp),
        ("MPI", _found(info["mpi"], f"MPI {info['mpi_version']}" if info["mpi_version"] else "")),
        ("MPI backend", _mpi_backend(info)),
        ("CUDA backend", "tilewise._cuda built (nvcc + cuBLAS/cuDNN/NCCL; no kernels yet, docs/CUDA.md)"
         if info["cuda_backend"] else "not built (needs nvcc and the nvidia cuBLAS/cuDNN/NCCL wheels at build time)"),
        *_cuda_rows(info),
        ("hardware threads", str(info["hardware_threads"] or "unknown")),
        ("Python", f"{info['python']} ({info['python_implementation']})"),
        ("NumPy", info["numpy"]),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0

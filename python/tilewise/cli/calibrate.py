"""``tilewise calibrate``: measure this machine for the time model and store the profile."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_calibrate(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "calibrate",
        help="measure this machine's kernel rates, copies and message latency for the step-time predictions",
        description="Time a fixed suite of small training graphs on one CPU device per kernel kind (GEMM, "
        "convolutions, element-wise, reductions, norms, layouts, lookups, the interpreter), the runtime's box "
        "copies and combines at 4 KiB..64 MiB, the in-process message latency and the memory bus shared by "
        "the cores; store the profile as JSON in the cache folder ($TILEWISE_CACHE_DIR, else "
        "$XDG_CACHE_HOME/tilewise, else ~/.cache/tilewise) and print the cluster 'this-machine'. A stored "
        "profile of this machine, tilewise version and BLAS is reused unless --force.",
    )
    parser.add_argument("--force", action="store_true", help="measure again even when a profile is stored")
    parser.add_argument("--quick", action="store_true", help="a smaller suite (about half the time)")
    parser.add_argument("--json", action="store_true", help="print the stored profile as JSON")
    parser.add_argument("--gpu", action="store_true",
                        help="measure GPU 0 instead (the CUDA backend: its kernels per kind, copy kernels, the "
                        "pinned host link each way and both ways; the cluster 'this-gpu')")
    parser.set_defaults(run=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    from .. import calibration

    if args.gpu:
        from .. import calibration_gpu
        from .._core import CudaError

        try:
            data = calibration_gpu.this_gpu_profile(recalibrate=args.force, quick=args.quick, progress=not args.json)
        except CudaError as e:
            print(f"tilewise calibrate --gpu: {e}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(data, indent=1))
            return 0
        print(calibration_gpu.cluster_from_profile(data))
        print(f"profile: {calibration.cache_dir() / 'this-gpu.json'}")
        return 0
    data = calibration.this_machine_profile(recalibrate=args.force, quick=args.quick, progress=not args.json)
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    print(calibration.this_machine())
    print(f"profile: {calibration.cache_dir() / 'this-machine.json'}")
    return 0

"""The ``tilewise`` command line.

Each subcommand is two functions: ``_add_<name>(subparsers)`` declares its parser and sets
``run=_<name>``, and ``_<name>(args) -> int`` does the work and returns the exit status. To add one,
write both and list ``_add_<name>`` in ``_SUBCOMMANDS``. Imports of the heavier parts of tilewise
happen inside the ``_<name>`` functions, so that ``tilewise --help`` stays fast and works even when
the extension does not load.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Callable, Sequence
from typing import Any


def _yes_no(found: bool, detail: str = "", missing: str = "not found") -> str:
    if not found:
        return missing
    return f"yes ({detail})" if detail else "yes"


# --- tilewise info --------------------------------------------------------------------------------


def _add_info(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "info",
        help="show what this build contains (BLAS, OpenMP, MPI, CUDA) and the machine",
        description="Show the tilewise version, the BLAS it is linked against and its threads, "
        "whether OpenMP, MPI and CUDA were found at build time, hardware threads, and the "
        "Python and NumPy versions.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(run=_info)


def _info(args: argparse.Namespace) -> int:
    import numpy

    from ._build_info import build_info

    info = build_info()
    info["python"] = platform.python_version()
    info["python_implementation"] = platform.python_implementation()
    info["numpy"] = numpy.__version__
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0

    openmp = _yes_no(info["openmp"], f"{info['openmp_max_threads']} threads", missing="not compiled in")
    rows = [
        ("tilewise", f"{info['version']} ({info['build_type']}, {info['compiler']})"),
        ("BLAS", f"{info['blas']}, {info['blas_threads']} thread(s)"),
        ("OpenMP", openmp),
        ("MPI", _yes_no(info["mpi"], f"MPI {info['mpi_version']}" if info["mpi_version"] else "")),
        ("CUDA", _yes_no(info["cuda"], f"toolkit {info['cuda_version']}" if info["cuda_version"] else "")),
        ("hardware threads", str(info["hardware_threads"] or "unknown")),
        ("Python", f"{info['python']} ({info['python_implementation']})"),
        ("NumPy", info["numpy"]),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


# --- the parser -----------------------------------------------------------------------------------

#: One entry per subcommand: a function that adds its parser to the subparsers.
_SUBCOMMANDS: list[Callable[[Any], None]] = [_add_info]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand in ``_SUBCOMMANDS``."""
    parser = argparse.ArgumentParser(
        prog="tilewise",
        description="Partition deep-learning models across devices: plan, inspect, run.",
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    subparsers.required = True
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tilewise`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())

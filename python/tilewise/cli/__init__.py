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
import os
import platform
import sys
from collections.abc import Callable, Sequence
from typing import Any


def _found(found: bool, detail: str = "") -> str:
    if not found:
        return "not found"
    return f"found ({detail})" if detail else "found"


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

    openmp = f"compiled in ({info['openmp_max_threads']} threads)" if info["openmp"] else "not compiled in"
    rows = [
        ("tilewise", f"{info['version']} ({info['build_type']}, {info['compiler']})"),
        ("BLAS", f"{info['blas']}, {info['blas_threads']} thread(s)"),
        ("OpenMP", openmp),
        # MPI and CUDA are detected at build time only; no backend uses them yet.
        ("MPI", _found(info["mpi"], f"MPI {info['mpi_version']}" if info["mpi_version"] else "")),
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


# --- the parser -----------------------------------------------------------------------------------

#: One entry per subcommand: a function that adds its parser to the subparsers.
def _add_ops(subparsers: Any) -> None:
    from ._cli_tdl import add_ops

    add_ops(subparsers)


def _add_analyze(subparsers: Any) -> None:
    from ._cli_tdl import add_analyze

    add_analyze(subparsers)


def _add_graph(subparsers: Any) -> None:
    from ._cli_graph import add_graph

    add_graph(subparsers)


def _add_plan(subparsers: Any) -> None:
    from ._cli_plan import add_plan

    add_plan(subparsers)


def _add_run(subparsers: Any) -> None:
    from ._cli_run import add_run

    add_run(subparsers)


_SUBCOMMANDS: list[Callable[[Any], None]] = [_add_info, _add_ops, _add_analyze, _add_graph, _add_plan, _add_run]


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
    try:
        return args.run(args)
    except ValueError as e:  # tw.TDLError, tw.ShapeError and bad option values: a message, no traceback
        print(f"tilewise {args.command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `tilewise ops | head`: the reader left; not an error
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
        return 0


if __name__ == "__main__":
    sys.exit(main())

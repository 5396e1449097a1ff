"""The ``tilewise`` command line (console script ``tilewise = "tilewise.cli:main"``).

One module per subcommand: ``info``, ``ops`` (``ops`` and ``analyze``: the TDL library), ``graph``,
``plan``, ``run``, ``swap``, ``frontier``, ``calibrate``. Each has ``add_<name>(subparsers)``, which declares its
parser and sets ``run=run_<name>``, and ``run_<name>(args) -> int``, which does the work and returns the exit
status.
To add one, write its module and list its ``add_<name>`` in ``_SUBCOMMANDS``. Imports of the heavier
parts of tilewise happen inside the ``run_<name>`` functions, so that ``tilewise --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .calibrate import add_calibrate
from .frontier import add_frontier
from .graph import add_graph
from .info import add_info
from .ops import add_analyze, add_ops
from .plan import add_plan
from .run import add_run
from .swap import add_swap

#: One entry per subcommand: a function that adds its parser to the subparsers.
_SUBCOMMANDS: list[Callable[[Any], None]] = [add_info, add_ops, add_analyze, add_graph, add_plan, add_run,
                                               add_swap, add_frontier, add_calibrate]


def _version() -> str:
    """The installed distribution's version, read without loading the extension."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tilewise")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand in ``_SUBCOMMANDS``."""
    parser = argparse.ArgumentParser(
        prog="tilewise",
        description="Partition deep-learning models across devices: plan, inspect, run.",
    )
    parser.add_argument("--version", action="version", version=f"tilewise {_version()}")
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

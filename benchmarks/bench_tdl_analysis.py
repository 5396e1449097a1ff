"""How long analysing the whole operator library takes (issue: "well under a second").

For every op in tdl_ops with its first test case's shapes: trace the description, infer the
output shape, discover its strategies with concrete regions for 2 and 8 workers, and the
symbolic regions. Cold = fresh op objects (tracing included); warm = traces cached.
Prints the median of several runs and writes benchmarks/out/tdl_analysis.json.

    python benchmarks/bench_tdl_analysis.py [--runs 7]
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import platform

from _timing import median_time  # noqa: E402

import tdl_ops
import tilewise as tw  # noqa: F401  (loads the extension before tdl_ops)

TARGET_SECONDS = 1.0  # the bound; Tofu reports no separate figure for its analysis


def analyse_library(fresh: bool) -> int:
    strategies = 0
    seen = set()
    for case in tdl_ops.CASES:
        if case.op in seen:
            continue
        seen.add(case.op)
        op = tdl_ops.ALL[case.op]
        if fresh:
            op = copy.copy(op)
            op._cache = {}
        shapes = dict(zip(op.inputs, case.shapes))
        attrs = dict(case.attrs)
        op.infer_shape(**shapes, **attrs)
        for parts in (2, 8):
            strategies += len(op.strategies(parts=parts, **shapes, **attrs))
        ranks = {n: len(s) for n, s in shapes.items()}
        strategies += len(op.symbolic_strategies(**ranks, **attrs))
    return len(seen)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    n_ops = analyse_library(fresh=True)
    cold = median_time(lambda: analyse_library(fresh=True), args.runs)
    warm = median_time(lambda: analyse_library(fresh=False), args.runs)
    print(f"TDL analysis of the whole library ({n_ops} ops; shapes, strategies for 2 and 8 workers, symbolic)")
    print(f"{'':24}{'ours (s)':>12}{'target (s)':>12}{'ratio':>10}")
    for name, t in (("cold (tracing included)", cold), ("warm (traces cached)", warm)):
        print(f"{name:24}{t:12.4f}{TARGET_SECONDS:12.1f}{t / TARGET_SECONDS:10.3f}")
    out = pathlib.Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "tdl_analysis.json").write_text(json.dumps({
        "ops": n_ops, "cold_seconds": cold, "warm_seconds": warm, "target_seconds": TARGET_SECONDS,
        "runs": args.runs, "machine": platform.machine(), "python": platform.python_version(),
    }, indent=2))


if __name__ == "__main__":
    main()

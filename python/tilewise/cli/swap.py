"""``tilewise swap MODEL --memory GB``: SwapAdvisor's search for a model on one small device."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_swap(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "swap",
        help="plan swapping for a model that does not fit one device: schedule, memory pool, fraction of ideal",
        description="Build the training graph of a zoo model (or load a graph JSON file), price its ops on one "
        "device of a cluster (default SwapAdvisor's V100 with its 12/20 GB/s host link) and run SwapAdvisor's "
        "genetic search over schedules and memory pools for a device with --memory GB. Prints the best plan "
        "(simulated step, fraction of the ideal time with unlimited memory, swaps), ODSwap's for comparison, "
        "and the least memory that would work when nothing fits. With --run, the best plan is also run on this "
        "machine (one CPU device whose memory is the plan's pool, tensors swapped to a host store) and its "
        "measured step is printed beside the simulated one.",
        epilog="Example: tilewise swap mlp-4-1024 --memory 0.02 --time-limit 10 --run --steps 5",
    )
    parser.add_argument("model", help="model name (e.g. rnn-2-1k, wresnet-50-1) or a graph JSON file")
    parser.add_argument("--memory", type=float, required=True, metavar="GB", help="device memory in GB (1e9 bytes)")
    parser.add_argument("--batch", type=int, help="batch size (default: the family's)")
    parser.add_argument("--accumulate", choices=("running", "sum"), default="running",
                        help="how a zoo model's gradient parts are summed: as they arrive (default; one part alive at "
                        "a time, as MXNet and PyTorch do) or by one op after the last (all parts alive at once)")
    parser.add_argument("--cluster", default="swapadvisor", help="cluster preset or JSON file (default swapadvisor)")
    parser.add_argument("--time-limit", type=float, default=30.0, metavar="S", help="search seconds (default 30)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="PATH", help="write the search result as JSON")
    parser.add_argument("--progress", action="store_true", help="show a progress bar (needs tqdm)")
    parser.add_argument("--run", action="store_true", dest="run_it",
                        help="run the best plan on this machine and print measured vs simulated step time")
    parser.add_argument("--steps", type=int, default=5, metavar="N",
                        help="with --run: steps timed after 2 warm-up steps (default 5; the median is printed)")
    parser.set_defaults(run=run_swap)


def _fail(message: str) -> int:
    print(f"tilewise swap: error: {message}", file=sys.stderr)
    return 2


def run_swap(args: argparse.Namespace) -> int:
    import pathlib

    from ..plan.swapping import swap_problem
    from ..sim.cluster import Cluster
    from ..swap import InfeasibleError
    from ._load import load_model

    if not args.memory > 0:
        return _fail(f"--memory must be positive, got {args.memory}")
    if args.run_it and not args.steps >= 1:
        return _fail(f"--steps must be at least 1, got {args.steps}")
    if args.time_limit is not None and not args.time_limit > 0:
        return _fail(f"--time-limit must be positive, got {args.time_limit}")
    g = load_model(args.model, batch=args.batch, accumulate=args.accumulate)
    cluster = Cluster.from_json(pathlib.Path(args.cluster)) if args.cluster.endswith(".json") else args.cluster
    problem = swap_problem(g, cluster, int(args.memory * 1e9))
    print(f"{args.model}: {len(problem.ops)} ops, {len(problem.tensors)} tensors, {problem.total_bytes / 1e9:.3g} GB "
          f"in all; device {args.memory:g} GB; ideal step {problem.ideal_time * 1e3:.3f} ms")
    try:
        result = problem.search(seed=args.seed, time_limit=args.time_limit, progress=args.progress)
    except InfeasibleError as e:
        return _fail(f"{e} (least memory that would work: {e.least_memory / 1e9:.4g} GB)")
    print(f"search: {result!r}")
    print(f"best:   {result.plan!r}")
    try:
        print(f"ODSwap: {problem.odswap()!r}")
    except (InfeasibleError, ValueError) as e:
        print(f"ODSwap: cannot run ({e})")
    if args.run_it:
        run_plan(g, result, args.steps)
    if args.json:
        try:
            pathlib.Path(args.json).write_text(result.to_json())
        except OSError as e:
            return _fail(str(e))
        print(f"wrote {args.json}")
    return 0


def run_plan(graph, result, steps: int = 5) -> None:
    """Runs the plan on this machine: ``steps`` timed steps after 2 warm-up ones; prints the median
    measured step beside the swapped program's simulated step on "this-machine"."""
    import statistics

    from ..exec.executable import compile as compile_plan
    from ..graph.feeds import example_feeds
    from ..plan.plan import Plan

    feeds = example_feeds(graph, 0)
    exe = compile_plan(graph, result).initialize(0)
    times = exe.time_steps(feeds, steps=steps, warmup=2)
    measured, simulated = statistics.median(times), exe.predict().step_seconds
    # The same graph unswapped, for scale (its memory is not limited).
    plain = compile_plan(graph, Plan.one_device(graph)).initialize(0)
    plain_measured = statistics.median(plain.time_steps(feeds, steps=steps, warmup=2))
    plain_simulated, plain_peak = plain.predict().step_seconds, plain.stats.peak_memory_per_device[0]
    del plain
    stats = exe.stats
    print(f"run:    {stats.summary(predict=False).splitlines()[1]}")
    print(f"        {stats.summary(predict=False).splitlines()[2]}")
    print(f"        step {measured * 1e3:.3f} ms measured (median of {steps}), {simulated * 1e3:.3f} ms simulated "
          f"on this-machine ({(measured - simulated) / simulated:+.1%})")
    print(f"unswapped: {plain_measured * 1e3:.3f} ms measured, {plain_simulated * 1e3:.3f} ms simulated, "
          f"{plain_peak / 1e6:.3g} MB of device memory")

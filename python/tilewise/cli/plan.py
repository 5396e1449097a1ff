"""``tilewise plan MODEL``: partition a zoo model's training graph across devices and show the plan."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

#: The algorithms, for the help text only (``tilewise --help`` must not load the extension);
#: tests/python/test_plan_api.py checks it against ``_core.partition_algorithms()``.
ALGORITHMS = ("tofu", "kcuts", "spartan", "data_parallel", "allrow_greedy", "equal_chop", "icml18", "brute_force")


def add_plan(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="partition a model's training graph across devices: bytes moved, memory, tilings",
        description="Build the training graph of a zoo model, find a partition plan over K devices with one "
        "of the planners (Tofu section 5.2 and the baselines), and print its summary: bytes moved per "
        "iteration (in total and per recursion step), search time, peak memory per device and the ops that "
        "move the most. Optionally write the plan as JSON or draw its tilings (Tofu Fig. 11) as a PNG.",
        epilog=f"algorithms: {', '.join(ALGORITHMS)}. Models as for `tilewise graph` (e.g. tilewise plan "
        "wresnet-50-4 --devices 8 --batch 8).",
    )
    parser.add_argument("model", help="model name, e.g. wresnet-50-4, rnn-4-1k, mlp-4-1024, or a graph JSON file "
                        "(Graph.save)")
    parser.add_argument("--devices", "-k", type=int, default=8, help="number of devices (default 8)")
    parser.add_argument("--algorithm", "-a", default="tofu", help="partition algorithm (default tofu)")
    parser.add_argument("--batch", type=int, help="batch size (default: the papers' for that family)")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum", "adam"])
    parser.add_argument("--time-limit", type=float, metavar="S", help="give up after S seconds of search")
    parser.add_argument("--threads", type=int, help="search threads (default: every core)")
    parser.add_argument("--json", metavar="PATH", help="write the plan as JSON")
    parser.add_argument("--draw", metavar="PNG", help="draw the tilings of up to 12 layers (needs matplotlib)")
    parser.add_argument("--top", type=int, default=10, metavar="N", help="ops listed by bytes (default 10)")
    parser.add_argument("--progress", action="store_true", help="show a progress bar (needs tqdm)")
    parser.add_argument("--cluster", metavar="NAME|JSON",
                        help="also predict the step time on a cluster: a preset (this-machine, tofu, tensoropt, "
                        "tensoropt-pcie, tensoropt-no-rdma, swapadvisor) or a cluster JSON file")
    parser.add_argument("--trace", metavar="PATH", help="with --cluster: write the simulated step as a "
                        "Chrome/Perfetto trace")
    parser.set_defaults(run=run_plan)


def _fail(message: str) -> int:
    print(f"tilewise plan: error: {message}", file=sys.stderr)
    return 2


def run_plan(args: argparse.Namespace) -> int:
    import pathlib

    from .._core import SearchTimeout, SearchTooLarge
    from ..plan.search import partition
    from ._load import load_model

    if args.batch is not None and args.batch < 1:
        return _fail(f"--batch must be positive, got {args.batch}")
    if args.top < 0:
        return _fail(f"--top must be at least 0, got {args.top}")
    t0 = time.perf_counter()
    g = load_model(args.model, batch=args.batch, optimizer=args.optimizer)
    built = time.perf_counter() - t0
    try:
        plan = partition(g, args.devices, args.algorithm, time_limit=args.time_limit, threads=args.threads,
                         progress=args.progress)
    except (SearchTimeout, SearchTooLarge, ImportError) as e:  # ValueErrors (PlanError) go to cli.main
        return _fail(str(e))
    print(f"{args.model}: graph built in {built:.3f} s ({g._g.num_ops} ops), plan found in "
          f"{plan.search_seconds:.3f} s")
    print(plan.summary(top=args.top), end="")
    if args.trace and not args.cluster:
        return _fail("--trace needs --cluster")
    if args.cluster:
        from ..sim.cluster import Cluster

        try:
            path = pathlib.Path(args.cluster)
            cluster = Cluster.from_json(path) if path.suffix == ".json" else args.cluster
            prediction = plan.predict(cluster)
        except (OSError, ValueError, RuntimeError) as e:
            return _fail(f"--cluster {args.cluster}: {e}")
        print(prediction.summary())
        if args.trace:
            try:
                prediction.to_trace(args.trace)
            except OSError as e:
                return _fail(str(e))
            print(f"wrote {args.trace}")
    try:
        if args.json:
            plan.save(args.json)
            print(f"wrote {args.json}")
        if args.draw:
            from ..plan.plot import plan_figure

            plan_figure(plan).savefig(pathlib.Path(args.draw), dpi=120)
            print(f"wrote {args.draw}")
    except ImportError as e:
        return _fail(f"--draw needs matplotlib (pip install 'tilewise[plot]'): {e}")
    except OSError as e:
        return _fail(str(e))
    return 0

"""``tilewise run MODEL``: train a zoo model on synthetic data over K CPU devices with a partition plan."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .plan import ALGORITHMS


def add_run(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="train a model over K CPU devices with a partition plan: loss, throughput, predicted vs measured",
        description="Build the training graph of a zoo model, partition it over K devices, lower the plan onto K "
        "CPU worker threads (each with its own memory arena) and run N training steps on synthetic data. Prints "
        "the loss per step, samples per second, and the bytes moved and peak memory per device beside the "
        "plan's predictions.",
        epilog=f"algorithms: {', '.join(ALGORITHMS[:-1])}. Example: tilewise run mlp-4-1024 --batch 64 "
        "--devices 2 --steps 5",
    )
    parser.add_argument("model", help="model name, e.g. mlp-4-1024, wresnet-50-1, rnn-2-1k, or a graph JSON file "
                        "(Graph.save)")
    parser.add_argument("--plan", metavar="PATH", help="run this saved plan (tilewise plan --json) instead of "
                        "searching; its device count wins over --devices")
    parser.add_argument("--devices", "-k", type=int, default=2, help="number of CPU devices (default 2)")
    parser.add_argument("--algorithm", "-a", default="tofu", help="partition algorithm (default tofu)")
    parser.add_argument("--batch", type=int, help="batch size (default: the family's)")
    parser.add_argument("--image", type=int, help="image size for CNNs (default: the family's)")
    parser.add_argument("--steps", type=int, default=3, help="training steps (default 3)")
    parser.add_argument("--memory", type=float, metavar="MIB", help="memory per device in MiB (default unlimited)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data and parameters")
    parser.add_argument("--backend", choices=("cpu", "mpi"), default="cpu",
                        help="cpu: worker threads of this process; mpi: one MPI rank per device, started as "
                        "`mpirun -np K tilewise run ... --backend mpi` (rank 0 prints)")
    parser.add_argument("--no-predict", action="store_true",
                        help="skip the simulated step beside the measured one (it calibrates this machine once)")
    parser.set_defaults(run=run_run)


def _fail(message: str) -> int:
    print(f"tilewise run: error: {message}", file=sys.stderr)
    return 2


def run_run(args: argparse.Namespace) -> int:
    import numpy as np

    from .._core import ExecError, OutOfMemory
    from ..exec.executable import compile as compile_plan
    from ..plan.search import partition
    from ._load import load_model

    if args.steps < 1:
        return _fail(f"--steps must be at least 1, got {args.steps}")
    kwargs = {"batch": args.batch}
    if args.image is not None:
        kwargs["image"] = args.image
    g = load_model(args.model, **kwargs)
    if args.plan:
        from ..plan.plan import Plan

        plan = Plan.load(args.plan, g)  # validated against the graph; PlanError names the field
        if plan.devices != args.devices:
            args.devices = plan.devices
    else:
        plan = partition(g, args.devices, args.algorithm)
    memory = int(args.memory * 2**20) if args.memory else None
    try:
        exe = compile_plan(g, plan, memory_per_device=memory, backend=args.backend).initialize(args.seed)
        say = print if getattr(exe, "rank", 0) == 0 else (lambda *a, **k: None)  # MPI: rank 0 speaks
        from ..graph.feeds import example_feeds

        rng = np.random.default_rng(args.seed)
        batch = next((t.shape[0] for t in g.tensors if t.role == "input" and t.shape), 1)
        say(f"{args.model}: {g._g.num_ops} ops, {args.algorithm} on {args.devices} CPU devices "
              f"(plan found in {plan.search_seconds:.3f} s)")
        for step in range(args.steps):
            feeds = example_feeds(g, seed=int(rng.integers(2**31)))  # ids inside their tables
            t0 = time.perf_counter()
            out = exe.step(feeds)
            seconds = time.perf_counter() - t0
            loss = float(np.asarray(out["loss"]).sum()) if "loss" in out else float("nan")
            say(f"step {step + 1}: loss {loss:.6g}, {seconds:.3f} s, {batch / seconds:.1f} samples/s")
    except (OutOfMemory, ExecError) as e:
        return _fail(str(e))
    # Under MPI every rank would calibrate at once: the MPI prediction is bench_predict.py --mpi's.
    say(exe.stats.summary(predict=not args.no_predict and args.backend == "cpu"))
    return 0

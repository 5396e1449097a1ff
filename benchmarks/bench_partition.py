"""Partition search time beside Tofu Table 1, and how it grows with the device count.

Tofu Table 1 (EC2 p2.8xlarge host, 8 workers): "using recursion" finds the plan for WResNet-152
in 8.3 s and for RNN-10 in 66.6 s. Ours, on this machine, for WResNet-152-10 (batch 8) and
RNN-10-8K (batch 128) training graphs (forward, backward, SGD update):

- "tofu, published": Tofu's recursion alone (refine_rounds=0), the algorithm Table 1 times.
- "tofu": our default, the recursion followed by refinement rounds (docs/PARTITION.md), with the
  bytes it saves.

Then every algorithm at 8 devices (search time and predicted bytes), and tofu at 16, 32, 64.
Median of --runs; the graph build is not timed. Goal: >= 10x faster than Tofu at 8 workers.
``--scale`` (issue 13): tofu published, tofu and kcuts on both models at --devices (default
8,64,256,1024), wall and CPU seconds, and whether a --time-limit cut refinement short.

    python benchmarks/bench_partition.py [--runs 3] [--devices 8,16,32,64] [--quick]
    python benchmarks/bench_partition.py --scale [--runs 3] [--devices 8,64,256,1024] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import time

import tilewise as tw
from tilewise import _core

TOFU_TABLE1 = {"wresnet-152-10": 8.3, "rnn-10-8k": 66.6}  # seconds, 8 workers
MODELS = [("wresnet-152-10", dict(batch=8)), ("rnn-10-8k", dict(batch=128))]


def timed_plans(graph, devices: int, algorithm: str, runs: int, **options):
    times, plan = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        plan = _core.partition(graph._g, devices, algorithm, **options)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), plan


def scale(args) -> None:
    """Tofu Table 1 beside the published recursion, tofu and kcuts from 8 to 1024 devices."""
    runs = args.runs
    scales = [int(d) for d in (args.devices or "8,64,256,1024").split(",")]
    limit = {"time_limit": args.time_limit} if args.time_limit else {}
    out = {"machine": platform.processor() or platform.machine(), "runs": runs, "threads": args.threads,
           "time_limit": args.time_limit, "rows": []}
    print(f"{'model':16s} {'algorithm':16s} {'devices':>7s} {'wall s':>8s} {'cpu s':>8s} {'Tofu T1 s':>9s} "
          f"{'GB moved':>10s} {'timed out':>9s}")
    for name, kwargs in MODELS:
        graph = tw.models.get(name, **kwargs)
        for label, algorithm, options in [("tofu, published", "tofu", dict(refine_rounds=0)),
                                          ("tofu", "tofu", limit), ("kcuts", "kcuts", limit)]:
            for devices in scales:
                walls, cpus, plan = [], [], None
                for _ in range(runs):
                    t0, c0 = time.perf_counter(), time.process_time()
                    plan = _core.partition(graph._g, devices, algorithm, threads=args.threads, **options)
                    walls.append(time.perf_counter() - t0)
                    cpus.append(time.process_time() - c0)
                wall, cpu = statistics.median(walls), statistics.median(cpus)
                paper = TOFU_TABLE1[name] if devices == 8 else None
                print(f"{name:16s} {label:16s} {devices:7d} {wall:8.2f} {cpu:8.2f} {paper or '':>9} "
                      f"{plan.comm_bytes / 1e9:10.2f} {str(plan.timed_out):>9s}", flush=True)
                out["rows"].append(dict(model=name, algorithm=label, devices=devices, seconds=wall, cpu_seconds=cpu,
                                        paper_seconds=paper, comm_bytes=plan.comm_bytes,
                                        unrefined_bytes=plan.unrefined_bytes, timed_out=plan.timed_out))
    path = pathlib.Path(__file__).parent / "out" / "partition_scale.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--devices", default=None, help="default 8,16,32,64 (--scale: 8,64,256,1024)")
    ap.add_argument("--quick", action="store_true", help="8 devices only, 1 run, tofu only")
    ap.add_argument("--scale", action="store_true", help="issue 13's table: 8 to 1024 devices")
    ap.add_argument("--time-limit", type=float, default=0.0, help="--scale: time_limit of tofu and kcuts")
    ap.add_argument("--threads", type=int, default=2, help="--scale: search threads")
    args = ap.parse_args()
    if args.scale:
        scale(args)
        return
    args.devices = args.devices or "8,16,32,64"
    runs = 1 if args.quick else args.runs
    scales = [8] if args.quick else [int(d) for d in args.devices.split(",")]
    out = {"machine": platform.processor() or platform.machine(), "runs": runs, "rows": []}
    print(f"{'model':16s} {'algorithm':16s} {'devices':>7s} {'search s':>9s} {'paper s':>8s} "
          f"{'paper/ours':>10s} {'GB moved':>9s} {'steps (GB)':s}")
    for name, kwargs in MODELS:
        graph = tw.models.get(name, **kwargs)
        rows = [("tofu, published", "tofu", dict(refine_rounds=0)), ("tofu", "tofu", {})]
        if not args.quick:
            rows += [(a, a, {}) for a in _core.partition_algorithms() if a not in ("tofu", "brute_force")]
        for label, algorithm, options in rows:
            for devices in scales if algorithm == "tofu" else [8]:
                seconds, plan = timed_plans(graph, devices, algorithm, runs, **options)
                paper = TOFU_TABLE1[name] if devices == 8 and algorithm == "tofu" else None
                ratio = f"{paper / seconds:10.1f}" if paper else f"{'':10s}"
                steps = " ".join(f"{s / 1e9:.2f}" for s in plan.step_bytes)
                print(f"{name:16s} {label:16s} {devices:7d} {seconds:9.3f} {paper or '':>8} {ratio} "
                      f"{plan.comm_bytes / 1e9:9.2f} {steps}", flush=True)
                out["rows"].append(dict(model=name, algorithm=label, devices=devices, seconds=seconds,
                                        paper_seconds=paper, comm_bytes=plan.comm_bytes,
                                        unrefined_bytes=plan.unrefined_bytes, step_bytes=list(plan.step_bytes)))
    path = pathlib.Path(__file__).parent / "out" / "partition.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

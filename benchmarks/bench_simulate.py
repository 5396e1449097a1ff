"""How fast the discrete-event simulator runs (issue 12: it is the fitness of the genetic search).

1. The core (cpp/sim/simulator.cpp through tilewise._core, columns built beforehand) on 100k tasks,
   8 streams, 1-3 random dependencies per task on earlier tasks, half of the tasks doing work on one
   of 4 shared resources (the issue's workload), and on a 1M-task chain (goal > 1M tasks/s).
2. tw.simulate end to end on the 100k workload given as dicts (validation in Python included).
3. Whole training steps of zoo models (plan.predict on the TensorOpt preset at 8 devices, tofu
   plans): lowering + simulation of every device's program, per second.

Prints tasks per second (median of --runs) and writes benchmarks/out/simulate.json.

    python benchmarks/bench_simulate.py [--runs 5] [--tasks 100000]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform

import numpy as np
from _timing import median_time  # noqa: E402

import tilewise as tw
from tilewise import _core

TARGET_TASKS_PER_SECOND = 1e6
STREAMS, RESOURCES = 8, 4
CAPACITIES = {f"r{k}": 4e9 for k in range(RESOURCES)}  # 4 transfers at their max_rate of 1e9


def random_workload(n: int, seed: int = 0) -> list[dict]:
    """The issue's workload as tw.simulate's dicts."""
    rng = np.random.default_rng(seed)
    streams = rng.integers(0, STREAMS, n)
    seconds = rng.uniform(0, 1e-3, n)
    uses = rng.random(n) < 0.5
    resource = rng.integers(0, RESOURCES, n)
    work = rng.uniform(1e3, 1e6, n)
    tasks = []
    for i in range(n):
        task = {"name": f"t{i}", "stream": int(streams[i]), "seconds": float(seconds[i])}
        if i:
            task["after"] = [f"t{j}" for j in set(rng.integers(0, i, rng.integers(1, 4)).tolist())]
        if uses[i]:
            task.update(work=float(work[i]), max_rate=1e9, resources=[f"r{resource[i]}"])
        tasks.append(task)
    return tasks


def columns(tasks: list[dict]) -> dict:
    """The same tasks as _core.simulate_tasks' columns (what a C++ caller builds directly)."""
    index = {t["name"]: i for i, t in enumerate(tasks)}
    n = len(tasks)
    res = [[int(r[1:]) for r in t.get("resources", [])] for t in tasks]
    after = [[index[a] for a in t.get("after", [])] for t in tasks]
    return dict(
        names=[t["name"] for t in tasks], stream=np.array([t["stream"] for t in tasks], dtype=np.int32),
        seconds=np.array([t["seconds"] for t in tasks]), work=np.array([t.get("work", 0.0) for t in tasks]),
        max_rate=np.array([t.get("max_rate", 0.0) for t in tasks]),
        resource_offsets=np.cumsum([0] + [len(r) for r in res], dtype=np.int64),
        resource_indices=np.array([x for r in res for x in r], dtype=np.int32),
        after_offsets=np.cumsum([0] + [len(a) for a in after], dtype=np.int64),
        after_indices=np.array([x for a in after for x in a], dtype=np.int32),
        memory=np.zeros(n, dtype=np.int64), memory_pool=np.full(n, -1, dtype=np.int32), streams=STREAMS,
        resource_names=list(CAPACITIES), capacities=list(CAPACITIES.values()))


def chain_columns(n: int) -> dict:
    return dict(
        names=[""] * n, stream=np.zeros(n, dtype=np.int32), seconds=np.full(n, 1e-6), work=np.zeros(n),
        max_rate=np.zeros(n), resource_offsets=np.zeros(n + 1, dtype=np.int64),
        resource_indices=np.zeros(0, dtype=np.int32), after_offsets=np.zeros(n + 1, dtype=np.int64),
        after_indices=np.zeros(0, dtype=np.int32), memory=np.zeros(n, dtype=np.int64),
        memory_pool=np.full(n, -1, dtype=np.int32), streams=1, resource_names=[], capacities=[])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=100_000)
    args = parser.parse_args(argv)
    tasks = random_workload(args.tasks)
    cols = columns(tasks)
    chain = chain_columns(10 * args.tasks)
    runs = args.runs
    rows = [
        (f"core, {args.tasks:,} random tasks", args.tasks, median_time(lambda: _core.simulate_tasks(**cols), runs)),
        (f"core, {10 * args.tasks:,}-task chain", 10 * args.tasks,
         median_time(lambda: _core.simulate_tasks(**chain), runs)),
        (f"tw.simulate, {args.tasks:,} dicts", args.tasks,
         median_time(lambda: tw.simulate(tasks, resources=CAPACITIES), runs)),
    ]
    cluster = tw.Cluster.preset("tensoropt").with_devices(8)
    for label, g in (("resnet-50 b32", tw.models.resnet(depth=50, batch=32)),
                     ("rnn-4-1k", tw.models.get("rnn-4-1k")),
                     ("transformer-6-512", tw.models.transformer(layers=6, hidden=512, heads=8, seq=128, batch=8))):
        plan = tw.partition(g, devices=8, algorithm="tofu")
        keep = [t.id for t in g.results().values()]
        pred = _core.simulate_plan(g._g, plan._core, cluster._core, keep, [], [], keep_tasks=True)
        n = len(pred.tasks())
        rows.append((f"predict {label} @8 ({n:,} tasks)", n, median_time(
            lambda g=g, plan=plan, keep=keep: _core.simulate_plan(g._g, plan._core, cluster._core, keep, [], [],
                                                                  keep_tasks=False),
            runs)))
    print(f"simulator: {STREAMS} streams, {RESOURCES} shared resources; median of {args.runs} runs")
    print(f"{'':44}{'seconds':>10}{'tasks/s':>14}{'runs/s':>9}{'goal':>10}")
    for name, n, t in rows:
        print(f"{name:44}{t:10.4f}{n / t:14,.0f}{1 / t:9.1f}{TARGET_TASKS_PER_SECOND:10.0e}")
    out = pathlib.Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "simulate.json").write_text(json.dumps({
        "rows": [{"name": name, "tasks": n, "seconds": t, "tasks_per_second": n / t} for name, n, t in rows],
        "target_tasks_per_second": TARGET_TASKS_PER_SECOND, "runs": args.runs, "machine": platform.machine(),
        "python": platform.python_version(),
    }, indent=2))


if __name__ == "__main__":
    main()

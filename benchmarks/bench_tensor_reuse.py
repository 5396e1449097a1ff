"""Tensor reuse (TensorOpt §4.2 keep-both): what ``tw.frontier(..., tensor_reuse=True)`` gains on zoo models.

TensorOpt gives no number for keep-both alone; §5.1 says strategies "tend to keep both copies" past the
turning point. Per row (16 devices of ``tensoropt``, one thread, CPU seconds), the frontier without and
with reuse under the same options: candidates (tensor, consumer), points, search seconds, the time the
reuse frontier saves at equal memory (for each point without reuse: its time against the reuse
frontier's least time within its memory; median, max), the points that keep a copy and which copies.
For those points, the copies alone: the same strategy with every copy left out (the consumers read
the tensor), costed by the same model: the time the copies save and the memory they cost (median).
With the heuristic both searches fix classes (their fixes can differ), so a small gain can be the
heuristic's and not reuse's; the copies-alone column is exact.

    python benchmarks/bench_tensor_reuse.py [--quick] [--rows 0,2]

Writes benchmarks/out/tensor_reuse.json.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import statistics
import time

import tilewise as tw
from tilewise.graph.reuse import reuse_candidates

MIB = 2**20
APPROX = {"heuristic": True, "max_table": 1 << 14, "memory_bucket": 16 * MIB}
ROWS = [  # (zoo name, batch, options)
    ("mlp-4-1024", 64, {}),
    ("rnn-1-1k", 64, {}),
    ("rnn-2-4k", 256, {"coarsen": True}),
    ("transformer-1-256-4", 32, APPROX),
    ("transformer-2-1024-16", 256, APPROX),
    ("wresnet-50-2", 256, APPROX),
    # TensorOpt's data loading (§4.2): inputs and labels arrive split along the batch; a consumer that
    # wants another layout re-fetches them in backward unless it keeps its copy.
    ("mlp-4-1024", 64, {"batch_split_inputs": True}),
    ("rnn-1-1k", 64, {"batch_split_inputs": True}),
    ("rnn-2-4k", 256, {"coarsen": True, "batch_split_inputs": True}),
    ("transformer-1-256-4", 32, {**APPROX, "batch_split_inputs": True}),
    ("wresnet-50-2", 256, {**APPROX, "batch_split_inputs": True}),
]
QUICK = [0, 1, 5, 6]


def run_row(name: str, batch: int, options: dict) -> dict:
    g = tw.models.get(name, batch=batch)
    t0 = time.process_time()
    plain = tw.frontier(g, "tensoropt", devices=16, baselines=False, threads=1, **options)
    t1 = time.process_time()
    reuse = tw.frontier(g, "tensoropt", devices=16, baselines=False, threads=1, tensor_reuse=True, **options)
    t2 = time.process_time()
    gains = []
    for p in plain.points:
        fit = [q.time for q in reuse.points if q.memory <= p.memory]
        gains.append(1 - min(fit) / p.time if fit else float("-inf"))
    gains.sort()
    kept = collections.Counter()
    saved, cost = [], []
    for p in reuse.points:
        copies = reuse.kept_copies(p)
        if not copies:
            continue
        kept.update(f"{t}@{c}" for t, c in copies)
        alone = reuse.evaluate(reuse.without_copies(p))
        saved.append(1 - p.time / alone.time)
        cost.append(p.memory / alone.memory - 1)
    return {
        "model": name, "batch": batch, "options": options, "candidates": len(reuse_candidates(g)),
        "points": [len(plain.points), len(reuse.points)], "cpu_s": [t1 - t0, t2 - t1],
        "heuristic_eliminations": [plain.stats.heuristic_eliminations, reuse.stats.heuristic_eliminations],
        "gain_median": gains[len(gains) // 2], "gain_max": gains[-1], "points_keeping": len(saved),
        "copies": dict(kept), "copies_save_time_median": statistics.median(saved) if saved else None,
        "copies_cost_memory_median": statistics.median(cost) if cost else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="rows " + ", ".join(map(str, QUICK)))
    ap.add_argument("--rows", help="comma-separated row numbers (0-based)")
    args = ap.parse_args()
    picks = [int(i) for i in args.rows.split(",")] if args.rows else QUICK if args.quick else range(len(ROWS))
    print("| zoo model | options | candidates | points (plain / reuse) | search CPU s (plain / reuse) | heur. fixes | "
          "time saved at equal memory (median, max) | points keeping copies | copies kept | copies alone: time saved, "
          "memory added (median) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    results = []
    for i in picks:
        name, batch, options = ROWS[i]
        r = run_row(name, batch, options)
        results.append(r)
        opts = ", ".join(f"{k}={v}" for k, v in options.items()) or "exact"
        alone = ("" if r["copies_save_time_median"] is None else
                 f"{100 * r['copies_save_time_median']:.2f} %, +{100 * r['copies_cost_memory_median']:.2f} %")
        copies = ", ".join(f"{k} ({n})" for k, n in r["copies"].items()) or "none"
        print(f"| {name} b{batch} | {opts} | {r['candidates']} | {r['points'][0]} / {r['points'][1]} | "
              f"{r['cpu_s'][0]:.2f} / {r['cpu_s'][1]:.2f} | {r['heuristic_eliminations'][0]} / "
              f"{r['heuristic_eliminations'][1]} | {100 * r['gain_median']:.2f} %, {100 * r['gain_max']:.2f} % | "
              f"{r['points_keeping']} | {copies} | {alone} |", flush=True)
    out = pathlib.Path(__file__).with_name("out")
    out.mkdir(exist_ok=True)
    (out / "tensor_reuse.json").write_text(json.dumps({"rows": results}, indent=1))


if __name__ == "__main__":
    main()

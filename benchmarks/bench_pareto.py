"""Frontier search (tw.pareto.solve) on random problems of TensorOpt Table 3's sizes, and Lemma 2.

A SYNTHETIC ANALOGUE, not a reproduction: TensorOpt Table 3 times FT on the operator graphs of
WideResNet, RNN and Transformer over 16 GPUs (48-core host): FT-LDP 1,292 s / 0.28 s / 201 s,
FT-Elimination 19,666 / 1.78 / 3,030 s, FT-LDP without threads 17,432 / 0.40 / 1,535 s. The paper
gives neither n nor K per model. Here: random problems with n nodes of K configurations, each
(time, memory) uniform in [0, 1) and independent (Lemma 2's random order), edge times uniform in
[0, 0.1), edge memory 0 (Eq. 2), on this machine's cores:

- chain: o_0 - o_1 - ... (what FT-LDP sweeps after elimination);
- residual: a chain plus a skip edge o_i - o_{i+2} every second node (ResNet blocks);
- hub: a chain plus one node joined to every fourth node (BERT's attention mask, which made
  TensorOpt fall back to heuristic elimination twice): exact, by conditioning on the hub, and
  with the paper's heuristic (the loss it causes is reported).

Then Lemma 2: Algorithm 1 on K random-order tuples keeps H_K of them on average; and the sizes of
the cumulative frontiers CF(o_i, .) along a chain, beside the H_{K^i} ~ i ln K the lemma would
give if cumulative sets were in random order (they are not: sums correlate).

    python benchmarks/bench_pareto.py [--quick] [--runs 1]

Writes benchmarks/out/pareto.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import platform
import statistics
import time

import numpy as np

import tilewise as tw

TABLE3 = {  # seconds, 16 GPUs, 48 cores
    "WideResNet": {"FT-LDP": 1292, "FT-Elimination": 19666, "FT-LDP no threads": 17432},
    "RNN": {"FT-LDP": 0.28, "FT-Elimination": 1.78, "FT-LDP no threads": 0.40},
    "Transformer": {"FT-LDP": 201, "FT-Elimination": 3030, "FT-LDP no threads": 1535},
}


def problem(shape: str, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    nodes = {f"o{i}": rng.random((k, 2)) for i in range(n)}
    edges = {(f"o{i}", f"o{i + 1}"): rng.random((k, k)) * 0.1 for i in range(n - 1)}
    if shape == "residual":
        for i in range(0, n - 2, 2):
            edges[(f"o{i}", f"o{i + 2}")] = rng.random((k, k)) * 0.1
    elif shape == "hub":
        nodes["hub"] = rng.random((k, 2))
        for i in range(0, n, 4):
            edges[("hub", f"o{i}")] = rng.random((k, k)) * 0.1
    return nodes, edges


def heuristic_loss(exact, approx) -> tuple[float, float]:
    """(largest relative time increase at an exact point's memory budget, among budgets the
    approximation meets; relative increase of the least memory)."""
    worst = 0.0
    for e in exact.points:
        fits = [a.time for a in approx.points if a.memory <= e.memory]
        if fits:
            worst = max(worst, min(fits) / e.time - 1)
    return worst, approx.points[0].memory / exact.points[0].memory - 1


def timed(runs: int, fn):
    times, out = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="skip the 300-node bucketed rows and 1-thread repeats")
    args = parser.parse_args(argv)
    cores = os.cpu_count()
    cases = [  # (analogue, shape, n, K, options)
        ("RNN", "chain", 50, 10, {}),
        ("RNN", "chain", 50, 10, {"threads": 1}),
        ("Transformer", "hub", 100, 30, {}),
        ("Transformer", "hub", 100, 30, {"max_table": 30}),
        ("Transformer", "hub", 100, 30, {"max_table": 30, "heuristic": True}),
        ("WideResNet", "residual", 100, 30, {}),
        ("WideResNet", "chain", 300, 30, {}),
        ("WideResNet", "chain", 300, 30, {"threads": 1}),
        ("WideResNet", "chain", 300, 100, {"memory_bucket": 0.01}),
        ("WideResNet", "residual", 300, 30, {"memory_bucket": 0.01}),
    ]
    if args.quick:
        cases = [c for c in cases if c[2] < 300 and "threads" not in c[4]]
    rows, exact_by_problem = [], {}
    print("SYNTHETIC ANALOGUE of TensorOpt Table 3 (random costs; the paper's graphs are not these problems)")
    print(f"this machine: {cores} cores; TensorOpt: 48 cores. Median of {args.runs} run(s).\n")
    head = (f"{'analogue':12}{'graph':9}{'n':>4}{'K':>5}  {'options':28}{'seconds':>9}{'points':>8}{'largest CF':>11}"
            f"{'table':>8}{'heur.':>6}{'cond.':>6}   {'Table 3 FT-LDP s (no threads; FT-Elim.)':>40}")
    print(head)
    for analogue, shape, n, k, options in cases:
        nodes, edges = problem(shape, n, k)
        seconds, f = timed(args.runs, lambda: tw.pareto.solve(nodes, edges, **options))
        key = (shape, n, k)
        if not options:
            exact_by_problem[key] = f
        row = {"analogue": analogue, "graph": shape, "n": n, "K": k, "options": options, "seconds": seconds,
               "search_seconds": f.stats.seconds, "points": len(f), "largest_frontier": f.stats.largest_frontier,
               "largest_table": f.stats.largest_table, "heuristic_eliminations": f.stats.heuristic_eliminations,
               "conditioned": list(f.stats.conditioned), "subproblems": f.stats.subproblems,
               "memory_error_bound": f.stats.memory_error_bound, "table3": TABLE3[analogue]}
        note = ""
        if options.get("heuristic") and key in exact_by_problem:
            row["time_loss"], row["memory_loss"] = heuristic_loss(exact_by_problem[key], f)
            note = f"  loss: time +{row['time_loss']:.1%}, least memory +{row['memory_loss']:.1%}"
        if options.get("memory_bucket"):
            note = (f"  memory within {f.stats.memory_error_bound:.3g} of exact "
                    f"(range {f.points[0].memory:.3g}..{f.points[-1].memory:.3g})")
        rows.append(row)
        t3 = TABLE3[analogue]
        opts = ", ".join(f"{a}={b}" for a, b in options.items()) or "exact, all cores"
        print(f"{analogue:12}{shape:9}{n:4d}{k:5d}  {opts:28}{seconds:9.2f}{len(f):8d}{f.stats.largest_frontier:11d}"
              f"{f.stats.largest_table:8d}{f.stats.heuristic_eliminations:6d}{len(f.stats.conditioned):6d}   "
              f"{t3['FT-LDP']:>10,} ({t3['FT-LDP no threads']:,}; {t3['FT-Elimination']:,}){note}", flush=True)

    print("\nLemma 2: Algorithm 1 on K random-order tuples keeps H_K on average")
    lemma = []
    rng = np.random.default_rng(2)
    for k, sets in ((10, 4000), (100, 4000), (1000, 2000), (10000, 400)):
        sizes = [len(tw.pareto.reduce(rng.random((k, 2)))) for _ in range(sets)]
        h = sum(1 / i for i in range(1, k + 1))
        lemma.append({"K": k, "sets": sets, "mean": float(np.mean(sizes)), "H_K": h,
                      "stderr": float(np.std(sizes) / math.sqrt(sets))})
        print(f"  K={k:6d}: mean {np.mean(sizes):6.3f} +- {lemma[-1]['stderr']:.3f} over {sets} sets, H_K = {h:6.3f}")

    cumulative = []
    chain = exact_by_problem.get(("chain", 300, 30)) or exact_by_problem.get(("chain", 50, 10))
    if chain is not None:
        k = 30 if ("chain", 300, 30) in exact_by_problem else 10
        print(f"\nCumulative frontiers CF(o_i, .) along a random chain (K = {k}): largest entry beside "
              "H_{K^i} ~ i ln K + 0.58")
        steps = chain.stats.eliminations
        for i in sorted({1, 2, 5, 10, 30, 100, 200, len(steps) - 1} & set(range(1, len(steps)))):
            e = steps[i - 1]
            h = i * math.log(k) + 0.5772
            cumulative.append({"i": i, "largest": e.max_points, "mean": e.total_points / e.entries, "H_K^i": h})
            print(f"  i={i:4d}: largest {e.max_points:7d}, mean {e.total_points / e.entries:9.1f}  (H ~ {h:7.1f})")

    out = pathlib.Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "pareto.json").write_text(json.dumps({
        "note": "synthetic analogue of TensorOpt Table 3: random problems, not the paper's graphs",
        "rows": rows, "lemma2": lemma, "cumulative": cumulative, "runs": args.runs, "cores": cores,
        "machine": platform.machine(), "python": platform.python_version()}, indent=1))


if __name__ == "__main__":
    main()

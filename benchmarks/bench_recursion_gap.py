"""How often Tofu's recursion (as published) misses the brute-force optimum of the same cost model,
and whether our refinement closes the gap (docs/PARTITION.md, "Refinement").

Random forward graphs of 1-4 two-dimensional ops (matmul family, transpose, element-wise; extents
4 or 8) at 4 and 8 devices, as in tests/python/test_partition_search.py. Tofu's paper claims the
recursion is optimal (Theorem 1); no figure to compare with beyond that claim (0 % misses).

    python benchmarks/bench_recursion_gap.py [--graphs 150] [--seeds 0,7]
"""

from __future__ import annotations

import argparse
import random

import tdl_ops as T
import tilewise as tw
from tilewise import _core

KINDS = ["matmul", "matmul_tn", "matmul_nt", "transpose", "add", "mul", "relu"]


def random_graph(rng: random.Random, max_ops: int = 4) -> tw.Graph:
    g = tw.Graph("random")
    tensors = [g.input("x", (rng.choice([4, 8]), rng.choice([4, 8])))]
    for n in range(rng.randint(1, max_ops)):
        kind, a = rng.choice(KINDS), rng.choice(tensors)
        m, k = a.shape
        if kind in ("relu", "transpose"):
            args = [a]
        elif kind in ("add", "mul"):
            same = [t for t in tensors if t.shape == a.shape and t != a]
            args = [a, rng.choice(same) if same and rng.random() < 0.5 else g.parameter(f"p{n}", a.shape)]
        else:
            other = rng.choice([4, 8])
            need = {"matmul": (k, other), "matmul_tn": (m, other), "matmul_nt": (other, k)}[kind]
            fits = [t for t in tensors if t.shape == need]
            args = [a, rng.choice(fits) if fits and rng.random() < 0.5 else g.parameter(f"w{n}", need)]
        tensors.append(getattr(T, kind)(*args))
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", type=int, default=150)
    ap.add_argument("--seeds", default="0,7")
    args = ap.parse_args()
    print(f"{'seed':>4s} {'devices':>7s} {'cases':>6s} {'published misses':>16s} {'worst ratio':>11s} "
          f"{'refined misses':>14s}")
    for seed in (int(s) for s in args.seeds.split(",")):
        rng = random.Random(seed)
        graphs = [random_graph(rng) for _ in range(args.graphs)]
        for devices in (4, 8):
            cases = published_misses = refined_misses = 0
            worst = 1.0
            for g in graphs:
                try:
                    best = _core.partition(g._g, devices, "brute_force").comm_bytes
                except _core.SearchTooLarge:
                    continue
                cases += 1
                published = _core.partition(g._g, devices, "tofu", refine_rounds=0).comm_bytes
                refined = _core.partition(g._g, devices, "tofu").comm_bytes
                if published != best:
                    published_misses += 1
                    worst = max(worst, published / best)
                refined_misses += refined != best
            print(f"{seed:4d} {devices:7d} {cases:6d} {published_misses:6d} ({published_misses / cases:5.1%}) "
                  f"{worst:11.3f} {refined_misses:14d}", flush=True)


if __name__ == "__main__":
    main()

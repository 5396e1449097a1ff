"""How long building the papers' training graphs takes, and how big they are beside the papers.

1. Time to build the training graph (forward, loss, backward, SGD updates) of WResNet-152-10
   (batch 8, Tofu Fig. 10) and RNN-10-8K (batch 128, Tofu §7.2): median of --runs, goal < 1 s.
   The forward-only build (train=False) is timed too: the difference is autodiff + optimizer.
2. Op counts beside SwapAdvisor Table 5.1 (thesis §5.2): WResNet-152-10 882, Inception-4 830,
   NasNet-25 5533, RNN-8-8K 8594, BRNN-4-8K 9034 (MXNet graphs; the thesis does not say which
   nodes it counts). Ours: forward ops and training-graph ops.
3. Total weight sizes beside Tofu Table 2 (GB): 3 x 4 bytes x parameters, in GiB (weight,
   gradient and optimizer history, as Tofu §7.1 counts them).

Prints paper figure, ours, ratio; writes benchmarks/out/graph_build.json.

    python benchmarks/bench_graph_build.py [--runs 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pathlib
import platform
import pstats
import time

from _timing import median_time  # noqa: E402

import tilewise as tw

TARGET_SECONDS = 1.0

TIMED = [  # (name, builder kwargs)
    ("wresnet-152-10", dict(batch=8)),
    ("rnn-10-8k", dict(batch=128)),
]

# SwapAdvisor Table 5.1: model -> (ops, batch of the table's row).
SWAPADVISOR_OPS = {
    "wresnet-152-10": (882, 64),
    "inception-4": (830, 64),
    "nasnet-25": (5533, 64),
    "rnn-8-8k": (8594, 256),
    "brnn-4-8k": (9034, 128),
}

# Tofu Table 2: total weight tensor sizes (GB).
TOFU_RNN = {(6, 4): 8.4, (8, 4): 11.4, (10, 4): 14.4, (6, 6): 18.6, (8, 6): 28.5, (10, 6): 32.1,
            (6, 8): 33.0, (8, 8): 45.3, (10, 8): 57.0}
TOFU_WRESNET = {(50, 4): 4.2, (101, 4): 7.8, (152, 4): 10.5, (50, 6): 9.6, (101, 6): 17.1, (152, 6): 23.4,
                (50, 8): 17.1, (101, 8): 30.6, (152, 8): 41.7, (50, 10): 26.7, (101, 10): 47.7, (152, 10): 65.1}


def profile(fn, top: int = 15) -> str:
    pr = cProfile.Profile()
    pr.enable()
    fn()
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def weight_gib(g: tw.Graph) -> float:
    return 3 * g.bytes_by_role()["parameter"] / 2**30


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each timed build")
    args = parser.parse_args(argv)
    result = {"machine": platform.platform(), "python": platform.python_version(),
              "autodiff": tw.models.has_autodiff(), "target_seconds": TARGET_SECONDS}

    print(f"== Building training graphs (median of {args.runs}; target {TARGET_SECONDS} s)")
    print(f"{'model':16s} {'train s':>8s} {'fwd s':>7s} {'ops':>6s} {'target':>7s} {'ratio':>6s}")
    timed = {}
    for name, kw in TIMED:
        tw.models.get(name, train=False, **kw)  # warm the op traces: steady-state building
        t_train = median_time(lambda: tw.models.get(name, **kw), args.runs)
        t_fwd = median_time(lambda: tw.models.get(name, train=False, **kw), args.runs)
        g = tw.models.get(name, **kw)
        timed[name] = {"batch": kw["batch"], "train_seconds": t_train, "forward_seconds": t_fwd,
                       "ops": len(g.ops), "ratio_to_target": t_train / TARGET_SECONDS}
        print(f"{name:16s} {t_train:8.3f} {t_fwd:7.3f} {len(g.ops):6d} {TARGET_SECONDS:7.1f} "
              f"{t_train / TARGET_SECONDS:6.2f}")
        if args.profile or t_train > TARGET_SECONDS:
            print(profile(lambda: tw.models.get(name, **kw)))
    result["build_time"] = timed

    print("\n== Op counts beside SwapAdvisor Table 5.1")
    print(f"{'model':16s} {'paper':>6s} {'ours fwd':>9s} {'ours train':>11s} {'train/paper':>12s} {'build s':>8s}")
    counts = {}
    for name, (paper, batch) in SWAPADVISOR_OPS.items():
        fwd = len(tw.models.get(name, batch=batch, train=False).ops)
        t0 = time.perf_counter()
        g = tw.models.get(name, batch=batch)
        secs = time.perf_counter() - t0
        ops = len(g.ops)
        counts[name] = {"paper_ops": paper, "batch": batch, "forward_ops": fwd, "training_ops": ops,
                        "ratio": ops / paper, "build_seconds": secs,
                        "phases": {p: sum(1 for o in g.ops if o.phase == p) for p in ("forward", "backward", "update")}}
        print(f"{name:16s} {paper:6d} {fwd:9d} {ops:11d} {ops / paper:12.2f} {secs:8.3f}")
    result["op_counts"] = counts

    print("\n== Total weight sizes beside Tofu Table 2 (GB = 3 x weight bytes, GiB)")
    print(f"{'model':16s} {'paper':>6s} {'ours':>7s} {'ratio':>6s}")
    sizes = {}
    for (depth, width), paper in TOFU_WRESNET.items():
        ours = weight_gib(tw.models.wresnet(depth, width, batch=1, train=False))
        sizes[f"wresnet-{depth}-{width}"] = {"paper_gb": paper, "ours_gib": ours, "ratio": ours / paper}
    for (layers, k), paper in TOFU_RNN.items():
        ours = weight_gib(tw.models.rnn(layers, k * 1024, steps=1, batch=1, train=False))
        sizes[f"rnn-{layers}-{k}k"] = {"paper_gb": paper, "ours_gib": ours, "ratio": ours / paper}
    for name, s in sizes.items():
        print(f"{name:16s} {s['paper_gb']:6.1f} {s['ours_gib']:7.2f} {s['ratio']:6.3f}")
    result["weight_sizes"] = sizes

    out = pathlib.Path(__file__).parent / "out" / "graph_build.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()

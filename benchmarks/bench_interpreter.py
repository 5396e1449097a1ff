"""Speed of the C++ reference interpreter (``op.evaluate``, ``tw.run_reference``) beside NumPy.

Cases: conv2d (data (8,16,32,32), filters (32,16,3,3), padding 1), matmul (256x256x256),
layer_norm (64x1024), softmax (64x1024), and one training step of a small MLP (forward, loss,
backward, SGD) through ``tw.run_reference``; ``--resnet`` adds a ResNet-50 training step at 32x32,
batch 2 (at most 3 runs: it took ~35 s before the compiled interpreter). Each figure is the median
of ``--runs`` runs after one warm-up run. The honest peer is each op's own NumPy reference from ``tdl_ops``
(einsum / BLAS / vectorised NumPy), run op by op over the same graph for the training steps.

"old" is the interpreter before the change: run once with ``--save-before`` on the old build to
record ``benchmarks/out/interpreter_before.json``; later runs print those figures beside the new
ones (same machine, different moments: on a shared machine compare ratios with care). Results go
to ``benchmarks/out/interpreter.json``.

    python benchmarks/bench_interpreter.py [--runs 5] [--threads 0] [--resnet] [--save-before]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np

import tdl_ops
import tilewise as tw

OUT = pathlib.Path(__file__).parent / "out"
BEFORE = OUT / "interpreter_before.json"


def _median(fn: Callable[[], object], runs: int) -> tuple[float, object]:
    result = fn()  # warm-up: traces cached, pages touched
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def _op_case(op, inputs: list[np.ndarray], attrs: dict, threads: int):
    def agreement(ours):
        return _max_rel_diff(ours, np.asarray(op.reference(*inputs, **attrs), dtype=np.float64)), op.name

    return (lambda: op.evaluate(*inputs, threads=threads, **attrs),
            lambda: np.asarray(op.reference(*inputs, **attrs), dtype=np.float64), agreement)


def _feeds(g: tw.Graph, rng: np.random.Generator) -> dict:
    feeds = {}
    for t in g.tensors:
        if t.producer is None:
            if t.role == "label":
                feeds[t.name] = np.eye(t.shape[-1])[rng.integers(0, t.shape[-1], t.shape[:-1])]
            else:
                feeds[t.name] = 0.1 * rng.standard_normal(t.shape)
    return feeds


def _reference(gop, values: dict) -> np.ndarray:
    args = [values[t.name] for t in gop.inputs]
    return np.asarray(gop.op.reference(*args, **gop.attrs), dtype=np.float64).reshape(gop.output.shape)


def _numpy_step(g: tw.Graph, feeds: dict) -> dict:
    """The graph op by op through each op's NumPy reference (the peer of tw.run_reference)."""
    values = {k: np.asarray(v, dtype=np.float64) for k, v in feeds.items()}
    for gop in g.ops:
        values[gop.output.name] = _reference(gop, values)
    return values


def _graph_case(g: tw.Graph, threads: int):
    feeds = _feeds(g, np.random.default_rng(0))

    def agreement(ours):
        # Op by op on the interpreter's own inputs: a chain of ops amplifies rounding differences
        # (batch norm over 2 values), which says nothing about the interpreter.
        return max((_max_rel_diff(ours[gop.output.name], _reference(gop, ours)), gop.type) for gop in g.ops)

    return (lambda: tw.run_reference(g, feeds, threads=threads), lambda: _numpy_step(g, feeds), agreement)


def cases(threads: int, resnet: bool) -> dict[str, tuple[Callable, Callable, Callable]]:
    rng = np.random.default_rng(0)
    c = {
        "conv2d 8x16x32x32 * 32x16x3x3": _op_case(
            tdl_ops.conv2d, [rng.standard_normal((8, 16, 32, 32)), rng.standard_normal((32, 16, 3, 3))],
            {"padding": 1}, threads),
        "matmul 256x256x256": _op_case(
            tdl_ops.matmul, [rng.standard_normal((256, 256)), rng.standard_normal((256, 256))], {}, threads),
        "layer_norm 64x1024": _op_case(
            tdl_ops.layer_norm, [rng.standard_normal((64, 1024)), rng.standard_normal(1024),
                                 rng.standard_normal(1024)], {}, threads),
        "softmax 64x1024": _op_case(tdl_ops.softmax, [rng.standard_normal((64, 1024))], {}, threads),
        "mlp-3-256 train step, batch 32": _graph_case(
            tw.models.mlp(layers=3, hidden=256, batch=32, classes=10), threads),
    }
    if resnet:
        c["resnet-50 train step, 32x32, batch 2"] = _graph_case(
            tw.models.resnet(50, batch=2, image=32, classes=10), threads)
    return c


def _max_rel_diff(a, b) -> float:
    if isinstance(a, dict):
        return max((_max_rel_diff(a[k], b[k]) for k in b), default=0.0)
    a, b = np.asarray(a), np.asarray(b)
    scale = max(float(np.max(np.abs(b), initial=0.0)), 1e-300)
    return float(np.max(np.abs(a - b), initial=0.0)) / scale


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="interpreter threads (0: all cores)")
    parser.add_argument("--resnet", action="store_true", help="add a ResNet-50 training step (one run)")
    parser.add_argument("--save-before", action="store_true",
                        help=f"record this build's figures as the old ones in {BEFORE.name}")
    args = parser.parse_args(argv)
    before = json.loads(BEFORE.read_text())["seconds"] if BEFORE.exists() and not args.save_before else {}
    rows = {}
    for name, (ours, peer, agreement) in cases(args.threads, args.resnet).items():
        runs = min(args.runs, 3) if name.startswith("resnet") else args.runs
        t_ours, r_ours = _median(ours, runs)
        t_peer, _ = _median(peer, runs)
        diff, worst_op = agreement(r_ours)
        rows[name] = {"interpreter_s": t_ours, "numpy_s": t_peer, "old_interpreter_s": before.get(name),
                      "max_rel_diff_vs_numpy": diff, "worst_op": worst_op, "runs": runs}
        print(f"{name}: {t_ours:.4f} s", flush=True)
    OUT.mkdir(exist_ok=True)
    if args.save_before:
        BEFORE.write_text(json.dumps({"seconds": {k: r["interpreter_s"] for k, r in rows.items()},
                                      "machine": platform.machine(), "threads": args.threads}, indent=2))
        print(f"recorded as the old interpreter in {BEFORE}")
        return
    print(f"\nreference interpreter (threads={args.threads or 'all'}) beside NumPy, median of {args.runs}")
    print(f"{'case':38}{'old (s)':>10}{'new (s)':>10}{'old/new':>9}{'NumPy (s)':>11}{'new/NumPy':>11}"
          f"{'rel diff':>10}")
    for name, r in rows.items():
        old = r["old_interpreter_s"]
        r["speedup_vs_old"] = old / r["interpreter_s"] if old else None
        r["slowdown_vs_numpy"] = r["interpreter_s"] / r["numpy_s"]
        old_s = f"{old:10.3f}" if old else f"{'-':>10}"
        sp = f"{r['speedup_vs_old']:9.1f}" if old else f"{'-':>9}"
        print(f"{name:38}{old_s}{r['interpreter_s']:10.4f}{sp}{r['numpy_s']:11.4f}"
              f"{r['slowdown_vs_numpy']:11.1f}{r['max_rel_diff_vs_numpy']:10.1e}")
    print("rel diff: largest max|ours - NumPy| / max|NumPy| over the outputs (training steps: op by op, on the\n"
          "interpreter's inputs)")
    for name, r in rows.items():
        if r["max_rel_diff_vs_numpy"] > 1e-9:
            print(f"  {name}: {r['worst_op']} differs from its NumPy reference by {r['max_rel_diff_vs_numpy']:.2g}")
    (OUT / "interpreter.json").write_text(json.dumps({
        "cases": rows, "runs": args.runs, "threads": args.threads, "machine": platform.machine(),
        "python": platform.python_version(), "numpy": np.__version__,
    }, indent=2))


if __name__ == "__main__":
    main()

"""Partitioned training on CPU devices: speed-up of 2 devices over 1, predicted vs measured step
time, and our single-device step beside PyTorch's on the same model.

Issue 5 goals on this 2-core machine: >= 1.8x for a GEMM-heavy MLP, >= 1.6x for a small Wide
ResNet. A device is one core: a worker thread whose kernels (BLAS included) run on it alone.
PyTorch gets one thread too (torch.set_num_threads(1)): the peer of one device.

Step-time prediction (approximate, stated plainly): calibrated on the 1-device run of the same
model (FLOP rate = total FLOPs / its step time), predicted k-device time = the busiest device's
FLOPs / that rate + its received bytes / the measured copy bandwidth. Median of --runs steps
after one warm-up step; the 1-device and 2-device steps alternate (1, 2, 1, 2, ...), so a shared,
noisy machine slows both alike. Bytes sent per device are checked against the plan's prediction.

    python benchmarks/bench_runtime.py [--runs 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time

import numpy as np

import tilewise as tw

GOALS = {"mlp": 1.8, "wresnet": 1.6}
ALGORITHMS = ("tofu", "kcuts", "equal_chop")


def models(quick: bool):
    yield "mlp", "mlp-4-2048 batch 512", tw.models.mlp(layers=4, hidden=2048 if not quick else 512,
                                                       batch=512 if not quick else 128)
    yield "wresnet", "WResNet-50-2 batch 8, 32x32", tw.models.wresnet(depth=50, width=2, batch=8, image=32,
                                                                       classes=10)


def feeds(g, rng):
    return {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in g.tensors
            if t.producer is None and t.role in ("input", "label", "constant")}


def compiled(g, devices: int, algorithm: str = "tofu"):
    plan = tw.partition(g, devices=devices, algorithm=algorithm)
    exe = tw.compile(g, plan).initialize(0)
    exe.step(feeds(g, np.random.default_rng(0)))  # warm-up: plans the arenas
    return plan, exe


def alternate(exes, g, runs: int) -> list[float]:
    """Median step time of each executable, their steps interleaved."""
    rng = np.random.default_rng(0)
    times = [[] for _ in exes]
    for _ in range(runs):
        f = feeds(g, rng)
        for exe, ts in zip(exes, times, strict=True):
            t0 = time.perf_counter()
            exe.step(f)
            ts.append(time.perf_counter() - t0)
    return [statistics.median(ts) for ts in times]


def run(g, devices: int, runs: int, algorithm: str = "tofu"):
    plan, exe = compiled(g, devices, algorithm)
    (t,) = alternate([exe], g, runs)
    return t, plan, exe.stats


def copy_bandwidth() -> float:
    a = np.ones(32 * 2**20 // 4, np.float32)
    b = np.empty_like(a)
    t0 = time.perf_counter()
    for _ in range(5):
        np.copyto(b, a)
    return 5 * a.nbytes / (time.perf_counter() - t0)


def torch_mlp_step(hidden: int, batch: int, layers: int, runs: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    torch.set_num_threads(1)
    mods = []
    for i in range(layers):
        mods.append(torch.nn.Linear(hidden, hidden))
        if i < layers - 1:
            mods.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*mods)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, hidden), torch.randn(batch, hidden)
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if i:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    bandwidth = copy_bandwidth()
    out = {"copy_bandwidth": bandwidth, "rows": []}
    print(f"copy bandwidth {bandwidth / 1e9:.1f} GB/s")
    print(f"{'model, algorithm':44s} {'1 dev s':>8s} {'2 dev s':>8s} {'speed-up':>8s} {'goal':>5s} "
          f"{'predicted 2 dev s':>17s} {'error':>6s} {'MB moved':>9s} {'native ops':>10s}")
    for key, label, g in models(args.quick):
        plan1, exe1 = compiled(g, 1)
        for algorithm in ALGORITHMS:
            plan2, exe2 = compiled(g, 2, algorithm)
            t1, t2 = alternate([exe1, exe2], g, args.runs)
            rate = sum(plan1.flops_per_device) / t1
            s2 = exe2.stats
            assert s2.bytes_sent_per_device == s2.predicted_bytes_sent_per_device, s2.summary()
            predicted = max(f / rate + b / bandwidth for f, b in zip(plan2.flops_per_device, s2.bytes_per_device,
                                                                     strict=True))
            error = (predicted - t2) / t2
            name = f"{label}, {algorithm}"
            print(f"{name:44s} {t1:8.3f} {t2:8.3f} {t1 / t2:8.2f} {GOALS[key]:5.1f} {predicted:17.3f} {error:6.1%} "
                  f"{s2.bytes_moved / 1e6:9.1f} {s2.native_ops:5d}/{s2.native_ops + s2.interpreted_ops}", flush=True)
            out["rows"].append(dict(model=label, algorithm=algorithm, one=t1, two=t2, speedup=t1 / t2,
                                    goal=GOALS[key], predicted=predicted, error=error, bytes=s2.bytes_moved,
                                    predicted_bytes=plan2.comm_bytes, memory_error=s2.memory_error,
                                    bytes_sent_per_device=s2.bytes_sent_per_device,
                                    step_seconds_per_device=s2.step_seconds_per_device,
                                    message_buffer_bytes=s2.message_buffer_bytes))
    hidden, batch = (2048, 512) if not args.quick else (512, 128)
    torch_t = torch_mlp_step(hidden, batch, 4, args.runs)
    if torch_t is not None:
        g = tw.models.mlp(layers=4, hidden=hidden, batch=batch)
        ours, _, _ = run(g, 1, args.runs)
        print(f"single device, mlp-4-{hidden} batch {batch}: ours {ours:.3f} s, PyTorch CPU {torch_t:.3f} s, "
              f"ratio (PyTorch/ours) {torch_t / ours:.2f}")
        out["torch"] = dict(ours=ours, torch=torch_t)
    path = pathlib.Path(__file__).parent / "out" / "runtime.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""Swapped execution on this machine (issue 17; SwapAdvisor §4.3): measured step vs simulated step.

For each model: the unswapped one-device step (its peak memory is what the graph "needs"), then
SwapAdvisor's search on this machine's op times (``tw.swap_plan(graph, "this-machine")``) for a device
with a third of that memory (or the least memory any pool works in, when more), the plan run with
``tw.compile(graph, plan)``: median step over ``--steps`` after 3 warm-up steps (swapped and
unswapped steps alternate, so that both see the same load on a shared machine), beside the swapped
program simulated (``exe.predict()``) with the calibrated kernel model and with the graph's own op
times (``tw.measure_ops`` in 3 rounds between the steps, per op the median; what remains then is
the swap modelling and the noise). Also: the pool, the most bytes of tensors in it at once, bytes
swapped (measured and the plan's). "overhead": the swapped step over the unswapped one, measured and
simulated (a ratio, less sensitive to the machine's load than either time). Writes benchmarks/out/swap_exec.json.

    python benchmarks/bench_swap_exec.py [--steps 9] [--time-limit 20] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics

import tilewise as tw
from tilewise.graph.feeds import example_feeds
from tilewise.plan.plan import Plan
from tilewise.plan.swapping import swap_problem

MODELS = {
    "mlp-4-1024 (batch 128)": lambda: tw.models.mlp(layers=4, hidden=1024, batch=128),
    "transformer-2-256 (seq 64, batch 8, vocab 1000)":
        lambda: tw.models.transformer(layers=2, hidden=256, heads=4, seq=64, batch=8, vocab=1000),
    "rnn-2-512 (8 steps, batch 32)": lambda: tw.models.rnn(layers=2, hidden=512, steps=8, batch=32, in_features=256),
}


def run(name, build, steps: int, time_limit: float, fraction: float, rounds: int = 3) -> dict:
    g = build()
    feeds = example_feeds(g, 0)
    plain = tw.compile(g, Plan.one_device(g)).initialize(0)
    plain.step(feeds)
    need = plain.stats.peak_memory_per_device[0]
    least = swap_problem(g, "this-machine", device_memory=10**12).least_memory
    memory = max(least, int(need * fraction))
    result = tw.swap_plan(g, "this-machine", device_memory=memory, time_limit=time_limit)
    exe = tw.compile(g, result).initialize(0)
    # Swapped and unswapped steps alternate, so that both see the same load on a shared machine; the
    # op times are measured in rounds between them (the machine's speed drifts within seconds).
    for _ in range(3):
        exe.step(feeds), plain.step(feeds)
    times, plain_times, op_rounds = [], [], []
    for k in range(steps):
        if k % max(1, steps // rounds) == 0 and len(op_rounds) < rounds:
            op_rounds.append(tw.measure_ops(g))
        exe.step(feeds)
        times.append(exe.stats.step_seconds)
        plain.step(feeds)
        plain_times.append(plain.stats.step_seconds)
    ops = tw.OpTimes.median(op_rounds)
    stats = exe.stats
    one = Plan.one_device(g)
    return dict(model=name, needs=need, memory=memory, pool=stats.memory_bytes, peak_memory=stats.peak_memory,
                pool_peak_bytes=stats.pool_peak_bytes, swapped=stats.swapped_bytes,
                planned_swapped=stats.planned_swapped_bytes, fraction_of_ideal=result.fraction_of_ideal,
                measured=statistics.median(times), measured_min=min(times), measured_max=max(times),
                simulated=exe.predict().step_seconds, simulated_op_times=exe.predict(op_times=ops).step_seconds,
                unswapped_measured=statistics.median(plain_times), unswapped_simulated=one.predict().step_seconds,
                unswapped_simulated_op_times=one.predict(op_times=ops).step_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=9)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--fraction", type=float, default=1 / 3, help="device memory / unswapped peak")
    parser.add_argument("--quick", action="store_true", help="the MLP only, 3 steps, 5 s search")
    args = parser.parse_args()
    models = dict(list(MODELS.items())[:1]) if args.quick else MODELS
    steps, limit = (3, 5.0) if args.quick else (args.steps, args.time_limit)
    rows = []
    print(f"{'model':<48} {'pool / needs':>14} {'measured':>9} {'simulated':>10} {'(op times)':>10} "
          f"{'unswapped':>10} {'(op times)':>10} {'overhead':>9} {'(sim.)':>7}")
    for name, build in models.items():
        r = run(name, build, steps, limit, args.fraction)
        rows.append(r)

        def ms(x):
            return f"{x * 1e3:.1f} ms"

        print(f"{name:<48} {r['pool'] / 2**20:5.1f}/{r['needs'] / 2**20:5.1f} MiB {ms(r['measured']):>9} "
              f"{ms(r['simulated']):>10} {ms(r['simulated_op_times']):>10} {ms(r['unswapped_measured']):>10} "
              f"{ms(r['unswapped_simulated_op_times']):>10} "
              f"{r['measured'] / r['unswapped_measured'] - 1:+9.1%} "
              f"{r['simulated_op_times'] / r['unswapped_simulated_op_times'] - 1:+7.1%}", flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    out = pathlib.Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "swap_exec.json").write_text(json.dumps(
        {"machine": platform.node(), "cores": os.cpu_count(), "load_average": load, "rows": rows}, indent=1))
    print(f"load average {load}; wrote {out / 'swap_exec.json'}")


if __name__ == "__main__":
    main()

"""SwapAdvisor's experiments with the zoo's models (issue 17; thesis §5.1-5.3, Fig. 5.1, Tables 5.1-5.2).

Training (Fig. 5.1 / Table 5.1): RNN-8-8K (batch 256), BRNN-4-8K (128), WResNet-152-10, Inception-4
and NasNet-25 (64) on one V100 with 16 GiB and SwapAdvisor's PCIe link (the ``swapadvisor`` cluster
preset: 12 GB/s one way, 20 GB/s both ways). Graphs are the zoo's training graphs built with
``accumulate="running"`` (gradient parts added as they arrive, as MXNet does past 8 parts: an RNN's
weight gradient summed over 20 steps at once would hold 20 one-GiB parts), each add summing into its
total in place as MXNet's cells do (``swap_problem(accumulate_in_place=True)``; the swapped runtime
computes each sum in its total's buffer). Op seconds come from the
time model's V100 profile (``Plan.one_device(graph).predict(cluster)``), not from a GPU: the
fractions are what the simulator predicts, the paper's are measured.

For each model: ops, tensor sizes, the memory an iteration needs unswapped (the ideal's peak), the
ideal time, an upper bound on the fraction of ideal any plan reaches (``fraction_bound``), ODSwap
in graph order and in random topological orders (the framework default the thesis ran), the GA (ours:
elitism, temperature 0.01, a seeded first generation) within ``--time-limit`` seconds and the seconds it
took to come within 1 % of its result, and random search with as many evaluations.

Inference (Table 5.2): ResNet-152, batch 1/16/32/64, device memory 64 MB-1 GB: seconds of an
iteration (the GA, ``--inference-limit`` seconds per cell) or N/A when nothing fits.

    python benchmarks/bench_swap_models.py [--time-limit 60] [--threads 2] [--quick] [--models rnn,...]

Writes benchmarks/out/swap_models.json.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import time

import tilewise as tw
from tilewise import swap
from tilewise.plan.swapping import swap_problem

GiB = 2**30
MB = 2**20

# (name in the zoo, batch, the paper's figures: Table 5.1 memory, ops, sizes; Fig. 5.1 fraction of ideal
# at that batch as its text gives it for SwapAdvisor and ODSwap)
TRAINING = [
    ("rnn-8-8k", 256, dict(memory="118GB", ops=8594, sizes=7, swapadvisor="70-80%", odswap="<1%")),
    ("brnn-4-8k", 128, dict(memory="99GB", ops=9034, sizes=9, swapadvisor="70-80%", odswap="<1%")),
    ("wresnet-152-10", 64, dict(memory="180GB", ops=882, sizes=26, swapadvisor="95%", odswap="80%")),
    ("inception-4", 64, dict(memory="71GB", ops=830, sizes=64, swapadvisor="<=65%", odswap="1.2-2.5x lower")),
    ("nasnet-25", 64, dict(memory="193GB", ops=5533, sizes=65, swapadvisor="53%", odswap="1.2-2.5x lower")),
]

# Table 5.2: ResNet-152 inference seconds per iteration by memory (MB) and batch; None = N/A.
TABLE_5_2 = {
    64: {1: 0.024}, 128: {1: 0.022, 16: 0.077}, 192: {1: 0.018, 16: 0.044},
    256: {1: 0.017, 16: 0.043, 32: 0.130}, 320: {1: 0.017, 16: 0.042, 32: 0.073},
    512: {1: 0.017, 16: 0.040, 32: 0.067, 64: 0.238}, 640: {1: 0.017, 16: 0.040, 32: 0.067, 64: 0.123},
    1024: {1: 0.017, 16: 0.040, 32: 0.067, 64: 0.121},
}
BATCHES = (1, 16, 32, 64)


def seconds_to_reach(history: list[dict], best: float) -> float:
    """Seconds of the search until its best came within 1 % of `best`."""
    return next(h["seconds"] for h in history if h["best"] <= best * 1.01)


def fraction_bound(p) -> float:
    """An upper bound on any plan's fraction of ideal, whatever the schedule and pool: at op o, the
    activations made by o or its ancestors and read by o or its descendants are alive in every order;
    what of them exceeds the capacity was copied out before o starts and comes back after o ends, each
    direction at most at the one-way rate. Taken at the op where the given order holds the most."""
    ops, tensors, one_way = p.ops, p.tensors, p.host_link[0]
    producer, readers = {}, {}
    for k, (_, ins, outs, _) in enumerate(ops):
        for t in outs:
            if tensors[t][1] == "activation":
                producer.setdefault(t, k)
        for t in ins:
            readers.setdefault(t, []).append(k)
    succ, pred = [[] for _ in ops], [[] for _ in ops]
    for t, k in producer.items():
        for r in readers.get(t, []):
            if r != k:
                succ[k].append(r)
                pred[r].append(k)
    order = p.plan().schedule  # the given order: where its live activations peak
    position = {name: i for i, name in enumerate(order)}
    index = {name: k for k, (name, _, _, _) in enumerate(ops)}
    last = {t: max(position[ops[r][0]] for r in rs) for t, rs in readers.items()}
    delta = [0] * (len(ops) + 1)
    for t, k in producer.items():
        delta[position[ops[k][0]]] += tensors[t][0]
        delta[last.get(t, len(ops) - 1) + 1] -= tensors[t][0]
    live, peak, at = 0, -1, 0
    for i in range(len(ops)):
        live += delta[i]
        if live > peak:
            peak, at = live, i
    o = index[order[at]]

    def reach(nb):
        seen, stack = {o}, [o]
        while stack:
            for y in nb[stack.pop()]:
                if y not in seen:
                    seen.add(y)
                    stack.append(y)
        return seen

    anc, des = reach(pred), reach(succ)
    alive = sum(tensors[t][0] for t, k in producer.items() if k in anc and any(r in des for r in readers.get(t, [])))
    move = max(0, alive - p.capacity) / one_way
    secs = lambda ks: sum(ops[k][3] for k in ks) - ops[o][3]  # noqa: E731
    return p.ideal_time / max(p.ideal_time, max(move, secs(anc)) + ops[o][3] + max(move, secs(des)))


def training_row(name: str, batch: int, time_limit: float, threads: int, seeds: int) -> dict:
    t0 = time.perf_counter()
    graph = tw.models.get(name, batch=batch, accumulate="running")
    p = swap_problem(graph, "swapadvisor", accumulate_in_place=True)
    build = time.perf_counter() - t0
    ideal = p.ideal()
    row = {"model": name, "batch": batch, "ops": len(p.ops), "sizes": len(p.sizes),
           "need_bytes": ideal.peak_tensor_bytes, "capacity": p.capacity, "least_memory": p.least_memory,
           "ideal_seconds": p.ideal_time, "build_seconds": build, "fraction_bound": fraction_bound(p)}
    frac = lambda plan: p.ideal_time / plan.makespan  # noqa: E731
    row["odswap_graph_order"] = frac(p.odswap())
    randoms = [frac(p.odswap(seed=s)) for s in range(seeds)]
    row["odswap_random_orders"] = {"best": max(randoms), "mean": statistics.mean(randoms)}
    r = p.search(seed=0, time_limit=time_limit, threads=threads, patience=None)
    row["ga"] = {"fraction": r.fraction_of_ideal, "evaluations": r.evaluations, "seconds": r.seconds,
                 "generations": len(r.history), "sims_per_second": r.simulations_per_second,
                 "seconds_to_within_1pct": seconds_to_reach(r.history, r.makespan),
                 "peak_memory": r.plan.peak_memory}
    rs = p.random_search(evaluations=r.evaluations, seed=0, threads=threads, time_limit=2 * time_limit)
    row["random_search"] = {"fraction": rs.fraction_of_ideal, "evaluations": rs.evaluations, "seconds": rs.seconds}
    return row


def inference_table(limit: float, threads: int, batches=BATCHES) -> dict:
    table: dict = {}
    for batch in batches:
        graph = tw.models.get("resnet-152", batch=batch, train=False)
        full = swap_problem(graph, "swapadvisor")
        table[batch] = {"full_16gb": full.ideal_time}
        for mb in TABLE_5_2:
            p = swap_problem(graph, "swapadvisor", device_memory=mb * MB)
            try:
                r = p.search(seed=0, time_limit=limit, threads=threads)
                table[batch][mb] = r.makespan
            except swap.InfeasibleError:
                table[batch][mb] = None
    return table


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--time-limit", type=float, default=60.0, help="GA seconds per model (the goal: 60)")
    ap.add_argument("--inference-limit", type=float, default=5.0, help="GA seconds per Table 5.2 cell")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=3, help="random topological orders for ODSwap")
    ap.add_argument("--models", default=",".join(m for m, _, _ in TRAINING))
    ap.add_argument("--quick", action="store_true", help="5 s searches, RNN and Inception, batch 1 and 16")
    ap.add_argument("--no-inference", action="store_true")
    args = ap.parse_args()
    wanted = args.models.split(",")
    if args.quick:
        args.time_limit, args.inference_limit, wanted = 5.0, 1.0, ["rnn-8-8k", "inception-4"]
    print(f"V100 16 GiB, host link 12 GB/s one way / 20 GB/s both (swapadvisor preset); GA {args.time_limit:g} s "
          f"on {args.threads} threads; {platform.processor() or platform.machine()}")
    out = {"training": [], "settings": vars(args)}
    print("model            batch  ops (paper)   sizes (paper)  needs (paper)   ideal s (bound)   ODSwap graph/random "
          "  random search   GA (to 1%)          paper SwapAdvisor / ODSwap")
    for name, batch, paper in TRAINING:
        if name not in wanted:
            continue
        row = training_row(name, batch, args.time_limit, args.threads, args.seeds)
        row["paper"] = paper
        out["training"].append(row)
        ga = row["ga"]
        print(f"{name:16s} {batch:5d}  {row['ops']:5d} ({paper['ops']:5d})  {row['sizes']:3d} ({paper['sizes']:3d})"
              f"      {row['need_bytes'] / GiB:6.1f}G ({paper['memory']:>5s})  {row['ideal_seconds']:7.2f}"
              f" ({pct(row['fraction_bound']):>4s} max)   {pct(row['odswap_graph_order']):>4s}"
              f" / {pct(row['odswap_random_orders']['best']):>4s}"
              f"        {pct(row['random_search']['fraction']):>4s}        {pct(ga['fraction']):>4s} "
              f"({ga['seconds_to_within_1pct']:4.1f} s, {ga['evaluations']} ev)"
              f"   {paper['swapadvisor']} / {paper['odswap']}")
    if not args.no_inference:
        batches = (1, 16) if args.quick else BATCHES
        table = inference_table(args.inference_limit, args.threads, batches)
        out["inference"] = table
        print("\nResNet-152 inference, seconds per iteration (ours / Table 5.2; N/A: nothing fits)")
        print("memory  " + "".join(f"{'batch ' + str(b):>22s}" for b in batches))
        for mb in TABLE_5_2:
            cells = []
            for b in batches:
                ours, theirs = table[b][mb], TABLE_5_2[mb].get(b)
                cells.append(f"{'N/A' if ours is None else f'{ours:.3f}'} / {'N/A' if theirs is None else theirs}")
            print(f"{mb:5d}MB " + "".join(f"{c:>22s}" for c in cells))
        print("16 GB   " + "".join(f"{table[b]['full_16gb']:>13.3f} (ideal)" for b in batches))
    path = pathlib.Path(__file__).parent / "out" / "swap_models.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

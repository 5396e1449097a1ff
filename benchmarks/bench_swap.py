"""SwapAdvisor's search on synthetic training graphs (issue 17, first part; thesis ch. 4-5).

1. Simulations per second: the swap planner plus the simulation of its augmented graph (the genetic
   search's fitness, cpp/swap), measured through the search on one thread and on ``--threads``.
2. GA vs baselines on an RNN-like graph (layers x steps of cells sharing each layer's weight, as
   RNN-L-XK; the framework's order interleaves layers) and an Inception-like one (cells of branches,
   many tensor sizes), each under capacities of 1/4 and 1/8 of what it needs without swapping (the
   peak of live tensors in the given order, tensors freed after their last use): fraction of ideal
   (ideal time / simulated time) for ODSwap (graph order; best and mean of 5 random topological
   orders), random search with the GA's number of evaluations, the schedule-only and pool-only
   searches (§5.4), the GA as the paper has it (softmax at temperature 1, no elitism) and ours
   (temperature 0.01, elitism). Host link: SwapAdvisor §5.1's 12 GB/s one way, 20 GB/s both ways.

Op times are synthetic (stated in each generator): the point is the searches' relative quality, not
the paper's absolute numbers (those need the graph-level API; later). Writes benchmarks/out/swap.json.

    python benchmarks/bench_swap.py [--time-limit 10] [--threads 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import time

import numpy as np

from tilewise import swap

MB = 2**20
HOST = (12e9, 20e9)  # SwapAdvisor §5.1
GEMM_RATE = 10e12  # FLOP/s of the synthetic device's cells (a V100 at about 2/3 of FP32 peak)
CONV_INTENSITY = 24e9  # synthetic convs: seconds = bytes touched / this


def rnn(layers: int = 4, steps: int = 48, hidden: int = 1536, batch: int = 256) -> tuple[dict, list]:
    """RNN-like: per layer an LSTM weight (4 gates x (2 hidden) x hidden floats) shared by every step;
    the cell of layer j at step t reads the layer below at t, its own state at t-1 and the weight, saves its gates
    for the backward pass. Backward cells run in reverse, accumulating the weight's gradient in a
    chain; one in-place update per layer. Cell time = 2 x batch x 8 hidden^2 FLOPs / GEMM_RATE
    (backward twice that). Ops are listed time-major (all layers at t, then t+1): the interleaved
    order the thesis says frameworks default to."""
    f32 = 4
    w = 4 * 2 * hidden * hidden * f32
    h = batch * hidden * f32
    cell = 2 * batch * 8 * hidden * hidden / GEMM_RATE
    tensors = {f"W{j}": (w, "parameter") for j in range(layers)}
    tensors.update({f"x{t}": (h, "parameter") for t in range(steps)})  # the input batch, on the host
    ops = []
    for t in range(steps):
        for j in range(layers):
            below = f"x{t}" if j == 0 else f"h{j - 1}_{t}"
            ins = [below, f"W{j}"] + ([f"h{j}_{t - 1}"] if t else [])
            tensors[f"h{j}_{t}"] = (h, "activation")
            tensors[f"g{j}_{t}"] = (4 * h, "activation")
            ops.append((f"fwd{j}_{t}", ins, [f"h{j}_{t}", f"g{j}_{t}"], cell))
    for t in range(steps):
        tensors[f"dy{t}"] = (h, "activation")
        ops.append((f"loss{t}", [f"h{layers - 1}_{t}"], [f"dy{t}"], cell / 20))
    for t in reversed(range(steps)):
        for j in reversed(range(layers)):
            up = f"dy{t}" if j == layers - 1 else f"dx{j + 1}_{t}"
            ins = [up, f"g{j}_{t}", f"W{j}", f"x{t}" if j == 0 else f"h{j - 1}_{t}"]
            if t:
                ins.append(f"h{j}_{t - 1}")
            if t < steps - 1:
                ins += [f"dh{j}_{t + 1}", f"dW{j}_{t + 1}"]
            outs = [f"dW{j}_{t}"] + ([f"dx{j}_{t}"] if j else []) + ([f"dh{j}_{t}"] if t else [])
            tensors[f"dW{j}_{t}"] = (w, "activation")
            for o in outs[1:]:
                tensors[o] = (h, "activation")
            ops.append((f"bwd{j}_{t}", ins, outs, 2 * cell))
    for j in range(layers):
        ops.append((f"update{j}", [f"W{j}", f"dW{j}_0"], [f"W{j}"], w / 500e9))
    return tensors, ops


def inception(cells: int = 24, seed: int = 0) -> tuple[dict, list]:
    """Inception-like: a chain of cells, each of 4 branches of 1-2 convs (weights and outputs of
    sizes drawn log-uniformly, so many distinct sizes), concatenated; backward: the concat's gradient
    split, each conv's backward (reads its input, weight and output gradient; writes input and weight
    gradients), the branches' input gradients summed pairwise, an in-place update per weight. Conv time =
    (input + output + weight bytes) / CONV_INTENSITY, backward twice that."""
    rng = np.random.default_rng(seed)

    def size(lo, hi):
        return int(np.exp(rng.uniform(np.log(lo), np.log(hi)))) // 4096 * 4096

    tensors = {"x": (size(16 * MB, 32 * MB), "parameter")}
    fwd, bwd_cells = [], []
    x = "x"
    for c in range(cells):
        branch_outs, convs = [], []
        for b in range(4):
            inp = x
            for k in range(int(rng.integers(1, 3))):
                name = f"c{c}b{b}k{k}"
                tensors[f"W_{name}"] = (size(1 * MB, 24 * MB), "parameter")
                tensors[f"A_{name}"] = (size(4 * MB, 32 * MB), "activation")
                secs = (tensors[inp][0] + tensors[f"A_{name}"][0] + tensors[f"W_{name}"][0]) / CONV_INTENSITY
                fwd.append((f"conv_{name}", [inp, f"W_{name}"], [f"A_{name}"], secs))
                convs.append((name, inp, secs))
                inp = f"A_{name}"
            branch_outs.append(inp)
        out = f"cat{c}"
        tensors[out] = (sum(tensors[o][0] for o in branch_outs), "activation")
        fwd.append((f"concat{c}", branch_outs, [out], tensors[out][0] / 400e9))
        bwd_cells.append((x, out, branch_outs, convs))
        x = out
    tensors["dloss"] = (tensors[x][0], "activation")
    ops = fwd + [("loss", [x], ["dloss"], tensors[x][0] / 400e9)]
    grad = "dloss"
    for c in reversed(range(cells)):
        x_in, out, branch_outs, convs = bwd_cells[c]
        splits = [f"d{o}" for o in branch_outs]
        for o, d in zip(branch_outs, splits):
            tensors[d] = (tensors[o][0], "activation")
        ops.append((f"split{c}", [grad], splits, tensors[out][0] / 400e9))
        into_x = []
        grad_of = dict(zip(branch_outs, splits))
        for name, inp, secs in reversed(convs):
            dout = grad_of[f"A_{name}"]
            din = f"d{inp}_{name}"
            tensors[din] = (tensors[inp][0], "activation")
            tensors[f"dW_{name}"] = (tensors[f"W_{name}"][0], "activation")
            ops.append((f"bconv_{name}", [dout, inp, f"W_{name}"], [din, f"dW_{name}"], 2 * secs))
            ops.append((f"update_{name}", [f"W_{name}", f"dW_{name}"], [f"W_{name}"], tensors[f"W_{name}"][0] / 500e9))
            if inp == x_in:
                into_x.append(din)
            else:
                grad_of[inp] = din
        # The branches' gradients for the cell input, summed pairwise (as autodiff's adds do).
        grad = into_x[0]
        for k, d in enumerate(into_x[1:]):
            acc = f"d{x_in}_sum{k}"
            tensors[acc] = (tensors[x_in][0], "activation")
            ops.append((f"add{c}_{k}", [grad, d], [acc], 3 * tensors[x_in][0] / 400e9))
            grad = acc
    return tensors, ops


def need(model: tuple[dict, list]) -> int:
    """The memory an iteration needs without swapping: the ideal's peak in the given order (tensors
    freed after their last use), the 'total' that capacities are fractions of."""
    tensors, ops = model
    return swap.Problem(tensors, ops, 2**62, host_link=HOST).ideal().peak_tensor_bytes


def problem(model: tuple[dict, list], fraction: float) -> swap.Problem:
    tensors, ops = model
    return swap.Problem(tensors, ops, int(need(model) * fraction), host_link=HOST)


def sims_per_second(p: swap.Problem, threads: int, generations: int) -> dict:
    """Evaluations per second of a short GA (its fitness: plan + simulate), one thread and `threads`."""
    out = {}
    for t in sorted({1, threads}):
        r = p.search(seed=0, population=48, generations=generations, patience=None, threads=t)
        out[f"threads_{t}"] = r.simulations_per_second
    return out


def compare(p: swap.Problem, time_limit: float, threads: int, seeds: int) -> dict:
    """Fraction of ideal of every method on one problem."""
    ideal = p.ideal_time
    row: dict = {"ops": len(p.ops), "tensors": len(p.tensors), "sizes": len(p.sizes),
                 "total_bytes": p.total_bytes, "need": need((p.tensors, p.ops)), "capacity": p.capacity,
                 "least_memory": p.least_memory, "ideal_seconds": ideal}

    def frac(plan):
        return ideal / plan.makespan

    try:
        row["odswap_graph_order"] = frac(p.odswap())
        randoms = [frac(p.odswap(seed=s)) for s in range(seeds)]
        row["odswap_random_orders"] = {"best": max(randoms), "mean": statistics.mean(randoms)}
    except swap.SwapError as e:
        row["odswap_graph_order"] = row["odswap_random_orders"] = f"cannot run: {e}"
    row["given_order_default_pool"] = frac(p.plan())
    searches = {
        "ga": dict(),
        "ga_paper_softmax": dict(temperature=1.0, elitism=False),
        "schedule_only": dict(schedule_only=True),
        "pool_only": dict(pool_only=True),
    }
    for name, kwargs in searches.items():
        t0 = time.perf_counter()
        r = p.search(seed=0, time_limit=time_limit, patience=None, threads=threads, **kwargs)
        row[name] = {"fraction": r.fraction_of_ideal, "evaluations": r.evaluations,
                     "seconds": time.perf_counter() - t0, "generations": len(r.history),
                     "sims_per_second": r.simulations_per_second}
    r = p.random_search(evaluations=row["ga"]["evaluations"], seed=0, threads=threads)
    row["random_search"] = {"fraction": r.fraction_of_ideal, "evaluations": r.evaluations, "seconds": r.seconds}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per search")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="smaller graphs, 2 s searches")
    args = ap.parse_args()
    limit = 2.0 if args.quick else args.time_limit
    models = {"rnn-4x48": rnn(4, 24 if args.quick else 48), "inception-24": inception(12 if args.quick else 24)}

    speed = {}
    for name, model in models.items():
        p = problem(model, 0.25)
        speed[name] = {"ops": len(p.ops), **sims_per_second(p, args.threads, 2 if args.quick else 5)}
        print(f"{name}: {len(p.ops)} ops, plans simulated per second: "
              + ", ".join(f"{k.replace('_', ' ')}: {v:,.0f}" for k, v in speed[name].items() if k != "ops"))

    results = {}
    for name, model in models.items():
        for fraction in (1 / 4, 1 / 8):
            key = f"{name} @ 1/{round(1 / fraction)}"
            results[key] = row = compare(problem(model, fraction), limit, args.threads, 5)
            od = row["odswap_graph_order"]
            odr = row["odswap_random_orders"]
            print(f"\n{key}: {row['ops']} ops, {row['sizes']} sizes, needs {row['need'] / 2**30:.2f} GiB "
                  f"({row['total_bytes'] / 2**30:.2f} GiB of tensors), capacity {row['capacity'] / 2**30:.2f} GiB "
                  f"(least {row['least_memory'] / 2**30:.2f}); fraction of ideal:")
            if isinstance(od, str):
                print(f"  ODSwap                          {od}")
            else:
                print(f"  ODSwap graph order              {od:6.1%}")
                print(f"  ODSwap random orders best/mean  {odr['best']:6.1%} / {odr['mean']:.1%}")
            print(f"  given order, default pool       {row['given_order_default_pool']:6.1%}")
            for m in ("ga", "ga_paper_softmax", "schedule_only", "pool_only", "random_search"):
                r = row[m]
                print(f"  {m:<31} {r['fraction']:6.1%}  ({r['evaluations']} evaluations, {r['seconds']:.1f} s)")

    out = pathlib.Path(__file__).parent / "out"
    out.mkdir(exist_ok=True)
    (out / "swap.json").write_text(json.dumps({
        "machine": platform.platform(), "processor": platform.processor(), "time_limit": limit,
        "threads": args.threads, "host_link": HOST, "sims_per_second": speed, "comparison": results}, indent=1))
    print(f"\nwrote {out / 'swap.json'}")


if __name__ == "__main__":
    main()

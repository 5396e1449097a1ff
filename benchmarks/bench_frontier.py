"""tw.frontier on zoo models sized like TensorOpt Table 1, beside Table 3's search times.

TensorOpt Table 3 (16 V100s on 2 machines; FT run on a 48-core host): FT-LDP 1,292 s WideResNet,
0.28 s RNN, 201 s Transformer. Table 1's models: WideResNet 7.3 GB of parameters, RNN 108 GB,
Transformer 9.7 GB (batch 256). Ours, matched in parameters: wresnet-152-6 (7.8 GiB), rnn-12-16k
(about 100 GB), transformer-48-2048-16 (about 9.9 GB), batch 256, on the ``tensoropt`` preset with 16
devices (parts [2, 8]: machines, then the GPUs of one machine). Smaller members of each family
show where the exact search stands; the Table-1 sizes need TensorOpt's heuristic (Eq. 7, tables
past 2^14 entries fix a class), 16 MiB memory buckets and 8 GiB for the tables (``max_bytes``).
Each row runs in a child process under a wall-clock limit (``--timeout``): a row past it is reported
as such, as is ``SearchTooLarge``.

Per row: costing seconds (configurations, bytes, compute), search seconds, op classes, K per op class
(before / after pruning), frontier points, the largest frontier of one table entry, heuristic
eliminations (goal 0) and conditioned classes. Rows with ``coarsen`` search the space where
element-wise ops follow their input's tiling (docs/FRONTIERS.md "Coarsening"); where the exact
frontier is affordable the row also gives the time it loses at equal memory (median, max).

    python benchmarks/bench_frontier.py [--quick] [--timeout 60] [--rows 0,1]

Writes benchmarks/out/frontier.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys

TABLE3 = {"WideResNet": 1292, "RNN": 0.28, "Transformer": 201}  # FT-LDP seconds, 16 GPUs, 48 cores
GOALS = {"WideResNet": 60, "RNN": 0.1, "Transformer": 10}

MIB = 2**20
# 8 GiB of tables: wresnet-152-6's search holds 1 GiB of back-pointers (137 M points) and its widest live
# tables beside them, past the 4 GiB default budget (6.2 GB resident at its peak).
APPROX = {"heuristic": True, "max_table": 1 << 14, "memory_bucket": 16 * MIB, "max_bytes": 8 << 30}
COARSE = {"coarsen": True}
ROWS = [  # (paper model, zoo name, batch, options)
    ("RNN", "rnn-1-1k", 64, {}),
    ("RNN", "rnn-1-1k", 64, {"coarsen": True, "compare": True}),
    ("RNN", "rnn-2-4k", 256, {"memory_bucket": 16 * MIB}),
    ("RNN", "rnn-2-4k", 256, {"coarsen": True, "compare": True}),
    ("RNN", "rnn-12-16k", 256, APPROX),
    ("RNN", "rnn-12-16k", 256, COARSE),
    ("RNN", "rnn-12-16k", 256, {"memory_bucket": 16 * MIB, **COARSE}),
    ("Transformer", "transformer-1-256-4", 32, {}),
    ("Transformer", "transformer-1-256-4", 32, COARSE),
    ("Transformer", "transformer-2-1024-16", 256, APPROX),
    ("Transformer", "transformer-2-1024-16", 256, {**APPROX, **COARSE}),
    ("Transformer", "transformer-48-2048-16", 256, APPROX),
    ("Transformer", "transformer-48-2048-16", 256, {**APPROX, **COARSE}),
    ("WideResNet", "wresnet-50-2", 256, APPROX),
    ("WideResNet", "wresnet-50-2", 256, {**APPROX, **COARSE}),
    ("WideResNet", "wresnet-152-6", 256, APPROX),
    ("WideResNet", "wresnet-152-6", 256, {**APPROX, **COARSE}),
    # The heuristic's threshold: tables past 2^12 entries fix a class (more fixes, smaller tables), each
    # compared with the 2^14 row of its model (the "against" column).
    ("RNN", "rnn-12-16k", 256, {**APPROX, "max_table": 1 << 12}),
    ("Transformer", "transformer-48-2048-16", 256, {**APPROX, "max_table": 1 << 12}),
    ("WideResNet", "wresnet-152-6", 256, {**APPROX, "max_table": 1 << 12}),
    ("RNN", "rnn-12-16k", 256, {**APPROX, "max_table": 1 << 12, **COARSE, "compare": "coarsen"}),
    # Coarser buckets for the RNN's goal (each entry keeps its lightest point: the least memory stays exact).
    ("RNN", "rnn-12-16k", 256, {**APPROX, "max_table": 1 << 12, **COARSE, "memory_bucket": 64 * MIB,
                                "compare": "coarsen"}),
    ("RNN", "rnn-12-16k", 256, {**APPROX, "max_table": 1 << 12, **COARSE, "memory_bucket": 32 * MIB,
                                "compare": "coarsen"}),
]
QUICK = [0, 1, 9, 10]

CHILD = r"""
import json, sys, time
import tilewise as tw
name, batch, options = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
compare = options.pop("compare", False)
g = tw.models.get(name, batch=batch)


start = time.monotonic()
try:
    f = tw.frontier(g, "tensoropt", devices=16, baselines=False, **options)
except (tw.SearchTooLarge, MemoryError) as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.exit(0)
ops = [r for r in f.configurations() if r["kind"] == "op"]
Ks = sorted(r["before"] for r in ops)
print(json.dumps({
    "ops": g._g.num_ops, "parameters_gib": g._g.bytes("parameter") / 2**30 if hasattr(g._g, "bytes") else None,
    "parts": f.parts, "op_classes": len(ops), "tensor_classes": len(f.configurations()) - len(ops),
    "K_max": Ks[-1], "K_mean": sum(Ks) / len(Ks), "K_pruned_mean": sum(r["after"] for r in ops) / len(ops),
    "K_histogram": {str(k): Ks.count(k) for k in sorted(set(Ks))},
    "costing_s": f.build_seconds, "search_s": f.stats.seconds, "total_s": time.monotonic() - start,
    "points": len(f.points), "largest_frontier": f.stats.largest_frontier, "largest_table": f.stats.largest_table,
    "heuristic_eliminations": f.stats.heuristic_eliminations, "conditioned": len(f.stats.conditioned),
    "incumbents": f.stats.incumbents,
    "min_memory_gib": f.points[0].memory / 2**30, "min_time_s": f.points[-1].time,
    "tied_ops": f.stats.tied_ops, "frontier": [[p.time, p.memory] for p in f.points],
    # The exact frontier to measure the time this row loses against (the parent compares).
    # compare="coarsen": the exact frontier of the coarsened space (the full one is out of reach there).
    "exact_frontier": ([[p.time, p.memory] for p in tw.frontier(g, "tensoropt", devices=16, baselines=False,
                                                                  coarsen=compare == "coarsen").points]
                       if compare else None),
}))
"""


def time_at_equal_memory(points: list, reference: list) -> list[float]:
    """Per reference point (time, memory), this frontier's least time within its memory against the reference's
    time, ours / theirs - 1 (inf where no point of ours fits its memory), sorted."""
    ratios = []
    for t, m in reference:
        fit = [q[0] for q in points if q[1] <= m]
        ratios.append(min(fit) / t - 1 if fit else float("inf"))
    return sorted(ratios)


def run_row(name: str, batch: int, options: dict, timeout: float) -> dict:
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, name, str(batch), json.dumps(options)], timeout=timeout,
                             capture_output=True, text=True, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"past {timeout:g} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the small rows only")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per row (default 60)")
    ap.add_argument("--rows", help="comma-separated row numbers (0-based) to run, e.g. 5,6")
    args = ap.parse_args()
    rows = [ROWS[i] for i in QUICK] if args.quick else ROWS
    if args.rows:
        rows = [ROWS[int(i)] for i in args.rows.split(",")]
    results = []
    print("| paper model (Table 3 FT-LDP s; goal) | zoo model | options | op classes | K per op class (mean, max; "
          "pruned mean) | costing s | search s | points | least memory GiB | largest CF | heur. | cond. | tied ops | "
          "time lost vs exact (median, max; least memory GiB) | against the 2^14 row: time at equal memory "
          "(median, max; points uncovered) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for paper, name, batch, options in rows:
        r = run_row(name, batch, options, args.timeout)
        results.append({"paper_model": paper, "model": name, "batch": batch, "options": options, **r})
        opts = ", ".join(f"{k}={v}" for k, v in options.items() if k != "compare") or "exact"
        if options.get("compare") == "coarsen":
            opts += " (vs exact coarsened)"
        head = f"| {paper} ({TABLE3[paper]:g}; < {GOALS[paper]:g}) | {name} b{batch} | {opts} |"
        ref = next((q for q in results[:-1] if q["model"] == name and q["options"] == APPROX and "frontier" in q), None)
        vs = ""
        if options == {**APPROX, "max_table": options.get("max_table")} != APPROX and ref and "frontier" in r:
            ratios = time_at_equal_memory(r["frontier"], ref["frontier"])
            covered = [x for x in ratios if x != float("inf")]
            vs = (f"{100 * covered[len(covered) // 2]:+.2f} %, {100 * covered[-1]:+.2f} %; "
                  f"{len(ratios) - len(covered)}")
        loss = None  # time lost at equal memory against the exact frontier: (median, max) over its points
        if r.get("exact_frontier"):
            ratios = time_at_equal_memory(r["frontier"], r["exact_frontier"])
            loss = (ratios[len(ratios) // 2], ratios[-1], r["exact_frontier"][0][1] / 2**30)
        results[-1]["loss"] = loss
        if "error" in r:
            print(f"{head} {r['error']} | | | | | | | | | | | |", flush=True)
        else:
            print(f"{head} {r['op_classes']} | {r['K_mean']:.1f}, {r['K_max']}; {r['K_pruned_mean']:.1f} | "
                  f"{r['costing_s']:.2f} | {r['search_s']:.2f} | {r['points']} | {r['min_memory_gib']:.3f} | "
                  f"{r['largest_frontier']} | {r['heuristic_eliminations']} | {r['conditioned']} | {r['tied_ops']} | "
                  + ("" if loss is None else f"{100 * loss[0]:.2f} %, {100 * loss[1]:.2f} %; {loss[2]:.3f}")
                  + f" | {vs} |",
                  flush=True)
    out = pathlib.Path(__file__).with_name("out")
    out.mkdir(exist_ok=True)
    (out / "frontier.json").write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}, "table3_ft_ldp_s": TABLE3,
        "goals_s": GOALS, "timeout_s": args.timeout, "rows": results}, indent=1))


if __name__ == "__main__":
    main()

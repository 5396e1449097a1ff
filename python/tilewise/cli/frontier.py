"""``tilewise frontier MODEL --cluster NAME --devices K``: TensorOpt's cost frontier of a model."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_frontier(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "frontier",
        help="the cost frontier (time per iteration against memory per device) of a model on a cluster",
        description="Build the training graph of a zoo model (or load a graph JSON file), cost every configuration "
        "of its tensor and op classes on K devices of a cluster (TensorOpt Eq. 1-3) and search the exact frontier "
        "(--heuristic for models of TensorOpt Table 1's size). "
        "Prints the points, the turning point, the baselines (data parallel, tofu, Mesh-TensorFlow) and, with "
        "--memory-limit, the fastest point that fits (1/1.1 of the limit, TensorOpt's margin).",
        epilog="Example: tilewise frontier mlp-4-1024 --cluster tensoropt --devices 16 --memory-limit 16",
    )
    parser.add_argument("model", help="model name (e.g. mlp-4-1024, transformer-2-256-4) or a graph JSON file")
    parser.add_argument("--cluster", default="tensoropt", help="cluster preset or JSON file (default tensoropt)")
    parser.add_argument("--devices", type=int, help="device count (default: the cluster's)")
    parser.add_argument("--batch", type=int, help="batch size (default: the family's)")
    parser.add_argument("--memory-limit", type=float, metavar="GB", help="device memory in GB (1e9 bytes)")
    parser.add_argument("--time-limit", type=float, metavar="S", help="seconds for costing and search")
    parser.add_argument("--memory-bucket", type=float, metavar="MB",
                        help="memories within this many MB count as equal (smaller, approximate frontiers)")
    parser.add_argument("--heuristic", action="store_true",
                        help="fix a class where a table would pass --max-table entries (TensorOpt Eq. 7: for "
                        "Table-1-size models; fast, not exact)")
    parser.add_argument("--max-table", type=int, metavar="N",
                        help="entries a table may reach (default 2**18 exact, 2**14 with --heuristic)")
    parser.add_argument("--max-bytes", type=float, metavar="GB",
                        help="memory the search's tables may take, in GB (1e9 bytes; default 4 GiB)")
    parser.add_argument("--coarsen", action="store_true",
                        help="element-wise ops follow their input's tiling (a smaller space, far faster search)")
    parser.add_argument("--tensor-reuse", action="store_true",
                        help="TensorOpt's keep-both: a consumer's re-laid-out copy of a tensor may be kept for "
                        "backward beside the tensor (one more variable per candidate)")
    parser.add_argument("--plot", metavar="PNG", help="draw the frontier (TensorOpt Fig. 6) to this file")
    parser.add_argument("--json", metavar="PATH", help="write the frontier as JSON")
    parser.add_argument("--progress", action="store_true", help="show a progress bar (needs tqdm)")
    parser.set_defaults(run=run_frontier)


def _fail(message: str) -> int:
    print(f"tilewise frontier: error: {message}", file=sys.stderr)
    return 2


def run_frontier(args: argparse.Namespace) -> int:
    import pathlib

    from .._core import SearchTimeout, SearchTooLarge
    from .._util import fmt_bytes
    from ..plan.frontier import frontier
    from ..sim.cluster import Cluster
    from ._load import load_model

    if args.devices is not None and args.devices < 1:
        return _fail(f"--devices must be at least 1, got {args.devices}")
    if args.memory_limit is not None and not args.memory_limit > 0:
        return _fail(f"--memory-limit must be positive, got {args.memory_limit}")
    if args.time_limit is not None and not args.time_limit > 0:
        return _fail(f"--time-limit must be positive, got {args.time_limit}")
    g = load_model(args.model, batch=args.batch)
    cluster = Cluster.from_json(pathlib.Path(args.cluster)) if args.cluster.endswith(".json") else args.cluster
    if args.max_table is not None and args.max_table < 1:
        return _fail(f"--max-table must be at least 1, got {args.max_table}")
    if args.max_bytes is not None and not args.max_bytes > 0:
        return _fail(f"--max-bytes must be positive, got {args.max_bytes}")
    bucket = None if args.memory_bucket is None else args.memory_bucket * 1e6
    max_bytes = None if args.max_bytes is None else int(args.max_bytes * 1e9)
    try:
        f = frontier(g, cluster, devices=args.devices, time_limit=args.time_limit, progress=args.progress,
                     memory_bucket=bucket, coarsen=args.coarsen, heuristic=args.heuristic, max_table=args.max_table,
                     max_bytes=max_bytes, tensor_reuse=args.tensor_reuse)
    except (ValueError, SearchTooLarge, SearchTimeout) as e:
        return _fail(str(e))
    print(repr(f))
    ops = [r for r in f.configurations() if r["kind"] == "op"]
    print(f"configurations: {len(ops)} op classes, K {min(r['before'] for r in ops)}-{max(r['before'] for r in ops)}"
          f" (pruned {min(r['after'] for r in ops)}-{max(r['after'] for r in ops)}); costing {f.build_seconds:.3g} s, "
          f"search {f.stats.seconds:.3g} s, heuristic eliminations {f.stats.heuristic_eliminations}"
          + (f", {f.stats.tied_ops} op classes tied to their input (--coarsen)" if args.coarsen else "")
          + (f", {len(f.search_graph.copies)} reuse candidates, kept at "
             f"{sum(bool(f.kept_copies(p)) for p in f.points)} points (--tensor-reuse)" if args.tensor_reuse else ""))
    tp = f.turning_point
    step = max(1, len(f.points) // 12)
    for p in list(f.points[::step]) + ([f.points[-1]] if f.points and (len(f.points) - 1) % step else []):
        mark = "  <- turning point" if tp is not None and p.index == tp.index else ""
        print(f"  #{p.index:<5} {p.time * 1e3:10.4g} ms (compute {p.compute * 1e3:.4g}, network "
              f"{p.network * 1e3:.4g})  {fmt_bytes(p.memory):>10}{mark}")
    if tp is not None:
        print(f"turning point: #{tp.index}, {tp.time * 1e3:.4g} ms, {fmt_bytes(tp.memory)}")
    for name, b in f.baselines.items():
        print(f"{name:>14}: {b.time * 1e3:.4g} ms, {fmt_bytes(b.memory)}")
    if f.mesh_points:
        print(f"Mesh-TensorFlow: {len(f.mesh_points)} points, least memory {fmt_bytes(f.mesh_points[0][1])}")
    if args.memory_limit is not None:
        best = f.best(args.memory_limit * 1e9)
        if best is None:
            print(f"no point fits {args.memory_limit:g} GB x 1/1.1 (least memory {fmt_bytes(f.points[0].memory)})")
        else:
            print(f"best within {args.memory_limit:g} GB x 1/1.1: #{best.index}, {best.time * 1e3:.4g} ms, "
                  f"{fmt_bytes(best.memory)}")
    try:
        if args.json:
            f.to_json(args.json)
            print(f"wrote {args.json}")
        if args.plot:
            import matplotlib

            matplotlib.use("Agg")
            ax = f.plot()
            ax.figure.savefig(args.plot, dpi=120, bbox_inches="tight")
            print(f"wrote {args.plot}")
    except OSError as e:
        return _fail(str(e))
    return 0

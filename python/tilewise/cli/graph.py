"""``tilewise graph MODEL``: build a zoo model's training graph and show it."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def add_graph(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "graph",
        help="build a model's training graph: summary, coarsened graph, JSON/DOT",
        description="Build the training graph (forward, backward, optimizer update) of a zoo model, print "
        "its summary and its coarsened graph (Tofu section 5.1), and optionally write it as JSON or "
        "Graphviz DOT.",
        epilog="models: wresnet-D-W, resnet-D, rnn-L-XK, brnn-L-XK, transformer-L-H-A, bert-base, vgg16, "
        "alexnet, inception-W, nasnet-R, mlp-L-H (e.g. tilewise graph wresnet-152-10 --batch 8)",
    )
    parser.add_argument("model", help="model name, e.g. wresnet-152-10, rnn-10-8k, bert-base")
    parser.add_argument("--batch", type=int, help="batch size (default: the papers' for that family)")
    parser.add_argument("--forward-only", action="store_true", help="only the forward graph")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum", "adam"])
    parser.add_argument("--json", metavar="PATH", help="write the graph as JSON")
    parser.add_argument("--dot", metavar="PATH", help="write the graph as Graphviz DOT")
    parser.add_argument("--coarse-dot", metavar="PATH", help="write the coarsened graph as Graphviz DOT")
    parser.set_defaults(run=run_graph)


def run_graph(args: argparse.Namespace) -> int:
    import pathlib

    from ..graph.coarsen import coarsen
    from ..models import get

    if args.batch is not None and args.batch < 1:
        raise SystemExit(f"tilewise graph: --batch must be positive, got {args.batch}")
    t0 = time.perf_counter()
    kwargs = {"train": not args.forward_only}
    if not args.forward_only:
        kwargs["optimizer"] = args.optimizer
    g = get(args.model, batch=args.batch, **kwargs)
    built = time.perf_counter() - t0
    t0 = time.perf_counter()
    coarse = coarsen(g)
    coarsened = time.perf_counter() - t0
    print(f"{args.model}: built in {built:.3f} s, coarsened in {coarsened * 1000:.1f} ms")
    print(g.summary(), end="")
    print(coarse.summary(), end="")
    for path, text in ((args.json, g.to_json), (args.dot, g.to_dot), (args.coarse_dot, coarse.to_dot)):
        if path:
            try:
                pathlib.Path(path).write_text(text())
            except OSError as e:  # a missing folder, no permission: a message, not a traceback
                print(f"tilewise graph: error: cannot write {path}: {e.strerror or e}", file=sys.stderr)
                return 2
            print(f"wrote {path}")
    return 0

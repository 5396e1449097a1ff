"""``tilewise ops`` and ``tilewise analyze``: the TDL analysis from the command line."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def add_ops(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "ops",
        help="analyse every operator of the TDL library",
        description="For every operator in tdl_ops (with its first test case's shapes): inputs, output "
        "shape, whether it is element-wise, its partition strategies for K workers, and FLOPs; then "
        "the time the whole analysis took.",
    )
    parser.add_argument("--parts", type=int, default=2, help="number of workers (default 2)")
    parser.add_argument("--family", help="only this family (e.g. conv, linalg)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(run=run_ops)


def _label(s) -> str:
    if s.kind == "replicate":
        return "replicate"
    return s.dim if s.kind == "output" else f"{s.dim}({s.reducer})"


def run_ops(args: argparse.Namespace) -> int:
    if args.parts < 1:
        raise SystemExit(f"tilewise ops: --parts must be positive, got {args.parts}")
    import tdl_ops

    first_case = {}
    for case in tdl_ops.CASES:
        first_case.setdefault(case.op, case)
    rows = []
    t0 = time.perf_counter()
    for name, op in tdl_ops.ALL.items():
        family = op.fn.__module__.rsplit(".", 1)[-1]
        if args.family and family != args.family:
            continue
        case = first_case[name]
        shapes = dict(zip(op.inputs, case.shapes))
        strategies = op.strategies(parts=args.parts, **shapes, **case.attrs)
        cost = op.cost(**shapes, **case.attrs)
        rows.append({
            "op": name,
            "family": family,
            "inputs": {n: list(s) for n, s in shapes.items()},
            "attrs": dict(case.attrs),
            "output": list(op.infer_shape(**shapes, **case.attrs)),
            "elementwise": op.is_elementwise_for(**shapes, **case.attrs),
            "strategies": [_label(s) for s in strategies],
            "flops": cost["flops"],
        })
    seconds = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"parts": args.parts, "seconds": seconds, "ops": rows}, indent=2))
        return 0
    if not rows:
        raise SystemExit(f"tilewise ops: no operator in family {args.family!r}")
    width = max(len(r["op"]) for r in rows)
    print(f"{'op':<{width}}  {'family':<13} {'output':<16} {'ew':<3} {'FLOPs':>10}  strategies ({args.parts} workers)")
    for r in rows:
        out = "x".join(map(str, r["output"])) or "scalar"
        ew = "yes" if r["elementwise"] else ""
        strategies = " ".join(r["strategies"])
        print(f"{r['op']:<{width}}  {r['family']:<13} {out:<16} {ew:<3} {r['flops']:>10.3g}  {strategies}")
    print(f"\n{len(rows)} operators analysed in {seconds * 1000:.1f} ms")
    return 0


def add_analyze(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "analyze",
        help="show the partition strategies of one operator",
        description="Print every basic partition strategy of a tdl_ops operator and the region of each "
        "input every worker reads (Tofu section 4.2).",
        epilog="example: tilewise analyze conv1d --shape data=8,16,34 --shape filters=16,32,3 --parts 2",
    )
    parser.add_argument("op", help="operator name in tdl_ops (see `tilewise ops`)")
    parser.add_argument("--parts", type=int, default=2, help="number of workers (default 2)")
    parser.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,..",
                        help="an input's shape (default: the op's first test case)")
    parser.add_argument("--attr", action="append", default=[], metavar="NAME=VALUE",
                        help="an attribute, e.g. stride=2 or kernel=3,3")
    parser.add_argument("--out", metavar="D0,D1,..", help="output shape, when accesses do not determine it")
    parser.add_argument("--symbolic", action="store_true", help="symbolic regions over the extents X_v")
    parser.set_defaults(run=run_analyze)


#: The largest extent and element count the analyses take (cpp/tdl/limits.h); a shape beyond them
#: is refused here, before the description is analysed.
MAX_EXTENT, MAX_ELEMENTS = 2**40, 2**44


def _ints(text: str, what: str) -> tuple:
    try:
        dims = tuple(int(t) for t in text.split(",") if t.strip() != "")
    except ValueError:
        raise SystemExit(f"tilewise analyze: {what} must be comma-separated integers, got {text!r}") from None
    elements = 1
    for d in dims:
        if not 0 <= d <= MAX_EXTENT:
            raise ValueError(f"{what}: extent {d} is out of range; expected 0 to 2^40")
        elements *= d
    if elements > MAX_ELEMENTS:
        raise ValueError(f"{what}: {elements:,} elements, more than 2^44")
    return dims


def _value(text: str):
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    if "," in text:
        return tuple(_value(t) for t in text.split(","))
    if text in ("True", "False"):
        return text == "True"
    return text


def _pairs(items, what):
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"tilewise analyze: {what} must be NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def run_analyze(args: argparse.Namespace) -> int:
    import tdl_ops

    op = tdl_ops.ALL.get(args.op)
    if op is None:
        close = sorted(n for n in tdl_ops.ALL if args.op.lower() in n.lower())
        hint = f"; did you mean {', '.join(close)}?" if close else "; `tilewise ops` lists them"
        raise SystemExit(f"tilewise analyze: no operator {args.op!r}{hint}")
    case = next((c for c in tdl_ops.CASES if c.op == args.op), None)
    shapes = dict(zip(op.inputs, case.shapes)) if case else {}
    attrs = dict(case.attrs) if case and not args.attr else {}
    shapes.update({k: _ints(v, f"--shape {k}") for k, v in _pairs(args.shape, "--shape").items()})
    attrs.update({k: _value(v) for k, v in _pairs(args.attr, "--attr").items()})
    ranks = tuple(len(s) for s in shapes.values()) if len(shapes) == len(op.inputs) else None
    print(f"{op.name}: {op.trace(ranks, {**op.attrs, **attrs})}")
    if args.symbolic:
        ranks = {n: len(s) for n, s in shapes.items()}
        strategies = op.symbolic_strategies(parts=args.parts, **ranks, **attrs)
    else:
        out = _ints(args.out, "--out") if args.out else None
        print("shapes: " + ", ".join(f"{n}={tuple(s)}" for n, s in shapes.items())
              + f" -> out={op.infer_shape(**shapes, **attrs) if out is None else out}")
        strategies = op.strategies(parts=args.parts, out=out, **shapes, **attrs)
    for s in strategies:
        print(s.describe())
    return 0

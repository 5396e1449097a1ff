"""Differential testing: a random training graph run by the partitioned runtime, by the float64
reference interpreter and (when torch is installed) by torch, compared step by step.

For each of 3 steps: the loss, the model's output and every parameter's gradient; after them, every
parameter and optimizer state. The runtime computes in float32 on ``case.devices`` devices under the
case's plan, the reference in float64 op by op (``tw.run_reference``), torch in float64 from the same
initial parameters and feeds. Runtime against either: ``|got - want| <= rtol * max(|want|, floor)``
per tensor (max over its elements; ``rtol`` 1e-4, ``floor`` 1e-2 of the tensor's own scale: float32
kernels against a float64 oracle); the reference against torch, both float64: 1e-7.

Long mode::

    python -m tilewise.testing.differential --cases 5000 --seed 1       # prints failures as Case(...)
    python -m tilewise.testing.differential --case-seed 123456          # one case again
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

from ..exec.executable import compile as compile_plan
from ..graph.feeds import example_feeds
from ..graph.graph import Graph
from ..graph.reference import run_reference
from ..plan.sample import random_plan
from ..plan.search import partition
from .random_graphs import Case, build_graph, build_torch, random_case

STEPS = 3
RTOL, FLOOR = 1e-4, 1e-2
ORACLE_RTOL = 1e-7  # float64 reference against float64 torch


@dataclass
class Mismatch:
    """One tensor out of tolerance: ``what`` names the step, the tensor and the two sides."""

    what: str
    error: float
    tolerance: float

    def __str__(self):
        return f"{self.what}: max |difference| {self.error:.3g} > {self.tolerance:.3g}"


@dataclass
class CaseResult:
    """What ``run_case`` found: mismatches (empty when the case passes), or the error it raised."""

    case: Case
    mismatches: list = field(default_factory=list)
    error: str | None = None
    compared: int = 0
    torch: bool = False
    seconds: float = 0.0
    worst: float = 0.0  # the largest error / tolerance of the runtime's comparisons (< 1 passes)

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.error is None

    def report(self) -> str:
        """The case as Python, what failed, and how to run it again."""
        lines = [f"differential case {self.case.describe()}", f"  reproduce: run_case({self.case!r})"]
        if self.error:
            lines.append(f"  error: {self.error}")
        lines += [f"  {m}" for m in self.mismatches[:12]]
        if len(self.mismatches) > 12:
            lines.append(f"  ... {len(self.mismatches) - 12} more")
        return "\n".join(lines)

    def __repr__(self):
        state = "ok" if self.ok else f"FAILED ({len(self.mismatches)} mismatches{', error' if self.error else ''})"
        return f"<CaseResult {self.case.describe()}: {state}, {self.compared} tensors compared>"


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def make_plan(graph: Graph, case: Case):
    """The case's plan: its planner on its devices, or a random valid plan."""
    if case.planner == "random":
        return random_plan(graph, case.devices, seed=case.seed)
    return partition(graph, devices=case.devices, algorithm=case.planner)


def case_feeds(graph: Graph, case: Case, step: int) -> dict:
    """Step ``step``'s feeds: the input and label as ``example_feeds`` makes them; other inputs (the
    recurrent layers' initial states) zero, as torch starts them."""
    feeds = example_feeds(graph, seed=(case.seed * 7919 + step) % 2**32)
    for name in feeds:
        if graph.tensor(name).role == "input" and name != "input":
            feeds[name] = np.zeros_like(feeds[name])
    return feeds


def _gradients(graph: Graph) -> dict:
    """Parameter name -> its gradient tensor."""
    return {t.grad_of.name: t for t in graph.tensors
            if t.grad_of is not None and t.grad_of.role == "parameter" and t.grad_of.producer is None}


def _state(graph: Graph) -> list:
    return [t for t in graph.tensors if t.producer is None and t.role in ("parameter", "optimizer_state")]


def _reference(graph: Graph, start: dict, feeds: list) -> tuple[list, dict]:
    values = {k: v.astype(np.float64) for k, v in start.items()}
    steps = []
    for f in feeds:
        out = run_reference(graph, {**values, **f})
        steps.append({k: out[t.name] for k, t in graph.outputs.items()})
        for t in graph.tensors:
            if t.updates is not None:
                values[t.updates.name] = out[t.name]
    return steps, values


def _torch(case: Case, graph: Graph, start: dict, feeds: list) -> tuple[list, dict]:
    import torch

    model, loss_fn, make_optimizer = build_torch(case)
    model = model.double().train()
    params = dict(model.named_parameters())
    names = {t.name for t in graph.tensors if t.producer is None and t.role == "parameter"}
    if set(params) != names:
        raise AssertionError(f"torch's parameters {sorted(params)} are not the graph's {sorted(names)}")
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(torch.from_numpy(start[name].astype(np.float64)))
    opt = make_optimizer(model.parameters())
    steps = []
    for f in feeds:
        x = torch.from_numpy(f["input"])
        x = x.long() if case.family == "seq" else x.double()
        out = model(x)
        loss = loss_fn(out, torch.from_numpy(f["label"]).double())
        opt.zero_grad()
        loss.backward()
        got = {"loss": loss.detach().numpy(), "output": out.detach().numpy()}
        got.update({f"grad:{n}": p.grad.detach().numpy().copy() for n, p in params.items()})
        steps.append(got)
        opt.step()
    return steps, {n: p.detach().numpy().copy() for n, p in params.items()}


def _compare(result: CaseResult, what: str, got, want, rtol: float, runtime: bool) -> None:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    result.compared += 1
    if got.shape != want.shape:
        result.mismatches.append(Mismatch(f"{what}: shape {got.shape} vs {want.shape}", float("inf"), 0.0))
        return
    tol = rtol * max(float(np.abs(want).max(initial=0.0)), FLOOR)
    err = float(np.abs(got - want).max(initial=0.0)) if np.all(np.isfinite(got)) else float("inf")
    if runtime:
        result.worst = max(result.worst, err / tol)
    if not err <= tol:
        result.mismatches.append(Mismatch(what, err, tol))


def run_case(case: Case, *, use_torch: bool | None = None, rtol: float = RTOL) -> CaseResult:
    """Run ``case`` three ways and compare (module docstring). ``use_torch``: None = when installed.
    Never raises for a failing case: an exception is recorded in ``result.error``."""
    result = CaseResult(case)
    start_time = time.perf_counter()
    try:
        _run(case, result, _torch_available() if use_torch is None else use_torch, rtol)
    except Exception as e:  # noqa: BLE001 - any exception is a finding, reported with the case
        result.error = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}"
    result.seconds = time.perf_counter() - start_time
    return result


def _run(case: Case, result: CaseResult, use_torch: bool, rtol: float) -> None:
    graph = build_graph(case)
    for name, t in _gradients(graph).items():
        graph.outputs[f"grad:{name}"] = t
    plan = make_plan(graph, case)
    exe = compile_plan(graph, plan).initialize(seed=case.seed % 2**32)
    start = {t.name: exe.get(t) for t in _state(graph)}
    feeds = [case_feeds(graph, case, s) for s in range(STEPS)]
    got = [exe.step(f) for f in feeds]
    final = {t.name: exe.get(t) for t in _state(graph)}
    want, want_final = _reference(graph, start, feeds)
    for s in range(STEPS):
        for k in want[s]:
            _compare(result, f"step {s + 1} {k}: runtime vs reference", got[s][k], want[s][k], rtol, True)
    for k in final:
        _compare(result, f"after {STEPS} steps {k}: runtime vs reference", final[k], want_final[k], rtol, True)
    if use_torch:
        result.torch = True
        ref, ref_final = _torch(case, graph, start, feeds)
        for s in range(STEPS):
            for k in ref[s]:
                _compare(result, f"step {s + 1} {k}: runtime vs torch", got[s][k], ref[s][k], rtol, True)
                _compare(result, f"step {s + 1} {k}: reference vs torch", want[s][k], ref[s][k], ORACLE_RTOL, False)
        for k in ref_final:
            _compare(result, f"after {STEPS} steps {k}: runtime vs torch", final[k], ref_final[k], rtol, True)
            _compare(result, f"after {STEPS} steps {k}: reference vs torch", want_final[k], ref_final[k],
                     ORACLE_RTOL, False)


def case_seeds(seed: int, cases: int) -> list[int]:
    """The case seeds of a long run: ``cases`` numbers drawn from ``seed``."""
    rng = random.Random(seed)
    return [rng.randrange(2**31) for _ in range(cases)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tilewise.testing.differential",
                                     description="Random training graphs: the runtime against the float64 "
                                                 "reference and torch (docs/RELIABILITY.md).")
    parser.add_argument("--cases", type=int, default=200, help="how many cases (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the case seeds (default 0)")
    parser.add_argument("--case-seed", type=int, action="append", help="run only the case of this seed (repeatable)")
    parser.add_argument("--no-torch", action="store_true", help="compare with the reference only")
    parser.add_argument("--quiet", action="store_true", help="no progress line per 100 cases")
    args = parser.parse_args(argv)
    seeds = args.case_seed or case_seeds(args.seed, args.cases)
    use_torch = False if args.no_torch else None
    failed, families, worst, t0 = [], {}, 0.0, time.perf_counter()
    for i, s in enumerate(seeds):
        r = run_case(random_case(s), use_torch=use_torch)
        families[r.case.family] = families.get(r.case.family, 0) + 1
        worst = max(worst, r.worst)
        if not r.ok:
            failed.append(r)
            print(f"FAILED (case seed {s}):\n{r.report()}", flush=True)
        if not args.quiet and (i + 1) % 100 == 0:
            print(f"[differential] {i + 1}/{len(seeds)} cases, {len(failed)} failed, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    mix = ", ".join(f"{k} {v}" for k, v in sorted(families.items()))
    print(f"[differential] {len(seeds)} cases ({mix}) in {time.perf_counter() - t0:.1f} s: {len(failed)} failed; "
          f"worst runtime error {worst:.2f} of its tolerance")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

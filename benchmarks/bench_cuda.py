"""The CUDA backend on a GPU beside torch's own CUDA eager step, and a swapped GPU run beside the
simulator (issue 18's acceptance; run by scripts/gpu_check.sh on a lent machine, never in CI).

1. **Training steps against torch.** Each model is a torch module (bench_models_torch.build: MLP,
   Wide ResNet, 2-layer LSTM, and with ``transformers`` installed GPT-2 small from its config), imported
   with ``tw.from_torch`` (MSE loss, Adam), run on one GPU with ``backend="cuda"`` and by torch on the
   same GPU (eager, TF32 off on both sides: our cuBLAS and cuDNN calls use FP32/FMA math). Steps
   interleave, each side's second step in a row timed (ours: ``exe.step_seconds``, which ends with a
   synchronisation; torch: ``torch.cuda.synchronize`` around it); medians. After ``--check-steps``
   steps from the same weights both sides' parameters are compared (largest difference relative to
   the tensor's largest value). Goal: ours within 1.3x torch's step.
2. **Swapped run.** A model needing about 4x the memory given to it: SwapAdvisor's search on the GPU's
   own profile (``tw.swap_plan(graph, "this-gpu", device_memory=need / 4)``, ``tilewise calibrate
   --gpu`` first), the plan run with ``backend="cuda"`` (the pool as the device memory, a pinned host
   store, swaps on the copy streams), its measured step beside the simulated one (``exe.predict()``
   on "this-gpu", with the kernel model and with the graph's own op times,
   ``tw.measure_ops(graph, backend="cuda")``) and beside the unswapped step. Goal: within 15 %.

    python benchmarks/bench_cuda.py [--models mlp,wresnet,lstm,gpt2-small] [--runs 10] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

import tilewise as tw
from tilewise.graph.feeds import example_feeds
from tilewise.plan.plan import Plan

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from bench_models_torch import build  # noqa: E402

SWAPPED = {
    "mlp-16-4096 (batch 2048)": lambda: tw.models.mlp(layers=16, hidden=4096, batch=2048),
    "rnn-4-2048 (16 steps, batch 256)": lambda: tw.models.rnn(layers=4, hidden=2048, steps=16, batch=256,
                                                              in_features=1024),
}


def _load(exe, values: dict) -> None:
    for name, value in values.items():
        exe.set(name, np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value))


def versus_torch(name: str, runs: int, check_steps: int) -> dict:
    import copy

    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model, inputs = build(name, quick=False)
    model.train()
    with torch.no_grad():
        target = torch.randn_like(model(**inputs))
    make_opt = lambda params: torch.optim.Adam(params, lr=1e-4)  # noqa: E731
    g = tw.from_torch(model, inputs, loss=F.mse_loss, optimizer=make_opt(model.parameters()), label=target)
    feeds = {**g.torch_import.feeds(model, inputs), "label": target}
    t0 = time.perf_counter()
    try:
        exe = tw.compile(g, tw.partition(g, devices=1), backend="cuda")
    except tw.CudaError as e:
        if getattr(e, "name", "") == "Untranslatable":
            return dict(model=name, untranslatable=e.ops.strip()[:400])
        raise
    _load(exe, feeds)
    setup = time.perf_counter() - t0
    ref = copy.deepcopy(model).cuda()
    opt = make_opt(ref.parameters())
    cuda_inputs = {k: v.cuda() for k, v in inputs.items()}
    cuda_target = target.cuda()

    def torch_step():
        opt.zero_grad()
        F.mse_loss(ref(**cuda_inputs), cuda_target).backward()
        opt.step()
        torch.cuda.synchronize()

    for _ in range(check_steps):  # the same steps from the same weights, then the parameters compared
        exe.step()
        torch_step()
    worst = 0.0
    for pname, p in ref.named_parameters():
        gname = pname if pname in {t.name for t in g.tensors} else None
        if gname is None:
            continue
        want = p.detach().cpu().numpy()
        got = exe.get(gname)
        worst = max(worst, float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-30))
    ours, theirs = [], []
    for _ in range(runs):
        exe.step()
        exe.step()
        ours.append(exe.step_seconds)
        torch_step()
        torch.cuda.synchronize()
        t = time.perf_counter()
        torch_step()
        theirs.append(time.perf_counter() - t)
    a, b = statistics.median(ours), statistics.median(theirs)
    breakdown = where_the_time_goes(g, exe)
    algorithms: dict[str, dict[int, int]] = {}  # cuDNN's choices: per mode, algorithm -> convolutions
    for c in exe._core.conv_algorithms():
        algorithms.setdefault(c["mode"], {}).setdefault(c["algo"], 0)
        algorithms[c["mode"]][c["algo"]] += 1
    return dict(model=name, ops=len(g.ops), parameters=g.num_parameters, ours=a, torch=b, ratio=a / b,
                parameter_error=worst, check_steps=check_steps, setup_seconds=setup, conv_algorithms=algorithms,
                breakdown=breakdown)


def where_the_time_goes(g, exe, top: int = 10) -> list[tuple[str, int, float]]:
    """One step timed by CUDA events: (kernel or instruction kind, launches, seconds), the largest first
    (where the next kernel work should go)."""
    exe._core.step(timed=True)
    per: dict[str, list] = {}
    for d, row in enumerate(exe._core.instruction_seconds):
        prog = json.loads(exe._core.program(d).to_json())["instructions"]
        for ins, (start, end) in zip(prog, row, strict=True):
            if end <= start:
                continue
            key = (g.op(ins["op"]).op.kernel or "?") if ins["kind"] == "compute" else ins["kind"]
            entry = per.setdefault(key, [0, 0.0])
            entry[0] += 1
            entry[1] += end - start
    return sorted(((k, n, t) for k, (n, t) in per.items()), key=lambda r: -r[2])[:top]


def swapped_run(name: str, builder, fraction: float, time_limit: float, runs: int) -> dict:
    from tilewise import _cuda

    g = builder()
    plan1 = Plan.one_device(g)
    keep = [t.id for t in g.results().values()]
    launch = _cuda.translate(g._g, plan1._core, 0, keep)
    need = int(launch["block_bytes"] + launch["resident_bytes"])  # what the unswapped GPU step holds
    from tilewise.plan.swapping import swap_problem
    least = swap_problem(g, "this-gpu", device_memory=10**15).least_memory
    memory = max(least, int(need * fraction))  # the least memory any pool works in, when more
    t0 = time.perf_counter()
    result = tw.swap_plan(g, "this-gpu", device_memory=memory, time_limit=time_limit)
    search = time.perf_counter() - t0
    values = {**tw.compile(g, plan1).initialize(0).state_dict(), **example_feeds(g, 0)}
    swapped = tw.compile(g, result, backend="cuda")
    plain = tw.compile(g, plan1, backend="cuda")
    for exe in (swapped, plain):
        _load(exe, values)
        exe.step()
    times, plain_times = [], []
    for _ in range(runs):  # alternating
        swapped.step()
        times.append(swapped.step_seconds)
        plain.step()
        plain_times.append(plain.step_seconds)
    op_times = tw.measure_ops(g, backend="cuda")
    kernel_model = swapped.predict("this-gpu").step_seconds
    with_ops = swapped.predict("this-gpu", op_times=op_times).step_seconds
    plain_predicted = plain.predict("this-gpu", op_times=op_times).step_seconds
    measured, unswapped = statistics.median(times), statistics.median(plain_times)
    return dict(model=name, need_bytes=need, memory_bytes=memory, least_bytes=int(least),
                pool_bytes=int(result.plan.memory_bytes), search_seconds=search,
                fraction_of_ideal_planned=float(result.fraction_of_ideal),
                planned_makespan=float(result.plan.makespan), measured=measured,
                predicted_kernel_model=kernel_model, predicted_with_op_times=with_ops,
                error_with_op_times=(with_ops - measured) / measured, unswapped_measured=unswapped,
                unswapped_predicted=plain_predicted, overhead_measured=measured / unswapped,
                overhead_predicted=with_ops / plain_predicted)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp,wresnet,lstm,gpt2-small")
    ap.add_argument("--swapped", default=",".join(SWAPPED), help="models for the swapped run ('' for none)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--check-steps", type=int, default=3)
    ap.add_argument("--fraction", type=float, default=0.25, help="device memory / what the step needs")
    ap.add_argument("--time-limit", type=float, default=20.0, help="the swap search's seconds")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "out"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from tilewise import _cuda
    report = dict(device=_cuda.device_info(0), versions=_cuda.versions(), rows=[], swapped=[])
    print(f"{report['device']['name']}: {'model':12s} {'ours s':>8s} {'torch s':>8s} {'ratio':>6s} {'param err':>9s}"
          "  (goal: ratio <= 1.3)", flush=True)
    for name in [m for m in args.models.split(",") if m]:
        try:
            r = versus_torch(name, args.runs, args.check_steps)
        except ImportError as e:  # transformers absent on the machine
            r = dict(model=name, skipped=str(e))
        except Exception as e:  # noqa: BLE001 - a benchmark row that fails is reported, the others still run
            r = dict(model=name, failed=f"{type(e).__name__}: {e}"[:600])
        report["rows"].append(r)
        if "ours" in r:
            print(f"{name:12s} {r['ours']:8.4f} {r['torch']:8.4f} {r['ratio']:6.2f} {r['parameter_error']:9.2e}  "
                  + ", ".join(f"{k} {t * 1e3:.2f} ms/{n}" for k, n, t in r["breakdown"][:5]), flush=True)
        else:
            print(f"{name:12s} {r}", flush=True)
        (out / "bench_cuda.json").write_text(json.dumps(report, indent=1))
    for name in [m for m in args.swapped.split(",") if m]:
        try:
            r = swapped_run(name, SWAPPED[name], args.fraction, args.time_limit, args.runs)
            ms = {k: r[k] * 1e3 for k in ("measured", "predicted_with_op_times", "predicted_kernel_model")}
            print(f"swapped {name}: measured {ms['measured']:.1f} ms, simulated {ms['predicted_with_op_times']:.1f}"
                  f" ms with op times ({r['error_with_op_times']:+.1%}), {ms['predicted_kernel_model']:.1f} ms with "
                  f"the kernel model; unswapped {r['unswapped_measured'] * 1e3:.1f} ms; memory "
                  f"{r['memory_bytes'] / 2**30:.2f} of {r['need_bytes'] / 2**30:.2f} GiB", flush=True)
        except Exception as e:  # noqa: BLE001
            r = dict(model=name, failed=f"{type(e).__name__}: {e}"[:600])
            print(f"swapped {name}: {r['failed']}", flush=True)
        report["swapped"].append(r)
        (out / "bench_cuda.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

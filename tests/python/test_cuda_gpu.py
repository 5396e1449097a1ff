"""The CUDA backend on a GPU (docs/CUDA.md; scripts/gpu_check.sh runs this file on a lent machine):
steps on the GPU against the CPU runtime's, float32, 1e-5 relative. Skipped with a reason where no
GPU is visible (CI); models with ops that have no CUDA kernel yet are xfailed naming them."""
import importlib.util

import numpy as np
import pytest

import tdl_ops
import tilewise as tw


def _devices() -> tuple[int, str]:
    if importlib.util.find_spec("tilewise._cuda") is None:
        return 0, "tilewise._cuda was not built"
    from tilewise import _cuda
    return _cuda.device_count()


COUNT, WHY = _devices()
pytestmark = pytest.mark.skipif(COUNT == 0, reason=f"no CUDA device: {WHY}")

TOLERANCE = 1e-5

MODELS = {
    "mlp-inference": lambda: tw.models.mlp(layers=2, hidden=64, batch=8, train=False),
    "mlp": lambda: tw.models.mlp(layers=2, hidden=64, batch=8),
    "transformer": lambda: tw.models.transformer(layers=1, hidden=64, heads=2, batch=2, seq=16, vocab=128),
    "lstm": lambda: tw.models.rnn(layers=1, hidden=64, batch=4, steps=5, in_features=32),
    "wrn": lambda: tw.models.wresnet(depth=50, width=1, batch=2, image=32, classes=10),
}


def _compile_or_xfail(g, plan):
    try:
        return tw.compile(g, plan, backend="cuda")
    except tw.CudaError as e:
        if getattr(e, "name", "") == "Untranslatable":
            pytest.xfail(f"ops without a CUDA kernel yet: {e.ops.strip()[:300]}")
        raise


@pytest.mark.parametrize("name", sorted(MODELS))
def test_step_equals_the_cpu_runtime(name):
    _step_beside_the_cpu(MODELS[name](), 1, TOLERANCE)


def _step_beside_the_cpu(g, devices, tolerance):
    plan = tw.partition(g, devices=devices)
    gpu = _compile_or_xfail(g, plan)
    cpu = tw.compile(g, plan)
    cpu.initialize(seed=0)
    rng = np.random.default_rng(0)
    feeds = {t.name: (rng.integers(0, 2, t.shape) if t.dtype != "float32" else rng.standard_normal(t.shape))
             for t in g.tensors if t.producer is None and t.role in ("input", "label")}
    for key, value in {**cpu.state_dict(), **feeds}.items():
        gpu.set(key, value)
    results = cpu.step(feeds)
    gpu.step()
    for key, want in results.items():
        got = gpu.get(g.results()[key].name)
        scale = max(float(np.max(np.abs(want))), 1e-30)
        assert float(np.max(np.abs(got - want))) / scale <= tolerance, key


_CASES = [c for c in tdl_ops.CASES if tdl_ops.ALL[c.op].kernel is not None]


@pytest.mark.parametrize("case", _CASES, ids=[c.id for c in _CASES])
def test_every_kernel_case_on_the_gpu_equals_the_cpu_runtime(case):
    """Each library op's cases launched on the GPU (cuBLAS, cuDNN or the backend's own kernels) against
    the CPU runtime on the same inputs: the launches themselves, which the host check cannot see."""
    g = tw.Graph()
    ins = [g.input(f"in{i}", s) for i, s in enumerate(case.shapes)]
    try:
        y = g.apply(tdl_ops.ALL[case.op], ins, dict(case.attrs))
    except (tw.GraphError, tw.ShapeError, tw.TDLError):
        pytest.skip("the case's output shape needs more than its inputs give")
    feeds = {f"in{i}": np.asarray(a, np.float32)
             for i, a in enumerate(tdl_ops.make_inputs(case, np.random.default_rng(0)))}
    plan = tw.partition(g, devices=1, algorithm="data_parallel")
    cpu = tw.compile(g, plan)
    cpu.step(feeds)
    gpu = _compile_or_xfail(g, plan)
    for name, value in feeds.items():
        gpu.set(name, value)
    gpu.step()
    want, got = cpu.get(y), gpu.get(y.name)
    finite = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~finite], want[~finite])
    scale = max(float(np.max(np.abs(want[finite]), initial=0.0)), 1e-30)
    assert float(np.max(np.abs(got[finite] - want[finite]), initial=0.0)) / scale <= 1e-5


@pytest.mark.skipif(COUNT < 2, reason=f"needs 2 GPUs, {COUNT} visible")
@pytest.mark.parametrize("name", ["transformer", "lstm", "wrn"])
def test_a_step_over_two_gpus_equals_the_cpu_runtime(name):
    """Two GPUs in one process, NCCL between them (step_schedule.h's order, which the host executable
    checks without GPUs in test_cuda_host_executable.py)."""
    _step_beside_the_cpu(MODELS[name](), 2, 1e-4)


@pytest.mark.parametrize("fraction", [1.0, 1 / 3])
def test_a_swapped_step_equals_the_cpu_swapped_runtime(fraction):
    """A swap plan on the GPU: the pool as its memory, a pinned host store, swaps on the copy streams
    (the host executable checks the same launches without a GPU)."""
    from tilewise.graph.feeds import example_feeds
    from tilewise.plan.plan import Plan
    from tilewise.plan.swapping import swap_problem

    g = tw.models.mlp(layers=3, hidden=256, batch=32)
    ref = tw.compile(g, Plan.one_device(g)).initialize(0)
    ref.step(example_feeds(g, 0))
    need = ref.stats.peak_memory_per_device[0]
    least = swap_problem(g, "swapadvisor", device_memory=10**12).least_memory
    plan = swap_problem(g, "swapadvisor", device_memory=max(least, int(need * fraction))).plan()
    cpu = tw.compile(g, plan).initialize(0)
    gpu = tw.compile(g, plan, backend="cuda")
    for key, value in cpu.state_dict().items():
        gpu.set(key, value)
    for step in range(3):
        feeds = example_feeds(g, step)
        for key, value in feeds.items():
            gpu.set(key, value)
        results = cpu.step(feeds)
        gpu.step()
        for key, want in results.items():
            scale = max(float(np.max(np.abs(want))), 1e-30)
            assert float(np.max(np.abs(gpu.get(g.results()[key].name) - want))) / scale <= 1e-4, (key, step)

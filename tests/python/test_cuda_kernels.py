"""Every native kernel of the CPU backend has a CUDA translation, and every case of every library op
(tdl_ops.CASES) runs through it on the host exactly as the CPU kernel computes it (tilewise._cuda's
host check; docs/CUDA.md): on one device and split over 2-4 devices by several planners (so blocks
cut rows, columns, windows and reductions), on uniform, non-finite (NaN/+Inf/-Inf) and tied inputs.
What the GPU itself does with these launches is checked on a GPU only (test_cuda_gpu.py)."""
import importlib.util

import pytest

import tdl_ops
import tilewise as tw
from tilewise.tdl import native_kernel_roles

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tilewise._cuda") is None,
                                reason="tilewise._cuda was not built (needs nvcc and the nvidia wheels)")

TOLERANCE = 1e-5
PLANS = [(1, "data_parallel"), (2, "tofu"), (3, "equal_chop"), (4, "kcuts"), (4, "tofu")]
MODES = [{}, {"nonfinite": True}, {"coarse": True}]
# cuDNN's (and the host reference's) convolutions skip padded positions, where the CPU kernels and the
# interpreter multiply a padded 0 by the filter (0 * Inf = NaN): non-finite inputs differ there (what
# cuDNN itself does there is unknown until a GPU runs it). The direct convolutions follow the CPU.
PADDING_TIMES_INF = {"conv2d", "conv2d_backward_filter", "conv1d", "conv1d_backward_filter"}


@pytest.fixture(scope="module")
def cuda():
    from tilewise import _cuda
    return _cuda


def test_every_native_kernel_has_a_cuda_translation(cuda):
    assert set(native_kernel_roles()) - {name for name, _ in cuda.kernels()} == set()


_CASES = [c for c in tdl_ops.CASES if tdl_ops.ALL[c.op].kernel is not None]


@pytest.mark.parametrize("case", _CASES, ids=[c.id for c in _CASES])
def test_every_kernel_case_runs_as_the_cpu_kernel(cuda, case):
    g = tw.Graph()
    ins = [g.input(f"in{i}", s) for i, s in enumerate(case.shapes)]
    try:
        g.apply(tdl_ops.ALL[case.op], ins, dict(case.attrs))
    except (tw.GraphError, tw.ShapeError, tw.TDLError):
        pytest.skip("the case's output shape needs more than its inputs give")
    for devices, algorithm in PLANS:
        plan = tw.partition(g, devices=devices, algorithm=algorithm)
        assert not [r for r in cuda.coverage(g._g, plan._core) if r["why_not"]]
        for mode in MODES:
            rows = cuda.host_check(g._g, plan._core, seed=5, max_elements=1 << 16, **mode)
            assert rows and all(r["checked"] for r in rows), rows
            for r in rows:
                if mode.get("nonfinite") and r["library"] == "cudnn" and r["kernel"] in PADDING_TIMES_INF:
                    continue
                assert r["max_error"] <= TOLERANCE, (devices, algorithm, mode, r)


def test_convolutions_cudnn_cannot_express_run_as_direct_gathers(cuda):
    """A data gradient split over its rows, a filter gradient summed over part of the rows, and a
    dilated strided window whose symmetric frame the region cannot hold: each translates to the
    backend's own direct convolution (checked above); the planners' usual splits take cuDNN."""
    libraries = {}
    for case in _CASES:
        if not case.op.startswith(("conv2d", "conv1d")) or case.op.endswith("bias_grad"):
            continue
        g = tw.Graph()
        g.apply(tdl_ops.ALL[case.op], [g.input(f"in{i}", s) for i, s in enumerate(case.shapes)], dict(case.attrs))
        for devices, algorithm in PLANS:
            for r in cuda.coverage(g._g, tw.partition(g, devices=devices, algorithm=algorithm)._core):
                libraries.setdefault(r["kernel"], set()).add(r["library"])
    assert {k: v for k, v in libraries.items() if v != {"cudnn", "kernel"}} == {}, libraries


@pytest.mark.parametrize("op, shape, attrs", [
    ("mse_loss", [(64, 1024), (64, 1024)], {}),
    ("bce_with_logits", [(64, 1024), (64, 1024)], {}),
    ("reduce_max", [(2, 40000)], {"axis": 1}),
    ("reduce_min", [(2, 40000)], {"axis": 1}),
    ("reduce_sum", [(3, 30000)], {"axis": 1}),
    ("cross_entropy", [(4096, 16), (4096, 16)], {}),
    ("layer_norm_grad_gamma", [(4096, 32), (4096, 32)], {}),
])
def test_long_reductions_run_in_two_phases(cuda, op, shape, attrs):
    """A few outputs over a long range (a loss over a batch, an extremum over a long axis) and the
    norms' gamma gradients and cross-entropy's sum over rows: no GPU thread walks the whole range
    alone (a split reduction's partials fold at most 2048 elements; staged row ops compute each row's
    statistics once), and the two phases agree with the CPU kernel, NaN and ties included."""
    g = tw.Graph()
    g.apply(tdl_ops.ALL[op], [g.input(f"in{i}", s) for i, s in enumerate(shape)], attrs)
    for devices in (1, 2):
        plan = tw.partition(g, devices=devices)
        lp = cuda.translate(g._g, plan._core, 0)
        for r in lp["reductions"]:
            assert r["split"] > 1 and -(-r["folded"] // r["split"]) <= 2048, r
        assert all(r["staged"] for r in lp["rows"]), lp["rows"]
        assert lp["reductions"] or lp["rows"], "the call is a reduction or a row op"
        for mode in MODES:
            rows = cuda.host_check(g._g, plan._core, seed=3, max_elements=1 << 20, **mode)
            assert rows and all(r["checked"] and r["max_error"] <= TOLERANCE for r in rows), (mode, rows)

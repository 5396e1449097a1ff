"""The CUDA backend's program translation, checked without a GPU (tilewise._cuda; docs/CUDA.md):
which ops of the zoo's programs translate, the launch plan's arena (the CPU planner's block), and
the host reference of every translated call (cuBLAS's column-major sgemm, cuDNN's convolutions, the
device functors) against the CPU kernel on the same call, for plans on one and several devices."""
import importlib.util

import pytest

import tilewise as tw

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tilewise._cuda") is None,
                                reason="tilewise._cuda was not built (needs nvcc and the nvidia wheels)")

# Largest relative difference allowed between the CUDA plan run on the host and the CPU kernel: both
# float32; the GEMMs sum in a different order (double in the reference, blocked float32 in BLAS).
TOLERANCE = 1e-5

MODELS = {
    "mlp": lambda: tw.models.mlp(layers=2, hidden=64, batch=8),
    "transformer": lambda: tw.models.transformer(layers=1, hidden=64, heads=2, batch=2, seq=16, vocab=128),
    "lstm": lambda: tw.models.rnn(layers=1, hidden=64, batch=4, steps=5, in_features=32),
    "wrn": lambda: tw.models.wresnet(depth=50, width=1, batch=2, image=32, classes=10),
}


def _model(name):
    return MODELS[name]()


@pytest.fixture(scope="module")
def cuda():
    from tilewise import _cuda
    return _cuda


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("devices", [1, 2])
def test_translated_calls_match_the_cpu_kernels(cuda, name, devices):
    g = _model(name)
    plan = tw.partition(g, devices=devices)
    # The reference is plain loops: the Wide ResNet's large convolutions are skipped (its small ones checked).
    rows = cuda.host_check(g._g, plan._core, seed=7, max_elements=1 << (14 if name == "wrn" else 16))
    checked = [r for r in rows if r["checked"]]
    assert checked, "no call was checked"
    bad = [(r["op"], r["kernel"], r["max_error"]) for r in checked if not r["max_error"] <= TOLERANCE]
    assert not bad, bad
    # Every GEMM of the model is translated and checked (the parameter derivation is what breaks).
    gemms = [r for r in rows if r["library"] == "cublas"]
    assert gemms and all(r["checked"] or r["note"].startswith("skipped") for r in gemms)
    if name == "wrn":  # convolutions of every kind checked through the cuDNN reference
        assert {r["kernel"] for r in checked if r["library"] == "cudnn"} == {
            "conv2d", "conv2d_backward_data", "conv2d_backward_filter"}


# What translates today (docs/CUDA.md keeps the table): (ops, translated, the kernels refused).
COVERAGE = {
    "mlp": (16, 16, set()),
    "transformer": (107, 107, set()),
    "lstm": (88, 88, set()),
    "wrn": (676, 676, set()),
}

# The backend's own kernels each model's host check must reach (a selection that silently stopped
# running, or an input mode that skipped them, fails here).
OWN_KERNELS = {
    "mlp": {"mse_loss", "mse_loss_backward", "relu", "sgd"},
    "transformer": {"embedding", "embedding_grad", "softmax", "softmax_grad", "layer_norm", "layer_norm_grad_input", "layer_norm_grad_gamma",
                    "cross_entropy", "cross_entropy_backward", "split_heads", "merge_heads", "select", "unselect",
                    "slice_axis", "slice_axis_grad", "add_broadcast"},
    "lstm": {"lstm_cell", "lstm_hidden", "lstm_cell_grad_c", "lstm_hidden_grad_c", "lstm_cell_grad_gates",
             "lstm_hidden_grad_gates", "select", "stack", "mse_loss"},
    "wrn": {"batch_norm_train", "batch_norm_grad_input", "batch_norm_grad_gamma", "max_pool2d", "reshape",
            "cross_entropy", "cross_entropy_backward"},
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("mode", ["nonfinite", "coarse"])
def test_own_kernels_follow_the_cpu_on_nonfinite_and_tied_inputs(cuda, name, mode):
    """NaN/+Inf/-Inf inputs (1 in 16) must give the CPU kernel's NaNs and infinities; coarse inputs
    ({-1, -0.5, 0, 0.5, 1}) make ties, so max pooling's winner rule and its gradient's routing are
    exercised (uniform inputs almost never tie)."""
    g = _model(name)
    for devices in (1, 2):
        rows = cuda.host_check(g._g, tw.partition(g, devices=devices)._core, seed=11,
                               max_elements=1 << (14 if name == "wrn" else 16), **{mode: True})
        own = [r for r in rows if r["library"] == "kernel" and r["checked"]]
        bad = [(r["op"], r["kernel"], r["max_error"]) for r in own if not r["max_error"] <= TOLERANCE]
        assert not bad, bad
        assert OWN_KERNELS[name] <= {r["kernel"] for r in own}, OWN_KERNELS[name] - {r["kernel"] for r in own}


def test_max_pool_gradient_routes_ties_in_the_host_check(cuda):
    """The Wide ResNet's max-pool gradient on one device (the whole map) with coarse inputs: its y
    then equals some window inputs, several of them tied, so the routing rule is compared (on
    uniform inputs y matches no x and both sides give zeros)."""
    g = tw.models.wresnet(depth=50, width=1, batch=1, image=32, classes=10)
    rows = cuda.host_check(g._g, tw.partition(g, devices=1)._core, seed=3, max_elements=1 << 17, coarse=True)
    grad = [r for r in rows if r["kernel"] in ("max_pool2d", "max_pool2d_grad")]
    assert len(grad) == 2 and all(r["checked"] and r["max_error"] <= TOLERANCE for r in grad), grad


def test_coverage_of_the_zoo(cuda):
    """Every op of the MLP, transformer, LSTM and Wide ResNet training programs (their GEMMs and
    convolutions through cuBLAS and cuDNN, the rest the backend's own kernels); refusals (other
    models) name the kernel and why."""
    for name in MODELS:
        g = _model(name)
        rows = cuda.coverage(g._g, tw.partition(g, devices=1)._core)
        ops, translated, refused = COVERAGE[name]
        assert (len(rows), sum(not r["why_not"] for r in rows)) == (ops, translated), name
        assert {r["kernel"] for r in rows if r["why_not"]} == refused, name
        for r in rows:
            assert r["why_not"] or r["library"] in ("cublas", "cudnn", "kernel")
            if r["why_not"]:
                assert r["kernel"] in r["why_not"] or "native kernel" in r["why_not"], r
            if r["kernel"] in ("linear", "matmul", "matmul_tn", "conv2d", "conv2d_backward_data",
                               "conv2d_backward_filter", "relu", "sgd", "sum_axes"):
                assert not r["why_not"], r


def test_launch_plan_uses_the_cpu_arena_planner(cuda):
    g = tw.models.mlp(layers=2, hidden=16, batch=8, train=False)
    plan = tw.partition(g, devices=1)
    lp = cuda.translate(g._g, plan._core, 0)
    exe = tw.compile(g, plan)
    exe.initialize(seed=0)
    exe.step({"x": [[0.5] * 16] * 8})
    # The CPU arena after its first (recorded) step holds resident tensors plus the planned block.
    assert lp["block_bytes"] + lp["resident_bytes"] == exe.stats.peak_memory_per_device[0]
    assert lp["block_bytes"] + lp["resident_bytes"] == exe.stats.predicted_memory_per_device[0]
    kinds = {k for k, *_ in lp["launches"]}
    assert "compute" in kinds and all(s == 0 for _, s, *_ in lp["launches"])
    # linear: the bias written first, then one GEMM accumulating onto it (beta 1), m/n swapped.
    gemm = lp["gemms"][0]
    assert (gemm["m"], gemm["n"], gemm["k"], gemm["beta"]) == (16, 8, 16, 1.0)
    assert gemm["transa"] and not gemm["transb"]


def test_untranslatable_plans_name_every_op(cuda):
    """An op with no native kernel (the CPU interprets its TDL description) has no CUDA kernel either:
    translation refuses, naming the op and why."""
    @tw.op(name="interpreted_twice")
    def twice(x):
        return lambda i, j: x[i, j] * 2.0

    g = tw.Graph()
    y = g.apply(twice, [g.input("x", (4, 4))], {})
    g.apply(twice, [y], {})
    with pytest.raises(tw.CudaError, match="declares no native kernel") as e:
        cuda.translate(g._g, tw.partition(g, devices=1)._core, 0)
    assert e.value.call == "translate" and e.value.ops.count("declares no native kernel") == 2


def test_int64_ids_move_between_devices_bit_for_bit(cuda):
    """A transformer over 2 devices moves its int64 ids with 8-byte box copies (and its activations
    with 4-byte ones); on one device only float32 regions are assembled."""
    g = tw.models.transformer(layers=1, hidden=16, heads=2, batch=2, seq=8, vocab=32)
    assert {c["element_bytes"] for c in cuda.translate(g._g, tw.partition(g, devices=1)._core, 0)["copies"]} <= {4}
    copies = [c for d in (0, 1) for c in cuda.translate(g._g, tw.partition(g, devices=2)._core, d)["copies"]]
    assert {c["element_bytes"] for c in copies} == {4, 8}
    assert any(c["element_bytes"] == 8 and c["kind"] == "copy" for c in copies)


def test_kernel_table_names_libraries(cuda):
    table = dict(cuda.kernels())
    assert table["matmul"] == "cublas" and table["conv2d"] == "cudnn" and table["relu"] == "kernel"

"""Gradient parts summed as one batched op (graph/batched_parts.py): the weight-gradient products of an
unrolled layer become one linear_grad_weight over the steps' stacked operands, the unselects of every index
of an axis one stack. Oracle: the same graph with a running sum ("running" is never batched), through the
reference interpreter and the runtime on 1 and 2 devices."""
import numpy as np
import pytest

import tdl_ops
import tilewise as tw
from tilewise.graph.autodiff import gradient_accumulation

try:
    import torch
    from torch import nn
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

STEPS, BATCH, WIDTH = 4, 2, 8  # a step's operands (2 x 8, twice) are smaller than its product (8 x 8)


def _rnn(accumulate: str, indices=range(STEPS)):
    """h_t = tanh(h_{t-1} w + xs[t]) over the given steps of xs; gradients of w and xs."""
    g = tw.Graph()
    w = g.parameter("w", (WIDTH, WIDTH))
    xs = g.parameter("xs", (STEPS, BATCH, WIDTH))
    h = g.input("h0", (BATCH, WIDTH))
    with g.unroll("cell") as u:
        for n, t in enumerate(indices):
            with u.step(n):
                h = tdl_ops.tanh(tdl_ops.add(tdl_ops.matmul(h, w), tdl_ops.select(xs, axis=0, index=t)))
    grads = tw.grad(g, tdl_ops.mse_loss(h, g.label("t", (BATCH, WIDTH))), accumulate=accumulate)
    return g, grads


def _values(g, grads, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {t.name: rng.standard_normal(t.shape) for t in g.tensors if t.producer is None}
    out = tw.run_reference(g, feeds)
    return {name: out[t.name] for name, t in grads.items()}


def _types(g, phase="backward"):
    return [op.type for op in g.ops if op.phase == phase]


def test_products_of_every_step_are_one_matmul_over_the_steps():
    g, grads = _rnn("batched")
    gw = grads["w"].producer
    assert (gw.type, gw.name) == ("linear_grad_weight", "grad/w.sum")
    assert [(t.producer.type, t.shape) for t in gw.inputs] == [("stack_4", (BATCH, STEPS, WIDTH))] * 2
    assert "matmul_tn" not in _types(g) and not any(t.startswith("add_") for t in _types(g))
    ref, want = _values(g, grads), _values(*_rnn("running"))
    for name in want:
        np.testing.assert_allclose(ref[name], want[name], rtol=1e-12, atol=1e-14)


def test_the_sum_mode_and_the_zoo_keep_one_product_per_step():
    g, grads = _rnn("sum")
    assert grads["w"].producer.type == "add_4" and _types(g).count("matmul_tn") == STEPS
    rnn = tw.models.rnn(layers=1, hidden=8, steps=3, batch=4, in_features=6)  # the papers' graphs
    assert "add_3" in _types(rnn) and "linear_grad_weight" not in _types(rnn)


def test_slices_of_every_index_are_one_stack():
    g, grads = _rnn("batched")
    gx = grads["xs"].producer
    assert (gx.type, gx.name, gx.attrs["axis"]) == ("stack_4", "grad/xs.sum", 0)
    assert "unselect" not in _types(g)


def test_slices_that_miss_an_index_are_unselected_and_added():
    g, grads = _rnn("batched", indices=[0, 2, 3])  # xs[1] is never read
    assert grads["xs"].producer.type == "add_3" and _types(g).count("unselect") == 3
    ref, want = _values(g, grads), _values(*_rnn("running", indices=[0, 2, 3]))
    np.testing.assert_allclose(ref["xs"], want["xs"], rtol=1e-12, atol=1e-14)
    assert not ref["xs"][1].any()


def test_products_with_operands_larger_than_the_parts_are_added():
    g = tw.Graph()
    x, w = g.input("x", (16, 4)), g.parameter("w", (4, 4))  # 16 rows: concatenating would copy more than adding
    grads = tw.grad(g, tdl_ops.mse_loss(tdl_ops.matmul(tdl_ops.matmul(x, w), w), g.label("t", (16, 4))))
    s = grads["w"].producer
    assert s.type == "add_2" and [t.producer.type for t in s.inputs] == ["matmul_tn", "matmul_tn"]


def test_parts_of_mixed_kinds_are_summed_as_the_rules_built_them():
    g = tw.Graph()
    x, w = g.input("x", (3, 3)), g.parameter("w", (3, 3))
    y = tdl_ops.add(tdl_ops.matmul(x, w), tdl_ops.scale(w, alpha=2.0))  # a product and a scaling of w
    grads = tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (3, 3))))
    s = grads["w"].producer
    assert s.type == "add_2" and {t.producer.type for t in s.inputs} == {"matmul_tn", "scale"}
    product = next(t.producer for t in s.inputs if t.producer.type == "matmul_tn")
    assert product.forward_op == g.op("matmul")  # named and placed as the rule's copy would be
    rng = np.random.default_rng(1)
    xv, wv, tv = (rng.standard_normal((3, 3)) for _ in range(3))
    got = tw.run_reference(g, {"x": xv, "w": wv, "t": tv})[grads["w"].name]
    dy = 2 * (xv @ wv + 2 * wv - tv) / tv.size
    np.testing.assert_allclose(got, xv.T @ dy + 2 * dy, rtol=1e-12)


if torch is not None:

    class LSTMHead(nn.Module):  # bench_models_torch's model, small
        def __init__(self, width=8):
            super().__init__()
            self.lstm = nn.LSTM(width, width, num_layers=2, batch_first=True)
            self.head = nn.Linear(width, 3)

        def forward(self, x):
            return self.head(self.lstm(x)[0])


def _lstm_step(accumulate: str):
    torch.manual_seed(0)
    model, x = LSTMHead(), torch.randn(3, 5, 8)
    with gradient_accumulation(accumulate):
        g = tw.from_torch(model, (x,), loss=tdl_ops.mse_loss, optimizer=torch.optim.SGD(model.parameters(), lr=0.5))
    feeds = {k: np.asarray(v, np.float32) for k, v in g.torch_import.feeds(model, x).items()}
    feeds["label"] = np.random.default_rng(2).standard_normal(g.tensor("label").shape).astype(np.float32)
    return g, feeds


@needs_torch
def test_the_lstm_weight_gradients_are_one_gemm_each():
    g, _ = _lstm_step("batched")
    for name in ("weight_ih", "weight_hh"):
        for layer in (0, 1):
            grad = next(t for t in g.tensors if t.grad_of is not None and t.grad_of.name == f"lstm.{name}_l{layer}")
            assert grad.producer.type in ("matmul_tn", "linear_grad_weight"), (name, layer, grad.producer.type)
    types = _types(g)
    # per layer: one product for W_ih (the input projection's), one for W_hh; then the head's
    assert types.count("matmul_tn") + types.count("linear_grad_weight") == 5
    assert "unselect" not in types
    # no sum of weight-sized parts is left (the biases' parts, one vector per step, still are added)
    assert not [op for op in g.ops if op.type.startswith("add_") and op.output.ndim > 1 and op.phase == "backward"
                and op.output.grad_of is not None and op.output.grad_of.role == "parameter"]


@needs_torch
@pytest.mark.parametrize("devices", [1, 2])
def test_the_batched_lstm_step_equals_the_running_sum(devices):
    batched, feeds = _lstm_step("batched")
    running, _ = _lstm_step("running")
    want = tw.run_reference(running, feeds)
    updated = {t.updates.name: want[t.name] for t in running.tensors if t.updates is not None}
    plan = tw.partition(batched, devices=devices, algorithm="tofu" if devices > 1 else "data_parallel")
    exe = tw.compile(batched, plan)
    loss = exe.step(feeds)["loss"]
    assert loss == pytest.approx(want[running.outputs["loss"].name], rel=1e-5)
    for name, value in exe.parameters().items():
        np.testing.assert_allclose(value, updated[name], rtol=1e-4, atol=1e-6, err_msg=name)
    assert exe.stats.bytes_moved == plan.comm_bytes

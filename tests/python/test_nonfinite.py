"""NaN and Inf through the native kernels: every library op that runs on a native kernel gives NaN and
±Inf where the float64 reference interpreter does (a kernel that turns NaN into 0 hides a diverged
run behind a finite loss), and a NaN batch makes the partitioned loss NaN."""
import numpy as np
import pytest

import tdl_ops
import tilewise as tw

# The interpreter reads a tensor outside its bounds as 0 and multiplies that 0 (or a 0/1 mask: the
# max-pool winner, the embedding row an id names, slice_axis_grad's positions between strided hits,
# cumsum's positions past the prefix)
# into the term, so 0 * Inf = NaN there; these kernels skip such terms, as torch does: their non-finite
# values must be a subset of the interpreter's.
_PADDING_TIMES_INF = ("conv2d_backward_data", "max_pool2d_grad", "embedding_grad", "embedding_seq_grad",
                      "lstm_cell_grad_gates", "lstm_hidden_grad_gates", "gru_cell_grad_gi", "gru_cell_grad_gh",
                      "slice_axis_grad", "avg_pool2d_grad", "depthwise_conv2d_backward_data", "conv1d_backward_data",
                      "cumsum", "cumsum_grad", "batch_diagonal_grad")
_VALUE_KINDS = ("normal", "wide", "negative", "positive", "unit", "prob", "distinct")


def _poison(a, rng):
    flat = a.reshape(-1)
    picks = rng.choice(flat.size, size=min(3, flat.size), replace=False)
    for pick, value in zip(picks, (np.nan, np.inf, -np.inf)):
        flat[pick] = value
    return a


def _check(case, rng):
    """None when the op does not run natively from a bare graph, else a list of what differs."""
    g = tw.Graph()
    ins = [g.input(f"in{i}", s) for i, s in enumerate(case.shapes)]
    try:
        y = g.apply(tdl_ops.ALL[case.op], ins, case.attrs)
    except (tw.GraphError, tw.ShapeError, tw.TDLError):
        return None  # output shape needs more than the case gives (reshape targets, ...)
    arrays = tdl_ops.make_inputs(case, rng)
    feeds = {}
    for i, a in enumerate(arrays):
        a = np.asarray(a, np.float32).copy()
        feeds[f"in{i}"] = _poison(a, rng) if a.size > 1 and case.kind(i) in _VALUE_KINDS else a
    exe = tw.compile(g, tw.partition(g, devices=1, algorithm="data_parallel"))
    exe.step(feeds)
    if exe.stats.native_ops == 0:
        return None
    got = exe.get(y).astype(np.float64)
    want = tw.run_reference(g, {k: v.astype(np.float64) for k, v in feeds.items()})[y.name]
    if case.op in _PADDING_TIMES_INF:
        return ["non-finite where the interpreter is finite"] if (~np.isfinite(got) & np.isfinite(want)).any() else []
    problems = [what for what, test in (("NaN", np.isnan), ("+Inf", np.isposinf), ("-Inf", np.isneginf))
                if not np.array_equal(test(got), test(want))]
    finite = np.isfinite(want) & np.isfinite(got)
    if not np.allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4):
        problems.append("finite values")
    return problems


def test_native_kernels_keep_nan_and_inf_where_the_interpreter_does():
    rng = np.random.default_rng(0)
    checked, failed = 0, {}
    for case in tdl_ops.CASES:
        problems = _check(case, rng)
        if problems is None:
            continue
        checked += 1
        if problems:
            failed[case.name or case.op] = problems
    assert checked >= 90, f"only {checked} cases ran on native kernels"
    assert not failed, failed


@pytest.mark.parametrize("algorithm", ["tofu", "data_parallel"])
def test_a_nan_batch_gives_a_nan_loss(algorithm):
    g = tw.models.mlp(layers=2, hidden=16, batch=8)
    exe = tw.compile(g, tw.partition(g, devices=2, algorithm=algorithm)).initialize(seed=0)
    feeds = {t.name: np.full(t.shape, np.nan, np.float32) for t in g.tensors
             if t.producer is None and t.role == "input"}
    feeds.update({t.name: np.zeros(t.shape, np.float32) for t in g.tensors
                  if t.producer is None and t.role == "label"})
    assert np.isnan(exe.step(feeds)["loss"])
    assert all(np.isnan(v).all() for k, v in exe.parameters().items() if k.endswith("weight"))


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_a_nan_on_any_device_reaches_a_partitioned_extremum(op):
    """A max or min split along its reduced axis: each device's partial is combined into one; a NaN in
    any device's share must survive the combine (std::max(x, NaN) is x: the combine dropped it)."""
    g = tw.Graph()
    x = g.input("x", (2, 4096))
    y = g.apply(tdl_ops.ALL[op], [x], {"axis": 1})
    exe = tw.compile(g, tw.partition(g, devices=4, algorithm="kcuts"))
    assert "max" in exe.program(0).text() or "min" in exe.program(0).text(), "the plan splits the reduced axis"
    for column in (0, 1100, 2100, 4095):  # in each device's quarter
        a = np.random.default_rng(column).standard_normal((2, 4096)).astype(np.float32)
        a[0, column] = np.nan
        exe.step({"x": a})
        got = exe.get(y)
        assert np.isnan(got[0]) and not np.isnan(got[1]), (column, got)
        assert got[1] == (a[1].max() if op == "reduce_max" else a[1].min())

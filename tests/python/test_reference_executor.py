"""tw.run_reference: runs a graph op by op with the C++ reference interpreter; feeds and their errors."""

from __future__ import annotations

import numpy as np
import pytest

import tdl_ops
import tilewise as tw
from tdl_ops._util import np_softmax


def small_graph():
    g = tw.Graph()
    x = g.input("x", (3, 4))
    w = g.parameter("w", (2, 4))
    b = g.parameter("b", (2,))
    y = tdl_ops.softmax(tdl_ops.linear(x, w, b))
    loss = tdl_ops.cross_entropy(y, g.label("t", (3, 2)), name="loss")
    return g, y, loss


def feeds(rng):
    return {"x": rng.standard_normal((3, 4)), "w": rng.standard_normal((2, 4)), "b": rng.standard_normal(2),
            "t": np.eye(2)[[0, 1, 1]]}


def test_values_match_numpy():
    g, y, loss = small_graph()
    f = feeds(np.random.default_rng(0))
    v = tw.run_reference(g, f)
    assert set(v) == {t.name for t in g.tensors}
    expected_y = np_softmax(f["x"] @ f["w"].T + f["b"])
    np.testing.assert_allclose(v[y.name], expected_y, rtol=1e-12)
    np.testing.assert_allclose(v["loss"], tdl_ops.cross_entropy.reference(expected_y, f["t"]), rtol=1e-12)
    assert v["loss"].shape == () and v["loss"].dtype == np.float64
    np.testing.assert_array_equal(v["x"], f["x"])


def test_zero_dimensional_tensors_flow_between_ops():
    g = tw.Graph()
    a = g.parameter("a", (2, 3))
    loss = tdl_ops.mse_loss(a, g.label("t", (2, 3)))
    grads = tw.grad(g, loss)
    v = tw.run_reference(g, {"a": np.ones((2, 3)), "t": np.zeros((2, 3))})
    assert v["grad/mse_loss.seed"].shape == ()
    np.testing.assert_allclose(v[grads["a"].name], np.full((2, 3), 2 / 6))


def test_outputs_limit_the_result_the_work_and_the_feeds():
    g, y, loss = small_graph()
    f = feeds(np.random.default_rng(1))
    del f["t"]  # only the loss reads the label
    v = tw.run_reference(g, f, outputs=[y.name])
    assert list(v) == [y.name]
    v = tw.run_reference(g, {**f, "t": np.eye(2)[[0, 0, 1]]}, outputs=[y, "loss"])
    assert list(v) == [y.name, "loss"]


def test_feeds_may_be_keyed_by_tensor_and_are_not_modified():
    g, y, loss = small_graph()
    f = feeds(np.random.default_rng(2))
    keep = {k: a.copy() for k, a in f.items()}
    v = tw.run_reference(g, {g.tensor(k): a for k, a in f.items()})
    assert "loss" in v
    for k in f:
        np.testing.assert_array_equal(f[k], keep[k])


def test_updated_parameters_come_back_under_their_own_names():
    g = tw.Graph()
    w = g.parameter("w", (2, 2))
    loss = tdl_ops.mse_loss(w, g.label("t", (2, 2)))
    new = tw.optim.SGD(0.5).apply(g, tw.grad(g, loss))
    v = tw.run_reference(g, {"w": np.ones((2, 2)), "t": np.zeros((2, 2))})
    np.testing.assert_allclose(v[new["w"].name], np.ones((2, 2)) - 0.5 * 2 / 4)
    np.testing.assert_array_equal(v["w"], np.ones((2, 2)))


def test_missing_feeds_are_listed():
    g, _, _ = small_graph()
    with pytest.raises(tw.GraphError, match=r"missing feeds for w, t: every tensor without a producer"):
        tw.run_reference(g, {"x": np.zeros((3, 4)), "b": np.zeros(2)})


def test_unknown_and_computed_feeds_are_rejected():
    g, y, _ = small_graph()
    f = feeds(np.random.default_rng(3))
    with pytest.raises(tw.GraphError, match="not in the graph: bias, weights"):
        tw.run_reference(g, {**f, "weights": 1.0, "bias": 2.0})
    with pytest.raises(tw.GraphError, match=f"that ops compute: {y.name}"):
        tw.run_reference(g, {**f, y.name: np.zeros((3, 2))})
    with pytest.raises(tw.GraphError, match="outputs name tensors that are not in the graph: nope"):
        tw.run_reference(g, f, outputs=["nope"])


def test_feed_shapes_are_checked():
    g, _, _ = small_graph()
    f = feeds(np.random.default_rng(4))
    f["w"] = np.zeros((4, 2))
    with pytest.raises(tw.ShapeError, match=r"feed 'w' has shape \(4, 2\), but the tensor has shape \(2, 4\)"):
        tw.run_reference(g, f)


def test_graph_loaded_from_json_runs_the_same():
    g, _, _ = small_graph()
    tw.grad(g, g.tensor("loss"))
    f = feeds(np.random.default_rng(5))
    a = tw.run_reference(g, f)
    b = tw.run_reference(tw.Graph.from_json(g.to_json()), f)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])

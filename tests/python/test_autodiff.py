"""tw.grad and tw.trace: the structure of the backward pass (phases, forward ops, names, sums,
pruning, unroll keys), its errors, and whole small models against one PyTorch SGD step."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import tdl_ops
import tilewise as tw


def mlp(x):
    """Two linear layers with a ReLU, built from tdl_ops directly."""
    g = x.graph
    with g.scope("fc1"):
        h = tdl_ops.relu(tdl_ops.linear(x, g.parameter("weight", (6, 5)), g.parameter("bias", (6,))))
    with g.scope("fc2"):
        return tdl_ops.linear(h, g.parameter("weight", (3, 6)), g.parameter("bias", (3,)))


def cnn(x):
    """conv2d + relu + max_pool2d + flatten + linear."""
    g = x.graph
    with g.scope("conv"):
        y = tdl_ops.conv2d(x, g.parameter("weight", (4, 2, 3, 3)), stride=1, padding=1)
        y = tdl_ops.bias_add_channel(y, g.parameter("bias", (4,)))
    y = tdl_ops.max_pool2d(tdl_ops.relu(y), kernel=2, stride=2)
    y = tdl_ops.flatten(y, c=4, h=3, w=3)
    with g.scope("fc"):
        return tdl_ops.linear(y, g.parameter("weight", (5, 36)), g.parameter("bias", (5,)))


def _feeds(g, rng, onehot=None):
    feeds = {}
    for t in g.tensors:
        if t.producer is None:
            feeds[t.name] = np.zeros(t.shape) if t.role == "optimizer_state" else rng.standard_normal(t.shape)
    if onehot is not None:
        t = g.tensors_with_role("label")[0]
        feeds[t.name] = np.eye(t.shape[1])[rng.integers(0, t.shape[1], t.shape[0])]
    return feeds


# ---------------------------------------------------------------- structure


def test_backward_ops_name_and_record_their_forward_op():
    g = tw.trace(mlp, tw.placeholder((4, 5)), loss=tdl_ops.cross_entropy)
    grads = {t.grad_of.name: t for t in g.tensors if t.grad_of is not None and t.grad_of.role == "parameter"}
    assert set(grads) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    for op in g.ops:
        if op.phase == "backward":
            assert op.output.role == "gradient"
            assert op.name.startswith(f"grad/{op.forward_op.name}.")
    w1 = grads["fc1.weight"].producer
    assert (w1.type, w1.forward_op.name, w1.name) == ("matmul_tn", "fc1.linear", "grad/fc1.linear.matmul_tn")
    assert g.op("grad/loss.seed").type == "fill_like"
    assert g.tensor("grad/loss.seed").grad_of.name == "loss"


def test_only_what_leads_to_a_parameter_is_differentiated():
    g = tw.trace(mlp, tw.placeholder((4, 5)), loss=tdl_ops.cross_entropy)
    marked = {t.grad_of.name for t in g.tensors if t.grad_of is not None}
    assert "input" not in marked and "label" not in marked
    # fc1's backward is its weight and bias gradients only: no data gradient for the input.
    assert sorted(o.type for o in g.ops if o.forward_op is not None and o.forward_op.name == "fc1.linear") == \
        ["matmul_tn", "sum_axes"]
    # cross_entropy's rule returns a target gradient too; it is not copied into the graph.
    assert [o.type for o in g.ops if o.forward_op is not None and o.forward_op.name == "loss"] == \
        ["fill_like", "cross_entropy_backward"]


def test_gradients_of_a_tensor_used_twice_are_summed():
    g = tw.Graph()
    x = g.input("x", (3, 4))
    w = g.parameter("w", (3, 4))
    h = tdl_ops.mul(x, w)
    y = tdl_ops.add(tdl_ops.exp(h), tdl_ops.tanh(h))  # h feeds two ops
    loss = tdl_ops.mse_loss(y, g.label("t", (3, 4)))
    grads = tw.grad(g, loss)
    s = g.op(f"grad/{h.name}.sum")
    assert s.type == "add_2" and s.phase == "backward" and s.forward_op is None
    assert s.output.grad_of == h
    assert grads["w"].producer.inputs[0] == s.output


def test_a_parameter_used_twice_gets_one_summed_gradient():
    g = tw.Graph()
    x = g.input("x", (3, 4))
    w = g.parameter("w", (4, 4))
    y = tdl_ops.matmul(tdl_ops.matmul(x, w), w)
    grads = tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (3, 4))))
    gw = grads["w"]
    assert gw.producer.type == "add_2" and gw.producer.name == "grad/w.sum" and gw.grad_of == w
    rng = np.random.default_rng(0)
    v = tw.run_reference(g, _feeds(g, rng) | {"w": (wv := rng.standard_normal((4, 4)))})
    xv, tv = v["x"], v["t"]
    dy = 2 * (xv @ wv @ wv - tv) / tv.size
    np.testing.assert_allclose(v[gw.name], (xv @ wv).T @ dy + xv.T @ dy @ wv.T, rtol=1e-12)


def test_one_gradient_tensor_for_two_parameters_is_copied():
    g = tw.Graph()
    a, b = g.parameter("a", (2, 3)), g.parameter("b", (2, 3))
    grads = tw.grad(g, tdl_ops.mse_loss(tdl_ops.add(a, b), g.label("t", (2, 3))))
    assert grads["a"] != grads["b"]
    assert grads["a"].grad_of == a and grads["b"].grad_of == b
    copy = grads["b"].producer
    assert (copy.type, copy.name, copy.forward_op) == ("identity", "grad/add.copy_b", g.op("add"))


def test_the_parts_of_a_gradient_are_summed_by_one_op_after_the_last():
    g = tw.Graph()
    w = g.parameter("w", (3, 4))
    ys = [tdl_ops.scale(w, alpha=k + 1.0) for k in range(4)]  # w feeds four ops
    y = tdl_ops.mul(tdl_ops.mul(ys[0], ys[1]), tdl_ops.mul(ys[2], ys[3]))  # 24 w**4
    grads = tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (3, 4))))
    assert not [o for o in g.ops if o.phase == "backward" and o.type == "add"]
    s = grads["w"].producer
    assert (s.type, s.name, s.phase, s.forward_op, s.output.grad_of) == ("add_4", "grad/w.sum", "backward", None, w)
    # One part per scale op, in the order the sweep made them; the sum comes right after the last.
    assert [p.producer.forward_op.name for p in s.inputs] == ["scale_3", "scale_2", "scale_1", "scale"]
    assert s.id == s.inputs[-1].producer.id + 1
    rng = np.random.default_rng(4)
    wv, tv = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    v = tw.run_reference(g, {"w": wv, "t": tv})
    np.testing.assert_allclose(v[grads["w"].name], 2 * (24 * wv**4 - tv) / tv.size * 96 * wv**3, rtol=1e-12)


def test_running_accumulation_adds_each_part_as_it_arrives():
    g = tw.Graph()
    w = g.parameter("w", (3, 4))
    ys = [tdl_ops.scale(w, alpha=k + 1.0) for k in range(4)]
    y = tdl_ops.mul(tdl_ops.mul(ys[0], ys[1]), tdl_ops.mul(ys[2], ys[3]))
    grads = tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (3, 4))), accumulate="running")
    sums = [o for o in g.ops if o.name.startswith("grad/w.sum")]
    assert [(o.type, o.name) for o in sums] == [("add", f"grad/w.sum{i}") for i in (1, 2, 3)]
    assert grads["w"].producer.name == sums[-1].name and sums[-1].output.grad_of == w
    assert all(o.output.grad_of is None for o in sums[:-1])
    for o in sums:  # right after the part it adds: one part alive at a time
        assert o.id == o.inputs[1].producer.id + 1
    rng = np.random.default_rng(4)
    wv, tv = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    v = tw.run_reference(g, {"w": wv, "t": tv})
    np.testing.assert_allclose(v[grads["w"].name], 2 * (24 * wv**4 - tv) / tv.size * 96 * wv**3, rtol=1e-12)


def test_running_accumulation_trains_a_zoo_model_as_the_one_sum_does():
    rnn = dict(batch=3, steps=4, in_features=8)
    graphs = [tw.models.get("rnn-2-16", accumulate=acc, **rnn) for acc in ("sum", "running")]
    assert not [o for o in graphs[1].ops if o.type.startswith("add_")]
    assert len(graphs[1].ops) > len(graphs[0].ops)
    feeds = tw.graph.feeds.example_feeds(graphs[0], seed=1)
    rng = np.random.default_rng(2)
    params = {t.name: rng.standard_normal(t.shape) * 0.3
              for t in graphs[0].tensors if t.producer is None and t.name not in feeds}
    outs = [tw.run_reference(g, {**feeds, **params}) for g in graphs]
    updated = [t.name for t in graphs[0].tensors if t.updates is not None]  # the new parameters
    assert len(updated) == 8 and set(updated) <= {t.name for t in graphs[1].tensors}
    for name in [*updated, "loss"]:
        np.testing.assert_allclose(outs[1][name], outs[0][name], rtol=1e-9, atol=1e-12)
    with tw.graph.autodiff.gradient_accumulation("running"):
        assert not [o for o in tw.models.get("rnn-2-16", **rnn).ops if o.type.startswith("add_")]
    assert [o for o in tw.models.get("rnn-2-16", **rnn).ops if o.type.startswith("add_")]
    with pytest.raises(tw.GraphError, match="accumulate must be one of 'batched', 'sum', 'running'"):
        tw.models.get("mlp-2-8", batch=2, accumulate="chain")


def test_a_tensor_read_twice_by_one_op_gets_a_sum_of_its_two_parts():
    g = tw.Graph()
    w = g.parameter("w", (2, 3))
    h = tdl_ops.exp(w)
    grads = tw.grad(g, tdl_ops.mse_loss(tdl_ops.add(h, h), g.label("t", (2, 3))))
    s = g.op(f"grad/{h.name}.sum")
    assert s.type == "add_2" and s.inputs[0] == s.inputs[1] and s.output.grad_of == h
    assert "identity" not in {o.type for o in g.ops}
    v = tw.run_reference(g, {"w": np.zeros((2, 3)), "t": np.zeros((2, 3))})
    np.testing.assert_allclose(v[grads["w"].name], np.full((2, 3), 2 * 2.0 / 6 * 2.0), rtol=1e-12)


def test_one_gradient_for_two_inputs_is_copied_for_all_but_the_main_input():
    g = tw.Graph()
    x = g.input("x", (2, 3))
    w1, w2 = g.parameter("w1", (3, 3)), g.parameter("w2", (3, 3))
    a, b = tdl_ops.matmul(x, w1), tdl_ops.matmul(x, w2)
    y = tdl_ops.add(a, b)  # b is produced last: the main input coarsening merges the add with
    tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (2, 3))))
    gy = g.tensor("grad/mse_loss.mse_loss_backward")
    assert gy.grad_of == y
    assert gy in g.op("grad/matmul_1.matmul_tn").inputs  # b's gradient is y's, passed through
    copy = g.op("grad/add.copy_a")
    assert (copy.type, copy.phase, copy.forward_op, copy.inputs) == ("identity", "backward", g.op("add"), [gy])
    assert copy.output.grad_of == a and copy.output in g.op("grad/matmul.matmul_tn").inputs
    # Every group's backward dataflow now mirrors a forward edge.
    assert "linked by backward" not in tw.coarsen(g).summary()


def test_no_copy_where_the_other_input_gets_a_sum():
    g = tw.Graph()
    x = g.input("x", (2, 3))
    w1, w2 = g.parameter("w1", (3, 3)), g.parameter("w2", (3, 3))
    a, b = tdl_ops.matmul(x, w1), tdl_ops.matmul(x, w2)
    y = tdl_ops.mul(tdl_ops.add(a, b), a)  # a's gradient sums two parts: a new tensor
    tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (2, 3))))
    assert "identity" not in {o.type for o in g.ops}
    assert g.tensor(f"grad/{a.name}.sum").grad_of == a


def test_wrt_limits_the_backward_pass():
    g = tw.Graph()
    x = g.input("x", (2, 3))
    w1, w2 = g.parameter("w1", (3, 3)), g.parameter("w2", (3, 3))
    y = tdl_ops.matmul(tdl_ops.matmul(x, w1), w2)
    grads = tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (2, 3))), wrt=[w2])
    assert list(grads) == ["w2"]
    assert [o.type for o in g.ops if o.phase == "backward"] == ["fill_like", "mse_loss_backward", "matmul_tn"]


def test_a_weighted_sum_of_losses():
    g = tw.Graph()
    w = g.parameter("w", (2, 3))
    t = g.label("t", (2, 3))
    loss = tdl_ops.add(tdl_ops.scale(tdl_ops.mse_loss(w, t), alpha=0.5), tdl_ops.scale(tdl_ops.l1_loss(w, t), alpha=3.0))
    grads = tw.grad(g, loss)
    rng = np.random.default_rng(3)
    wv, tv = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    v = tw.run_reference(g, {"w": wv, "t": tv})
    np.testing.assert_allclose(v[grads["w"].name], (0.5 * 2 * (wv - tv) + 3.0 * np.sign(wv - tv)) / 6, rtol=1e-12)


def test_gradient_with_respect_to_an_intermediate_tensor():
    g = tw.Graph()
    x = g.input("x", (2, 3))
    h = _autodiff_test_no_rule(x)  # no rule needed: nothing before h is differentiated
    loss = tdl_ops.mse_loss(tdl_ops.exp(h), g.label("t", (2, 3)))
    grads = tw.grad(g, loss, wrt=[h])
    assert grads[h.name].grad_of == h
    v = tw.run_reference(g, {"x": np.ones((2, 3)), "t": np.zeros((2, 3))})
    np.testing.assert_allclose(v[grads[h.name].name], 2 * np.exp(2.0) / 6 * np.ones((2, 3)), rtol=1e-12)


def test_gradient_through_piecewise_constant_ops_is_zero():
    g = tw.Graph()
    w = g.parameter("w", (2, 3))
    grads = tw.grad(g, tdl_ops.mse_loss(tdl_ops.sign(w), g.label("t", (2, 3))))
    assert grads["w"].producer.type == "fill_like"
    v = tw.run_reference(g, {"w": np.ones((2, 3)), "t": np.zeros((2, 3))})
    np.testing.assert_array_equal(v[grads["w"].name], np.zeros((2, 3)))


def test_backward_ops_of_unrolled_steps_share_unroll_keys():
    g = tw.Graph()
    w = g.parameter("w", (3, 3))
    h = g.input("h0", (2, 3))
    with g.unroll("cell") as u:
        for t in range(3):
            with u.step(t):
                h = tdl_ops.tanh(tdl_ops.matmul(h, w))
    tw.grad(g, tdl_ops.mse_loss(h, g.label("t", (2, 3))))
    keys = {}
    for op in g.ops:
        if op.phase == "backward" and op.forward_op is not None and op.forward_op.unroll_key:
            keys.setdefault(op.forward_op.unroll_key, set()).add((op.type, op.unroll_key))
    assert keys == {"cell/0": {("matmul_nt", "grad/cell/0/0"), ("matmul_tn", "grad/cell/0/1")},
                    "cell/1": {("tanh_grad", "grad/cell/1/0")}}
    # w's gradient is one sum of the steps' parts, made after the last (step 0's), under its key.
    [s] = [o for o in g.ops if o.name.startswith("grad/w.sum")]
    assert (s.type, s.unroll_key, s.forward_op) == ("add_3", "grad/cell/0/sum1/0", None)


def test_training_graph_round_trips_through_json():
    g = tw.trace(cnn, tw.placeholder((2, 2, 6, 6)), loss=tdl_ops.cross_entropy, optimizer=tw.optim.Adam(0.01))
    loaded = tw.Graph.from_json(g.to_json())
    assert loaded.to_json() == g.to_json()
    data = json.loads(g.to_json())
    assert {o["phase"] for o in data["ops"]} == {"forward", "backward", "update"}


def test_graph_with_sums_of_any_arity_loads_in_a_fresh_process(tmp_path):
    """add_370, stack_300 and concat_70 are made on demand by the op registry of a new interpreter."""
    g = tw.Graph()
    w = g.parameter("w", (2, 3))
    n = 300
    stacked = tdl_ops.models.stack_op(n)(*[tdl_ops.scale(w, alpha=k / n) for k in range(n)], axis=0, inner=3)
    joined = tdl_ops.models.concat_op(70)(*[tdl_ops.exp(tdl_ops.scale(w, alpha=k / 70)) for k in range(70)], axis=1)
    loss = tdl_ops.add(tdl_ops.mse_loss(stacked, g.label("t", (n, 2, 3))), tdl_ops.reduce_sum(
        tdl_ops.sum_axes(joined, axes=(1,)), axis=0))
    gw = tw.grad(g, loss)["w"]
    assert gw.producer.type == "add_370"
    rng = np.random.default_rng(5)
    feeds = {"w": rng.standard_normal((2, 3)), "t": rng.standard_normal((n, 2, 3))}
    path = tmp_path / "graph.json"
    g.save(path)
    np.savez(tmp_path / "feeds.npz", **feeds)
    code = (
        "import sys, numpy as np, tilewise as tw\n"
        "path, feeds, out = sys.argv[1:]\n"
        "g = tw.Graph.load(path)\n"
        "assert g.to_json() == open(path).read()\n"
        f"v = tw.run_reference(g, dict(np.load(feeds)), outputs=[{gw.name!r}])\n"
        f"np.save(out, v[{gw.name!r}])\n"
    )
    args = [str(path), str(tmp_path / "feeds.npz"), str(tmp_path / "gw.npy")]
    subprocess.run([sys.executable, "-c", code, *args], check=True, timeout=120)
    expected = tw.run_reference(g, feeds, outputs=[gw.name])[gw.name]
    np.testing.assert_allclose(np.load(tmp_path / "gw.npy"), expected, rtol=1e-12)


# ---------------------------------------------------------------- trace


def test_trace_names_inputs_label_loss_and_outputs():
    g = tw.trace(lambda a, b: tdl_ops.add(a, tdl_ops.mul(a, b)), (2, 3), tw.placeholder((2, 3), name="scale"))
    assert [t.name for t in g.tensors_with_role("input")] == ["input", "scale"]
    assert g.outputs["output"].shape == (2, 3) and "loss" not in g.outputs
    assert all(op.phase == "forward" for op in g.ops)

    g = tw.trace(mlp, tw.placeholder((4, 5)), loss=tdl_ops.mse_loss, optimizer=tw.optim.SGD(0.1), name="mlp")
    assert g.name == "mlp"
    assert g.tensor("label").role == "label" and g.tensor("label").shape == (4, 3)
    assert g.outputs["loss"] == g.tensor("loss") and g.op("loss").type == "mse_loss"
    updated = {t.updates.name for t in g.tensors if t.updates is not None}
    assert updated == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}


def test_trace_names_the_last_op_of_a_composite_loss():
    def nll_of_log_softmax(y, t):
        return tdl_ops.nll_loss(tdl_ops.log_softmax(y), t)

    g = tw.trace(mlp, tw.placeholder((4, 5)), loss=nll_of_log_softmax, label=tw.placeholder((4, 3), name="target"))
    assert g.op("loss").type == "nll_loss" and g.op("loss").inputs[1].name == "target"
    assert g.op("log_softmax").phase == "forward"


def test_trace_loss_may_read_model_tensors():
    weights = []

    def model(x):
        y = mlp(x)
        weights.append(x.graph.tensor("fc2.weight"))
        return y

    def regularised(y, t):  # closes over a parameter of the traced graph
        return tdl_ops.add(tdl_ops.mse_loss(y, t), tdl_ops.scale(tdl_ops.reduce_sum(tdl_ops.sum_axes(
            tdl_ops.square(weights[0]), axes=(1,)), axis=0), alpha=0.01))

    g = tw.trace(model, tw.placeholder((4, 5)), loss=regularised)
    assert g.op("loss").type == "add"
    gw = g.tensor("fc2.weight")
    assert {o.type for o in gw.consumers} == {"linear", "square", "matmul", "square_grad"}
    [total] = [t for t in g.tensors if t.grad_of == gw and not t.consumers]
    assert total.producer.type == "add_2"  # the data term's and the regulariser's parts


def test_trace_errors():
    with pytest.raises(tw.GraphError, match="0-d tensor"):
        tw.trace(mlp, (4, 5), loss=lambda y, t: tdl_ops.squared_difference(y, t))
    with pytest.raises(tw.GraphError, match="must return a tensor of the traced graph"):
        tw.trace(lambda x: 3.0, (4, 5))
    with pytest.raises(tw.GraphError, match="need loss="):
        tw.trace(mlp, (4, 5), optimizer=tw.optim.SGD(0.1))
    with pytest.raises(tw.GraphError, match="placeholder shape"):
        tw.placeholder("big")


# ---------------------------------------------------------------- grad errors


@tw.op(reference=lambda x: x**3)
def _autodiff_test_no_rule(x):
    """An op without a gradient rule."""
    return lambda i, j: x[i, j] * x[i, j] * x[i, j]


def test_missing_rule_names_the_op_type_and_the_parameter():
    g = tw.Graph()
    w = g.parameter("w", (2, 3))
    y = _autodiff_test_no_rule(tdl_ops.exp(w))
    with pytest.raises(tw.GraphError, match=r"op '_autodiff_test_no_rule' of type '_autodiff_test_no_rule' has no "
                                            r"gradient rule, and the gradient of 'w' flows through it"):
        tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (2, 3))))


def test_ops_off_the_path_need_no_rule():
    g = tw.Graph()
    x = g.input("x", (2, 3))
    w = g.parameter("w", (2, 3))
    y = tdl_ops.mul(_autodiff_test_no_rule(x), w)  # the rule-less op only reads the input
    assert set(tw.grad(g, tdl_ops.mse_loss(y, g.label("t", (2, 3))))) == {"w"}


def test_grad_errors():
    g = tw.Graph()
    w = g.parameter("w", (2, 3))
    y = tdl_ops.exp(w)
    with pytest.raises(tw.GraphError, match=r"must be a 0-d tensor \(a scalar\); 'exp' has shape \(2, 3\)"):
        tw.grad(g, y)
    loss = tdl_ops.mse_loss(y, g.label("t", (2, 3)))
    other = g.parameter("unused", (3,))
    with pytest.raises(tw.GraphError, match="does not depend on 'unused'"):
        tw.grad(g, loss, wrt=[other])
    with pytest.raises(tw.GraphError, match="tensor of this graph"):
        tw.grad(tw.Graph(), loss)
    h = tw.Graph()
    with pytest.raises(tw.GraphError, match="depends on no parameter"):
        tw.grad(h, tdl_ops.mse_loss(h.input("a", (2,)), h.label("b", (2,))))


def test_rule_returning_a_wrong_shape_is_reported():
    @tw.op(reference=lambda x: 2 * x)
    def _autodiff_test_bad_rule(x):
        return tw.compute(x.ndim, lambda *i: 2.0 * x[i])

    @_autodiff_test_bad_rule.def_grad
    def _(g, x, out):
        return (tdl_ops.sum_axes(g, axes=(0,)),)

    g = tw.Graph()
    w = g.parameter("w", (2, 3))
    with pytest.raises(tw.GraphError, match=r"returned a gradient of shape \(3,\) for input 'x' of shape \(2, 3\)"):
        tw.grad(g, tdl_ops.mse_loss(_autodiff_test_bad_rule(w), g.label("t", (2, 3))))


# ---------------------------------------------------------------- one SGD step against PyTorch


def _torch_mlp(torch, p):
    def f(x):
        h = torch.relu(torch.nn.functional.linear(x, p["fc1.weight"], p["fc1.bias"]))
        return torch.nn.functional.linear(h, p["fc2.weight"], p["fc2.bias"])
    return f


def _torch_cnn(torch, p):
    F = torch.nn.functional

    def f(x):
        y = F.max_pool2d(torch.relu(F.conv2d(x, p["conv.weight"], p["conv.bias"], padding=1)), 2)
        return F.linear(y.flatten(1), p["fc.weight"], p["fc.bias"])
    return f


@pytest.mark.parametrize("model, torch_model, shape", [(mlp, _torch_mlp, (4, 5)), (cnn, _torch_cnn, (2, 2, 6, 6))],
                         ids=["mlp", "cnn"])
def test_one_sgd_step_matches_pytorch(model, torch_model, shape):
    torch = pytest.importorskip("torch")
    lr = 0.1
    g = tw.trace(model, tw.placeholder(shape), loss=tdl_ops.cross_entropy, optimizer=tw.optim.SGD(lr))
    feeds = _feeds(g, np.random.default_rng(7), onehot=True)
    v = tw.run_reference(g, feeds)

    params = {t.name: torch.tensor(feeds[t.name], requires_grad=True) for t in g.tensors_with_role("parameter")
              if t.producer is None}
    out = torch_model(torch, params)(torch.tensor(feeds["input"]))
    loss = torch.nn.functional.cross_entropy(out, torch.tensor(feeds["label"]).argmax(1))
    loss.backward()
    opt = torch.optim.SGD(params.values(), lr=lr)
    opt.step()
    np.testing.assert_allclose(v["loss"], loss.item(), rtol=1e-5)
    for t in g.tensors:
        if t.updates is not None:
            np.testing.assert_allclose(v[t.name], params[t.updates.name].detach().numpy(), rtol=1e-5, atol=1e-12,
                                       err_msg=t.updates.name)

"""tw.optim: update ops, optimizer state, roles and marks; the numbers against the formulas and
against torch.optim over two steps."""

from __future__ import annotations

import numpy as np
import pytest

import tdl_ops
import tilewise as tw


def quadratic(shape=(2, 3)):
    """loss = mse(w, t): a graph whose gradient is 2 (w - t) / n."""
    g = tw.Graph()
    w = g.parameter("w", shape)
    loss = tdl_ops.mse_loss(w, g.label("t", shape))
    return g, w, tw.grad(g, loss)


def run(g, w0, t, state=None):
    feeds = {"w": w0, "t": t}
    for s in g.tensors_with_role("optimizer_state"):
        if s.producer is None:
            feeds[s.name] = np.zeros(s.shape) if state is None else state[s.name]
    return tw.run_reference(g, feeds)


def test_sgd_update_is_marked_and_correct():
    g, w, grads = quadratic()
    new = tw.optim.SGD(lr=0.1, weight_decay=0.01).apply(g, grads)
    op = new["w"].producer
    assert (op.type, op.phase, op.name, new["w"].role) == ("sgd", "update", "update/w.sgd", "parameter")
    assert new["w"].updates == w and g.num_parameters == 6
    w0, t = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    v = run(g, w0, t)
    np.testing.assert_allclose(v[new["w"].name], w0 - 0.1 * (2 * (w0 - t) / 6 + 0.01 * w0), rtol=1e-12)


def test_momentum_state_is_optimizer_state_updated_in_place():
    g, w, grads = quadratic()
    new = tw.optim.Momentum(lr=0.1, momentum=0.8).apply(g, grads)
    vel = g.tensor("w.velocity")
    assert vel.role == "optimizer_state" and vel.producer is None
    [v_new] = [t for t in g.tensors if t.updates == vel]
    assert v_new.role == "optimizer_state" and v_new.producer.phase == "update"
    assert g.bytes_by_role()["optimizer_state"] == 6 * 4
    w0, t = np.arange(6.0).reshape(2, 3), np.zeros((2, 3))
    grad = 2 * w0 / 6
    v = run(g, w0, t, {"w.velocity": np.ones((2, 3))})
    np.testing.assert_allclose(v[v_new.name], 0.8 + grad, rtol=1e-12)
    np.testing.assert_allclose(v[new["w"].name], w0 - 0.1 * (0.8 + grad), rtol=1e-12)


def test_adam_creates_two_moments_per_parameter_and_one_step_counter():
    g, w, grads = quadratic()
    tw.optim.Adam(lr=0.01).apply(g, grads)
    leaves = {t.name for t in g.tensors_with_role("optimizer_state") if t.producer is None}
    assert leaves == {"w.adam_m", "w.adam_v", "optimizer.step"}
    assert g.tensor("optimizer.step").shape == (1,)
    [count] = [t for t in g.tensors if t.updates == g.tensor("optimizer.step")]
    assert g.op("update/w.adam_weight").inputs[3] == count
    assert [o.type for o in g.ops if o.phase == "update"] == ["step_count", "adam_m", "adam_v", "adam_weight"]
    with pytest.raises(tw.GraphError, match="one Adam optimizer per graph"):
        tw.optim.Adam().apply(g, grads)


def test_grads_given_as_pairs_or_a_mapping_of_tensors():
    for as_pairs in (True, False):
        g, w, grads = quadratic()
        pairs = [(w, grads["w"])]
        new = tw.optim.SGD(0.1).apply(g, pairs if as_pairs else dict(pairs))
        assert new["w"].updates == w


def test_optimizer_errors():
    g, w, grads = quadratic()
    with pytest.raises(tw.GraphError, match="'t' is not a parameter"):
        tw.optim.SGD(0.1).apply(g, [(g.tensor("t"), grads["w"])])
    with pytest.raises(tw.GraphError, match=r"has shape \(2, 3\), parameter 'w' \(3,\)"):
        h = tw.Graph()
        tw.optim.SGD(0.1).apply(h, [(h.parameter("w", (3,)), h.input("g", (2, 3)))])
    with pytest.raises(tw.GraphError, match="lr must be a number"):
        tw.optim.SGD("fast")
    with pytest.raises(tw.GraphError, match="betas must be a pair"):
        tw.optim.Adam(betas=0.9)
    with pytest.raises(tw.GraphError, match=r"betas\[1\] must lie in \[0, 1\)"):
        tw.optim.Adam(betas=(0.9, 1.0))
    assert repr(tw.optim.SGD(0.5)) == "tw.optim.SGD(lr=0.5, weight_decay=0.0)"


@pytest.mark.parametrize("ours, theirs", [
    (lambda step: tw.optim.SGD(0.2, weight_decay=0.1), lambda torch, p: torch.optim.SGD(p, lr=0.2, weight_decay=0.1)),
    (lambda step: tw.optim.Momentum(0.2, momentum=0.7), lambda torch, p: torch.optim.SGD(p, lr=0.2, momentum=0.7)),
    (lambda step: tw.optim.Adam(0.05, betas=(0.8, 0.95), eps=1e-6),
     lambda torch, p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.95), eps=1e-6)),
    (lambda step: tw.optim.AdamW(0.05, weight_decay=0.1),
     lambda torch, p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1)),
    (lambda step: tw.optim.Adam(0.05, betas=(0.0, 0.9)),
     lambda torch, p: torch.optim.Adam(p, lr=0.05, betas=(0.0, 0.9))),
], ids=["sgd", "momentum", "adam", "adamw", "adam_beta1_zero"])
def test_one_graph_matches_torch_optim_over_six_steps(ours, theirs):
    # One graph, run step after step with its updated state fed back: the step counter, not the
    # graph, carries the bias corrections (a fixed step drifted 15 % from torch after 5 steps).
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w0, t = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    p = torch.tensor(w0, requires_grad=True)
    opt = theirs(torch, [p])
    w, state = w0, None
    g, _, grads = quadratic()
    ours(1).apply(g, grads)
    for step in range(1, 7):
        v = run(g, w, t, state)
        updated = {x.updates.name: v[x.name] for x in g.tensors if x.updates is not None}
        w, state = updated.pop("w"), updated
        opt.zero_grad()
        torch.nn.functional.mse_loss(p, torch.tensor(t)).backward()
        opt.step()
        np.testing.assert_allclose(w, p.detach().numpy(), rtol=1e-10, err_msg=f"step {step}")

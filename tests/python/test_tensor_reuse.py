"""Tensor reuse (TensorOpt §4.2): keep-both copies in the graph (graph/reuse.py), priced by the frontier
(tensor_reuse=True), kept by a point's plan and run by tw.compile."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_models import tiny_gpt2, torch_adam_losses

import tilewise as tw
from tilewise import _core
from tilewise.graph.feeds import example_feeds
from tilewise.graph.reuse import reuse_candidates, with_copies
from tilewise.plan.frontier import _kept_pairs, _on_search_graph, _plan_with_kept_copies, _resolve

torch = pytest.importorskip("torch")


def _cluster(devices):
    return _resolve("tensoropt", devices)[0]


def _tanh_mlp(batch=8, width=6, hidden=8, classes=4, optimizer=None):
    """x -> linear -> tanh -> linear -> tanh -> linear: each tanh's output is read in backward by its own
    gradient and by the next linear's weight gradient (keep-both candidates)."""
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(width, hidden)
            self.b = torch.nn.Linear(hidden, hidden)
            self.c = torch.nn.Linear(hidden, classes)

        def forward(self, x):
            return self.c(torch.tanh(self.b(torch.tanh(self.a(x)))))

    model = Model()
    x = torch.randn(batch, width)
    labels = torch.randint(0, classes, (batch,))
    g = tw.from_torch(model, (x,), loss=torch.nn.CrossEntropyLoss(),
                      optimizer=optimizer(model) if optimizer else tw.optim.SGD(lr=0.1), label=labels)
    return g, model, x, labels


def _names(g, pairs):
    return [(g._g.tensor(t).name, g._g.op(c).name) for t, c in pairs]


def test_candidates_are_tensors_two_backward_readers_keep():
    g, *_ = _tanh_mlp()
    # The input (resident) for the first linear; each tanh output for the linear after it (its own
    # gradient reads it too). Linear outputs are read only by the tanh gradient: no second reader.
    assert _names(g, reuse_candidates(g)) == [("x", "a.linear"), ("tanh", "b.linear"), ("tanh_1", "c.linear")]
    # A tensor whose only backward readers are one consumer's: keeping it in that consumer's layout is
    # keep-after, already a choice of its tiling.
    mlp = tw.models.mlp(layers=2, hidden=8, batch=4)
    names = [t for t, _ in _names(mlp, reuse_candidates(mlp))]
    assert all(mlp.tensor(t).role in ("input", "label") for t in names)


def test_copies_replay_the_graph_and_train_alike():
    g, *_ = _tanh_mlp()
    pairs = reuse_candidates(g)
    h = with_copies(g, pairs)
    assert h.derived_from is g and h.copies == ["x@a.linear", "tanh@b.linear", "tanh_1@c.linear"]
    assert h._g.num_ops == g._g.num_ops + 3 and h._g.num_tensors == g._g.num_tensors + 3
    copy = h.tensor("tanh@b.linear")
    assert copy.producer.type == "identity" and copy.producer.phase == "forward"
    # The consumer and its backward ops read the copy; the tanh gradient still reads the tensor.
    b_linear, tanh = h.op("b.linear"), h.tensor("tanh")
    assert [o.name for o in copy.consumers if o.phase == "forward"] == ["b.linear"]
    assert all(o.forward_op == b_linear for o in copy.consumers if o.phase == "backward")
    assert any(o.phase == "backward" for o in copy.consumers)
    # The tensor itself: read in forward by the copy only, in backward by its producer's gradient only.
    assert [o.name for o in tanh.consumers if o.phase == "forward"] == ["tanh@b.linear"]
    assert {o.forward_op.name for o in tanh.consumers if o.phase == "backward"} == {tanh.producer.name}
    for t in g.tensors:  # names, shapes, roles and marks carry over
        u = h.tensor(t.name)
        assert (u.shape, u.role, u.dtype) == (t.shape, t.role, t.dtype)
        assert (u.grad_of and u.grad_of.name) == (t.grad_of and t.grad_of.name)
        assert (u.updates and u.updates.name) == (t.updates and t.updates.name)
    assert {k: v.name for k, v in h.outputs.items()} == {k: v.name for k, v in g.outputs.items()}
    # One device: the graph with copies trains exactly as the graph without.
    rng = np.random.default_rng(1)
    feeds = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in g.tensors_with_role("parameter")
             if t.producer is None}
    feeds["x"] = rng.standard_normal(g.tensor("x").shape).astype(np.float32)
    feeds["label"] = rng.integers(0, 4, g.tensor("label").shape)
    runs = []
    for graph in (g, h):
        exe = tw.compile(graph, tw.partition(graph, devices=1))
        losses = [float(exe.step(feeds if s == 0 else {"x": feeds["x"], "label": feeds["label"]})["loss"])
                  for s in range(3)]
        runs.append((losses, exe.parameters()))
    assert runs[0][0] == runs[1][0]
    for name, value in runs[0][1].items():
        np.testing.assert_array_equal(runs[1][1][name], value)


def test_copies_are_validated():
    g, *_ = _tanh_mlp()
    x, a = g.tensor("x").id, g.op("a.linear").id
    with pytest.raises(ValueError, match="not a forward consumer"):
        with_copies(g, [(x, g.op("b.linear").id)])
    with pytest.raises(ValueError, match="given twice"):
        with_copies(g, [(x, a), (x, a)])
    label = g.tensor("label")
    with pytest.raises(ValueError, match="is int64: ops compute float32"):
        with_copies(g, [(label.id, label.consumers[0].id)])
    with pytest.raises(ValueError, match="not a \\(tensor id, op id\\)"):
        with_copies(g, [(10**6, a)])
    with pytest.raises(TypeError, match="tensor_reuse must be a bool"):
        tw.frontier(g, _cluster(2), devices=2, tensor_reuse="yes")
    # The model's own checks: ids in range, copies only (one input of the output's shape).
    for bad, message in (([10**6], "is not an op of the graph"), ([g.op("b.linear").id], "is not a copy")):
        with pytest.raises(tw.PlanError, match=message):
            _core.FrontierModel(g._g, _cluster(2)._core, [2], copy_ops=bad)


def _one_device(g, steps):
    """Initial parameters (seed 0), example feeds and ``steps`` steps' outputs of ``g`` on one device."""
    ref = tw.compile(g, tw.partition(g, devices=1)).initialize(0)
    init, feeds = ref.parameters(), example_feeds(g, seed=0)
    return init, feeds, [ref.step(feeds) for _ in range(steps)]


def _forced(f, rng):
    """A choice of the reuse frontier's model with every copy class at a random configuration."""
    model = f._model
    choice = list(f.points[int(rng.integers(len(f.points)))].choice)
    for _, _, copy in model.copy_classes:
        choice[copy] = int(rng.integers(len(model.nodes[copy])))
    return choice


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), devices=st.sampled_from([2, 4]))
def test_a_copy_is_priced_as_the_graph_that_keeps_it(seed, devices):
    # Any choice's (time, memory) under the reuse model equals, exactly, a plain model of the graph that
    # holds just the copies the choice tiles apart (there a copy is an op and a kept tensor like any other).
    g, *_ = _tanh_mlp(batch=16, hidden=16)
    f = tw.frontier(g, _cluster(devices), devices=devices, baselines=False, tensor_reuse=True)
    rng = np.random.default_rng(seed)
    choice = _forced(f, rng)
    t, m, c, n = f._model.costs(choice)
    plan = _plan_with_kept_copies(g, f.search_graph, f._model, choice)
    core, sg = f._model.plan(choice), f.search_graph._g  # the copies tiled apart, from the plan's tilings
    apart = [n for n in f.search_graph.copies
             if core.tilings[sg.op(sg.find_op(n)).inputs[0]] != core.tilings[sg.op(sg.find_op(n)).output]]
    assert plan.graph.copies == apart
    assert [f"{a}@{b}" for a, b in _names(g, _kept_pairs(g, f.search_graph, f._model, choice))] == apart
    plain = _core.FrontierModel(plan.graph._g, _cluster(devices)._core, f.parts, prune=False)
    t2, m2, _, _ = plain.evaluate(plan._core)
    assert t == pytest.approx(t2, rel=1e-12) and m == m2
    assert (f.evaluate(plan).time, f.evaluate(plan).memory) == (t, m)
    assert plan.evaluate().comm_bytes == plan.comm_bytes


def test_reuse_frontier_contains_the_plain_one():
    # (The search is the exact engine over the model's problem; the hypothesis test above checks the
    # problem's costs against the graph with the copies.)
    g, *_ = _tanh_mlp(batch=4, width=4, hidden=4, classes=2)
    f = tw.frontier(g, _cluster(2), devices=2, baselines=False, tensor_reuse=True)
    assert len(f._model.copy_classes) == 3
    rows = f.configurations()
    assert sorted(r["name"] for r in rows if r["kind"] == "copy") == sorted(f.search_graph.copies)
    assert all(r["before"] == 1 for r in rows if r["kind"] == "copy")
    plain = tw.frontier(g, _cluster(2), devices=2, baselines=False)
    for p in plain.points:  # the plain space is the reuse space with every copy tiled like its source
        assert any(q.time <= p.time * (1 + 1e-12) and q.memory <= p.memory for q in f.points)
    for p in f.points:
        b = f.evaluate(f.to_plan(p))
        assert (b.time, b.memory) == (p.time, p.memory)
    # A plan of the plain graph (a planner's) is costed on the reuse model as no copy at all.
    dp = tw.partition(g, devices=2, algorithm="data_parallel")
    assert (f.evaluate(dp).time, f.evaluate(dp).memory) == (plain.evaluate(dp).time, plain.evaluate(dp).memory)
    assert plain.kept_copies(plain.points[0]) == []
    for p in f.points:  # without its copies a point is a plan of the graph itself
        plan = f.without_copies(p)
        alone = f.evaluate(plan)
        assert plan.graph is g and plan.evaluate().comm_bytes == plan.comm_bytes
        if f.kept_copies(p):  # on the exact frontier a kept copy buys time for its memory
            assert alone.time > p.time and alone.memory < p.memory
        else:
            assert (alone.time, alone.memory) == (p.time, p.memory)
    data = json.loads(f.to_json())
    assert data["tensor_reuse"] and all("kept_copies" in p for p in data["points"])
    assert json.loads(plain.to_json())["tensor_reuse"] is False


def test_a_point_keeping_copies_compiles_simulates_and_trains_as_torch():
    # Adam over three steps on two devices, with the copies kept, against torch.
    g, model, x, labels = _tanh_mlp(optimizer=lambda m: torch.optim.Adam(m.parameters(), lr=1e-2))
    f = tw.frontier(g, _cluster(2), devices=2, baselines=False, tensor_reuse=True)
    rng = np.random.default_rng(0)
    for _ in range(50):
        choice = _forced(f, rng)
        if len(_kept_pairs(g, f.search_graph, f._model, choice)) >= 2:
            break
    plan = _plan_with_kept_copies(g, f.search_graph, f._model, choice)
    assert len(plan.graph.copies) >= 2
    first = {**g.torch_import.feeds(model, x), "label": labels.numpy()}
    # Saved and loaded with the model's own graph: the copies come back (names in the file).
    loaded = tw.Plan.from_json(plan.to_json(), g)
    assert loaded.graph.copies == plan.graph.copies and loaded.graph.derived_from is g
    assert loaded.to_dict() == plan.to_dict()
    with pytest.raises(tw.PlanError, match="reuse_copies"):
        tw.Plan.from_json(plan.to_json().replace('"reuse_copies": [', '"reuse_copies": [["nope", "a.linear"], '), g)
    exe = tw.compile(g, loaded)  # the plan's graph (g with copies) runs in g's place
    assert exe.graph is loaded.graph
    losses = [float(exe.step(first if s == 0 else {"x": x.numpy(), "label": labels.numpy()})["loss"])
              for s in range(3)]
    np.testing.assert_allclose(losses, torch_adam_losses(torch, model, x, labels), rtol=1e-5)
    params = exe.parameters()
    for name, p in model.named_parameters():
        key = next(k for k in params if k.endswith(name) or k == name.replace(".", "_"))
        np.testing.assert_allclose(params[key], p.detach().numpy(), rtol=1e-4, atol=1e-5)
    # The simulator runs the same program: the copies are instructions of it.
    pred = plan.predict(_cluster(2))
    assert pred.step_seconds > 0 and max(pred.memory_per_device) > 0


def test_cli_tensor_reuse(capsys):
    from tilewise.cli import main

    assert main(["frontier", "mlp-2-64", "--devices", "4", "--tensor-reuse"]) == 0
    text = capsys.readouterr().out
    assert "reuse candidates, kept at" in text and "(--tensor-reuse)" in text


@pytest.mark.parametrize("make", [
    lambda: tw.models.get("rnn-1-8", batch=4),
    lambda: tw.models.transformer(layers=1, hidden=16, heads=2, seq=4, batch=2, vocab=16),
], ids=["rnn", "transformer"])
def test_random_copies_of_zoo_models_train_as_one_device(make):
    # Unrolled time steps (copies of a class across steps), int64 ids and float masks (only float32
    # tensors are candidates): any choice of copy tilings on 2 devices trains as one device does.
    g = make()
    assert all(g._g.tensor(t).dtype == "float32" for t, _ in reuse_candidates(g))
    f = tw.frontier(g, _cluster(2), devices=2, baselines=False, tensor_reuse=True, coarsen=True)
    init, feeds, expected = _one_device(g, steps=2)
    rng = np.random.default_rng(0)
    copies = 0
    for _ in range(3):
        plan = _plan_with_kept_copies(g, f.search_graph, f._model, _forced(f, rng))
        copies += len(plan.graph.copies)
        exe = tw.compile(g, plan)
        for s, want in enumerate(expected):
            got = exe.step({**init, **feeds} if s == 0 else feeds)
            for k, v in want.items():
                np.testing.assert_allclose(np.asarray(got[k], dtype=float), np.asarray(v, dtype=float),
                                           rtol=1e-4, atol=1e-5, err_msg=k)
    assert copies > 0


def test_gpt2_attention_keeps_its_probabilities_and_trains_as_torch():
    # A model we did not write (Hugging Face GPT-2 from a config): attention's softmax output is read in
    # backward by the softmax gradient and by the probabilities-times-values product's gradient, the
    # case §4.2 describes. With its copy kept in another tiling, Adam over 3 steps on 2 devices = torch.
    transformers = pytest.importorskip("transformers")
    model, ids, labels, g = tiny_gpt2(torch, transformers)
    assert [t for t, _ in _names(g, reuse_candidates(g))] == ["model.transformer.h.0.attn.softmax"]
    f = tw.frontier(g, _cluster(2), devices=2, baselines=False, tensor_reuse=True)
    first = {**g.torch_import.feeds(model, ids), "label": labels.numpy()}
    rng = np.random.default_rng(0)
    for _ in range(50):
        choice = _forced(f, rng)
        if _kept_pairs(g, f.search_graph, f._model, choice):
            break
    plan = _plan_with_kept_copies(g, f.search_graph, f._model, choice)
    assert plan.graph.copies == ["model.transformer.h.0.attn.softmax@model.transformer.h.0.attn.bmatmul"]
    exe = tw.compile(g, plan)
    losses = [float(exe.step(first if s == 0 else {"ids": ids.numpy(), "label": labels.numpy()})["loss"])
              for s in range(3)]
    np.testing.assert_allclose(losses, torch_adam_losses(torch, model, ids, labels), rtol=1e-5)


def test_batch_split_inputs_keep_their_consumers_copies():
    # TensorOpt's data loading (§4.2): inputs and labels arrive split along the batch. A consumer that
    # wants them otherwise fetches them in forward and again in backward, unless it keeps its copy:
    # here the reuse frontier is faster at equal memory, and its points keeping copies run as one device.
    g = tw.models.mlp(layers=2, hidden=32, batch=16)
    plain = tw.frontier(g, _cluster(4), devices=4, baselines=False, batch_split_inputs=True)
    f = tw.frontier(g, _cluster(4), devices=4, baselines=False, batch_split_inputs=True, tensor_reuse=True)
    gains = [1 - min(q.time for q in f.points if q.memory <= p.memory) / p.time for p in plain.points]
    assert min(gains) >= -1e-12 and max(gains) > 0.05
    keeping = [p for p in f.points if f.kept_copies(p)]
    assert keeping
    for p in keeping:  # the program simulator confirms what the proxy says the copies buy
        alone = f.without_copies(p)
        assert f.evaluate(alone).time > p.time
        assert f.simulate(p)["predicted_time"] < alone.predict(f.cluster).step_seconds
    init, feeds, outputs = _one_device(g, steps=3)
    expected = [float(o["loss"]) for o in outputs]
    for p in (keeping[0], keeping[-1]):
        plan = f.to_plan(p)
        assert plan.graph.copies and all(plan.cuts(t)[0].dim == 0 for t in ("x", "label"))  # as they arrive
        exe = tw.compile(g, plan)
        losses = [float(exe.step({**init, **feeds} if s == 0 else feeds)["loss"]) for s in range(3)]
        np.testing.assert_allclose(losses, expected, rtol=1e-5)


def test_with_the_heuristic_reuse_is_never_worse():
    # The reuse search eliminates in another order and the heuristic fixes other classes, which can do
    # far worse (rnn-12-16k: 16x slower at equal memory); the plain search's points are merged in.
    g = tw.models.rnn(layers=1, hidden=64, steps=3, batch=16)
    kw = dict(devices=16, baselines=False, heuristic=True, max_table=2**8)
    plain = tw.frontier(g, "tensoropt", **kw)
    f = tw.frontier(g, "tensoropt", tensor_reuse=True, **kw)
    # Here the reuse search alone does worse (4 fixes against 5): most points come from the plain one.
    assert plain.stats.heuristic_eliminations > 0 and f.stats.merged_points > 0
    for p in plain.points:
        assert any(q.time <= p.time * (1 + 1e-12) and q.memory <= p.memory for q in f.points)
    times = [p.time for p in f.points]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
    for p in f.points:  # merged or searched, every point's plan re-evaluates to it
        b = f.evaluate(f.to_plan(p))
        assert (b.time, b.memory) == (p.time, p.memory)
        assert f._model.choice_of(_on_search_graph(f.to_plan(p), f.search_graph)) == list(p.choice)
    for p in plain.points:
        assert plain._model.choice_of(plain.to_plan(p)._core) == list(p.choice)

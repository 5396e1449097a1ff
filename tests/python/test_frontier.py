"""tw.frontier: the graph-level cost frontier (TensorOpt §3-4, docs/FRONTIERS.md).

Oracles: enumeration of every configuration of every class on tiny graphs (the frontier is exact
and pruning loses nothing); every point re-evaluates exactly, through its plan; on small zoo models
the frontier's ends are no worse than the single-objective planners' plans costed alike, data
parallelism and the Mesh-TensorFlow frontier are dominated or matched; points compile and run.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from torch_models import tiny_gpt2, torch_adam_losses

import tilewise as tw
from tilewise import _core
from tilewise.graph.feeds import example_feeds
from tilewise.plan.frontier import _resolve


def _cluster(devices=4):
    return _resolve("tensoropt", devices)[0]


def _frontier_of(model, idx):
    """The frontier of the additive costs of the choices in ``idx`` (one row per variable)."""
    nodes = [np.array(n, dtype=float).reshape(-1, 2) for n in model.nodes]
    time = np.zeros(idx.shape[1])
    memory = np.zeros(idx.shape[1])
    for v, n in enumerate(nodes):
        time += n[idx[v], 0]
        memory += n[idx[v], 1]
    for u, v, table in model.edges:
        entries = np.array(table, dtype=float).reshape(-1, 2)[idx[u] * len(nodes[v]) + idx[v]]
        time += entries[:, 0]
        memory += entries[:, 1]
    pts = list(zip(time.tolist(), memory.tolist()))
    return [pts[i] for i in tw.pareto.reduce(pts)]


def _enumerate(model):
    """Every choice of the model's (pruned) problem: the frontier of their additive costs."""
    sizes = [len(n) for n in model.nodes]
    return _frontier_of(model, np.indices(sizes).reshape(len(sizes), -1))


@pytest.mark.parametrize("layers, parts", [(1, [2]), (1, [2, 2]), (2, [2])])
def test_frontier_equals_enumeration_of_every_configuration(layers, parts):
    g = tw.models.mlp(layers=layers, hidden=8, batch=4, train=False)
    full = _core.FrontierModel(g._g, _cluster()._core, parts, prune=False)
    expected = _enumerate(full)
    f = tw.frontier(g, _cluster(), devices=4 if parts == [2, 2] else 2, parts=parts)
    assert len(f.points) == len(expected)
    for p, (t, m) in zip(f.points, expected):
        assert p.time == pytest.approx(t, rel=1e-12) and p.memory == m
    # Pruning is exact: the pruned model's enumeration is the same frontier.
    assert [(p.time, p.memory) for p in f.points] == pytest.approx(_enumerate(f._model), rel=1e-12)
    assert f.stats.heuristic_eliminations == 0


def test_every_point_unrolls_to_its_costs_through_its_plan():
    g = tw.models.mlp(layers=2, hidden=32, batch=8)
    f = tw.frontier(g, _cluster(), devices=4, baselines=False)
    assert len(f.points) > 1
    times = [p.time for p in f.points]
    assert times == sorted(times, reverse=True) and len(set(times)) == len(times)
    for p in f.points:
        assert (p.time, p.memory, p.compute, p.network) == f._model.costs(list(p.choice))
        assert p.time == pytest.approx(p.compute + p.network, rel=1e-12)
        b = f.evaluate(f.to_plan(p))  # the plan's tilings and strategies, looked up again
        assert (b.time, b.memory) == (p.time, p.memory)
        assert f.to_plan(p).evaluate().comm_bytes == f.to_plan(p).comm_bytes


@pytest.mark.parametrize("make", [
    lambda: tw.models.mlp(layers=2, hidden=64, batch=16),
    lambda: tw.models.transformer(layers=1, hidden=32, heads=2, seq=8, batch=2, vocab=64),
], ids=["mlp", "transformer"])
def test_frontier_ends_beat_the_planners_costed_alike(make):
    g = make()
    f = tw.frontier(g, _cluster(), devices=2)
    assert f.parts == [2]
    lo, hi = f.points[0], f.points[-1]
    for algorithm in ("tofu", "kcuts", "data_parallel", "icml18", "spartan", "allrow_greedy"):
        b = f.evaluate(tw.partition(g, devices=2, algorithm=algorithm))
        assert hi.time <= b.time, algorithm  # the min-time point is no slower than any planner's plan
        if algorithm == "tofu":
            assert lo.memory <= b.memory  # the min-memory point uses no more than tofu's plan
        # every plan is dominated or matched by a frontier point
        assert any(p.time <= b.time and p.memory <= b.memory for p in f.points), algorithm
    dp = f.baselines["data_parallel"]
    assert any(p.time <= dp.time and p.memory <= dp.memory for p in f.points)
    for t, m in f.mesh_points:  # the Mesh-TensorFlow frontier never beats the full one
        assert any(p.time <= t * (1 + 1e-12) and p.memory <= m for p in f.points)


def test_points_compile_and_run_a_step_on_two_devices():
    g = tw.models.mlp(layers=2, hidden=32, batch=8)
    f = tw.frontier(g, _cluster(), devices=2, baselines=False)
    for p in {f.points[0], f.turning_point, f.points[-1]}:
        plan = f.to_plan(p)
        assert plan.algorithm == "frontier" and plan.devices == 2
        exe = tw.compile(g, plan).initialize(0)
        exe.step(example_feeds(g))
    sim = f.simulate(f.points[0])
    assert sim["time"] == f.points[0].time and sim["predicted_time"] > 0 and sim["predicted_memory"] > 0


def test_best_turning_point_json_html_plot_and_configurations():
    g = tw.models.mlp(layers=2, hidden=64, batch=16)
    f = tw.frontier(g, "tensoropt", devices=16)
    assert f.parts == [2, 8]
    assert f.best(memory_limit=1e15) is f.points[-1]
    assert f.best(memory_limit=f.points[0].memory * 0.5) is None
    limit = f.points[len(f.points) // 2].memory
    b = f.best(memory_limit=limit, margin=1.0)
    assert b.memory <= limit and all(p.time >= b.time for p in f.points if p.memory <= limit)
    assert f.best(memory_limit=limit).memory <= limit / 1.1
    tp = f.turning_point
    assert f.points[0].time >= tp.time >= f.points[-1].time
    data = json.loads(f.to_json())
    assert data["format"] == "tilewise-frontier/1" and len(data["points"]) == len(f.points)
    assert data["turning_point"] == tp.index and "data_parallel" in data["baselines"]
    assert "turning point" in f._repr_html_() and "16 devices" in repr(f)
    rows = [r for r in f.configurations() if r["kind"] == "op"]
    assert rows and all(1 <= r["after"] <= r["before"] <= 16 for r in rows)
    assert "pruned K" in f.configurations_table()
    import matplotlib

    matplotlib.use("Agg")
    ax = f.plot()
    assert ax.get_xlabel().startswith("memory")
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


def test_min_devices_and_profile_parallelism():
    g = tw.models.mlp(layers=2, hidden=64, batch=16)
    one = tw.frontier(g, "tensoropt", devices=1, baselines=False)
    assert len(one.points) == 1 and one.parts == []
    k, p, f = tw.min_devices(g, "tensoropt", memory_limit=one.points[0].memory * 0.6, margin=1.0)
    assert k > 1 and p.memory <= one.points[0].memory * 0.6 and f.devices == k
    assert tw.min_devices(g, "tensoropt", memory_limit=1.0) is None
    prof = tw.profile_parallelism(g, "tensoropt", devices=[1, 2, 4])
    assert [r["devices"] for r in prof.rows] == [1, 2, 4] and "min time" in prof.table()
    assert json.loads(prof.to_json())["rows"][0]["points"] == 1


def test_batch_split_inputs_is_the_data_loading_constraint():
    g = tw.models.mlp(layers=2, hidden=32, batch=8)
    free = tw.frontier(g, "tensoropt", devices=4, baselines=False)
    loaded = tw.frontier(g, "tensoropt", devices=4, batch_split_inputs=True)
    for p in loaded.points:
        plan = loaded.to_plan(p)
        assert all(plan.cuts(t)[0].dim == 0 for t in ("x", "label"))  # batch-split as they arrive
        assert any(q.time <= p.time and q.memory <= p.memory for q in free.points)  # a subset of the space
    assert loaded.mesh_points


def test_progress_and_time_limit():
    g = tw.models.mlp(layers=2, hidden=32, batch=8)
    seen = []
    f = tw.frontier(g, "tensoropt", devices=4, baselines=False, time_limit=60,
                    progress=lambda what, done, total: seen.append(what))
    assert f.points and any(w.startswith("costing") for w in seen) and "frontier search" in seen
    with pytest.raises(TypeError, match="progress"):
        tw.frontier(g, "tensoropt", devices=2, progress="yes")


def test_a_search_past_its_time_limit_says_what_would_be_faster():
    # rnn-1-1k: costing about 0.03 s, the exact search about 0.5 s on this machine.
    g = tw.models.get("rnn-1-1k", batch=64)
    with pytest.raises(tw.SearchTimeout, match=r"time limit .* with heuristic=False, max_table=2\*\*18, "
                       r"memory_bucket=None, coarsen=False; try heuristic=True .*memory_bucket=16 \* 2\*\*20 .*"
                       r"coarsen=True .*a longer time_limit \(now 0.3 s\)"):
        tw.frontier(g, "tensoropt", devices=16, baselines=False, time_limit=0.3)


def test_bad_arguments_are_named():
    g = tw.models.mlp(layers=1, hidden=8, batch=4)
    with pytest.raises(TypeError, match="tw.Graph"):
        tw.frontier("mlp", "tensoropt")
    with pytest.raises(ValueError, match="cluster 'tensoropt' has 4"):
        tw.frontier(g, _cluster(4), devices=8)
    with pytest.raises(ValueError, match=r"multiply to 4, not to 8"):
        tw.frontier(g, "tensoropt", devices=8, parts=[2, 2])
    with pytest.raises(ValueError, match="time_limit"):
        tw.frontier(g, "tensoropt", devices=2, time_limit=-1)
    f = tw.frontier(g, "tensoropt", devices=2, baselines=False)
    with pytest.raises(ValueError, match="memory_limit"):
        f.best(memory_limit=0)
    with pytest.raises(ValueError, match="margin"):
        f.best(memory_limit=1e9, margin=2)
    with pytest.raises(tw.PlanError, match=r"parts \[2, 2\] are not the frontier's \[4\]"):
        f4 = tw.frontier(g, "tensoropt", devices=4, baselines=False)
        f4.evaluate(tw.partition(g, devices=4))


def test_cli_frontier(tmp_path, capsys):
    from tilewise.cli import main

    out = tmp_path / "f.json"
    assert main(["frontier", "mlp-2-64", "--devices", "4", "--memory-limit", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "turning point" in text and "best within 1 GB" in text and "data_parallel" in text
    assert json.loads(out.read_text())["devices"] == 4
    assert main(["frontier", "mlp-2-64", "--devices", "0"]) == 2
    # The heuristic from the shell: a tiny table limit forces fixes.
    assert main(["frontier", "mlp-2-64", "--devices", "4", "--heuristic", "--max-table", "4"]) == 0
    fixes = int(capsys.readouterr().out.split("heuristic eliminations ")[1].split()[0].rstrip(","))
    assert fixes > 0
    # A search past its byte budget is a message naming what it used and what to try, not a traceback.
    assert main(["frontier", "mlp-2-64", "--devices", "4", "--max-bytes", "1e-6"]) == 2
    err = capsys.readouterr().err
    assert "tables would take more than" in err and "heuristic=False" in err and "try heuristic=True" in err


def test_the_simulator_reranks_the_frontier():
    """The additive proxy and the program simulator disagree away from the least-memory end (link
    contention, the arena's peak): ``simulated`` re-evaluates every point, marks the simulator's own
    Pareto set, and ``best_simulated`` picks by predicted time and memory."""
    f = tw.frontier(tw.models.get("mlp-4-1024", batch=4096), "tensoropt", devices=16)
    rows = f.simulated()
    assert [r["index"] for r in rows] == list(range(len(f.points)))
    assert rows[3]["predicted_time"] == f.simulate(3)["predicted_time"]

    def dominates(o, r):
        a, b = (o["predicted_time"], o["predicted_memory"]), (r["predicted_time"], r["predicted_memory"])
        return a != b and a[0] <= b[0] and a[1] <= b[1]

    pareto = [r for r in rows if r["pareto"]]
    assert pareto and not any(dominates(o, r) for o in pareto for r in pareto)
    assert all(any(dominates(o, r) for o in pareto) for r in rows if not r["pareto"])
    # Measured here: 5 of 48 points survive, and the proxy's fastest point simulates 2.6x slower
    # than the simulator's pick.
    assert len(pareto) < len(rows)
    best = f.best_simulated(memory_limit=1e15)
    fastest = min(rows, key=lambda r: r["predicted_time"])
    assert best.index == fastest["index"]
    assert fastest["predicted_time"] < f.simulate(f.best(memory_limit=1e15))["predicted_time"]
    limit = pareto[0]["predicted_memory"]
    assert f.best_simulated(memory_limit=limit, margin=1.0).index in {r["index"] for r in rows
                                                                        if r["predicted_memory"] <= limit}
    assert f.best_simulated(memory_limit=1.0) is None
    assert [r["index"] for r in f.simulated(limit=3)] == [0, (len(f.points) - 1 + 1) // 2, len(f.points) - 1]
    with pytest.raises(ValueError, match="limit must be a positive int"):
        f.simulated(limit=0)


def _restricted_enumeration(model):
    """Every choice of the pruned problem in which each tied op takes the split its group's tensor
    class dictates (the free variables enumerated, the tied ones following): the frontier the
    coarsened search must find."""
    follows = {v: (group[0][0], np.array(follow)) for group in model.ties for v, follow in group[1:]}
    free = [v for v in range(len(model.nodes)) if v not in follows]
    grid = np.indices([len(model.nodes[v]) for v in free]).reshape(len(free), -1)
    idx = np.zeros((len(model.nodes), grid.shape[1]), dtype=np.int64)
    idx[free] = grid
    for v, (tensor, follow) in follows.items():
        idx[v] = follow[idx[tensor]]
    return _frontier_of(model, idx)


@pytest.mark.parametrize("layers, train", [(2, False), (1, True)])
def test_coarsened_frontier_equals_enumeration_of_the_tied_space(layers, train):
    g = tw.models.mlp(layers=layers, hidden=8, batch=4, train=train)
    devices, parts = 2, [2]
    f = tw.frontier(g, _cluster(), devices=devices, parts=parts, coarsen=True, baselines=False)
    model = f._model
    assert f.stats.tied_ops == model.tied_ops > 0  # relu, the SGD updates follow their inputs
    assert model.coarse_variables == model.num_tensor_classes + model.num_op_classes - model.tied_ops
    expected = _restricted_enumeration(model)
    assert [(p.time, p.memory) for p in f.points] == pytest.approx(expected, rel=1e-12)
    # A restriction: the exact frontier dominates every point.
    exact = tw.frontier(g, _cluster(), devices=devices, parts=parts, baselines=False)
    assert all(any(q.time <= p.time and q.memory <= p.memory for q in exact.points) for p in f.points)


@pytest.mark.parametrize("make", [
    lambda: tw.models.mlp(layers=2, hidden=32, batch=8),
    lambda: tw.models.rnn(layers=1, hidden=16, steps=3, batch=4, in_features=8),
    lambda: tw.models.transformer(layers=1, hidden=32, heads=2, seq=8, batch=2, vocab=64),
], ids=["mlp", "lstm", "transformer"])
def test_coarsened_points_are_full_configurations_the_exact_frontier_dominates(make):
    g = make()
    exact = tw.frontier(g, _cluster(), devices=4, baselines=False)
    coarse = tw.frontier(g, _cluster(), devices=4, baselines=False, coarsen=True)
    assert coarse.stats.tied_ops > 0
    tied = {v for group in coarse._model.ties for v, _ in group[1:]}
    reps = coarse._model.representatives
    for p in coarse.points:
        assert any(q.time <= p.time and q.memory <= p.memory for q in exact.points)
        plan = coarse.to_plan(p)
        b = coarse.evaluate(plan)  # the plan's tilings and strategies looked up in the full model
        assert (b.time, b.memory) == (p.time, p.memory)
        for v in tied:  # a tied op splits the variable indexing its input's cut dimension (or replicates)
            op = g.ops[reps[v]]
            strategies = plan.splits(op)
            assert all(s["kind"] in ("output", "replicate") for s in strategies), (op.name, strategies)
    # The ends: on these models the restriction keeps the least time and the least memory.
    assert coarse.points[-1].time == pytest.approx(exact.points[-1].time, rel=1e-12)
    assert coarse.points[0].memory == exact.points[0].memory


def test_coarsen_is_validated():
    g = tw.models.mlp(layers=1, hidden=8, batch=4)
    with pytest.raises(TypeError, match="coarsen must be a bool"):
        tw.frontier(g, _cluster(), devices=2, coarsen=1)


def test_points_of_an_imported_transformer_train_as_torch_does():
    # A model we did not write (Hugging Face GPT-2 from a config, no weights), imported with Adam:
    # the frontier's two ends and its turning point, each run for three steps on two devices, give
    # torch's losses and, within float32 rounding, the single-device run's parameters.
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model, ids, labels, g = tiny_gpt2(torch, transformers)
    f = tw.frontier(g, _cluster(2), devices=2, baselines=False)
    assert len(f.points) > 2

    first = {**g.torch_import.feeds(model, ids), "label": labels.numpy()}  # before torch trains the model

    def train(plan):
        exe = tw.compile(g, plan)
        feeds = first
        losses = [float(exe.step(feeds if s == 0 else {"ids": ids.numpy(), "label": labels.numpy()})["loss"])
                  for s in range(3)]
        return losses, exe.parameters()

    single_losses, single = train(tw.partition(g, devices=1))
    expected = torch_adam_losses(torch, model, ids, labels)
    np.testing.assert_allclose(single_losses, expected, rtol=1e-5)
    for p in {f.points[0], f.turning_point, f.points[-1]}:
        losses, params = train(f.to_plan(p))
        np.testing.assert_allclose(losses, expected, rtol=1e-5)
        for name, value in single.items():
            np.testing.assert_allclose(params[name], value, rtol=0, atol=2e-3 * (np.abs(value).max() + 1e-6),
                                       err_msg=f"point {p.index}: {name}")

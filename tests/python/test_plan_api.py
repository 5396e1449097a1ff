"""tw.partition / tw.evaluate / tw.Plan: plans of every planner, tilings, JSON, errors, CLI, drawing."""

import json

import numpy as np
import pytest

import tilewise as tw
from tilewise import _core
from tilewise.cli import main
from tilewise.plan.search import ALGORITHMS
from tilewise.plan.tiling import UnknownNameError, device_coords, tile_box, tile_boxes


@pytest.fixture(scope="module")
def mlp():
    return tw.models.mlp(layers=2, hidden=16, batch=8)


class TinyResNet(tw.nn.Module):
    """A stem convolution, one bottleneck block (residual fork-join) and a classifier: ResNet's op
    kinds in 62 ops, so that exact searches take well under a second."""

    def __init__(self):
        from tilewise.models.resnet import Bottleneck

        super().__init__()
        self.conv1 = tw.nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = tw.nn.BatchNorm2d(16)
        self.relu = tw.nn.ReLU()
        self.layer1 = tw.nn.Sequential(Bottleneck(16, 4))
        self.avgpool = tw.nn.AdaptiveAvgPool2d((1, 1))
        self.flatten = tw.nn.Flatten()
        self.fc = tw.nn.Linear(16, 10)

    def forward(self, x):
        x = self.layer1(self.relu(self.bn1(self.conv1(x))))
        return self.fc(self.flatten(self.avgpool(x)))


@pytest.fixture(scope="module")
def resnet():
    from tilewise.models._build import build

    return build(TinyResNet(), [("x", (4, 3, 8, 8))], label=(4, 10), loss="cross_entropy", train=True,
                 name="tiny-resnet")


@pytest.fixture(scope="module")
def kcuts4(resnet):
    return tw.partition(resnet, devices=4, algorithm="kcuts")


@pytest.fixture(scope="module")
def tofu4(mlp):
    return tw.partition(mlp, devices=4, algorithm="tofu")


# ----- every planner ------------------------------------------------------------------------------


def _check_plan(g, plan, devices):
    assert plan.devices == devices
    assert int(np.prod(plan.parts)) == devices
    cost = tw.evaluate(g, plan)
    assert cost.comm_bytes == plan.comm_bytes, "the planner's total is what the cost model recounts"
    assert cost.step_bytes == plan.step_bytes
    assert sum(plan.step_bytes) == plan.comm_bytes >= 0
    assert sum(r["bytes"] for r in cost.per_op) == plan.comm_bytes
    assert len(plan.memory_per_device) == len(plan.resident_per_device) == len(plan.flops_per_device) == devices
    assert all(p >= r > 0 for p, r in zip(plan.memory_per_device, plan.resident_per_device))
    for t in g.tensors:
        assert len(plan.tiling(t).split()) == len(plan.parts)
        assert len(plan.cuts(t)) == len(plan.parts)
    for o in g.ops:
        assert len(plan.strategies(o)) == len(plan.parts)


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "brute_force"])
def test_every_planner_on_mlp_and_resnet(mlp, resnet, algorithm):
    for g in (mlp, resnet):
        plan = tw.partition(g, devices=4, algorithm=algorithm)
        assert plan.algorithm == algorithm
        _check_plan(g, plan, 4)
    assert tw.partition(mlp, 4, algorithm).parts == ([4] if algorithm == "equal_chop" else [2, 2])


def test_brute_force_is_no_worse_than_tofu(mlp):
    plan = tw.partition(mlp, devices=2, algorithm="brute_force")
    _check_plan(mlp, plan, 2)
    assert plan.evaluated > 0
    assert plan.comm_bytes <= tw.partition(mlp, 2, "tofu").comm_bytes
    one = tw.models.mlp(layers=1, hidden=16, batch=8)
    plain = tw.partition(one, devices=2, algorithm="brute_force")
    replicated = tw.partition(one, devices=2, algorithm="brute_force", replication=True)
    assert replicated.evaluated > plain.evaluated and replicated.comm_bytes <= plain.comm_bytes
    assert replicated.evaluate().comm_bytes == replicated.comm_bytes


def test_algorithm_names_match_the_core_and_the_cli():
    from tilewise.cli.plan import ALGORITHMS as CLI_ALGORITHMS

    assert ALGORITHMS == CLI_ALGORITHMS == tuple(_core.partition_algorithms())
    assert "tofu" in ALGORITHMS and "data_parallel" in ALGORITHMS


def test_one_device_needs_no_communication(mlp):
    plan = tw.partition(mlp, devices=1)
    assert plan.parts == [] and plan.comm_bytes == 0 and plan.step_bytes == []
    assert plan.tiling("x") == "" and plan.strategies("0.linear") == []
    assert plan.evaluate().comm_bytes == 0


# ----- tilings and strategies ---------------------------------------------------------------------


def test_data_parallel_replicates_parameters_and_splits_the_batch(mlp, resnet):
    plan = tw.partition(mlp, devices=2, algorithm="data_parallel")
    for t in mlp.tensors_with_role("parameter"):
        assert plan.tiling(t) == "r"
        assert plan.cuts(t) == [tw.Cut(None, 2)]
        assert plan.cuts(t)[0].replicated
    assert plan.tiling("x") == "R" and plan.tiling("label") == "R"
    assert plan.cuts("x") == [tw.Cut(0, 2)]
    assert plan.strategies("0.linear") == ["output i0/2"]
    assert plan.splits("0.linear") == [{"kind": "output", "var": "i0", "index": 0, "parts": 2, "reducer": None}]

    plan = tw.partition(resnet, devices=4, algorithm="data_parallel")
    assert plan.parts == [2, 2]
    assert all(plan.tiling(t) == "r r" for t in resnet.tensors_with_role("parameter"))
    assert plan.tiling("x") == "P0 P0"  # rank 4: P<dim>
    assert plan.strategies("conv1.conv2d") == ["output b/2"] * 2


def test_tiling_strings_name_rows_and_columns():
    from tilewise.plan.tiling import tiling_str

    assert tiling_str([0, 1, -1], 2) == "R C r"
    assert tiling_str([1, 3], 4) == "P1 P3"
    assert tiling_str([0], 1) == "P0"
    assert tiling_str([-1, -1], 0) == "r r"


def test_reduce_strategies_print_their_reducer(resnet, kcuts4):
    plan = kcuts4
    reduces = [(o, s) for o in resnet.ops for s in plan.splits(o) if s["kind"] == "reduce"]
    assert reduces, "kcuts on ResNet splits some reduction"
    op, s = reduces[0]
    assert s["var"] == op.desc.var_names[s["index"]] and s["reducer"] == "Sum"
    assert f"reduce {s['var']}/{s['parts']} (Sum)" in plan.strategies(op)


def test_tile_box_is_nested_array_split():
    for n, k in ((7, 3), (10, 4), (5, 5), (3, 2)):
        pieces = np.array_split(np.arange(n), k)
        for w in range(k):
            (lo, hi), = tile_box((n,), [0], [k], [w])
            assert list(range(lo, hi + 1)) == list(pieces[w])
    for c0 in range(3):
        for c1 in range(2):
            outer = np.array_split(np.arange(11), 3)[c0]
            inner = np.array_split(outer, 2)[c1]
            box = tile_box((11, 4), [0, 0], [3, 2], [c0, c1])
            assert box == ((inner[0], inner[-1]), (0, 3))
    assert tile_box((4, 6), [1, -1], [2, 2], [1, 1]) == ((0, 3), (3, 5))
    assert [device_coords(d, [3, 2]) for d in range(6)] == [[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]]
    assert tile_boxes((11, 4), [0, 1], [3, 2]) == [tile_box((11, 4), [0, 1], [3, 2], device_coords(d, [3, 2]))
                                                   for d in range(6)]


@pytest.mark.parametrize("call, message", [
    (lambda: tile_box((4, 6), [2], [2], [0]), "cuts must be dimensions 0..1"),
    (lambda: tile_box((4, 6), [0], [2], [2]), "do not lie in parts"),
    (lambda: tile_box((4, -6), [0], [2], [0]), "shape must not be negative"),
    (lambda: tile_boxes((4, 6), [0], [2, 2]), "one cut per step"),
    (lambda: tile_boxes((4, 6), [0], [0]), "parts must be positive"),
    (lambda: device_coords(6, [3, 2]), "device 6 is not one of the 6 devices"),
    (lambda: tile_box((4.5, 6), [0], [2], [0]), "shape must be a sequence of ints"),
])
def test_tile_geometry_rejects_what_c_plus_plus_must_not_see(call, message):
    # The geometry is the cost model's own (tilewise._core): bad arguments stop in Python.
    with pytest.raises(tw.PlanError, match=message):
        call()


def test_tiles_cover_each_tensor_once_per_replica(resnet, kcuts4):
    plan = kcuts4
    for t in resnet.tensors:
        count = np.zeros(t.shape, dtype=int)
        for box in plan.tiles(t):
            count[tuple(slice(lo, hi + 1) for lo, hi in box)] += 1
        copies = int(np.prod([c.parts for c in plan.cuts(t) if c.replicated]))
        assert (count == copies).all(), (t.name, plan.tiling(t))


def test_breakdown_and_summary(tofu4):
    rows = tofu4.breakdown()
    assert len(rows) == len(tofu4.graph.ops)
    assert [r["bytes"] for r in rows] == sorted((r["bytes"] for r in rows), reverse=True)
    assert sum(r["bytes"] for r in rows) == tofu4.comm_bytes
    top = tofu4.breakdown(top=3)
    assert top == rows[:3]
    r = top[0]
    op = tofu4.graph.op(r["op"])
    assert set(r["inputs"]) == {t.name for t in op.inputs}
    assert r["bytes"] == sum(r["inputs"].values()) + r["output"]
    assert r["type"] == op.type and r["phase"] == op.phase

    text = tofu4.summary()
    assert "tofu on 4 devices (parts 2 x 2)" in text
    assert f"({tofu4.comm_bytes:,} bytes)" in text and " GB per iteration" in text
    assert "peak memory per device" in text and r["op"] in text
    assert "tofu" in repr(tofu4) and f"{tofu4.comm_bytes:,} bytes" in repr(tofu4)
    assert "<table>" in tofu4._repr_html_()
    assert "peak memory" in repr(tofu4.evaluate())


def test_progress_bar_and_callback(mlp, capsys):
    pytest.importorskip("tqdm")
    tw.partition(mlp, devices=4, progress=True)
    assert "step" in capsys.readouterr().err
    calls = []
    tw.partition(mlp, devices=4, progress=lambda what, done, total: calls.append((what, done, total)))
    assert calls and all(isinstance(w, str) and 0 <= d <= t for w, d, t in calls)


def test_time_limit_raises_search_timeout(resnet):
    with pytest.raises(tw.SearchTimeout, match="time limit"):
        tw.partition(resnet, devices=4, algorithm="tofu", time_limit=1e-9)
    assert issubclass(tw.SearchTimeout, TimeoutError) and issubclass(tw.SearchTooLarge, RuntimeError)
    assert issubclass(tw.PlanError, ValueError)


# ----- JSON ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["kcuts", "spartan", "equal_chop"])
def test_json_round_trip_is_exact(resnet, kcuts4, algorithm, tmp_path):
    plan = kcuts4 if algorithm == "kcuts" else tw.partition(resnet, devices=4, algorithm=algorithm)
    path = tmp_path / "plan.json"
    plan.save(path)
    loaded = tw.Plan.load(path, resnet)
    assert loaded.to_dict() == plan.to_dict()
    assert loaded._core.tilings == plan._core.tilings and loaded._core.splits == plan._core.splits
    for name in ("algorithm", "devices", "parts", "comm_bytes", "step_bytes", "search_seconds", "largest_table",
                 "evaluated", "duplication_used"):
        assert getattr(loaded, name) == getattr(plan, name), name
    assert loaded.evaluate().comm_bytes == plan.comm_bytes
    assert loaded.memory_per_device == plan.memory_per_device
    data = json.loads(path.read_text())
    assert data["format"] == "tilewise.plan/1"
    conv = next(o for o in data["splits"] if o["op"] == "conv1.conv2d")
    assert all(s["var"] in (None, *resnet.op("conv1.conv2d").desc.var_names) for s in conv["strategies"])


def test_plan_loads_onto_a_rebuilt_graph_but_not_another(tofu4, resnet):
    text = tofu4.to_json()
    same = tw.models.mlp(layers=2, hidden=16, batch=8)
    assert tw.Plan.from_json(text, same).evaluate().comm_bytes == tofu4.comm_bytes
    assert tw.evaluate(same, tofu4).comm_bytes == tofu4.comm_bytes
    with pytest.raises(tw.PlanError, match="made for graph 'mlp-2-16'"):
        tw.Plan.from_json(text, resnet)
    bigger = tw.models.mlp(layers=2, hidden=16, batch=16)
    with pytest.raises(tw.PlanError, match=r"tensor 0 is 'x' \(8, 16\) in the plan but 'x' \(16, 16\)"):
        tw.Plan.from_json(text, bigger)
    with pytest.raises(tw.PlanError, match="made for graph"):
        tw.evaluate(bigger, tofu4)
    with pytest.raises(tw.PlanError, match="not a tilewise plan"):
        tw.Plan.from_json("{}", same)
    with pytest.raises(tw.PlanError, match="invalid JSON"):
        tw.Plan.from_json("{", same)
    data = tofu4.to_dict()
    data["splits"][0]["strategies"][0]["var"] = "nope"
    with pytest.raises(tw.PlanError, match="splits variable 'nope'"):
        tw.Plan.from_json(json.dumps(data), same)
    with pytest.raises(TypeError, match="tw.Graph"):
        tw.Plan.from_json(text, None)


# ----- errors -------------------------------------------------------------------------------------


def test_bad_arguments_raise_typed_errors(mlp):
    with pytest.raises(TypeError, match="partition takes a tw.Graph, not str"):
        tw.partition("mlp", devices=4)
    with pytest.raises(tw.PlanError, match="devices must be an int from 1 to"):
        tw.partition(mlp, devices=0)
    with pytest.raises(TypeError, match="devices must be an int, not float"):
        tw.partition(mlp, devices=4.0)
    with pytest.raises(TypeError, match="not bool"):
        tw.partition(mlp, devices=True)
    with pytest.raises(tw.PlanError, match=r"unknown partition algorithm 'tofoo' \(did you mean 'tofu'\?\); valid: "
                                           r"tofu, kcuts, spartan, data_parallel"):
        tw.partition(mlp, devices=4, algorithm="tofoo")
    with pytest.raises(TypeError, match="algorithm must be a str"):
        tw.partition(mlp, devices=4, algorithm=None)
    assert tw.partition(mlp, devices=2, algorithm="Data-Parallel").algorithm == "data_parallel"
    with pytest.raises(tw.PlanError, match="time_limit must be a positive number"):
        tw.partition(mlp, devices=4, time_limit=-1)
    with pytest.raises(TypeError, match="time_limit must be a number"):
        tw.partition(mlp, devices=4, time_limit="1")
    with pytest.raises(tw.PlanError, match="threads must be an int from 1"):
        tw.partition(mlp, devices=4, threads=0)
    with pytest.raises(tw.PlanError, match="duplication_budget applies to spartan only"):
        tw.partition(mlp, devices=4, duplication_budget=1000)
    with pytest.raises(tw.PlanError, match="duplication_budget must be an int from 0"):
        tw.partition(mlp, devices=4, algorithm="spartan", duplication_budget=-1)
    with pytest.raises(tw.PlanError, match="replication=True applies to brute_force only"):
        tw.partition(mlp, devices=4, replication=True)
    with pytest.raises(TypeError, match="progress must be a bool or a callable"):
        tw.partition(mlp, devices=4, progress="yes")
    with pytest.raises(TypeError, match="evaluate takes a tw.Plan"):
        tw.evaluate(mlp, "plan")


def test_unknown_names_suggest_close_matches(tofu4, resnet):
    with pytest.raises(KeyError) as e:
        tofu4.tiling("0.wieght")
    assert isinstance(e.value, tw.PlanError) and isinstance(e.value, UnknownNameError)
    assert str(e.value) == "no tensor named '0.wieght' in graph 'mlp-2-16' (did you mean '0.weight' or '2.weight'?)"
    with pytest.raises(tw.PlanError, match="no op named '0.lin' in graph 'mlp-2-16' \\(did you mean '0.linear'"):
        tofu4.strategies("0.lin")
    with pytest.raises(KeyError, match="there is a tensor of that name"):
        tofu4.splits("x")
    with pytest.raises(TypeError, match="expected a tensor"):
        tofu4.tiling(tofu4.graph.op("0.linear"))
    with pytest.raises(TypeError, match="expected a tensor name or a GTensor, not int"):
        tofu4.cuts(3)
    with pytest.raises(tw.PlanError, match="belongs to graph 'tiny-resnet'"):
        tofu4.tiling(resnet.tensor("x"))
    with pytest.raises(tw.PlanError, match="top must be an int from 0"):
        tofu4.breakdown(top=-1)


# ----- CLI and drawing ----------------------------------------------------------------------------


def test_cli_plan(capsys, tmp_path):
    out = tmp_path / "plan.json"
    assert main(["plan", "mlp-2-16", "--batch", "8", "--devices", "4", "--algorithm", "tofu", "--json", str(out),
                 "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "tofu on 4 devices" in text and "bytes)" in text and "GB per iteration" in text
    assert "top 3 ops by bytes" in text
    g = tw.models.get("mlp-2-16", batch=8)
    assert tw.Plan.load(out, g).devices == 4


@pytest.mark.parametrize("args, message", [
    (["--algorithm", "tofoo"], "valid: tofu, kcuts"),
    (["--devices", "0"], "devices must be an int from 1"),
    (["--time-limit", "1e-9", "--devices", "8"], "time limit"),
    (["--batch", "0"], "--batch must be positive"),
])
def test_cli_plan_errors_exit_2(capsys, args, message):
    assert main(["plan", "mlp-2-16", "--batch", "8", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tilewise plan: error: ") and message in err and "Traceback" not in err


def test_cli_unknown_model_exits_2(capsys):
    assert main(["plan", "mlp"]) == 2
    assert "unknown model name 'mlp'" in capsys.readouterr().err


def test_draw(resnet, kcuts4, tmp_path, capsys):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = kcuts4
    ax = plan.draw(max_ops=3)
    assert isinstance(ax, matplotlib.axes.Axes)
    titles = [t.get_text() for t in ax.texts]
    assert "conv1.conv2d" in titles and "fc.linear" in titles  # evenly sampled: first and last
    assert any(plan.tiling("conv1.weight") in t for t in titles)
    assert len(ax.patches) >= 4 * 2 * 3  # a tile per device, two tensors per op
    plt.close(ax.figure)

    fig, ax = plt.subplots()
    assert plan.draw(ax=ax, ops=["layer1.0.conv2.conv2d", resnet.op("fc.linear")]) is ax
    plt.close(fig)
    with pytest.raises(tw.PlanError, match="no op named"):
        plan.draw(ops=["conv9"])

    png = tmp_path / "plan.png"
    assert main(["plan", "mlp-2-16", "--batch", "8", "--devices", "2", "--draw", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"

"""Loading is validated, not trusted: regression tests for the defects issue 15 found (each of
these failed before its fix: a raw KeyError/TypeError, a silent acceptance, a segfault or a hang).
docs/RELIABILITY.md lists them."""

from __future__ import annotations

import json
import time

import pytest

import tdl_ops
import tilewise as tw
from tilewise.cli import main


@pytest.fixture(scope="module")
def mlp():
    return tw.models.get("mlp-2-8", batch=4, optimizer="adam")


def _doc(g) -> dict:
    return json.loads(g.to_json())


def _load(doc) -> tw.Graph:
    return tw.Graph.from_json(json.dumps(doc))


def _tid(doc, name):
    return next(i for i, t in enumerate(doc["tensors"]) if t["name"] == name)


# ----- graph files -------------------------------------------------------------------------------


@pytest.mark.parametrize("text, field", [
    ("{", "invalid JSON"),
    ("[1, 2]", "the JSON is a list"),
    ('{"format": "tilewise.graph/1"}', r"\.tensors: missing"),
    ('{"format": "tilewise.graph/1", "tensors": {}, "ops": []}', r"\.tensors: is an object"),
    ('{"format": "tilewise.graph/1", "tensors": [1], "ops": []}', r"tensors\[0\]: is an integer"),
    ('{"format": "tilewise.graph/1", "tensors": [], "ops": [], "outputs": {"y": 3}}', r"\.outputs\.y"),
    ("[" * 100000, "invalid JSON"),
    ('{"format": "tilewise.graph/1", "tensors": [], "ops": [], "n": ' + "9" * 5000 + "}", "invalid JSON"),
])
def test_malformed_graph_json_is_a_graph_error_naming_the_field(text, field):
    with pytest.raises(tw.GraphError, match=field):
        tw.Graph.from_json(text)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["tensors"][0].pop("shape"), r"tensors\[0\]\.shape: missing"),
    (lambda d: d["tensors"][0].update(shape="4x8"), r"tensors\[0\]\.shape: is a string"),
    (lambda d: d["tensors"][0].update(shape=[4, -8]), r"tensors\[0\]\.shape\[1\]: is -8"),
    (lambda d: d["tensors"][0].update(shape=[4, 8.0]), r"tensors\[0\]\.shape\[1\]: is 8\.0"),
    (lambda d: d["tensors"][0].update(dtype="float8"), r"tensors\[0\]\.dtype: is 'float8'; expected one of"),
    (lambda d: d["tensors"][0].update(role=None), r"tensors\[0\]\.role: is null"),
    (lambda d: d["tensors"][0].update(name=""), r"tensors\[0\]\.name: is empty"),
    (lambda d: d["tensors"][1].update(name="x"), r"tensors\[1\]\.name: 'x' is already the name of tensors\[0\]"),
    (lambda d: d["tensors"][3].update(producer=99), r"tensors\[3\]\.producer: is 99; expected"),
    (lambda d: d["ops"][0]["inputs"].append(99), r"ops\[0\]\.inputs\[3\]: is 99"),
    (lambda d: d["ops"][0].update(inputs=[0, 1, 2, 0]), r"ops\[0\]\.inputs: lists 4 tensors"),
    (lambda d: d["ops"][0].update(attrs=[]), r"ops\[0\]\.attrs: is a list"),
    (lambda d: d["ops"][0]["attrs"].update(bogus=1), r"ops\[0\]\.attrs\.bogus: op 'linear' has no attribute"),
    (lambda d: d["ops"][1].update(phase="sideways"), r"ops\[1\]\.phase: is 'sideways'"),
    (lambda d: d["ops"][1].update(forward_op=1), r"ops\[1\]\.forward_op: is 1; expected -1 or the id of an earlier"),
    (lambda d: d["ops"][0].update(type="no_such_op"), r"ops\[0\]\.type: no TDL op named 'no_such_op'"),
])
def test_bad_graph_fields_are_graph_errors_naming_the_field(mlp, edit, field):
    doc = _doc(mlp)
    edit(doc)
    with pytest.raises(tw.GraphError, match=field):
        _load(doc)


def test_gradient_with_a_shape_its_op_does_not_compute_is_refused(mlp):
    """Loaded silently before, and trained wrong (missing rows read as 0)."""
    doc = _doc(mlp)
    i = _tid(doc, "grad/2.linear.matmul_tn")  # (8, 8) weight gradient
    doc["tensors"][i]["shape"] = [8, 4]
    with pytest.raises(tw.GraphError, match=rf"tensors\[{i}\]\.grad_of: .* a gradient has its tensor's shape"):
        _load(doc)
    doc["tensors"][i]["grad_of"] = -1  # unmarked: only the op can tell
    with pytest.raises(tw.GraphError, match=rf"tensors\[{i}\]\.shape: is \(8, 4\), but op .* computes shape \(8, 8\)"):
        _load(doc)


def test_gradient_of_a_tensor_of_another_shape_is_refused(mlp):
    doc = _doc(mlp)
    i = _tid(doc, "grad/2.linear.sum_axes")  # (8,) bias gradient
    doc["tensors"][i]["grad_of"] = _tid(doc, "2.weight")
    with pytest.raises(tw.GraphError, match=rf"tensors\[{i}\]\.grad_of: .* a gradient has its tensor's shape"):
        _load(doc)


def test_deleting_the_last_tensor_does_not_silently_drop_its_op(mlp):
    doc = _doc(mlp)
    doc["tensors"].pop()
    with pytest.raises(tw.GraphError, match=r"ops\[\d+\]\.output: is \d+; expected a tensor id"):
        _load(doc)


def test_a_tensor_produced_twice_is_refused(mlp):
    doc = _doc(mlp)
    doc["ops"][1]["output"] = doc["ops"][0]["output"]  # relu claims linear's output too
    with pytest.raises(tw.GraphError, match=r"ops\[1\]\.output: names tensors\[3\], whose producer is 0"):
        _load(doc)
    doc = _doc(mlp)
    doc["tensors"][4]["producer"] = 0  # two tensors claim op 0
    with pytest.raises(tw.GraphError, match="producer"):
        _load(doc)


def test_a_computed_tensor_without_its_op_is_refused(mlp):
    """An activation with no producer would be read uninitialised: a dangling tensor."""
    doc = _doc(mlp)
    doc["tensors"][4]["producer"] = -1
    with pytest.raises(tw.GraphError, match=r"tensors\[4\]\.producer: is -1, but role 'activation' is computed"):
        _load(doc)


def test_ops_out_of_producer_order_are_refused(mlp):
    doc = _doc(mlp)
    doc["ops"][0]["inputs"][0] = 4  # linear reads relu's output, which relu computes from linear's
    with pytest.raises(tw.GraphError, match=r"ops\[0\]\.inputs\[0\]: is tensor 4, not before the op's output"):
        _load(doc)


def test_a_parameter_that_updates_a_gradient_is_refused(mlp):
    """Segfaulted in the step before."""
    doc = _doc(mlp)
    i = _tid(doc, "update/0.weight.sgd") if any(t["name"] == "update/0.weight.sgd" for t in doc["tensors"]) else \
        next(k for k, t in enumerate(doc["tensors"]) if t["updates"] >= 0 and t["role"] == "parameter")
    doc["tensors"][i]["updates"] = next(k for k, t in enumerate(doc["tensors"])
                                        if t["role"] == "gradient" and t["shape"] == doc["tensors"][i]["shape"])
    with pytest.raises(tw.GraphError, match=rf"tensors\[{i}\]\.updates: names .*gradient, computed by an op"):
        _load(doc)


def test_a_tensor_that_updates_itself_is_refused(mlp):
    """Made compile loop forever before."""
    doc = _doc(mlp)
    i = next(k for k, t in enumerate(doc["tensors"]) if t["updates"] >= 0)
    doc["tensors"][i]["updates"] = i
    with pytest.raises(tw.GraphError, match=rf"tensors\[{i}\]\.updates: names the tensor itself"):
        _load(doc)


def test_two_updates_of_one_tensor_and_updates_of_other_shapes_are_refused(mlp):
    doc = _doc(mlp)
    ts = doc["tensors"]
    ups = [k for k, t in enumerate(ts) if t["updates"] >= 0]
    a, b = next((a, b) for a in ups for b in ups if a < b and ts[a]["shape"] == ts[b]["shape"])
    ts[b]["updates"] = ts[a]["updates"]
    with pytest.raises(tw.GraphError, match="already updates"):
        _load(doc)
    doc = _doc(mlp)
    doc["tensors"][a]["updates"] = next(k for k, t in enumerate(doc["tensors"])
                                        if t["role"] == "parameter" and t["producer"] < 0
                                        and t["shape"] != doc["tensors"][a]["shape"])
    with pytest.raises(tw.GraphError, match="an update keeps shape and dtype"):
        _load(doc)


def test_a_cycle_through_gradient_and_update_marks_is_refused(mlp):
    """Found by the fuzzer: a parameter marked as the gradient of its own update loaded, and
    coarsening then failed on the cycle."""
    doc = _doc(mlp)
    i = next(k for k, t in enumerate(doc["tensors"]) if t["updates"] >= 0)
    doc["tensors"][doc["tensors"][i]["updates"]]["grad_of"] = i
    with pytest.raises(tw.GraphError, match="forms a cycle of grad_of/updates marks"):
        _load(doc)


def test_graphs_built_in_python_get_the_same_checks_of_marks():
    """The C++ graph checks marks too, so a graph built by hand cannot hold a self-update either."""
    g = tw.Graph()
    w = g.parameter("w", (4,))
    x = g.input("x", (4,))
    y = tdl_ops.relu(x)
    with pytest.raises(tw.GraphError, match="a tensor does not update itself"):
        g.mark_update(w, w)
    with pytest.raises(tw.GraphError, match="only a parameter or optimizer state that no op computes"):
        g.mark_update(y, x)
    with pytest.raises(tw.GraphError, match="cannot be the gradient of itself"):
        g.mark_gradient(y, y)
    g.mark_update(y, w)
    with pytest.raises(tw.GraphError, match="already updates it"):
        g.mark_update(tdl_ops.relu(y), w)


def test_huge_extents_are_shape_errors_not_overflow(mlp):
    """A declared extent of 2^62 overflowed the size arithmetic (interval, comm cost, arena) and segfaulted."""
    g = tw.Graph()
    with pytest.raises(tw.ShapeError, match=r"extent 4611686018427387904 .* at most 2\^40"):
        g.input("x", (4, 2**62))
    with pytest.raises(tw.ShapeError, match=r"more than 2\^44"):
        g.input("y", (2**30, 2**30))
    doc = _doc(mlp)
    doc["tensors"][0]["shape"] = [2**62, 8]
    with pytest.raises(tw.GraphError, match=r"tensors\[0\]\.shape: .*at most 2\^40"):
        _load(doc)
    doc["tensors"][0]["shape"] = [2**64, 8]  # beyond int64: refused before the C++ conversion
    with pytest.raises(tw.GraphError, match=r"tensors\[0\]\.shape\[0\]"):
        _load(doc)


def test_an_nary_op_of_absurd_arity_is_refused_before_it_is_made(mlp):
    doc = _doc(mlp)
    doc["ops"][0]["type"] = "add_99999999"
    t0 = time.perf_counter()
    with pytest.raises(tw.GraphError, match=r"ops\[0\]\.type: 'add_99999999' names an op of 99999999 inputs"):
        _load(doc)
    assert time.perf_counter() - t0 < 5


def test_files_that_are_not_utf8_are_typed_errors(tmp_path, mlp, plan):
    path = tmp_path / "g.json"
    path.write_bytes(mlp.to_json().encode()[:-2] + b"\xff\n")
    with pytest.raises(tw.GraphError, match="not UTF-8"):
        tw.Graph.load(path)
    path.write_bytes(plan.to_json().encode()[:-2] + b"\xff\n")
    with pytest.raises(tw.PlanError, match="not UTF-8"):
        tw.Plan.load(path, mlp)


def test_valid_files_still_round_trip(mlp):
    text = mlp.to_json()
    assert tw.Graph.from_json(text).to_json() == text
    assert tw.Graph.from_json(text.encode()).to_json() == text


# ----- plan files ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plan(mlp):
    return tw.partition(mlp, 4, "tofu")


def _plan_with(plan, edit) -> str:
    d = plan.to_dict()
    edit(d)
    return json.dumps(d)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(parts=[2, 3]), r"\.parts: \[2, 3\] multiply to 6, not to the plan's 4 devices"),
    (lambda d: d.update(parts=[4, 1]), r"\.parts\[1\]: is 1; expected a part count"),
    (lambda d: d.update(devices="4"), r"\.devices: is a string"),
    (lambda d: d["tilings"][0]["cuts"].append(0), r"\.tilings\[0\]\.cuts: has 3 cuts; the plan has 2 steps"),
    (lambda d: d["tilings"][0]["cuts"].__setitem__(0, 5), r"\.tilings\[0\]\.cuts\[0\]: is 5; expected -1"),
    (lambda d: d["tilings"][0].update(tiling="R R R"), r"\.tilings\[0\]\.tiling: is 'R R R', but the cuts"),
    (lambda d: d.update(comm_bytes=-1), r"\.comm_bytes: is -1; expected a non-negative integer"),
    (lambda d: d.update(comm_bytes=d["comm_bytes"] + 4), r"\.comm_bytes: .* \(re-evaluated\): the figure is stale"),
    (lambda d: d["step_bytes"].pop(), r"\.step_bytes: has 1 entries"),
    (lambda d: d.update(search_seconds=float("nan")), r"\.search_seconds: is a number \(nan\)"),
    (lambda d: d["splits"][0]["strategies"][0].update(kind="sideways"), r"\.splits\[0\]\.strategies\[0\]\.kind"),
    (lambda d: d["splits"][0]["strategies"][0].update(reducer="Avg"), r"\.splits\[0\]\.strategies\[0\]\.reducer"),
    (lambda d: d["splits"][0].update(strategies="output"), r"\.splits\[0\]\.strategies: is a string"),
    (lambda d: d.pop("tilings"), r"\.tilings: missing"),
])
def test_bad_plan_fields_are_plan_errors_naming_the_field(mlp, plan, edit, field):
    with pytest.raises(tw.PlanError, match=field):
        tw.Plan.from_json(_plan_with(plan, edit), mlp)


def test_a_strategy_the_op_does_not_have_is_refused(mlp, plan):
    """linear's output variables can be split as outputs, its k only as a reduction."""
    def edit(d):
        names = list(mlp.ops[0].desc.var_names)
        d["splits"][0]["strategies"][0].update(kind="reduce", var=names[0], index=0, reducer="Sum")
    with pytest.raises(tw.PlanError, match=r"\.splits\[0\]\.strategies\[0\]: op '0\.linear' .* has no strategy"):
        tw.Plan.from_json(_plan_with(plan, edit), mlp)


def test_an_update_tiled_unlike_its_tensor_is_refused(mlp, plan):
    """Reached the runtime's internal error 'an update shares its tensor's tiles' before."""
    i = next(t.id for t in mlp.tensors if t.updates is not None and len(t.shape) == 2)
    target = mlp.tensors[i].updates.id

    def edit(d):
        d["tilings"][i]["cuts"] = [1 - c if c >= 0 else 0 for c in d["tilings"][target]["cuts"]]
        d["tilings"][i].pop("tiling")
    with pytest.raises(tw.PlanError, match=rf"\.tilings\[{i}\]\.cuts: .* an update is tiled like its tensor"):
        tw.Plan.from_json(_plan_with(plan, edit), mlp)


def test_valid_plans_still_round_trip(mlp, plan):
    assert tw.Plan.from_json(plan.to_json(), mlp).to_json() == plan.to_json()


# ----- descriptions, model names, the command line --------------------------------------------------


def test_a_very_deep_description_body_is_a_tdl_error():
    """20,000 chained additions overflowed the stack in the recursive scope check (segfault)."""
    @tw.op
    def deep_chain(a):
        def body(i):
            v = a[i]
            for _ in range(20000):
                v = v + a[i]
            return v
        return body

    with pytest.raises(tw.TDLError, match="too deep: more than 2000 nested operations"):
        deep_chain.infer_shape(a=(3,))


def test_a_long_but_shallow_description_still_traces():
    @tw.op
    def sum_of_1000(a):
        return lambda i: sum((a[i] for _ in range(999)), a[i])

    assert sum_of_1000.infer_shape(a=(3,)) == (3,)


@pytest.mark.parametrize("name", ["mlp-99999999999-16", "mlp-2-99999999999", "rnn-100000-1k", "nasnet-99999"])
def test_absurd_model_sizes_are_refused_at_once(name):
    """`tilewise plan mlp-99999999999-16` hung (building 10^11 layers)."""
    t0 = time.perf_counter()
    with pytest.raises(tw.GraphError, match="out of range; expected 1 to"):
        tw.models.get(name)
    assert time.perf_counter() - t0 < 1


def test_cli_plan_with_an_absurd_model_is_a_message(capsys):
    assert main(["plan", "mlp-99999999999-16"]) == 2
    assert "layers = 99999999999 is out of range" in capsys.readouterr().err


def test_cli_run_image_on_an_mlp_is_a_message(capsys):
    """A TypeError traceback before."""
    assert main(["run", "mlp-2-8", "--image", "32"]) == 2
    assert "has no option 'image'" in capsys.readouterr().err


def test_cli_graph_json_into_a_missing_folder_is_a_message(tmp_path, capsys):
    """A FileNotFoundError traceback before."""
    assert main(["graph", "mlp-1-4", "--batch", "2", "--json", str(tmp_path / "missing" / "g.json")]) == 2
    assert "cannot write" in capsys.readouterr().err


@pytest.mark.parametrize("shape", ["x=1,4611686018427387904,2,2", "x=99999999999999999999,2,2,2",
                                   "x=1048576,1048576,1048576,2"])
def test_cli_analyze_with_a_huge_shape_is_a_message(capsys, shape):
    """A hang (2^62: the extent arithmetic overflowed) or an OverflowError traceback before."""
    assert main(["analyze", "upsample_nearest2d", "--shape", shape]) == 2
    assert "--shape x" in capsys.readouterr().err


def test_graphs_with_huge_shapes_cannot_be_built_through_ops():
    g = tw.Graph()
    x = g.input("x", (1, 2**20, 2**20, 2**3))
    with pytest.raises(tw.ShapeError, match="more than 2\\^44"):
        tdl_ops.upsample_nearest2d(x, scale=2**10)

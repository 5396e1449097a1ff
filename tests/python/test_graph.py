"""The graph IR: building by calling ops on graph tensors, naming, roles, summary, DOT, JSON."""

import json

import pytest

import tdl_ops
import tilewise as tw


def mlp_graph():
    g = tw.Graph("mlp")
    x = g.input("x", (8, 16))
    with g.scope("fc1"):
        h = tdl_ops.relu(tdl_ops.linear(x, g.parameter("weight", (32, 16)), g.parameter("bias", (32,))))
    with g.scope("fc2"):
        y = tdl_ops.linear(h, g.parameter("weight", (4, 32)), g.parameter("bias", (4,)))
    return g, x, y


def test_shapes_come_from_the_descriptions():
    g, x, y = mlp_graph()
    assert y.shape == (8, 4)
    assert y.name == "fc2.linear" and y.role == "activation"
    assert y.producer.type == "linear" and y.producer.inputs[0].name == "fc1.relu"
    assert [o.name for o in x.consumers] == ["fc1.linear"]
    assert g.num_parameters == 32 * 16 + 32 + 4 * 32 + 4


def test_bytes_by_role_and_summary():
    g, _, _ = mlp_graph()
    b = g.bytes_by_role()
    assert b["parameter"] == 4 * g.num_parameters
    assert b["input"] == 4 * 8 * 16
    assert b["activation"] == 4 * (8 * 32 * 2 + 8 * 4)
    s = g.summary()
    assert "3 ops" in s and "linear x2" in s and "relu x1" in s


def test_json_round_trips_exactly(tmp_path):
    g, _, _ = mlp_graph()
    with g.phase("backward", forward_op=g.op("fc2.linear")):
        gy = g.input("grad_seed", (8, 4))
        gh = tdl_ops.matmul(gy, g.tensor("fc2.weight"), name="grad/fc2")
    g.mark_gradient(gh, g.tensor("fc1.relu"))
    path = tmp_path / "g.json"
    g.save(path)
    loaded = tw.Graph.load(path)
    assert loaded.to_json() == g.to_json()
    assert loaded.tensor("grad/fc2").grad_of.name == "fc1.relu"
    assert loaded.op("grad/fc2").phase == "backward"
    assert loaded.op("grad/fc2").forward_op.name == "fc2.linear"
    data = json.loads(g.to_json())
    assert data["format"] == "tilewise.graph/1"


def test_attributes_survive_the_round_trip():
    g = tw.Graph()
    x = g.input("x", (2, 3, 9, 9))
    w = g.parameter("w", (4, 3, 3, 3))
    y = tdl_ops.conv2d(x, w, stride=2, padding=1)
    assert y.shape == (2, 4, 5, 5)
    assert y.producer.attrs["stride"] == 2
    loaded = tw.Graph.from_json(g.to_json())
    assert loaded.tensor(y.name).shape == (2, 4, 5, 5)
    assert loaded.to_json() == g.to_json()


def test_unroll_tags_the_kth_op_of_every_step():
    g = tw.Graph()
    h = g.input("h0", (2, 3))
    with g.unroll("cell") as u:
        for t in range(3):
            with u.step(t):
                h = tdl_ops.tanh(tdl_ops.exp(h))
    keys = [o.unroll_key for o in g.ops]
    assert keys == ["cell/0", "cell/1"] * 3


def test_dot_export_names_every_node():
    g, _, _ = mlp_graph()
    dot = g.to_dot()
    assert dot.startswith("digraph tilewise {")
    assert dot.count("shape=box") == 3 and dot.count("shape=ellipse") == len(g.tensors)


def test_errors_are_typed_and_name_the_problem():
    g, x, _ = mlp_graph()
    with pytest.raises(tw.GraphError, match="tensor name 'x' is already used"):
        g.input("x", (1,))
    with pytest.raises(tw.ShapeError, match=r"in graph op 'linear'.*inconsistent extents"):
        tdl_ops.linear(x, g.parameter("bad.weight", (4, 15)), g.parameter("bad.bias", (4,)))
    other = tw.Graph()
    with pytest.raises(tw.GraphError, match="belongs to another graph"):
        tdl_ops.add(x, other.input("y", (8, 16)))
    with pytest.raises(tw.GraphError, match="unknown role 'weights'"):
        g._tensor("z", (1,), "weights", "float32")
    with pytest.raises(tw.TDLError, match="applied to graph tensors"):
        tdl_ops.relu(None)
    with pytest.raises(tw.GraphError, match="unknown phase"):
        with g.phase("sideways"):
            pass
    with pytest.raises(tw.GraphError, match="not a tilewise graph"):
        tw.Graph.from_json('{"format": "other"}')
    with pytest.raises(tw.GraphError, match="unknown dtype 'float8'"):
        g.input("q", (1,), dtype="float8")


def test_unknown_op_on_load_names_it():
    g, _, _ = mlp_graph()
    text = g.to_json().replace('"type": "relu"', '"type": "no_such_op"')
    with pytest.raises(tw.GraphError, match="no TDL op named 'no_such_op'"):
        tw.Graph.from_json(text)


def test_named_outputs_survive_json():
    g, _, y = mlp_graph()
    g.outputs = {"output": y}
    loaded = tw.Graph.from_json(g.to_json())
    assert loaded.outputs["output"].name == "fc2.linear"
    assert loaded.to_json() == g.to_json()
    assert json.loads(g.to_json())["outputs"] == {"output": y.id}


def test_constants_have_their_own_role():
    g = tw.Graph()
    x = g.input("x", (4, 3))
    c = g.constant("running_mean", (4, 3))
    y = tdl_ops.sub(x, c)
    assert c.role == "constant" and g.num_parameters == 0
    assert g.bytes_by_role()["constant"] == 4 * 12
    assert tw.Graph.from_json(g.to_json()).tensor("running_mean").role == "constant"
    assert y.shape == (4, 3)

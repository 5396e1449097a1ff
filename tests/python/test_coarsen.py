"""Graph coarsening (Tofu §5.1) on hand-built training graphs: groups, coalescing, linearity."""

import importlib.util
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tdl_ops
import tilewise as tw
from tilewise.graph.coarsen import is_linear_graph, is_series_parallel

# ----- hand-built training graphs --------------------------------------------------------


def sgd_update(g, w, dw):
    with g.phase("update"):
        new = tdl_ops.sgd(w, dw, lr=0.1, name=f"{w.name}.sgd")
    g.mark_update(new, w)
    return new


def linear_backward(g, op, dz, *, need_dx=True):
    """Backward ops of y = linear(x, w, b) (y = x @ w.T + b), named after the forward op."""
    x, w, b = op.inputs
    with g.phase("backward", forward_op=op):
        dw = tdl_ops.matmul_tn(dz, x, name=f"{op.name}.dw")
        db = tdl_ops.sum_rows(dz, name=f"{op.name}.db")
        dx = tdl_ops.matmul(dz, w, name=f"{op.name}.dx") if need_dx else None
    g.mark_gradient(dw, w)
    g.mark_gradient(db, b)
    if dx is not None:
        g.mark_gradient(dx, x)
    return dx, dw, db


def mlp_training(layers=3, dims=(16, 32, 32, 4), batch=8):
    """x -> [linear -> relu] * (layers - 1) -> linear -> mse_loss, with backward ops and SGD."""
    g = tw.Graph("mlp")
    x = g.input("x", (batch, dims[0]))
    label = g.label("target", (batch, dims[-1]))
    h, stack = x, []
    for i in range(layers):
        with g.scope(f"fc{i}"):
            w = g.parameter("weight", (dims[i + 1], dims[i]))
            b = g.parameter("bias", (dims[i + 1],))
            z = tdl_ops.linear(h, w, b)
            a = tdl_ops.relu(z) if i < layers - 1 else z
        stack.append((z.producer, a.producer if a is not z else None))
        h = a
    loss = tdl_ops.mse_loss(h, label, name="loss")
    with g.phase("backward", forward_op=loss.producer):
        da = tdl_ops.mse_loss_grad(h, label, name="loss.grad")
    g.mark_gradient(da, h)
    for i in reversed(range(layers)):
        lin, act = stack[i]
        dz = da
        if act is not None:
            with g.phase("backward", forward_op=act):
                dz = tdl_ops.relu_grad(da, lin.output, name=f"{act.name}.grad")
            g.mark_gradient(dz, lin.output)
        da, dw, db = linear_backward(g, lin, dz, need_dx=i > 0)
        sgd_update(g, lin.inputs[1], dw)
        sgd_update(g, lin.inputs[2], db)
    return g


def residual_training():
    """x -> linear -> relu -> linear -> add(., x) -> relu -> linear -> loss (a fork-join), with a
    gradient sum for x's two uses."""
    g = tw.Graph("resblock")
    x = g.input("x", (8, 16))
    w1, b1 = g.parameter("w1", (16, 16)), g.parameter("b1", (16,))
    w2, b2 = g.parameter("w2", (16, 16)), g.parameter("b2", (16,))
    w3, b3 = g.parameter("w3", (4, 16)), g.parameter("b3", (4,))
    h = tdl_ops.linear(x, w1, b1, name="fc1")
    r = tdl_ops.relu(h, name="relu1")
    z = tdl_ops.linear(r, w2, b2, name="fc2")
    s = tdl_ops.add(z, x, name="skip")
    o = tdl_ops.relu(s, name="relu2")
    y = tdl_ops.linear(o, w3, b3, name="head")
    loss = tdl_ops.mse_loss(y, g.label("t", (8, 4)), name="loss")
    with g.phase("backward", forward_op=loss.producer):
        dy = tdl_ops.mse_loss_grad(y, g.tensor("t"), name="loss.grad")
    g.mark_gradient(dy, y)
    do, *_ = linear_backward(g, y.producer, dy)
    with g.phase("backward", forward_op=o.producer):
        ds = tdl_ops.relu_grad(do, s, name="relu2.grad")
    g.mark_gradient(ds, s)
    # add's gradient is ds for both operands: no op needed. Then through fc2 and relu1.
    dr, *_ = linear_backward(g, z.producer, ds)
    with g.phase("backward", forward_op=r.producer):
        dh = tdl_ops.relu_grad(dr, h, name="relu1.grad")
    g.mark_gradient(dh, h)
    dx1, *_ = linear_backward(g, h.producer, dh)
    with g.phase("backward"):  # x is used by fc1 and skip: the chain rule sums its gradients
        dx = tdl_ops.add(dx1, ds, name="x.grad_sum")
    g.mark_gradient(dx, x)
    for w in (w1, b1, w2, b2, w3, b3):
        grads = [t for t in g.tensors if t.grad_of == w]
        sgd_update(g, w, grads[0])
    return g


def rnn_grid(layers=2, steps=3, batch=4, hidden=8, with_backward=True):
    """A `layers`-deep tanh RNN unrolled over `steps` (cell(l, t) reads h(l-1, t) and h(l, t-1)),
    a loss on the last layer's outputs, and gradient sums of the weights over the time steps."""
    g = tw.Graph("rnn")
    xs = [g.input(f"x{t}", (batch, hidden)) for t in range(steps)]
    cells = []
    for layer in range(layers):
        with g.scope(f"l{layer}"):
            w_ih, w_hh = g.parameter("w_ih", (hidden, hidden)), g.parameter("w_hh", (hidden, hidden))
            b = g.parameter("b", (hidden,))
            h = g.input("h0", (batch, hidden))
            row = []
            with g.unroll(f"l{layer}") as u:
                for t in range(steps):
                    with u.step(t):
                        h = tdl_ops.rnn_tanh_cell(xs[t], h, w_ih, w_hh, b, name=f"cell{t}")
                    row.append(h.producer)
                    xs[t] = h
        cells.append(row)
    loss = xs[0]
    for t in range(1, steps):
        loss = tdl_ops.add(loss, xs[t], name=f"out_sum{t}")
    if not with_backward:
        return g, cells
    # Backward: each cell's weight gradient (stand-in: matmul_tn(h_out, x_in)), summed over steps.
    for row in cells:
        w_ih = row[0].inputs[2]
        partial = []
        for op in row:
            with g.phase("backward", forward_op=op):
                partial.append(tdl_ops.matmul_tn(op.output, op.inputs[0], name=f"{op.name}.dw_ih"))
            g.mark_gradient(partial[-1], w_ih)
        total = partial[0]
        with g.phase("backward"):
            for k, p in enumerate(partial[1:]):
                total = tdl_ops.add(total, p, name=f"{w_ih.name}.grad_sum{k}")
                g.mark_gradient(total, w_ih)
        sgd_update(g, w_ih, total)
    return g, cells


def forward_ops(g):
    return [o for o in g.ops if o.phase == "forward" and o.forward_op is None]


# ----- MLP ---------------------------------------------------------------------------------


def test_mlp_is_linear_and_isomorphic_to_the_forward_graph():
    g = mlp_training()
    plain = tw.coarsen(g, merge_elementwise=False)
    fwd = forward_ops(g)
    fwd_tensors = {t.id for o in fwd for t in o.inputs + [o.output]}
    # One group per forward op and per forward tensor, and an edge per forward dataflow edge.
    assert plain.counts() == {"op": len(fwd), "tensor": len(fwd_tensors), "merged": 0}
    expected = set()
    for o in fwd:
        expected |= {frozenset((plain.group_of(t).id, plain.group_of(o).id)) for t in o.inputs}
        expected.add(frozenset((plain.group_of(o).id, plain.group_of(o.output).id)))
    assert {frozenset(e) for e in plain.edges} == expected
    assert len(plain.edges) == len(expected)
    assert plain.is_linear and plain.irreducible == []

    cg = tw.coarsen(g)
    relus = [o for o in fwd if o.type == "relu"]
    assert cg.elementwise_merges == len(relus) == 2
    assert cg.counts()["op"] == len(fwd) - len(relus)
    assert cg.counts()["merged"] == 2
    assert cg.is_linear
    # Every op and tensor is in exactly one group.
    assert sorted(o.id for grp in cg.groups for o in grp.ops) == list(range(len(g.ops)))
    assert sorted(t.id for grp in cg.groups for t in grp.tensors) == list(range(len(g.tensors)))


def test_backward_ops_join_their_forward_op_and_gradients_their_tensor():
    g = mlp_training()
    cg = tw.coarsen(g, merge_elementwise=False)
    fc1 = g.op("fc1.linear")
    grp = cg.group_of(fc1)
    assert grp.kind == "op" and grp.label == "fc1.linear"
    assert {o.name for o in grp.ops} == {"fc1.linear", "fc1.linear.dw", "fc1.linear.db", "fc1.linear.dx"}
    assert grp.forward_ops == [fc1]
    # The gradient of fc1's output sits with it; relu's backward op sits with relu.
    assert cg.group_of(g.op("fc1.linear.dw")) is grp
    assert g.tensor("fc1.relu.grad") in cg.group_of(g.tensor("fc1.linear"))
    assert cg.group_of(g.tensor("fc1.relu.grad")) is not cg.group_of(g.op("fc1.relu.grad"))
    assert g.op("fc1.relu.grad") in cg.group_of(g.op("fc1.relu"))


def test_optimizer_update_lands_in_its_parameter_group():
    g = mlp_training()
    cg = tw.coarsen(g)
    for w in g.tensors_with_role("parameter"):
        if w.updates is not None:
            continue
        grp = cg.group_of(w)
        assert grp.kind == "tensor" and grp.label == w.name
        names = {o.name for o in grp.ops}
        assert names == {f"{w.name}.sgd"}
        assert {t.role for t in grp.tensors} == {"parameter", "gradient"}


def test_momentum_state_joins_the_parameter_group():
    g = tw.Graph()
    x = g.input("x", (4, 8))
    w, b = g.parameter("w", (3, 8)), g.parameter("b", (3,))
    y = tdl_ops.linear(x, w, b)
    dy = g.input("dy", (4, 3))
    g.mark_gradient(dy, y)
    _, dw, _db = linear_backward(g, y.producer, dy, need_dx=False)
    v = g.state("w.velocity", (3, 8))
    with g.phase("update"):
        # Op calls take no role=; apply() does (update-phase outputs default to "parameter").
        v_new = g.apply(tdl_ops.momentum_velocity, [v, dw], {}, role="optimizer_state")
        w_new = tdl_ops.momentum_weight(w, v_new)
    g.mark_update(v_new, v)
    g.mark_update(w_new, w)
    cg = tw.coarsen(g)
    grp = cg.group_of(w)
    assert {t.name for t in grp.tensors} == {"w", "w.velocity", v_new.name, w_new.name, dw.name}
    assert {o.name for o in grp.ops} == {v_new.producer.name, w_new.producer.name}
    assert grp.kind == "tensor"
    assert cg.group_of(dy) is cg.group_of(y)
    assert cg.is_linear


# ----- coalescing element-wise ops --------------------------------------------------------


def test_elementwise_chain_collapses_into_the_linear_output_group():
    g = tw.Graph()
    x = g.input("x", (8, 16))
    r = g.input("r", (8, 32))
    z = tdl_ops.linear(x, g.parameter("w", (32, 16)), g.parameter("b", (32,)), name="linear")
    a = tdl_ops.relu(z, name="relu1")
    s = tdl_ops.add(a, r, name="add")
    o = tdl_ops.relu(s, name="relu2")
    y = tdl_ops.linear(o, g.parameter("w2", (4, 32)), g.parameter("b2", (4,)), name="head")
    cg = tw.coarsen(g)
    chain = cg.group_of(z)
    assert chain.kind == "merged"
    assert [op.name for op in chain.ops] == ["relu1", "add", "relu2"]
    assert {t.name for t in chain.tensors} == {"linear", "relu1", "add", "relu2"}
    assert cg.elementwise_merges == 3
    assert cg.group_of(z.producer).kind == "op" and cg.group_of(y.producer).kind == "op"
    # The residual operand stays a separate neighbour of the merged group.
    assert cg.group_of(r).kind == "tensor"
    assert cg.group_of(r) in cg.neighbours(chain)
    assert chain.label == "relu1+add+relu2"
    assert cg.is_linear
    assert tw.coarsen(g, merge_elementwise=False).counts() == {"op": 5, "tensor": 11, "merged": 0}


def test_elementwise_op_on_leaves_joins_a_non_parameter_leaf():
    g = tw.Graph()
    x = g.input("x", (4, 4))
    p = g.parameter("scale", (4, 4))
    y = tdl_ops.mul(p, x, name="mul")
    cg = tw.coarsen(g)
    assert cg.group_of(y.producer) is cg.group_of(x)
    assert cg.group_of(p) is not cg.group_of(x)


def test_only_ops_with_an_aligned_input_are_merged():
    g = tw.Graph()
    x = g.input("x", (4, 6))
    y = tdl_ops.softmax(x)  # reads a whole row: x is not read at the output index
    r = g.parameter("r", (6,))
    z = tdl_ops.add_row(y, r)  # a broadcast: y is read at the output index, r is not
    cg = tw.coarsen(g)
    assert cg.group_of(y.producer).kind == "op"
    # add_row tiles like y: it joins y's group (a broadcast's small operand stays apart).
    assert cg.elementwise_merges == 1
    assert cg.group_of(z.producer).id == cg.group_of(y).id
    assert cg.group_of(r).id != cg.group_of(y).id


# ----- fork-join ---------------------------------------------------------------------------


def test_residual_block_is_linear_and_gradient_sum_joins_its_tensor():
    g = residual_training()
    cg = tw.coarsen(g)
    assert cg.is_linear
    x = g.tensor("x")
    gx = cg.group_of(x)
    assert g.op("x.grad_sum") in gx and g.tensor("x.grad_sum") in gx
    assert gx.kind == "tensor"
    # The add joined fc2's output; x feeds both fc1 and the merged group: a fork-join.
    merged = cg.group_of(g.tensor("fc2"))
    assert g.op("skip") in merged and g.op("relu2") in merged
    assert {grp.id for grp in cg.neighbours(gx)} == {cg.group_of(g.op("fc1")).id, merged.id}
    assert tw.coarsen(g, merge_elementwise=False).is_linear


def test_inception_style_branches_are_linear():
    g = tw.Graph()
    x = g.input("x", (8, 16))
    branches = []
    for k in range(3):
        h = x
        for d in range(k + 1):
            h = tdl_ops.linear(h, g.parameter(f"b{k}.w{d}", (16, 16)), g.parameter(f"b{k}.b{d}", (16,)))
            h = tdl_ops.relu(h)
        branches.append(h)
    joined = tdl_ops.concat(tdl_ops.concat(branches[0], branches[1], axis=1), branches[2], axis=1)
    tdl_ops.linear(joined, g.parameter("head.w", (4, 48)), g.parameter("head.b", (4,)))
    assert tw.coarsen(g).is_linear
    assert tw.coarsen(g, merge_elementwise=False).is_linear


def test_weights_inside_a_branch_are_pendants_not_sources():
    # Joined to the super source, fc2's weight would tie the middle of the residual branch to it
    # (a bridge): the bare reduction says no. Pendant pruning searches it with fc2 instead.
    g = residual_training()
    cg = tw.coarsen(g)
    index = {grp.id: i for i, grp in enumerate(cg.groups)}
    assert not is_series_parallel(len(cg), [(index[a], index[b]) for a, b in cg.edges])
    assert is_linear_graph(len(cg), cg.edges)
    assert cg.group_of(g.tensor("w2")) in cg.pendants
    assert cg.entries == [cg.group_of(g.tensor("x"))]
    assert "pendant groups" in cg.summary()


def tied_chain(ties):
    """A chain of four linear layers; ``ties`` lists the layers that share weight "w{k}"."""
    g = tw.Graph()
    h = g.input("x", (8, 16))
    weights = {}
    for layer in range(4):
        name = next((f"w{k}" for k, layers in enumerate(ties) if layer in layers), f"own{layer}")
        if name not in weights:
            weights[name] = g.parameter(name, (16, 16))
        h = tdl_ops.linear_nobias(h, weights[name], name=f"fc{layer}")
    return g


def test_one_tied_weight_is_a_fork_join_but_crossing_ties_are_not():
    assert tw.coarsen(tied_chain([(0, 2)])).is_linear  # the weight forks to fc0 and fc2
    cg = tw.coarsen(tied_chain([(0, 2), (1, 3)]))
    assert not cg.is_linear
    assert cg.group_of(cg.graph.tensor("w0")) in cg.irreducible
    assert "linear: no" in cg.summary() and "left after series-parallel reduction" in cg.summary()


# ----- RNN time steps -------------------------------------------------------------------------


def test_rnn_grid_is_not_linear_until_time_steps_merge():
    g, cells = rnn_grid()
    grid = tw.coarsen(g, merge_timesteps=False)
    assert not grid.is_linear
    assert grid.timestep_merges == 0
    assert len(grid.irreducible) > 0
    chain = tw.coarsen(g)
    assert chain.is_linear
    assert chain.timestep_merges == 2 * (3 - 1)
    for row in cells:
        grp = chain.group_of(row[0])
        assert all(op in grp for op in row) and grp.kind == "merged"
        assert all(op.output in chain.group_of(row[0].output) for op in row)
    assert chain.group_of(cells[0][0]) is not chain.group_of(cells[1][0])
    # The per-step inputs x0..x2 are leaves at the same position: one group.
    assert chain.group_of(g.tensor("x0")) is chain.group_of(g.tensor("x2"))
    # The weight gradients of every step and their sums sit with the weight.
    w = g.tensor("l0.w_ih")
    wg = chain.group_of(w)
    assert {o.name for o in wg.ops} == {"l0.w_ih.grad_sum0", "l0.w_ih.grad_sum1", "l0.w_ih.sgd"}
    assert all(t in wg for t in g.tensors if t.grad_of == w)


def test_reduction_on_the_uncoarsened_graphs():
    # The reduction itself, on the plain forward dataflow graph (ops and tensors as nodes).
    for build, linear in ((lambda: rnn_grid(with_backward=False)[0], False), (lambda: mlp_training(), True)):
        g = build()
        fwd = forward_ops(g)
        ids = {}
        for o in fwd:
            for t in o.inputs + [o.output]:
                ids.setdefault(("t", t.id), len(ids))
            ids[("o", o.id)] = len(ids)
        edges = []
        for o in fwd:
            edges += [(ids[("t", t.id)], ids[("o", o.id)]) for t in o.inputs]
            edges.append((ids[("o", o.id)], ids[("t", o.output.id)]))
        assert is_series_parallel(len(ids), edges) is linear


def test_one_layer_rnn_needs_merged_steps_too():
    # Each of w_ih, w_hh and b feeds every step: crossing ties, like the grid.
    g, _cells = rnn_grid(layers=1, steps=4, with_backward=False)
    assert not tw.coarsen(g, merge_timesteps=False).is_linear
    cg = tw.coarsen(g)
    assert cg.timestep_merges == 3
    assert cg.is_linear


def test_unroll_keys_with_different_op_types_do_not_merge():
    # Step 0 has an extra op, so positional keys pair exp with tanh: matched by type, they stay apart.
    g = tw.Graph()
    h = g.input("h0", (2, 3))
    with g.unroll("cell") as u:
        for t in range(3):
            with u.step(t):
                if t == 0:
                    h = tdl_ops.exp(h, name="init")
                h = tdl_ops.softmax(h, name=f"sm{t}")
    cg = tw.coarsen(g)
    assert [o.unroll_key for o in g.ops] == ["cell/0", "cell/1", "cell/0", "cell/0"]
    assert cg.group_of(g.op("sm1")) is cg.group_of(g.op("sm2"))
    assert cg.group_of(g.op("sm0")) is not cg.group_of(g.op("sm1"))
    assert cg.timestep_merges == 1


# ----- presentation and API ------------------------------------------------------------------


def test_summary_repr_html_dot_and_dict():
    g = mlp_training()
    cg = tw.coarsen(g)
    s = cg.summary()
    assert "CoarseGraph:" in s and "2 merged" in s and "linear: yes" in s
    assert "2 element-wise/aligned ops, 0 time-step ops" in s
    assert f"{len(g.ops)} ops" in s
    assert repr(cg).startswith("<tw.CoarseGraph of 'mlp':") and "linear=yes" in repr(cg)
    assert "<table>" in cg._repr_html_() and "fc1.linear" in cg._repr_html_()
    dot = cg.to_dot()
    assert dot.startswith("digraph") and dot.count("->") == len(cg.edges) and "octagon" in dot
    d = cg.to_dict()
    assert len(d["groups"]) == len(cg) and d["is_linear"] is True
    assert repr(cg.groups[0]).startswith("Group(0, kind=")
    rnn = tw.coarsen(rnn_grid()[0])
    assert "4 time-step ops" in rnn.summary()


def test_group_order_follows_the_forward_graph():
    g = mlp_training()
    cg = tw.coarsen(g)
    assert cg.groups[0].label == "x"
    positions = [cg.group_of(o).id for o in forward_ops(g)]
    assert positions == sorted(positions)
    assert [grp.id for grp in cg.groups] == list(range(len(cg)))


def test_bad_arguments():
    g = mlp_training()
    cg = tw.coarsen(g)
    with pytest.raises(TypeError, match="tw.Graph"):
        tw.coarsen(g._g)
    with pytest.raises(KeyError, match="nope"):
        cg.group_of("nope")
    with pytest.raises(tw.GraphError, match="'fc1.linear' names both an op and a tensor"):
        cg.group_of("fc1.linear")
    assert cg.group_of("fc1.weight") is cg.group_of(g.tensor("fc1.weight"))
    with pytest.raises(KeyError):
        cg.group_of(tw.Graph().input("x", (1,)))
    late = tdl_ops.relu(g.tensor("x"))
    with pytest.raises(KeyError, match="after it was coarsened"):
        cg.group_of(late)
    with pytest.raises(TypeError, match="GOp, a GTensor"):
        cg.group_of(3)
    with pytest.raises(ValueError, match="outside"):
        is_series_parallel(2, [(0, 5)])
    with pytest.raises(ValueError, match="both"):
        is_series_parallel(2, [(0, 1)], sources=[0])


def test_a_cycle_of_gradient_links_is_reported():
    # Graph.mark_gradient accepts cycles; coarsening names the tensor when an update follows one.
    g = tw.Graph()
    w = g.parameter("w", (2, 2))
    a, b = g.input("a", (2, 2)), g.input("b", (2, 2))
    tdl_ops.relu(w)
    g.mark_gradient(a, b)
    g.mark_gradient(b, a)
    with g.phase("update"):
        tdl_ops.sgd(a, w, name="upd")  # reads the looping gradient first
    with pytest.raises(tw.GraphError, match="cycle of grad_of/updates links"):
        tw.coarsen(g)


def test_empty_graph_and_threads():
    assert tw.coarsen(tw.Graph()).is_linear
    g = mlp_training()
    results = []
    threads = [threading.Thread(target=lambda: results.append(tw.coarsen(g).is_linear)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


# ----- the reduction against series-parallel constructions (oracle by construction) -----------


@st.composite
def sp_graphs(draw, depth=4):
    """A two-terminal series-parallel DAG built by series and parallel composition, as
    (n, edges); node 0 is the source and node 1 the sink."""
    edges = [(0, 1)]
    n = 2
    for _ in range(draw(st.integers(0, 12))):
        k = draw(st.integers(0, len(edges) - 1))
        a, b = edges[k]
        if draw(st.booleans()):  # series: subdivide
            edges[k] = (a, n)
            edges.append((n, b))
            n += 1
        else:  # parallel: a second path a -> new -> b (a plain duplicate would be merged)
            edges += [(a, n), (n, b)]
            n += 1
    perm = draw(st.permutations(range(n)))
    return n, [(perm[a], perm[b]) for a, b in edges]


@settings(max_examples=200, deadline=None)
@given(sp_graphs())
def test_series_parallel_constructions_reduce(graph):
    n, edges = graph
    assert is_series_parallel(n, edges)
    assert is_linear_graph(n, edges)


@settings(max_examples=200, deadline=None)
@given(sp_graphs(), st.data())
def test_replacing_an_edge_by_a_bridge_breaks_linearity(graph, data):
    n, edges = graph
    k = data.draw(st.integers(0, len(edges) - 1))
    a, b = edges.pop(k)
    # Wheatstone bridge between a and b: a -> p, a -> q, p -> q, p -> b, q -> b.
    p, q = n, n + 1
    edges += [(a, p), (a, q), (p, q), (p, b), (q, b)]
    assert not is_series_parallel(n + 2, edges)
    assert not is_linear_graph(n + 2, edges)


@settings(max_examples=100, deadline=None)
@given(sp_graphs(), st.data())
def test_pendant_trees_never_change_linearity(graph, data):
    n, edges = graph
    assert is_linear_graph(n, edges)
    # Hang trees (weights, side outputs) off random nodes, pointing either way.
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, n - 1))
        edges.append((n, at) if data.draw(st.booleans()) else (at, n))
        n += 1
    assert is_linear_graph(n, edges)


# ----- the model zoo / tracer, once they exist ------------------------------------------------


def _has(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def _zoo():
    if not _has("tilewise.models"):
        return None
    from tilewise import models

    return models if hasattr(models, "get") else None


ZOO_LINEAR = ("mlp-3-64", "resnet-50", "rnn-2-64", "brnn-2-64", "transformer-2-64-4", "vgg16", "alexnet",
              "inception-1")


@pytest.mark.skipif(_zoo() is None, reason="tw.models (model zoo) not built yet")
@pytest.mark.parametrize("name", ZOO_LINEAR)
def test_zoo_models_coarsen_to_linear_graphs(name):
    models = _zoo()
    g = models.get(name, batch=2, train=models.has_autodiff())
    cg = tw.coarsen(g)
    assert cg.is_linear, cg.summary()
    assert sorted(o.id for grp in cg.groups for o in grp.ops) == list(range(len(g.ops)))
    assert sorted(t.id for grp in cg.groups for t in grp.tensors) == list(range(len(g.tensors)))
    if name.startswith(("rnn", "brnn")):
        assert cg.timestep_merges > 0
        assert not tw.coarsen(g, merge_timesteps=False).is_linear
    else:
        assert cg.elementwise_merges > 0 or name.startswith("mlp")


@pytest.mark.skipif(_zoo() is None, reason="tw.models (model zoo) not built yet")
def test_nasnet_cells_reading_two_previous_cells_are_not_linear():
    # Each cell reads the outputs of the two cells before it: the square of a path, full of bridges.
    g = _zoo().get("nasnet-2", batch=2, train=False)
    cg = tw.coarsen(g)
    assert not cg.is_linear
    assert cg.irreducible


@pytest.mark.parametrize("name", ["vgg16", "alexnet", "bert-base"])
def test_bias_ops_keep_backward_dataflow_inside_mirrored_groups(name):
    # bias_add/bias_add_channel/add_broadcast pass their gradient unchanged to their aligned
    # input; merging through that input keeps every backward edge beside a forward one.
    cg = tw.coarsen(tw.models.get(name, batch=1))
    assert cg.is_linear
    assert "linked by backward" not in cg.summary()

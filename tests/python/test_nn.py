"""tw.nn: module registration and naming, parameter sharing, errors, and every layer's forward
evaluated through the reference interpreter against PyTorch (or NumPy where torch is absent)."""

from __future__ import annotations

import doctest
import importlib

import numpy as np
import pytest

import tdl_ops
import tilewise as tw
import tilewise.nn.functional as F
from tilewise import nn


def run_graph(g: tw.Graph, feeds: dict) -> dict:
    """Evaluate every op of ``g`` in order with the reference interpreter; feeds by tensor name.

    Returns tensor name -> array for all tensors (tw.run_reference where it exists).
    """
    if hasattr(tw, "run_reference"):
        return tw.run_reference(g, feeds)
    vals = {}
    for t in g.tensors:
        if t.producer is None:
            if t.name not in feeds:
                raise KeyError(f"no feed for {t.role} tensor {t.name!r}")
            a = np.asarray(feeds[t.name], dtype=np.float64)
            assert a.shape == t.shape, (t.name, a.shape, t.shape)
            vals[t.id] = a
    for op in g.ops:
        args = [vals[t.id] for t in op.inputs]
        vals[op.output.id] = op.op.evaluate(*args, out=op.output.shape, **op.attrs)
    return {t.name: vals[t.id] for t in g.tensors}


def random_feeds(g: tw.Graph, rng, **given) -> dict:
    """Normal random values for every source tensor not in ``given`` (dropout masks 0/1)."""
    feeds = dict(given)
    for t in g.tensors:
        if t.producer is None and t.name not in feeds:
            if "mask" in t.name.rsplit(".", 1)[-1]:
                feeds[t.name] = (rng.uniform(size=t.shape) < 0.7).astype(np.float64)
            else:
                feeds[t.name] = rng.standard_normal(t.shape)
    return feeds


def forward(module, *shapes, rng=None, feeds=None, **call_kwargs):
    """Build module(*inputs) on a new graph, run it; returns (graph, output tensor, values, feeds)."""
    rng = rng or np.random.default_rng(0)
    g = tw.Graph()
    xs = [g.input(f"in{i}", s) for i, s in enumerate(shapes)]
    out = module(*xs, **call_kwargs)
    feeds = random_feeds(g, rng, **(feeds or {}))
    return g, out, run_graph(g, feeds), feeds


# ---------------------------------------------------------------- registration and naming


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 2)])
        self.scale = nn.Parameter((2,))

    def forward(self, x):
        h = F.relu(self.bn(self.conv(x)))
        h = F.adaptive_avg_pool2d(h, 1)
        h = F.flatten(h)
        for layer in self.layers:
            h = layer(h)
        return tdl_ops.mul_row(h, self.scale)


def test_named_parameters_follow_pytorch():
    b = Block()
    names = [n for n, _ in b.named_parameters()]
    assert names == ["scale", "conv.weight", "conv.bias", "bn.weight", "bn.bias", "layers.0.weight", "layers.0.bias",
                     "layers.1.weight", "layers.1.bias"]
    assert [n for n, _ in b.named_modules()] == ["", "conv", "bn", "layers", "layers.0", "layers.1"]
    assert [n for n, _ in b.named_buffers()] == ["bn.running_mean", "bn.running_var"]
    assert b.num_parameters() == 2 + 4 * 27 + 4 + 8 + 20 + 10
    assert isinstance(b.conv.weight, nn.Parameter) and b.conv.weight.shape == (4, 3, 3, 3)


def test_parameters_become_graph_parameters_under_the_module_path():
    b = Block()
    g = tw.Graph()
    y = b(g.input("x", (2, 3, 5, 5)))
    assert y.shape == (2, 2)
    params = {t.name: t.shape for t in g.tensors_with_role("parameter")}
    assert params == {n: p.shape for n, p in b.named_parameters()}
    assert g.num_parameters == b.num_parameters()
    types = {op.name: op.type for op in g.ops}
    assert types["conv.conv2d"] == "conv2d" and types["layers.1.linear"] == "linear"
    assert types["bn.batch_norm_train"] == "batch_norm_train"


def test_a_module_called_twice_shares_its_parameters():
    fc = nn.Linear(4, 4)
    g = tw.Graph()
    x = g.input("x", (2, 4))
    y = fc(fc(x))
    assert len(g.tensors_with_role("parameter")) == 2
    w = g.tensor("weight")
    assert [op.name for op in w.consumers] == ["linear", "linear_1"]
    assert y.producer.inputs[0].producer.name == "linear"
    # Another graph gets its own tensors.
    g2 = tw.Graph()
    fc(g2.input("x", (3, 4)))
    assert g2.tensor("weight").graph is g2 and g.num_parameters == g2.num_parameters == 20
    # A second root module in the same graph: its names are made unique rather than clashing.
    nn.Linear(4, 4)(x)
    assert sorted(t.name for t in g.tensors_with_role("parameter")) == ["bias", "bias_1", "weight", "weight_1"]


def test_shared_submodule_and_outer_scope():
    shared = nn.Linear(4, 4)
    net = nn.Sequential(shared, nn.ReLU(), shared)
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias"]
    g = tw.Graph()
    with g.scope("enc"):
        net(g.input("x", (2, 4)))
    assert sorted(t.name for t in g.tensors_with_role("parameter")) == ["enc.0.bias", "enc.0.weight"]
    assert [op.name for op in g.ops] == ["enc.0.linear", "enc.1.relu", "enc.0.linear_1"]
    assert g.scoped("z") == "z"  # scopes restored after the call


def test_weight_tying_names_the_parameter_by_its_owner():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 4)
            self.head = nn.Linear(4, 4)

        def forward(self, ids):
            h = self.head(self.emb(ids))
            return tdl_ops.matmul_nt(h, self.emb.weight)  # decoder tied to the embedding table

    g = tw.Graph()
    y = Tied()(g.input("ids", (3,)))
    assert y.shape == (3, 10)
    assert sorted(t.name for t in g.tensors_with_role("parameter")) == ["emb.weight", "head.bias", "head.weight"]


def test_parameter_used_before_its_module_runs_gets_its_own_name():
    class Early(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            w = self.fc.weight  # read through the parent before fc runs
            return self.fc(tdl_ops.matmul_nt(x, w))

    g = tw.Graph()
    Early()(g.input("x", (2, 4)))
    assert sorted(t.name for t in g.tensors_with_role("parameter")) == ["fc.bias", "fc.weight"]


def test_sequential_and_modulelist_containers():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and len(seq[1:]) == 2
    assert [type(m).__name__ for m in seq] == ["Linear", "ReLU", "Linear"]
    ml = nn.ModuleList([nn.ReLU()]).append(nn.Tanh()).extend([nn.Sigmoid()])
    assert len(ml) == 3 and isinstance(ml[-1], nn.Sigmoid)
    assert "(0): Linear(in_features=2, out_features=3, bias=True)" in repr(seq)
    with pytest.raises(tw.GraphError, match="ModuleList has no forward"):
        g = tw.Graph()
        ml(g.input("x", (1,)))


def test_train_and_eval_modes():
    net = nn.Sequential(nn.Conv2d(2, 2, 1), nn.BatchNorm2d(2), nn.Dropout(0.5))
    g = tw.Graph()
    net(g.input("x", (1, 2, 3, 3)))
    assert {op.type for op in g.ops} == {"conv2d", "bias_add_channel", "batch_norm_train", "dropout"}
    assert g.tensor("2.mask").role == "input"
    net.eval()
    assert not net[2].training
    g = tw.Graph()
    net(g.input("x", (1, 2, 3, 3)))
    assert [op.type for op in g.ops] == ["conv2d", "bias_add_channel", "batch_norm_inference"]
    assert g.tensor("1.running_mean").role == "input"


def test_errors_are_typed_and_name_the_layer():
    g = tw.Graph()
    x = g.input("x", (2, 3, 8, 8))
    with pytest.raises(tw.GraphError, match="modules are called on graph tensors"):
        nn.Linear(2, 2)(np.zeros((2, 2)))
    with pytest.raises(tw.ShapeError, match="linear: input"):
        nn.Linear(5, 2)(g.input("v", (2, 4)))
    with pytest.raises(tw.ShapeError, match="conv2d: input has 3 channels"):
        nn.Conv2d(4, 2, 3)(x)
    with pytest.raises(tw.GraphError, match="groups=2 is not supported"):
        nn.Conv2d(4, 4, 3, groups=2)
    with pytest.raises(tw.GraphError, match="stride"):
        F.conv2d(x, g.parameter("w", (2, 3, 1, 1)), stride=(1, 2))
    with pytest.raises(tw.ShapeError, match="not a multiple of the output size"):
        nn.AdaptiveAvgPool2d(3)(x)
    with pytest.raises(tw.GraphError, match=r"p must be in \[0, 1\)"):
        nn.Dropout(1.0)
    with pytest.raises(tw.ShapeError, match="normalized_shape"):
        F.layer_norm(x, 4, g.parameter("a", (4,)), g.parameter("b", (4,)))
    with pytest.raises(tw.GraphError, match="multiple of num_heads"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(tw.ShapeError, match="LSTM: input features 8 != input_size 4"):
        nn.LSTM(4, 4)(g.input("seq", (3, 2, 8)))
    with pytest.raises(tw.ShapeError, match="cross_entropy: target"):
        F.cross_entropy(g.input("l", (2, 5)), g.label("t", (2, 4)))
    with pytest.raises(tw.GraphError, match="call super"):
        class Bad(nn.Module):
            def __init__(self):
                self.fc = nn.Linear(1, 1)
        Bad()


def test_docstring_examples_run():
    mods = ["module", "functional", "linear", "conv", "normalization", "activation", "pooling", "dropout", "sparse",
            "rnn", "attention"]
    for name in [""] + mods:
        mod = importlib.import_module("tilewise.nn" + (f".{name}" if name else ""))
        res = doctest.testmod(mod, extraglobs={"tw": tw})
        assert res.failed == 0, name


# ---------------------------------------------------------------- numerics against PyTorch / NumPy




def _torch():
    return pytest.importorskip("torch")


def _load(torch_module, feeds: dict, prefix: str = "") -> None:
    """Copy our parameter feeds into the torch module (same names)."""
    t = _torch()
    with t.no_grad():
        for name, p in torch_module.named_parameters():
            p.copy_(t.tensor(feeds[prefix + name]))


def _close(got, want, tol=1e-6):
    np.testing.assert_allclose(got, np.asarray(want, dtype=np.float64), rtol=tol, atol=tol)


def test_linear_any_rank_against_numpy():
    for shape in [(4, 5), (2, 3, 5)]:
        g, out, vals, feeds = forward(nn.Linear(5, 3), shape)
        _close(vals[out.name], feeds["in0"] @ feeds["weight"].T + feeds["bias"])
    g, out, vals, feeds = forward(nn.Linear(5, 3, bias=False), (4, 5))
    _close(vals[out.name], feeds["in0"] @ feeds["weight"].T)


@pytest.mark.parametrize("kw", [
    dict(kernel_size=3),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(1, 3), padding=(0, 1)),
    dict(kernel_size=(3, 1), padding=(1, 0), bias=False),
    dict(kernel_size=3, padding=2, dilation=2),
    dict(kernel_size=3, padding=1, groups=4, out_channels=4, stride=2),
], ids=["plain", "s2p1", "1x3", "3x1_nobias", "dilated", "depthwise"])
def test_conv2d_against_torch(kw):
    t = _torch()
    kw = dict(kw)
    cout = kw.pop("out_channels", 5)
    ours, ref = nn.Conv2d(4, cout, **kw), t.nn.Conv2d(4, cout, **kw).double()
    g, out, vals, feeds = forward(ours, (2, 4, 7, 6))
    _load(ref, feeds)
    _close(vals[out.name], ref(t.tensor(feeds["in0"])).detach())


def test_batchnorm_and_layernorm_against_torch():
    t = _torch()
    g, out, vals, feeds = forward(nn.BatchNorm2d(3), (4, 3, 2, 5))
    ref = t.nn.BatchNorm2d(3).double().train()
    _load(ref, feeds)
    _close(vals[out.name], ref(t.tensor(feeds["in0"])).detach())
    g, out, vals, feeds = forward(nn.LayerNorm(6, eps=1e-6), (2, 3, 6))
    ref = t.nn.LayerNorm(6, eps=1e-6).double()
    _load(ref, feeds)
    _close(vals[out.name], ref(t.tensor(feeds["in0"])).detach())


def test_batchnorm_eval_uses_running_statistics():
    t = _torch()
    rng = np.random.default_rng(1)
    feeds = {"running_mean": rng.standard_normal(3), "running_var": rng.uniform(0.5, 2.0, 3)}
    g, out, vals, feeds = forward(nn.BatchNorm2d(3).eval(), (2, 3, 4, 4), feeds=feeds)
    ref = t.nn.BatchNorm2d(3).double().eval()
    _load(ref, feeds)
    ref.running_mean.copy_(t.tensor(feeds["running_mean"]))
    ref.running_var.copy_(t.tensor(feeds["running_var"]))
    _close(vals[out.name], ref(t.tensor(feeds["in0"])).detach())


@pytest.mark.parametrize("name", ["ReLU", "GELU", "Tanh", "Sigmoid", "Softmax"])
def test_activations_against_torch(name):
    t = _torch()
    kw = {"dim": -1} if name == "Softmax" else {}
    g, out, vals, feeds = forward(getattr(nn, name)(**kw), (3, 4, 5))
    _close(vals[out.name], getattr(t.nn, name)(**kw)(t.tensor(feeds["in0"])))


def test_gelu_tanh_approximation():
    t = _torch()
    g, out, vals, feeds = forward(nn.GELU("tanh"), (3, 4))
    _close(vals[out.name], t.nn.GELU("tanh")(t.tensor(feeds["in0"])))


@pytest.mark.parametrize("make", [
    lambda m: m.MaxPool2d(3, 2, 1), lambda m: m.MaxPool2d(2), lambda m: m.AvgPool2d(3, 1, 1),
    lambda m: m.AvgPool2d(2, 2), lambda m: m.AdaptiveAvgPool2d(1), lambda m: m.AdaptiveAvgPool2d((3, 2)),
    lambda m: m.Flatten(),
], ids=["max_k3s2p1", "max_k2", "avg_k3s1p1", "avg_k2", "adaptive_1", "adaptive_3x2", "flatten"])
def test_pooling_and_flatten_against_torch(make):
    t = _torch()
    g, out, vals, feeds = forward(make(nn), (2, 3, 6, 4))
    _close(vals[out.name], make(t.nn)(t.tensor(feeds["in0"])))


def test_dropout_mask_is_an_input_named_after_the_module():
    net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.25))
    g, out, vals, feeds = forward(net, (3, 4))
    assert g.tensor("1.mask").role == "input" and g.tensor("1.mask").shape == (3, 4)
    _close(vals[out.name], vals["0.linear"] * feeds["1.mask"] / 0.75)
    # Called twice: a second mask, not the first one reused.
    drop = nn.Dropout(0.5)
    g = tw.Graph()
    drop(drop(g.input("x", (2, 2))))
    assert sorted(t.name for t in g.tensors_with_role("input")) == ["mask", "mask_1", "x"]


def test_embedding_against_numpy():
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 7, (2, 5)).astype(float)
    g, out, vals, feeds = forward(nn.Embedding(7, 3), (2, 5), feeds={"in0": ids})
    _close(vals[out.name], feeds["weight"][ids.astype(int)])
    g, out, vals, feeds = forward(nn.Embedding(7, 3), (4,), feeds={"in0": ids[0, :4]})
    assert out.shape == (4, 3)


@pytest.mark.parametrize("layers,bidirectional,batch_first", [(1, False, False), (2, False, True), (2, True, False)])
def test_lstm_against_torch(layers, bidirectional, batch_first):
    t = _torch()
    T, B, I, H = 4, 3, 5, 6
    ours = nn.LSTM(I, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)
    ref = t.nn.LSTM(I, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first).double()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    shape = (B, T, I) if batch_first else (T, B, I)
    g = tw.Graph()
    out, (h_n, c_n) = ours(g.input("x", shape))
    dirs = 2 if bidirectional else 1
    assert out.shape == shape[:2] + (dirs * H,) and h_n.shape == c_n.shape == (layers * dirs, B, H)
    rng = np.random.default_rng(3)
    feeds = random_feeds(g, rng)
    for name in feeds:
        if name.startswith(("h0", "c0")):
            feeds[name] = np.zeros(feeds[name].shape)
    vals = run_graph(g, feeds)
    _load(ref, feeds)
    want, (wh, wc) = ref(t.tensor(feeds["x"]))
    _close(vals[out.name], want.detach())
    _close(vals[h_n.name], wh.detach())
    _close(vals[c_n.name], wc.detach())


def test_lstm_unroll_keys_and_step_lists():
    lstm = nn.LSTM(4, 4, num_layers=2, bidirectional=True)
    g = tw.Graph()
    steps = [g.input(f"x{t}", (2, 4)) for t in range(3)]
    outs, (h_n, c_n) = lstm(steps, hx=([g.input(f"h{i}", (2, 4)) for i in range(4)],
                                       [g.input(f"c{i}", (2, 4)) for i in range(4)]))
    assert len(outs) == 3 and outs[0].shape == (2, 8) and len(h_n) == 4
    keys = {op.unroll_key for op in g.ops}
    assert {"l0/0", "l0/1", "l0/2", "l0_reverse/0", "l1/2", "l0_concat/0"} <= keys
    gates = [op for op in g.ops if op.unroll_key == "l0/0"]
    assert len(gates) == 3 and all(op.type == "lstm_gates" for op in gates)
    assert "stack_3" not in {op.type for op in g.ops}  # lists in, lists out: nothing stacked


def test_lstm_initial_state_tensor_and_errors():
    t = _torch()
    lstm = nn.LSTM(3, 2)
    g = tw.Graph()
    x, h0, c0 = g.input("x", (2, 1, 3)), g.input("h0", (1, 1, 2)), g.input("c0", (1, 1, 2))
    out, _ = lstm(x, (h0, c0))
    feeds = random_feeds(g, np.random.default_rng(4))
    vals = run_graph(g, feeds)
    ref = t.nn.LSTM(3, 2).double()
    _load(ref, feeds)
    want, _ = ref(t.tensor(feeds["x"]), (t.tensor(feeds["h0"]), t.tensor(feeds["c0"])))
    _close(vals[out.name], want.detach())
    with pytest.raises(tw.ShapeError, match="h_0 must have shape"):
        lstm(x, (g.input("bad", (2, 1, 2)), c0))


@pytest.mark.parametrize("batch_first,cross", [(True, False), (False, False), (True, True)])
def test_multihead_attention_against_torch(batch_first, cross):
    t = _torch()
    E, heads, B, S, S2 = 8, 2, 2, 3, 4
    ours = nn.MultiheadAttention(E, heads, batch_first=batch_first)
    ref = t.nn.MultiheadAttention(E, heads, batch_first=batch_first).double()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    g = tw.Graph()
    qs = (B, S, E) if batch_first else (S, B, E)
    ks = (B, S2, E) if batch_first else (S2, B, E)
    q = g.input("q", qs)
    k, v = (g.input("k", ks), g.input("v", ks)) if cross else (q, q)
    out, weights = ours(q, k, v)
    assert weights is None and out.shape == qs
    feeds = random_feeds(g, np.random.default_rng(5))
    vals = run_graph(g, feeds)
    _load(ref, feeds)
    tq = t.tensor(feeds["q"])
    tk, tv = (t.tensor(feeds["k"]), t.tensor(feeds["v"])) if cross else (tq, tq)
    want, _ = ref(tq, tk, tv, need_weights=False)
    _close(vals[out.name], want.detach())
    if not cross:
        assert [op.type for op in g.ops].count("linear") == 2  # packed q|k|v projection, out_proj


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_key_padding_mask_against_torch(batch_first):
    """A bool key_padding_mask (True: ignore that key), reference and compiled on 2 devices."""
    t = _torch()
    E, heads, B, S = 8, 2, 2, 5
    ours = nn.MultiheadAttention(E, heads, batch_first=batch_first)
    ref = t.nn.MultiheadAttention(E, heads, batch_first=batch_first).double()
    g = tw.Graph()
    x = g.input("x", (B, S, E) if batch_first else (S, B, E))
    mask = g.input("mask", (B, S), "bool")
    out, _ = ours(x, x, x, key_padding_mask=mask)
    feeds = random_feeds(g, np.random.default_rng(7))
    m = np.zeros((B, S), bool)
    m[0, 0], m[1, 3:] = True, True
    feeds["mask"] = m.astype(np.float64)
    vals = run_graph(g, feeds)
    _load(ref, feeds)
    want, _ = ref(*(t.tensor(feeds["x"]),) * 3, key_padding_mask=t.tensor(m), need_weights=False)
    _close(vals[out.name], want.detach())
    exe = tw.compile(g, tw.partition(g, devices=2))
    for name, value in feeds.items():
        exe.set(name, m if name == "mask" else value)
    assert exe.step()  # no results kept but the output
    np.testing.assert_allclose(exe.get(out), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(tw.ShapeError, match=r"key_padding_mask must be \(batch, keys\)"):
        ours(x, x, x, key_padding_mask=g.input("bad", (S, B), "bool"))
    with pytest.raises(tw.GraphError, match="attn_mask is not supported"):
        ours(x, x, x, attn_mask=mask)


def test_attention_dropout_mask():
    mha = nn.MultiheadAttention(4, 2, dropout=0.1, batch_first=True)
    g = tw.Graph()
    x = g.input("x", (2, 3, 4))
    mha(x, x, x)
    assert g.tensor("dropout_mask").shape == (4, 3, 3)


def test_losses_against_torch():
    t = _torch()
    rng = np.random.default_rng(6)
    g = tw.Graph()
    logits, target = g.input("logits", (4, 5)), g.label("target", (4, 5))
    ce = F.cross_entropy(logits, target)
    a, b = g.input("a", (2, 3, 4)), g.label("b", (2, 3, 4))
    mse = F.mse_loss(a, b)
    assert ce.shape == () and mse.shape == ()
    p = rng.uniform(0.1, 1, (4, 5))
    feeds = {"logits": rng.standard_normal((4, 5)), "target": p / p.sum(1, keepdims=True),
             "a": rng.standard_normal((2, 3, 4)), "b": rng.standard_normal((2, 3, 4))}
    vals = run_graph(g, feeds)
    _close(vals[ce.name], t.nn.functional.cross_entropy(t.tensor(feeds["logits"]), t.tensor(feeds["target"])))
    _close(vals[mse.name], t.nn.functional.mse_loss(t.tensor(feeds["a"]), t.tensor(feeds["b"])))


def test_cat_stack_select_are_one_op_each():
    g = tw.Graph()
    xs = [g.input(f"x{i}", (2, i + 1, 3)) for i in range(3)]
    c = F.cat(xs, dim=1)
    ys = [g.input(f"y{i}", (2, 3)) for i in range(4)]
    s = F.stack(ys, dim=1)
    sel = F.select(s, 1, 2)
    assert c.shape == (2, 6, 3) and s.shape == (2, 4, 3) and sel.shape == (2, 3)
    assert [op.type for op in g.ops] == ["concat_3", "stack_4", "select"]
    feeds = random_feeds(g, np.random.default_rng(7))
    vals = run_graph(g, feeds)
    _close(vals[c.name], np.concatenate([feeds[f"x{i}"] for i in range(3)], axis=1))
    _close(vals[s.name], np.stack([feeds[f"y{i}"] for i in range(4)], axis=1))
    _close(vals[sel.name], feeds["y2"])
    # Graphs with generated n-ary ops load back from JSON.
    assert tw.Graph.from_json(g.to_json()).to_json() == g.to_json()


def test_new_op_gradient_rules_match_finite_differences():
    """Each tdl_ops.models gradient rule, evaluated on a scratch graph, equals the numerical gradient."""
    rng = np.random.default_rng(8)
    m = tdl_ops.models
    cases = [
        (tdl_ops.select, [(3, 2, 4)], {"axis": 1, "index": 1}),
        (tdl_ops.unselect, [(3, 4)], {"axis": 1, "index": 2, "size": 3, "inner": 4}),
        (m.stack_op(3), [(2, 3)] * 3, {"axis": 1, "inner": 3}),
        (m.concat_op(3), [(2, 1), (2, 3), (2, 2)], {"axis": 1}),
        (tdl_ops.split_heads, [(2, 3, 12)], {"heads": 2, "dim_head": 2, "piece": 1, "pieces": 3}),
        (tdl_ops.merge_heads, [(4, 3, 2)], {"heads": 2, "dim_head": 2, "piece": 0, "pieces": 3}),
        (tdl_ops.add_broadcast, [(2, 3, 4), (3, 4)], {}),
        (tdl_ops.sum_leading, [(2, 3, 4)], {"lead": 2}),
        (tdl_ops.adaptive_avg_pool2d, [(1, 2, 4, 6)], {"kernel_h": 2, "kernel_w": 3}),
        (tdl_ops.adaptive_avg_pool2d_grad, [(1, 2, 2, 2)], {"kernel_h": 2, "kernel_w": 3}),
    ]
    for op, shapes, attrs in cases:
        xs = [rng.standard_normal(s) for s in shapes]
        y = op.evaluate(*xs, **attrs)
        gy = rng.standard_normal(y.shape)
        g = tw.Graph()
        ins = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
        out = op(*ins, **attrs)
        seed = g.input("gy", y.shape)
        grads = op.grad_fn(seed, *ins, out=out, **attrs)
        vals = run_graph(g, {**{f"x{i}": x for i, x in enumerate(xs)}, "gy": gy})
        for i, gt in enumerate(grads):
            # The op is linear in each input: the gradient is exactly the transposed map applied to gy.
            num = np.zeros(shapes[i])
            for idx in np.ndindex(*shapes[i]):
                e = [x.copy() for x in xs]
                e[i][idx] += 1.0
                num[idx] = np.sum((op.evaluate(*e, **attrs) - y) * gy)
            _close(vals[gt.name], num, tol=1e-9)

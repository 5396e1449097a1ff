"""tw.from_onnx: whole models exported by torch.onnx.export, run by tw.compile and compared with
torch; and the errors of models it cannot take (every unsupported node listed at once, bad files,
dtypes, symbolic axes, opsets). Needs onnx (skipped without); the exported models need torch too.

The models run on the runtime's float32 kernels (one device, and two for the MLP) against torch's
float32 forward pass: outputs agree to 1e-5 of their scale (measured: ~1e-7).
"""

from __future__ import annotations

import io
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tilewise as tw

onnx = pytest.importorskip("onnx", reason="from_onnx needs onnx: pip install onnx")
from onnx import TensorProto, helper  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="the exported models need PyTorch: pip install torch")


# ----------------------------------------------------------------------------- helpers


def export(module, x, **kwargs):
    """The module (in eval mode) as an ONNX ModelProto, by torch's TorchScript-based exporter (the
    torch.export-based one needs onnxscript)."""
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
        torch.onnx.export(module.eval(), (x,), f, dynamo=False, **kwargs)
    return onnx.load_from_string(f.getvalue())


def run_compiled(graph, x, devices=1):
    exe = tw.compile(graph, tw.partition(graph, devices=devices))
    exe.load_state_dict(graph.onnx_import.state_dict())
    out = exe.step(graph.onnx_import.feeds(x))
    return exe, [out[name] for name in graph.outputs]


def assert_rel_close(got, want, rtol=1e-5):
    assert got.shape == want.shape
    scale = max(float(np.abs(want).max()), 1e-30)
    err = float(np.abs(got - want).max())
    assert err <= rtol * scale, f"max error {err:.3g} is {err / scale:.3g} of the scale {scale:.3g}"


def check_model(module, x, devices=1, **export_kwargs):
    model = export(module, x, **export_kwargs)
    g = tw.from_onnx(model)
    assert g.num_parameters == sum(p.numel() for p in module.parameters())
    exe, outs = run_compiled(g, x.numpy(), devices)
    with torch.no_grad():
        want = module(x).numpy()
    assert_rel_close(outs[0], want)
    # The float64 interpreter agrees too (the oracle for every op).
    ref = tw.run_reference(g, g.onnx_import.feeds(x.numpy(), dtype=np.float64), outputs=[g.outputs[n].name
                                                                                         for n in g.outputs])
    assert_rel_close(next(iter(ref.values())), want)
    return g, model, exe


def node_model(nodes, inputs, outputs, initializers=(), opset=17, name="m"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


# ----------------------------------------------------------------------------- whole models


@needs_torch
@pytest.mark.parametrize("devices", [1, 2])
def test_mlp(devices):
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4))
    g, model, exe = check_model(mlp, torch.randn(8, 16), devices=devices)
    assert {t.name for t in g.tensors_with_role("parameter")} == {i.name for i in model.graph.initializer}
    assert exe.stats.interpreted_ops == 0  # Gemm -> linear, Relu, Tanh: native kernels


@needs_torch
def test_small_cnn():
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AvgPool2d(2),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))
    with torch.no_grad():  # running statistics other than 0 and 1
        cnn[1].running_mean.uniform_(-1, 1)
        cnn[1].running_var.uniform_(0.5, 2)
    # Without constant folding, the exporter keeps BatchNormalization (else it folds it into the conv).
    g, model, _ = check_model(cnn, torch.randn(2, 3, 16, 16), do_constant_folding=False)
    assert "BatchNormalization" in {n.op_type for n in model.graph.node}
    assert [t.name for t in g.tensors_with_role("constant")] == ["1.running_mean", "1.running_var"]


@needs_torch
@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
def test_upsampling_block(mode):
    """A UNet-style decoder step: Resize (scales as a constant) between convolutions, and a Concat."""

    class Up(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.up = nn.Conv2d(4, 4, 3, padding=1), nn.Upsample(scale_factor=2, mode=mode)
            self.out = nn.Conv2d(8, 2, 1)

        def forward(self, x):
            y = self.up(torch.relu(self.conv(x)))
            return self.out(torch.cat([y, self.up(x)], dim=1))

    torch.manual_seed(0)
    g, model, _ = check_model(Up(), torch.randn(2, 4, 5, 6))
    assert "Resize" in {n.op_type for n in model.graph.node}
    want = "upsample_nearest2d_hw" if mode == "nearest" else "matmul_nd"
    assert want in {op.type for op in g.ops}


class EncoderLayer(nn.Module if torch is not None else object):
    """A post-norm transformer encoder layer written out (torch's own TransformerEncoderLayer does not
    export with the TorchScript exporter of torch 2.13)."""

    def __init__(self, d=16, heads=2, ff=32):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.proj(y))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


@needs_torch
@pytest.mark.parametrize("opset", [17, 20])  # 17: Gelu as Erf, Mul, Add; 20: the Gelu op
def test_transformer_encoder_layer(opset):
    torch.manual_seed(0)
    layer = EncoderLayer()
    with torch.no_grad():  # (the exporter would share the two norms' equal initial weights)
        for ln in (layer.ln1, layer.ln2):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    g, model, _ = check_model(layer, torch.randn(2, 5, 16), opset_version=opset)
    ops = {n.op_type for n in model.graph.node}
    assert {"LayerNormalization", "Softmax", "MatMul", "Split", "Transpose"} <= ops
    assert ("Gelu" in ops) == (opset >= 20)


@needs_torch
def test_symbolic_batch_and_a_path(tmp_path):
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 3), nn.Sigmoid())
    path = tmp_path / "mlp.onnx"
    path.write_bytes(export(mlp, torch.randn(2, 4), input_names=["x"], output_names=["y"],
                            dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}).SerializeToString())
    with pytest.raises(tw.GraphError, match=r"input 'x' axis 0 is 'batch'.*pass batch=N or dims=\{'batch': N\}"):
        tw.from_onnx(path)
    g = tw.from_onnx(str(path), batch=5)
    assert g.tensor("x").shape == (5, 4) and list(g.outputs) == ["y"]
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    _, (y,) = run_compiled(g, x)
    with torch.no_grad():
        assert_rel_close(y, mlp(torch.from_numpy(x)).numpy())


# ----------------------------------------------------------------------------- errors


def test_every_unsupported_node_is_listed():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="ok"),
        helper.make_node("ConvTranspose", ["a", "w"], ["b"], name="up", group=3),
        helper.make_node("MaxPool", ["b"], ["c"], name="pool", kernel_shape=[2, 2], dilations=[2, 2]),
        helper.make_node("Foo", ["c"], ["c2"], name="custom", domain="com.example"),
        helper.make_node("Foo", ["c2"], ["d"], name="custom", domain="com.example"),  # names need not be unique
    ]
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 1, 2, 2], np.ones(12, np.float32))
    m = node_model(nodes, [vi("x", [1, 3, 8, 8])], [vi("d", [1, 3, 4, 4])], [w])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(tw.GraphError) as info:
        tw.from_onnx(m)
    err = info.value
    assert [(op, name) for op, name, _ in err.unsupported] == [("ConvTranspose", "up"), ("MaxPool", "pool"),
                                                                ("Foo", "custom"), ("Foo", "custom")]
    text = str(err)
    assert "4 node(s) of 'm' cannot be converted (ConvTranspose, Foo, MaxPool)" in text
    assert "ConvTranspose 'up': grouped transposed convolution (group=3)" in text
    assert "MaxPool 'pool': max pooling with dilations [2, 2]" in text
    assert "operator domain 'com.example'" in text


def test_attributes_that_cannot_be_honoured_are_refused():
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c", strides=[1, 2]),
             helper.make_node("AveragePool", ["y"], ["z"], name="p", kernel_shape=[2, 3])]
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], np.ones(108, np.float32))
    with pytest.raises(tw.GraphError) as info:
        tw.from_onnx(node_model(nodes, [vi("x", [1, 3, 9, 9])], [vi("z", [1, 4, 6, 2])], [w]))
    reasons = {name: reason for _, name, reason in info.value.unsupported}
    assert reasons["c"] == "strides=[1, 2]: only equal values along every spatial axis"
    assert reasons["p"] == "kernel_shape=[2, 3]: only equal values along every spatial axis"


def test_bad_files(tmp_path):
    with pytest.raises(tw.GraphError, match="no file"):
        tw.from_onnx(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x00\x01not a protobuf\xff" * 3)
    with pytest.raises(tw.GraphError, match="is not an ONNX model"):
        tw.from_onnx(tmp_path / "junk.onnx")
    dangling = node_model([helper.make_node("Relu", ["nowhere"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(tw.GraphError, match=r"not a valid ONNX model \(onnx.checker"):
        tw.from_onnx(dangling)
    with pytest.raises(tw.GraphError, match="takes an onnx.ModelProto, a path or bytes"):
        tw.from_onnx(42)


def test_dtypes_opsets_and_shapes():
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    with pytest.raises(tw.GraphError) as info:
        tw.from_onnx(node_model(relu, [vi("x", [2], TensorProto.DOUBLE)], [vi("y", [2], TensorProto.DOUBLE)]))
    assert "input 'x' is float64 (graph inputs are float32, int64 or int32 (token ids) or bool" in str(info.value)
    assert "output 'y' is float64 (outputs are float32 only)" in str(info.value)
    ids = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)]
    with pytest.raises(tw.GraphError, match="input 'x' is uint8"):
        tw.from_onnx(node_model(ids, [vi("x", [2], TensorProto.UINT8)], [vi("y", [2])]))
    with pytest.raises(tw.GraphError, match="opset 6 is not supported"):
        tw.from_onnx(node_model(relu, [vi("x", [2])], [vi("y", [2])], opset=6))
    with pytest.raises(tw.GraphError, match=r"axis 1 is 'n' \(tilewise graphs have static shapes; pass dims=\{'n': N\}"):
        tw.from_onnx(node_model(relu, [vi("x", [2, "n"])], [vi("y", [2, "n"])]), batch=2)
    g = tw.from_onnx(node_model(relu, [vi("x", ["b", "n"])], [vi("y", ["b", "n"])]), batch=2, dims={"n": 3})
    assert g.tensor("x").shape == (2, 3)
    with pytest.raises(tw.GraphError, match="batch must be a positive int"):
        tw.from_onnx(node_model(relu, [vi("x", [2])], [vi("y", [2])]), batch=0)


def test_shapes_and_axes_must_be_known():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")]
    m = node_model(nodes, [vi("x", [2, 3]), vi("s", [2])], [vi("y", [3, 2])])
    with pytest.raises(tw.GraphError, match="the shape is the graph input 's'; it must be known when importing") as info:
        tw.from_onnx(m)
    assert info.value.needs_values == ["s"]  # what the ONNX backend binds to the given value


def test_initializers_parameters_and_folded_constants():
    # y = (x @ W) * 0.5 + reshape(b, Shape-derived shape): W a parameter, 0.5 a scale attribute,
    # the Shape -> Gather -> Concat chain folded, b a parameter.
    rng = np.random.default_rng(0)
    W, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    inits = [helper.make_tensor("W", TensorProto.FLOAT, [3, 4], W.ravel()),
             helper.make_tensor("b", TensorProto.FLOAT, [4], b),
             helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]),
             helper.make_tensor("one", TensorProto.INT64, [1], [1]),
             helper.make_tensor("last", TensorProto.INT64, [], [1])]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]),
             helper.make_node("Mul", ["xw", "half"], ["h"]),
             helper.make_node("Shape", ["h"], ["shape"]),
             helper.make_node("Gather", ["shape", "last"], ["n"]),
             helper.make_node("Unsqueeze", ["n", "zero_axes"], ["n1"]),
             helper.make_node("Concat", ["one", "n1"], ["bshape"], axis=0),
             helper.make_node("Reshape", ["b", "bshape"], ["b2"]),
             helper.make_node("Add", ["h", "b2"], ["y"])]
    inits.append(helper.make_tensor("zero_axes", TensorProto.INT64, [1], [0]))
    g = tw.from_onnx(node_model(nodes, [vi("x", [2, 3])], [vi("y", [2, 4])], inits))
    assert sorted(t.name for t in g.tensors_with_role("parameter")) == ["W", "b"]
    assert {op.type for op in g.ops} <= {"matmul", "scale", "reshape", "bias_add"}
    x = rng.standard_normal((2, 3)).astype(np.float32)
    _, (y,) = run_compiled(g, x)
    assert_rel_close(y, (x @ W) * 0.5 + b)


def test_import_tilewise_does_not_import_onnx():
    code = "import sys, tilewise; assert 'onnx' not in sys.modules, 'onnx imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("node, want", [
    (helper.make_node("Pad", ["x", "p"], ["y"]), lambda x: np.pad(x, ((0, 0), (1, 2), (3, 0)))),
    (helper.make_node("CumSum", ["x", "a"], ["y"]), lambda x: np.cumsum(x, axis=1)),
    (helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0),
     lambda x: np.log(np.exp(x).sum(axis=(0, 2)))),
    (helper.make_node("Softmax", ["x"], ["y"], axis=1),  # opset 11: softmax of each row of the 2-D view
     lambda x: (lambda e: e / e.sum(axis=1, keepdims=True))(np.exp(x.reshape(2, 12))).reshape(2, 3, 4)),
    (helper.make_node("Trilu", ["x", "a"], ["y"], upper=0), lambda x: np.tril(x, 1)),
    (helper.make_node("Trilu", ["x"], ["y"]), lambda x: np.triu(x)),
], ids=["Pad", "CumSum", "ReduceLogSumExp", "Softmax-11", "Trilu-lower", "Trilu-upper"])
def test_ops_without_float32_node_tests(node, want):
    """Ops whose ONNX node tests are float64 (CumSum, ReduceLogSumExp), int64 (Trilu) or use other
    modes (Pad)."""
    inits = [helper.make_tensor("p", TensorProto.INT64, [6], [0, 1, 3, 0, 2, 0]),
             helper.make_tensor("a", TensorProto.INT64, [], [1]),
             helper.make_tensor("axes", TensorProto.INT64, [2], [0, -1])]
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    opset = 11 if node.op_type == "Softmax" else 18
    inits = [t for t in inits if t.name in node.input]
    g = tw.from_onnx(node_model([node], [vi("x", [2, 3, 4])], [vi("y", list(want(x).shape))], inits, opset=opset))
    _, (y,) = run_compiled(g, x)
    assert_rel_close(y, want(x.astype(np.float64)))


@needs_torch
@pytest.mark.parametrize("devices", [1, 2])
def test_token_ids_and_a_mask_stay_integers(devices):
    """An embedding model exported by torch: int64 ids into Gather (embedding_seq), an int64 padding
    mask cast to float; the compiled graph on 1 and 2 devices matches torch, and an id outside the
    table fails the step instead of reading another row."""

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 8)
            self.fc = nn.Linear(8, 3)

        def forward(self, ids, mask):
            return self.fc(self.emb(ids)) * mask.unsqueeze(-1).to(torch.float32)

    torch.manual_seed(0)
    module = Tagger().eval()
    ids = torch.randint(0, 50, (4, 6))
    mask = torch.ones(4, 6, dtype=torch.int64)
    mask[2, 4:] = 0
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (ids, mask), f, dynamo=False, input_names=["ids", "mask"])
    g = tw.from_onnx(onnx.load_from_string(f.getvalue()))
    assert g.tensor("ids").dtype == "int64" and g.tensor("mask").dtype == "int64"
    assert "embedding_seq" in {op.type for op in g.ops}
    exe = tw.compile(g, tw.partition(g, devices=devices))
    exe.load_state_dict(g.onnx_import.state_dict())
    out = exe.step(g.onnx_import.feeds(ids.numpy(), mask.numpy()))
    with torch.no_grad():
        want = module(ids, mask).numpy()
    assert_rel_close(out[next(iter(g.outputs))], want)
    bad = ids.numpy().copy()
    bad[1, 2] = 50
    with pytest.raises(tw.ExecError, match="id 50 at"):
        exe.step(g.onnx_import.feeds(bad, mask.numpy()))

"""Gradient rules of the op library, checked against central finite differences of each op's NumPy
reference (every op with a rule, on its test cases) and, where torch is importable, against
torch.autograd for the main ops."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import tdl_ops
import tilewise as tw
from tdl_ops._util import scalar

# Input kinds that hold data which is not differentiated: ids, masks, targets.
_NOT_DIFFERENTIATED = ("mask", "onehot", "prob")

# Inputs whose rule returns no gradient on purpose (running statistics, binary labels).
_NO_GRADIENT = {("batch_norm_inference", 1), ("batch_norm_inference", 2), ("bce_with_logits", 1)}

# Forward ops of the library that have no rule on purpose: opaque linear algebra (no model uses
# it), optimizer updates and statistics updates (they run after the backward pass).
_WITHOUT_RULE = {"batch_cholesky", "batch_inverse", "batch_solve", "sort_rows", "running_stat_update", "sgd",
                 "momentum_velocity", "momentum_weight", "adam_m", "adam_v", "adam_weight", "step_count", "rmsprop_sq",
                 "rmsprop_weight", "sum_product"}
_FAMILIES_WITH_RULES = ("elementwise", "activations", "linalg", "conv", "pooling", "normalization", "reductions",
                        "shape", "embedding", "rnn", "losses", "optimizers")


def _is_backward_op(name: str) -> bool:
    return name.endswith("_grad") or "_grad_" in name or "_backward" in name or name == "fill_like"


# ---------------------------------------------------------------- a linear functional as the loss


@tw.op(reference=lambda x, r: np.asarray((x * r).sum()))
def _gradcheck_dot(x, r):
    """sum(x * r): a scalar whose gradient with respect to x is r."""
    if x.ndim == 0:
        return lambda: scalar(x) * scalar(r)
    return lambda: tw.Sum(lambda *i: x[i] * r[i], ndim=x.ndim)


@tw.op(reference=lambda r, s: r * s)
def _gradcheck_times(r, s):
    """r * s with s 0-d."""
    return tw.compute(r.ndim, lambda *i: r[i] * scalar(s))


@_gradcheck_dot.def_grad
def _(g, x, r, out):
    return _gradcheck_times(r, g), _gradcheck_times(x, g)


# ---------------------------------------------------------------- finite differences


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _graph_gradients(op, inputs, attrs, wrt, r):
    """d sum(op(inputs) * r) / d inputs[k] for k in wrt, through tw.grad and tw.run_reference."""
    g = tw.Graph()
    ts = [(g.parameter if k in wrt else g.input)(f"in{k}", np.shape(a)) for k, a in enumerate(inputs)]
    out = op(*ts, **attrs)
    loss = _gradcheck_dot(out, g.input("r", out.shape))
    grads = tw.grad(g, loss, wrt=[ts[k] for k in wrt])
    feeds = {f"in{k}": a for k, a in enumerate(inputs)}
    feeds["r"] = r
    values = tw.run_reference(g, feeds, outputs=[grads[f"in{k}"].name for k in wrt])
    return {k: values[grads[f"in{k}"].name] for k in wrt}


def _numeric_gradient(op, inputs, attrs, k, r, eps=1e-6):
    x = np.array(inputs[k], dtype=np.float64)
    grad = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        f = []
        for step in (eps, -eps):
            xs = x.copy()
            xs[idx] += step
            args = list(inputs)
            args[k] = xs
            f.append(float((np.asarray(op.reference(*args, **attrs)) * r).sum()))
        grad[idx] = (f[0] - f[1]) / (2 * eps)
    return grad


# Shapes the library's cases do not reach: vectors through layers written for batches, reductions to 0-d.
_EXTRA_CASES = [
    tdl_ops.Case("linear", [(5,), (3, 5), (3,)], name="grad_linear_vector"),
    tdl_ops.Case("linear_nobias", [(2, 2, 5), (3, 5)], name="grad_linear_nobias_3d"),
    tdl_ops.Case("bias_add", [(4,), (4,)], name="grad_bias_add_vector"),
    tdl_ops.Case("reduce_sum", [(4,)], name="grad_reduce_sum_to_scalar"),
    tdl_ops.Case("reduce_mean", [(4,)], {"axis": 0}, name="grad_reduce_mean_to_scalar"),
    tdl_ops.Case("logsumexp", [(3, 4)], {"axis": 0}, name="grad_logsumexp_axis0"),
    tdl_ops.Case("reduce_max", [(3, 4)], {"axis": -1}, ("distinct",), name="grad_reduce_max_last"),
]


def _cases_with_rules():
    return [c for c in tdl_ops.CASES + _EXTRA_CASES if tdl_ops.ALL[c.op].grad_fn is not None]


def _differentiated(case) -> list[int]:
    kinds = [case.kind(k) for k in range(len(case.shapes))]
    return [k for k, kind in enumerate(kinds)
            if kind not in _NOT_DIFFERENTIATED and not kind.startswith("ids:") and (case.op, k) not in _NO_GRADIENT]


@pytest.mark.parametrize("case", _cases_with_rules(), ids=[c.id for c in _cases_with_rules()])
def test_rule_matches_finite_differences(case):
    op = tdl_ops.ALL[case.op]
    rng = _rng(case.id)
    inputs = tdl_ops.make_inputs(case, rng)
    wrt = _differentiated(case)
    if not wrt:
        pytest.skip("no differentiable input")
    out_shape = np.shape(op.reference(*inputs, **case.attrs))
    r = rng.standard_normal(out_shape)
    got = _graph_gradients(op, inputs, case.attrs, wrt, r)
    for k in wrt:
        expected = _numeric_gradient(op, inputs, case.attrs, k, r)
        np.testing.assert_allclose(got[k], expected, rtol=1e-5, atol=1e-6, err_msg=f"input {op.inputs[k]}")


def test_every_forward_op_has_a_rule():
    missing = []
    # tdl_ops.FAMILIES, not getattr: the op tdl_ops.embedding hides the module of the same name.
    families = [m for m in tdl_ops.FAMILIES if m.__name__.rsplit(".", 1)[1] in _FAMILIES_WITH_RULES]
    assert len(families) == len(_FAMILIES_WITH_RULES)
    for mod in families:
        for name, obj in vars(mod).items():
            if name in tdl_ops.ALL and tdl_ops.ALL[name] is obj and not _is_backward_op(name):
                if obj.grad_fn is None and name not in _WITHOUT_RULE:
                    missing.append(name)
    assert not missing, f"forward ops without a gradient rule: {missing}"


def test_every_op_with_a_rule_is_checked():
    checked = {c.op for c in _cases_with_rules() if _differentiated(c)}
    with_rule = {n for n, o in tdl_ops.ALL.items() if o.grad_fn is not None}
    constant = {"argmax", "sign", "one_hot", "fill_like"}  # zero gradient everywhere it exists
    assert with_rule - checked - constant == set()


# ---------------------------------------------------------------- against torch.autograd


def _torch_cases():
    """(id, tdl op, attrs, input shapes, differentiated inputs, torch function of the inputs)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional

    def onehot(n, c):
        return ("onehot", (n, c))

    return [
        ("linear", tdl_ops.linear, {}, [(4, 5), (3, 5), (3,)], [0, 1, 2], F.linear),
        ("linear_3d", tdl_ops.linear, {}, [(2, 3, 5), (4, 5), (4,)], [0, 1, 2], F.linear),
        ("matmul", tdl_ops.matmul, {}, [(3, 4), (4, 5)], [0, 1], torch.matmul),
        ("batch_matmul_nt", tdl_ops.batch_matmul_nt, {}, [(2, 3, 4), (2, 5, 4)], [0, 1],
         lambda a, b: a @ b.transpose(1, 2)),
        ("conv2d_s2_p1_d2", tdl_ops.conv2d, {"stride": 2, "padding": 1, "dilation": 2},
         [(2, 2, 9, 8), (3, 2, 3, 3)], [0, 1], lambda x, w: F.conv2d(x, w, stride=2, padding=1, dilation=2)),
        ("conv1d_s2_p1", tdl_ops.conv1d, {"stride": 2, "padding": 1}, [(2, 3, 9), (4, 3, 3)], [0, 1],
         lambda x, w: F.conv1d(x, w, stride=2, padding=1)),
        ("depthwise_conv2d", tdl_ops.depthwise_conv2d, {"padding": 1}, [(1, 3, 5, 5), (3, 1, 3, 3)], [0, 1],
         lambda x, w: F.conv2d(x, w, padding=1, groups=3)),
        ("max_pool2d_k3_s2_p1", tdl_ops.max_pool2d, {"kernel": 3, "stride": 2, "padding": 1}, [(2, 2, 7, 7)],
         [0], lambda x: F.max_pool2d(x, 3, 2, 1)),
        ("avg_pool2d_k3_s2_p1", tdl_ops.avg_pool2d, {"kernel": 3, "stride": 2, "padding": 1}, [(2, 2, 7, 7)],
         [0], lambda x: F.avg_pool2d(x, 3, 2, 1)),
        ("softmax", tdl_ops.softmax, {}, [(3, 5)], [0], lambda x: F.softmax(x, -1)),
        ("log_softmax", tdl_ops.log_softmax, {}, [(3, 5)], [0], lambda x: F.log_softmax(x, -1)),
        ("cross_entropy", tdl_ops.cross_entropy, {}, [(4, 5), onehot(4, 5)], [0],
         lambda x, t: F.cross_entropy(x, t.argmax(1))),
        ("layer_norm", tdl_ops.layer_norm, {}, [(2, 3, 6), (6,), (6,)], [0, 1, 2],
         lambda x, g, b: F.layer_norm(x, (6,), g, b)),
        ("batch_norm_train", tdl_ops.batch_norm_train, {}, [(3, 2, 3, 4), (2,), (2,)], [0, 1, 2],
         lambda x, g, b: F.batch_norm(x, None, None, g, b, training=True)),
        ("gelu", tdl_ops.gelu, {}, [(3, 4)], [0], F.gelu),
        ("gelu_tanh", tdl_ops.gelu_tanh, {}, [(3, 4)], [0], lambda x: F.gelu(x, approximate="tanh")),
        ("silu", tdl_ops.silu, {}, [(3, 4)], [0], F.silu),
        ("mse_loss", tdl_ops.mse_loss, {}, [(3, 4), (3, 4)], [0, 1], F.mse_loss),
        ("smooth_l1_loss", tdl_ops.smooth_l1_loss, {"beta": 0.5}, [(3, 4), (3, 4)], [0, 1],
         lambda a, b: F.smooth_l1_loss(a, b, beta=0.5)),
        ("embedding", tdl_ops.embedding, {}, [(7, 3), ("ids:7", (5,))], [0],
         lambda table, ids: F.embedding(ids.long(), table)),
        ("global_avg_pool2d", tdl_ops.global_avg_pool2d, {}, [(2, 3, 4, 4)], [0], lambda x: x.mean((2, 3))),
        ("upsample_nearest2d", tdl_ops.upsample_nearest2d, {"scale": 2}, [(1, 2, 3, 3)], [0],
         lambda x: F.interpolate(x, scale_factor=2, mode="nearest")),
    ]


def _torch_case_ids():
    try:
        return [c[0] for c in _torch_cases()]
    except pytest.skip.Exception:
        return ["torch-missing"]


@pytest.mark.parametrize("index", range(len(_torch_case_ids())), ids=_torch_case_ids())
def test_rule_matches_torch_autograd(index):
    torch = pytest.importorskip("torch")
    name, op, attrs, shapes, wrt, torch_fn = _torch_cases()[index]
    rng = _rng(name)
    inputs = [tdl_ops.make_input(*s, rng) if isinstance(s[0], str) else rng.standard_normal(s) for s in shapes]
    r = rng.standard_normal(np.shape(op.reference(*inputs, **attrs)))
    got = _graph_gradients(op, inputs, attrs, wrt, r)
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=k in wrt) for k, a in enumerate(inputs)]
    (torch_fn(*ts) * torch.tensor(r)).sum().backward()
    for k in wrt:
        np.testing.assert_allclose(got[k], ts[k].grad.numpy(), rtol=1e-9, atol=1e-10, err_msg=op.inputs[k])

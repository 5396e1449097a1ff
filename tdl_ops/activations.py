"""Activation functions, softmax and log-softmax (last axis), their gradient ops and rules.

Each differentiable op declares its gradient rule right after it (``@op.def_grad``)."""

from __future__ import annotations

import math

import numpy as np

import tilewise.tdl as tw

from ._cases import Case
from ._util import np_erf, np_log_softmax, np_sigmoid, np_softmax

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_GELU_C = math.sqrt(2.0 / math.pi)


@tw.op(reference=lambda x: np.maximum(x, 0.0), kernel="relu")
def relu(x):
    """max(x, 0)."""
    return tw.compute(x.ndim, lambda *i: tw.max(x[i], 0.0))


@relu.def_grad
def _(g, x, out):
    return (relu_grad(g, x),)


@tw.op(reference=lambda x: np.minimum(np.maximum(x, 0.0), 6.0), kernel="relu6")
def relu6(x):
    """min(max(x, 0), 6)."""
    return tw.compute(x.ndim, lambda *i: tw.min(tw.max(x[i], 0.0), 6.0))


@relu6.def_grad
def _(g, x, out):
    return (relu6_grad(g, x),)


@tw.op(reference=lambda x, lo=-1.0, hi=1.0: np.clip(x, lo, hi), kernel="clip")
def hardtanh(x, lo=-1.0, hi=1.0):
    """min(max(x, lo), hi) as torch's hardtanh: its gradient is 0 at the bounds (clip's, torch.clamp's, is dy)."""
    return tw.compute(x.ndim, lambda *i: tw.min(tw.max(x[i], lo), hi))


@hardtanh.def_grad
def _(g, x, out, lo, hi):
    return (hardtanh_grad(g, x, lo=lo, hi=hi),)


@tw.op(reference=np_sigmoid, kernel="sigmoid")
def sigmoid(x):
    """1 / (1 + e**-x)."""
    return tw.compute(x.ndim, lambda *i: tw.sigmoid(x[i]))


@sigmoid.def_grad
def _(g, x, out):
    return (sigmoid_grad(g, out),)


@tw.op(reference=np.tanh, kernel="tanh")
def tanh(x):
    """Hyperbolic tangent."""
    return tw.compute(x.ndim, lambda *i: tw.tanh(x[i]))


@tanh.def_grad
def _(g, x, out):
    return (tanh_grad(g, out),)


@tw.op(reference=lambda x: 0.5 * x * (1.0 + np_erf(x / math.sqrt(2.0))), kernel="gelu")
def gelu(x):
    """GELU, exact erf form: x * Phi(x)."""
    return tw.compute(x.ndim, lambda *i: 0.5 * x[i] * (1.0 + tw.erf(x[i] * _SQRT1_2)))


@gelu.def_grad
def _(g, x, out):
    return (gelu_grad(g, x),)


@tw.op(reference=lambda x: 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * x**3))), kernel="gelu_tanh")
def gelu_tanh(x):
    """GELU, tanh approximation."""
    return tw.compute(x.ndim, lambda *i: 0.5 * x[i]
                      * (1.0 + tw.tanh(_GELU_C * (x[i] + 0.044715 * x[i] ** 3))))


@gelu_tanh.def_grad
def _(g, x, out):
    return (gelu_tanh_grad(g, x),)


@tw.op(reference=lambda x: np.logaddexp(0.0, x), kernel="softplus")
def softplus(x):
    """log(1 + e**x), written stably as max(x, 0) + log(1 + e**-|x|)."""
    return tw.compute(x.ndim, lambda *i: tw.max(x[i], 0.0) + tw.log(1.0 + tw.exp(-tw.abs(x[i]))))


@softplus.def_grad
def _(g, x, out):
    return (softplus_grad(g, x),)


@tw.op(reference=lambda x, slope=0.01: np.where(x > 0, x, slope * x), kernel="leaky_relu")
def leaky_relu(x, slope=0.01):
    """x if x > 0 else slope * x."""
    return tw.compute(x.ndim, lambda *i: tw.where(x[i] > 0, x[i], slope * x[i]))


@leaky_relu.def_grad
def _(g, x, out, slope):
    return (leaky_relu_grad(g, x, slope=slope),)


@tw.op(reference=lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(x) - 1.0)), kernel="elu")
def elu(x, alpha=1.0):
    """x if x > 0 else alpha * (e**x - 1)."""
    return tw.compute(x.ndim, lambda *i: tw.where(x[i] > 0, x[i], alpha * (tw.exp(x[i]) - 1.0)))


@elu.def_grad
def _(g, x, out, alpha):
    return (elu_grad(g, x, alpha=alpha),)


@tw.op(reference=lambda x: x * np_sigmoid(x), kernel="silu")
def silu(x):
    """x * sigmoid(x) (swish)."""
    return tw.compute(x.ndim, lambda *i: x[i] * tw.sigmoid(x[i]))


@silu.def_grad
def _(g, x, out):
    return (silu_grad(g, x),)


# ---------------------------------------------------------------- gradients


@tw.op(reference=lambda dy, x: np.where(x <= 0, 0.0, dy), kernel="relu_grad")
def relu_grad(dy, x):
    """0 where x <= 0, else dy (NaN included, like torch's threshold_backward)."""
    return tw.compute(x.ndim, lambda *i: tw.where(x[i] <= 0, 0.0, dy[i]))


@tw.op(reference=lambda dy, x, slope=0.01: np.where(x > 0, dy, slope * dy), kernel="leaky_relu_grad")
def leaky_relu_grad(dy, x, slope=0.01):
    """dy where x > 0 else slope * dy."""
    return tw.compute(x.ndim, lambda *i: tw.where(x[i] > 0, dy[i], slope * dy[i]))


@tw.op(reference=lambda dy, y: dy * y * (1.0 - y), kernel="sigmoid_grad")
def sigmoid_grad(dy, y):
    """dy * y * (1 - y), y the forward output."""
    return tw.compute(y.ndim, lambda *i: dy[i] * y[i] * (1.0 - y[i]))


@tw.op(reference=lambda dy, y: dy * (1.0 - y * y), kernel="tanh_grad")
def tanh_grad(dy, y):
    """dy * (1 - y**2), y the forward output."""
    return tw.compute(y.ndim, lambda *i: dy[i] * (1.0 - y[i] * y[i]))


@tw.op(reference=lambda dy, x: dy * (0.5 * (1.0 + np_erf(x / math.sqrt(2.0)))
                                     + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)), kernel="gelu_grad")
def gelu_grad(dy, x):
    """dy * (Phi(x) + x * phi(x)) for the erf-form GELU."""
    return tw.compute(x.ndim, lambda *i: dy[i] * (0.5 * (1.0 + tw.erf(x[i] * _SQRT1_2))
                                                  + x[i] * tw.exp(-0.5 * x[i] * x[i]) * _INV_SQRT_2PI))


@tw.op(reference=lambda dy, x: np.where((x > 0) & (x < 6), dy, 0.0), kernel="relu6_grad")
def relu6_grad(dy, x):
    """dy where 0 < x < 6, else 0 (at NaN too: torch's vectorised hardtanh backward)."""
    return tw.compute(x.ndim, lambda *i: tw.where(x[i] > 0, tw.where(x[i] < 6, dy[i], 0.0), 0.0))


@tw.op(reference=lambda dy, x, lo=-1.0, hi=1.0: np.where((x > lo) & (x < hi), dy, 0.0), kernel="hardtanh_grad")
def hardtanh_grad(dy, x, lo=-1.0, hi=1.0):
    """dy where lo < x < hi, else 0 (at NaN too: torch's vectorised hardtanh backward)."""
    return tw.compute(x.ndim, lambda *i: tw.where(x[i] > lo, tw.where(x[i] < hi, dy[i], 0.0), 0.0))


def _gelu_tanh_grad_ref(dy, x):
    t = np.tanh(_GELU_C * (x + 0.044715 * x**3))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _GELU_C * (1.0 + 3 * 0.044715 * x * x))


@tw.op(reference=_gelu_tanh_grad_ref, kernel="gelu_tanh_grad")
def gelu_tanh_grad(dy, x):
    """dy * d/dx of the tanh-approximated GELU."""
    def f(*i):
        t = tw.tanh(_GELU_C * (x[i] + 0.044715 * x[i] ** 3))
        return dy[i] * (0.5 * (1.0 + t) + 0.5 * x[i] * (1.0 - t * t) * _GELU_C * (1.0 + 3 * 0.044715 * x[i] * x[i]))
    return tw.compute(x.ndim, f)


@tw.op(reference=lambda dy, x: dy * np_sigmoid(x), kernel="softplus_grad")
def softplus_grad(dy, x):
    """dy sigmoid(x)."""
    return tw.compute(x.ndim, lambda *i: dy[i] * tw.sigmoid(x[i]))


@tw.op(reference=lambda dy, x, alpha=1.0: np.where(x > 0, dy, dy * alpha * np.exp(x)), kernel="elu_grad")
def elu_grad(dy, x, alpha=1.0):
    """dy where x > 0 else dy alpha e**x."""
    return tw.compute(x.ndim, lambda *i: tw.where(x[i] > 0, dy[i], dy[i] * alpha * tw.exp(x[i])))


@tw.op(reference=lambda dy, x: dy * np_sigmoid(x) * (1.0 + x * (1.0 - np_sigmoid(x))), kernel="silu_grad")
def silu_grad(dy, x):
    """dy s (1 + x (1 - s)), s = sigmoid(x)."""
    def f(*i):
        s = tw.sigmoid(x[i])
        return dy[i] * s * (1.0 + x[i] * (1.0 - s))
    return tw.compute(x.ndim, f)


# ---------------------------------------------------------------- softmax family (last axis)


def _row(x, i):
    """The last-axis row of x through output index i, as a function of the reduction variable."""
    return lambda k: x[tuple(i[:-1]) + (k,)]


@tw.op(reference=np_softmax, kernel="softmax")
def softmax(x):
    """exp(x - max) / sum(exp(x - max)) over the last axis."""
    def f(*i):
        row = _row(x, i)
        m = tw.Max(row)
        return tw.exp(x[i] - m) / tw.Sum(lambda k: tw.exp(row(k) - m))
    return tw.compute(x.ndim, f)


@softmax.def_grad
def _(g, x, out):
    return (softmax_grad(g, out),)


@tw.op(reference=np_log_softmax, kernel="log_softmax")
def log_softmax(x):
    """x - max - log(sum(exp(x - max))) over the last axis."""
    def f(*i):
        row = _row(x, i)
        m = tw.Max(row)
        return x[i] - m - tw.log(tw.Sum(lambda k: tw.exp(row(k) - m)))
    return tw.compute(x.ndim, f)


@log_softmax.def_grad
def _(g, x, out):
    return (log_softmax_grad(g, out),)


@tw.op(reference=lambda dy, y: y * (dy - (dy * y).sum(axis=-1, keepdims=True)), kernel="softmax_grad")
def softmax_grad(dy, y):
    """y * (dy - sum(dy * y)) over the last axis, y the softmax output."""
    return tw.compute(y.ndim, lambda *i: y[i] * (dy[i] - tw.Sum(lambda k: _row(dy, i)(k) * _row(y, i)(k))))


@tw.op(reference=lambda dy, y: dy - np.exp(y) * dy.sum(axis=-1, keepdims=True), kernel="log_softmax_grad")
def log_softmax_grad(dy, y):
    """dy - exp(y) * sum(dy) over the last axis, y the log-softmax output."""
    return tw.compute(y.ndim, lambda *i: dy[i] - tw.exp(y[i]) * tw.Sum(_row(dy, i)))


ELEMENTWISE = ("relu", "relu6", "sigmoid", "tanh", "gelu", "gelu_tanh", "softplus", "leaky_relu", "elu",
               "silu", "relu_grad", "leaky_relu_grad", "sigmoid_grad", "tanh_grad", "gelu_grad", "relu6_grad",
               "gelu_tanh_grad", "softplus_grad", "elu_grad", "silu_grad", "hardtanh", "hardtanh_grad")

CASES = [
    Case("relu", [(6, 7)]),
    Case("relu6", [(6, 7)], kinds=("wide",)),
    Case("sigmoid", [(3, 4, 5)]),
    Case("tanh", [(6, 7)]),
    Case("gelu", [(6, 7)]),
    Case("gelu_tanh", [(6, 7)]),
    Case("softplus", [(6, 7)]),
    Case("leaky_relu", [(6, 7)], {"slope": 0.2}),
    Case("elu", [(6, 7)], {"alpha": 0.7}),
    Case("silu", [(6, 7)]),
    Case("relu_grad", [(6, 7), (6, 7)]),
    Case("leaky_relu_grad", [(6, 7), (6, 7)], {"slope": 0.1}),
    Case("sigmoid_grad", [(6, 7), (6, 7)], kinds=("normal", "unit")),
    Case("tanh_grad", [(6, 7), (6, 7)]),
    Case("gelu_grad", [(6, 7), (6, 7)]),
    Case("relu6_grad", [(6, 7), (6, 7)], kinds=("normal", "wide")),
    Case("gelu_tanh_grad", [(6, 7), (6, 7)]),
    Case("softplus_grad", [(6, 7), (6, 7)]),
    Case("elu_grad", [(6, 7), (6, 7)], {"alpha": 0.7}),
    Case("silu_grad", [(6, 7), (6, 7)]),
    Case("hardtanh", [(6, 7)], {"lo": -0.5, "hi": 0.75}),
    Case("hardtanh_grad", [(6, 7), (6, 7)], {"lo": -0.5, "hi": 0.75}),
    Case("hardtanh_grad", [(2, 3), (2, 3)], {"lo": 0.0, "hi": 1.0}, name="hardtanh_grad_bounds",
         prepare=lambda inputs, attrs: [inputs[0], np.array([[0.0, 0.5, 1.0], [-1.0, 2.0, 1e-3]])]),
    Case("softmax", [(5, 7)]),
    Case("softmax", [(2, 3, 6)], name="softmax_3d"),
    Case("log_softmax", [(5, 7)]),
    Case("softmax_grad", [(5, 7), (5, 7)], kinds=("normal", "prob")),
    Case("log_softmax_grad", [(5, 7), (5, 7)]),
]

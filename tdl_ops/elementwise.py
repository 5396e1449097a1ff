"""Element-wise unary and binary operators, and broadcasting variants (any rank via tw.compute)."""

from __future__ import annotations

import numpy as np
import tilewise as tw

from ._cases import Case
from ._util import np_erf

# ---------------------------------------------------------------- unary


@tw.op(reference=lambda x: -x)
def neg(x):
    """-x."""
    return tw.compute(x.ndim, lambda *i: -x[i])


@tw.op(reference=np.exp)
def exp(x):
    """e**x."""
    return tw.compute(x.ndim, lambda *i: tw.exp(x[i]))


@tw.op(reference=np.log)
def log(x):
    """Natural logarithm (positive inputs)."""
    return tw.compute(x.ndim, lambda *i: tw.log(x[i]))


@tw.op(reference=np.sqrt)
def sqrt(x):
    """Square root (non-negative inputs)."""
    return tw.compute(x.ndim, lambda *i: tw.sqrt(x[i]))


@tw.op(reference=lambda x: 1.0 / np.sqrt(x))
def rsqrt(x):
    """1 / sqrt(x)."""
    return tw.compute(x.ndim, lambda *i: 1.0 / tw.sqrt(x[i]))


@tw.op(reference=lambda x: 1.0 / x)
def reciprocal(x):
    """1 / x."""
    return tw.compute(x.ndim, lambda *i: 1.0 / x[i])


@tw.op(reference=np.abs)
def abs(x):  # noqa: A001 - op name
    """|x|."""
    return tw.compute(x.ndim, lambda *i: tw.abs(x[i]))


@tw.op(reference=np.square)
def square(x):
    """x * x."""
    return tw.compute(x.ndim, lambda *i: x[i] * x[i])


@tw.op(reference=np.sign)
def sign(x):
    """-1, 0 or 1 (comparisons are 1.0 / 0.0)."""
    return tw.compute(x.ndim, lambda *i: (x[i] > 0) - (x[i] < 0))


@tw.op(reference=np_erf)
def erf(x):
    """Gauss error function."""
    return tw.compute(x.ndim, lambda *i: tw.erf(x[i]))


@tw.op(reference=lambda x, exponent=2.0: x**exponent)
def power(x, exponent=2.0):
    """x ** exponent (exponent a constant attribute; positive x for fractional exponents)."""
    return tw.compute(x.ndim, lambda *i: x[i] ** exponent)


@tw.op(reference=lambda x, lo=-1.0, hi=1.0: np.clip(x, lo, hi))
def clip(x, lo=-1.0, hi=1.0):
    """min(max(x, lo), hi)."""
    return tw.compute(x.ndim, lambda *i: tw.min(tw.max(x[i], lo), hi))


@tw.op(reference=lambda x, alpha=1.0, beta=0.0: alpha * x + beta)
def scale(x, alpha=1.0, beta=0.0):
    """alpha * x + beta."""
    return tw.compute(x.ndim, lambda *i: alpha * x[i] + beta)


# ---------------------------------------------------------------- binary, same shape


@tw.op(reference=np.add)
def add(a, b):
    """a + b."""
    return tw.compute(a.ndim, lambda *i: a[i] + b[i])


@tw.op(reference=np.subtract)
def sub(a, b):
    """a - b."""
    return tw.compute(a.ndim, lambda *i: a[i] - b[i])


@tw.op(reference=np.multiply)
def mul(a, b):
    """a * b."""
    return tw.compute(a.ndim, lambda *i: a[i] * b[i])


@tw.op(reference=np.divide)
def div(a, b):
    """a / b."""
    return tw.compute(a.ndim, lambda *i: a[i] / b[i])


@tw.op(reference=np.maximum)
def maximum(a, b):
    """Element-wise max(a, b)."""
    return tw.compute(a.ndim, lambda *i: tw.max(a[i], b[i]))


@tw.op(reference=np.minimum)
def minimum(a, b):
    """Element-wise min(a, b)."""
    return tw.compute(a.ndim, lambda *i: tw.min(a[i], b[i]))


@tw.op(reference=lambda a, b: (a - b) ** 2)
def squared_difference(a, b):
    """(a - b) ** 2."""
    return tw.compute(a.ndim, lambda *i: (a[i] - b[i]) ** 2)


@tw.op(reference=lambda x, y, alpha=1.0: alpha * x + y)
def axpy(x, y, alpha=1.0):
    """alpha * x + y."""
    return tw.compute(x.ndim, lambda *i: alpha * x[i] + y[i])


@tw.op(reference=lambda cond, a, b: np.where(cond != 0, a, b))
def where(cond, a, b):
    """Select a where cond != 0 else b."""
    return tw.compute(a.ndim, lambda *i: tw.where(cond[i], a[i], b[i]))


# ---------------------------------------------------------------- broadcasting


@tw.op(reference=lambda x, r: x + r[None, :])
def add_row(x, r):
    """x[i, j] + r[j] (row vector broadcast over rows)."""
    return lambda i, j: x[i, j] + r[j]


@tw.op(reference=lambda x, c: x + c[:, None])
def add_col(x, c):
    """x[i, j] + c[i] (column vector broadcast over columns)."""
    return lambda i, j: x[i, j] + c[i]


@tw.op(reference=lambda x, r: x * r[None, :])
def mul_row(x, r):
    """x[i, j] * r[j]."""
    return lambda i, j: x[i, j] * r[j]


@tw.op(reference=lambda x, c: x * c[:, None])
def mul_col(x, c):
    """x[i, j] * c[i]."""
    return lambda i, j: x[i, j] * c[i]


@tw.op(reference=lambda x, b: x + b)
def bias_add(x, b):
    """x + b over the last axis, any rank."""
    return tw.compute(x.ndim, lambda *i: x[i] + b[i[-1]])


@tw.op(reference=lambda x, b: x + b.reshape((1, -1) + (1,) * (x.ndim - 2)))
def bias_add_channel(x, b):
    """x + b over the channel axis 1 (NCHW, NCW, ...)."""
    return tw.compute(x.ndim, lambda *i: x[i] + b[i[1]])


@tw.op(reference=lambda x, s: x * s[0])
def mul_scalar_tensor(x, s):
    """x * s[0] with s a one-element tensor (e.g. a loss scale)."""
    return tw.compute(x.ndim, lambda *i: x[i] * s[0])


# Ops that read every input exactly at the output index (op.is_elementwise).
ELEMENTWISE = ("neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "abs", "square", "sign", "erf", "power",
               "clip", "scale", "add", "sub", "mul", "div", "maximum", "minimum", "squared_difference",
               "axpy", "where")

CASES = [
    Case("neg", [(5, 7)]),
    Case("exp", [(4, 3, 5)]),
    Case("log", [(6, 7)], kinds=("positive",)),
    Case("sqrt", [(6, 7)], kinds=("positive",)),
    Case("rsqrt", [(2, 3, 4)], kinds=("positive",)),
    Case("reciprocal", [(6, 7)], kinds=("positive",)),
    Case("abs", [(6, 7)]),
    Case("square", [(30,)]),
    Case("sign", [(6, 7)]),
    Case("erf", [(6, 7)]),
    Case("power", [(6, 7)], {"exponent": 3.0}),
    Case("power", [(6, 7)], {"exponent": 0.5}, ("positive",), name="power_sqrt"),
    Case("clip", [(6, 7)], {"lo": -0.5, "hi": 0.75}),
    Case("scale", [(2, 3, 4, 5)], {"alpha": 1.5, "beta": -2.0}),
    Case("add", [(5, 6), (5, 6)]),
    Case("add", [(2, 3, 4, 5), (2, 3, 4, 5)], name="add_4d"),
    Case("sub", [(5, 6), (5, 6)]),
    Case("mul", [(3, 4, 5), (3, 4, 5)]),
    Case("div", [(5, 6), (5, 6)], kinds=("normal", "positive")),
    Case("maximum", [(5, 6), (5, 6)]),
    Case("minimum", [(5, 6), (5, 6)]),
    Case("squared_difference", [(5, 6), (5, 6)]),
    Case("axpy", [(5, 6), (5, 6)], {"alpha": -0.3}),
    Case("where", [(5, 6), (5, 6), (5, 6)], kinds=("mask",)),
    Case("add_row", [(5, 6), (6,)]),
    Case("add_col", [(5, 6), (5,)]),
    Case("mul_row", [(5, 6), (6,)]),
    Case("mul_col", [(5, 6), (5,)]),
    Case("bias_add", [(3, 4, 5), (5,)]),
    Case("bias_add", [(7, 5), (5,)], name="bias_add_2d"),
    Case("bias_add_channel", [(2, 3, 4, 5), (3,)]),
    Case("bias_add_channel", [(2, 3, 6), (3,)], name="bias_add_channel_ncw"),
    Case("mul_scalar_tensor", [(4, 5), (1,)]),
]

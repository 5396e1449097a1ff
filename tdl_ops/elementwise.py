"""Element-wise unary, binary and n-ary operators, and broadcasting variants (any rank via tw.compute).

Each differentiable op declares its gradient rule right after it (``@op.def_grad``); the backward
ops those rules need that are not forward ops elsewhere follow under "gradients"."""

from __future__ import annotations

import math

import numpy as np

import tilewise.tdl as tw
from tilewise._core import GraphError, ShapeError
from tilewise.tdl.registry import ops

from ._cases import Case
from ._util import leading, nary, np_erf

# ---------------------------------------------------------------- unary


@tw.op(reference=lambda x: -x, kernel="neg")
def neg(x):
    """-x."""
    return tw.compute(x.ndim, lambda *i: -x[i])


@neg.def_grad
def _(g, x, out):
    return (neg(g),)


@tw.op(reference=np.exp, kernel="exp")
def exp(x):
    """e**x."""
    return tw.compute(x.ndim, lambda *i: tw.exp(x[i]))


@exp.def_grad
def _(g, x, out):
    return (mul(g, out),)


@tw.op(reference=np.log, kernel="log")
def log(x):
    """Natural logarithm (positive inputs)."""
    return tw.compute(x.ndim, lambda *i: tw.log(x[i]))


@log.def_grad
def _(g, x, out):
    return (div(g, x),)


@tw.op(reference=np.sqrt, kernel="sqrt")
def sqrt(x):
    """Square root (non-negative inputs)."""
    return tw.compute(x.ndim, lambda *i: tw.sqrt(x[i]))


@sqrt.def_grad
def _(g, x, out):
    return (sqrt_grad(g, out),)


@tw.op(reference=lambda x: 1.0 / np.sqrt(x), kernel="rsqrt")
def rsqrt(x):
    """1 / sqrt(x)."""
    return tw.compute(x.ndim, lambda *i: 1.0 / tw.sqrt(x[i]))


@rsqrt.def_grad
def _(g, x, out):
    return (rsqrt_grad(g, out),)


@tw.op(reference=lambda x: 1.0 / x, kernel="reciprocal")
def reciprocal(x):
    """1 / x."""
    return tw.compute(x.ndim, lambda *i: 1.0 / x[i])


@reciprocal.def_grad
def _(g, x, out):
    return (reciprocal_grad(g, out),)


@tw.op(reference=np.abs, kernel="abs")
def abs(x):  # noqa: A001 - op name
    """|x|."""
    return tw.compute(x.ndim, lambda *i: tw.abs(x[i]))


@abs.def_grad
def _(g, x, out):
    return (abs_grad(g, x),)


@tw.op(reference=np.square, kernel="square")
def square(x):
    """x * x."""
    return tw.compute(x.ndim, lambda *i: x[i] * x[i])


@square.def_grad
def _(g, x, out):
    return (square_grad(g, x),)


@tw.op(reference=np.sign, kernel="sign")
def sign(x):
    """-1, 0 or 1 (comparisons are 1.0 / 0.0)."""
    return tw.compute(x.ndim, lambda *i: (x[i] > 0) - (x[i] < 0))


@sign.def_grad
def _(g, x, out):
    return (None,)  # piecewise constant: zero gradient almost everywhere


@tw.op(reference=np_erf, kernel="erf")
def erf(x):
    """Gauss error function."""
    return tw.compute(x.ndim, lambda *i: tw.erf(x[i]))


@erf.def_grad
def _(g, x, out):
    return (erf_grad(g, x),)


@tw.op(reference=lambda x, exponent=2.0: x**exponent, kernel="power")
def power(x, exponent=2.0):
    """x ** exponent (exponent a constant attribute; positive x for fractional exponents)."""
    return tw.compute(x.ndim, lambda *i: x[i] ** exponent)


@power.def_grad
def _(g, x, out, exponent):
    return (power_grad(g, x, exponent=exponent),)


@tw.op(reference=lambda x, lo=-1.0, hi=1.0: np.clip(x, lo, hi), kernel="clip")
def clip(x, lo=-1.0, hi=1.0):
    """min(max(x, lo), hi)."""
    return tw.compute(x.ndim, lambda *i: tw.min(tw.max(x[i], lo), hi))


@clip.def_grad
def _(g, x, out, lo, hi):
    return (clip_grad(g, x, lo=lo, hi=hi),)


@tw.op(reference=lambda x, alpha=1.0, beta=0.0: alpha * x + beta, kernel="scale")
def scale(x, alpha=1.0, beta=0.0):
    """alpha * x + beta."""
    return tw.compute(x.ndim, lambda *i: alpha * x[i] + beta)


@scale.def_grad
def _(g, x, out, alpha, beta):
    return (scale(g, alpha=alpha),)


# ---------------------------------------------------------------- binary, same shape


@tw.op(reference=np.add, kernel="add")
def add(a, b):
    """a + b."""
    return tw.compute(a.ndim, lambda *i: a[i] + b[i])


@add.def_grad
def _(g, a, b, out):
    return g, g


@tw.op(reference=np.subtract, kernel="sub")
def sub(a, b):
    """a - b."""
    return tw.compute(a.ndim, lambda *i: a[i] - b[i])


@sub.def_grad
def _(g, a, b, out):
    return g, neg(g)


@tw.op(reference=np.multiply, kernel="mul")
def mul(a, b):
    """a * b."""
    return tw.compute(a.ndim, lambda *i: a[i] * b[i])


@mul.def_grad
def _(g, a, b, out):
    return mul(g, b), mul(g, a)


@tw.op(reference=np.divide, kernel="div")
def div(a, b):
    """a / b."""
    return tw.compute(a.ndim, lambda *i: a[i] / b[i])


@div.def_grad
def _(g, a, b, out):
    return div(g, b), div_grad_divisor(g, a, b)


@tw.op(reference=np.maximum, kernel="maximum")
def maximum(a, b):
    """Element-wise max(a, b)."""
    return tw.compute(a.ndim, lambda *i: tw.max(a[i], b[i]))


@maximum.def_grad
def _(g, a, b, out):
    return maximum_grad(g, a, b), maximum_grad(g, b, a)


@tw.op(reference=np.minimum, kernel="minimum")
def minimum(a, b):
    """Element-wise min(a, b)."""
    return tw.compute(a.ndim, lambda *i: tw.min(a[i], b[i]))


@minimum.def_grad
def _(g, a, b, out):
    # min(a, b) = -max(-a, -b): a gets dy where a < b, which is maximum_grad with the operands swapped.
    return maximum_grad(g, b, a), maximum_grad(g, a, b)


@tw.op(reference=lambda a, b: (a - b) ** 2, kernel="squared_difference")
def squared_difference(a, b):
    """(a - b) ** 2."""
    return tw.compute(a.ndim, lambda *i: (a[i] - b[i]) ** 2)


@squared_difference.def_grad
def _(g, a, b, out):
    return squared_difference_grad(g, a, b), squared_difference_grad(g, b, a)


@tw.op(reference=lambda x, y, alpha=1.0: alpha * x + y, kernel="axpy")
def axpy(x, y, alpha=1.0):
    """alpha * x + y."""
    return tw.compute(x.ndim, lambda *i: alpha * x[i] + y[i])


@axpy.def_grad
def _(g, x, y, out, alpha):
    return scale(g, alpha=alpha), g


@tw.op(reference=lambda cond, a, b: np.where(cond != 0, a, b), kernel="where")
def where(cond, a, b):
    """Select a where cond != 0 else b."""
    return tw.compute(a.ndim, lambda *i: tw.where(cond[i], a[i], b[i]))


@where.def_grad
def _(g, cond, a, b, out):
    return None, where_grad(cond, g, branch=0), where_grad(cond, g, branch=1)


# ---------------------------------------------------------------- n-ary sum

_ADDS: dict[int, tw.Op] = {}


def _add_n_shape(*shapes):
    first = tuple(shapes[0])
    for k, s in enumerate(shapes):
        if tuple(s) != first:
            raise ShapeError(f"op 'add_{len(shapes)}': input x{k} has shape {tuple(s)}, x0 has {first}; "
                             "the summed tensors must have one shape")
    return first


def _pairwise(terms: list):
    """terms[0] + terms[1] + ... as a balanced tree: depth log2(n), so a sum of hundreds of tensors
    stays a shallow expression for the analyses and the interpreter, which recurse over it."""
    while len(terms) > 1:
        terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k] for k in range(0, len(terms), 2)]
    return terms[0]


def _add_n_body(*xs):
    return tw.compute(xs[0].ndim, lambda *i: _pairwise([x[i] for x in xs]))


def add_n(n: int) -> tw.Op:
    """The op ``add_<n>``: the element-wise sum of n same-shape tensors x0..x{n-1}, any rank.

    Autodiff sums the gradient contributions of a tensor with one (not a chain of ``add``). A TDL op
    has a fixed number of inputs, so each arity is its own op, made on first use (``tdl_ops.nary_op``
    makes one from its name for a graph loaded from JSON). Its gradient rule passes the output's
    gradient to every input.

        >>> add_n(3).evaluate(np.ones(2), np.arange(2.0), np.ones(2)).tolist()
        [2.0, 3.0]
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise GraphError(f"add_n sums at least one tensor, got {n!r}")
    op = _ADDS.get(n)
    if op is None:
        name = f"add_{n}"
        op = tw.op(nary(n, _add_n_body, name, {}), name=name, reference=lambda *xs: sum(xs[1:], xs[0]),
                   out_shape=_add_n_shape, kernel="add_n")

        def grad(g, *xs, out=None):
            return (g,) * len(xs)
        op.def_grad(grad)
        _ADDS[n] = op
    return op


# The members with test cases (and so in tdl_ops.ALL); every other arity is made on first use.
add_2 = add_n(2)
add_3 = add_n(3)


# ---------------------------------------------------------------- broadcasting


@tw.op(reference=lambda x, r: x + r[None, :], kernel="add_row")
def add_row(x, r):
    """x[i, j] + r[j] (row vector broadcast over rows)."""
    return lambda i, j: x[i, j] + r[j]


@add_row.def_grad
def _(g, x, r, out):
    return g, ops.sum_axes(g, axes=(0,))


@tw.op(reference=lambda x, c: x + c[:, None], kernel="add_col")
def add_col(x, c):
    """x[i, j] + c[i] (column vector broadcast over columns)."""
    return lambda i, j: x[i, j] + c[i]


@add_col.def_grad
def _(g, x, c, out):
    return g, ops.sum_axes(g, axes=(1,))


@tw.op(reference=lambda x, r: x * r[None, :], kernel="mul_row")
def mul_row(x, r):
    """x[i, j] * r[j]."""
    return lambda i, j: x[i, j] * r[j]


@mul_row.def_grad
def _(g, x, r, out):
    return mul_row(g, r), ops.sum_axes(mul(g, x), axes=(0,))


@tw.op(reference=lambda x, c: x * c[:, None], kernel="mul_col")
def mul_col(x, c):
    """x[i, j] * c[i]."""
    return lambda i, j: x[i, j] * c[i]


@mul_col.def_grad
def _(g, x, c, out):
    return mul_col(g, c), ops.sum_axes(mul(g, x), axes=(1,))


@tw.op(reference=lambda x, b: x + b, kernel="bias_add")
def bias_add(x, b):
    """x + b over the last axis, any rank."""
    return tw.compute(x.ndim, lambda *i: x[i] + b[i[-1]])


@bias_add.def_grad
def _(g, x, b, out):
    return g, (ops.sum_axes(g, axes=leading(x.ndim)) if x.ndim > 1 else g)


@tw.op(reference=lambda x, b: x + b.reshape((1, -1) + (1,) * (x.ndim - 2)), kernel="bias_add_channel")
def bias_add_channel(x, b):
    """x + b over the channel axis 1 (NCHW, NCW, ...)."""
    return tw.compute(x.ndim, lambda *i: x[i] + b[i[1]])


@bias_add_channel.def_grad
def _(g, x, b, out):
    return g, ops.sum_axes(g, axes=(0,) + tuple(range(2, x.ndim)))


@tw.op(reference=lambda x, s: x * s[0], kernel="mul_scalar_tensor")
def mul_scalar_tensor(x, s):
    """x * s[0] with s a one-element tensor (e.g. a loss scale)."""
    return tw.compute(x.ndim, lambda *i: x[i] * s[0])


@mul_scalar_tensor.def_grad
def _(g, x, s, out):
    return mul_scalar_tensor(g, s), sum_product(g, x)


# ---------------------------------------------------------------- gradients


@tw.op(reference=lambda x, value=1.0: np.full(np.shape(x), value), out_shape=lambda x, value=1.0: tuple(x),
       kernel="fill_like")
def fill_like(x, value=1.0):
    """A tensor of x's shape filled with value; reads nothing of x (the seed of a backward pass)."""
    return tw.compute(x.ndim, lambda *i: value)


@fill_like.def_grad
def _(g, x, out, value):
    return (None,)  # a constant


@tw.op(reference=lambda dy, y: 0.5 * dy / y, kernel="sqrt_grad")
def sqrt_grad(dy, y):
    """dy / (2 y), y = sqrt(x) the forward output."""
    return tw.compute(y.ndim, lambda *i: 0.5 * dy[i] / y[i])


@tw.op(reference=lambda dy, y: -0.5 * dy * y**3, kernel="rsqrt_grad")
def rsqrt_grad(dy, y):
    """-dy y**3 / 2, y = 1 / sqrt(x) the forward output."""
    return tw.compute(y.ndim, lambda *i: -0.5 * dy[i] * y[i] * y[i] * y[i])


@tw.op(reference=lambda dy, y: -dy * y * y, kernel="reciprocal_grad")
def reciprocal_grad(dy, y):
    """-dy y**2, y = 1 / x the forward output."""
    return tw.compute(y.ndim, lambda *i: -dy[i] * y[i] * y[i])


@tw.op(reference=lambda dy, x: dy * np.sign(x), kernel="abs_grad")
def abs_grad(dy, x):
    """dy sign(x) (0 at x = 0, like PyTorch)."""
    return tw.compute(x.ndim, lambda *i: dy[i] * ((x[i] > 0) - (x[i] < 0)))


@tw.op(reference=lambda dy, x: 2.0 * dy * x, kernel="square_grad")
def square_grad(dy, x):
    """2 dy x."""
    return tw.compute(x.ndim, lambda *i: 2.0 * dy[i] * x[i])


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


@tw.op(reference=lambda dy, x: dy * _TWO_OVER_SQRT_PI * np.exp(-x * x), kernel="erf_grad")
def erf_grad(dy, x):
    """dy 2 / sqrt(pi) exp(-x**2)."""
    return tw.compute(x.ndim, lambda *i: dy[i] * _TWO_OVER_SQRT_PI * tw.exp(-x[i] * x[i]))


@tw.op(reference=lambda dy, x, exponent=2.0: dy * exponent * x ** (exponent - 1.0), kernel="power_grad")
def power_grad(dy, x, exponent=2.0):
    """dy exponent x**(exponent - 1)."""
    return tw.compute(x.ndim, lambda *i: dy[i] * exponent * x[i] ** (exponent - 1.0))


@tw.op(reference=lambda dy, x, lo=-1.0, hi=1.0: np.where((x >= lo) & (x <= hi), dy, 0.0), kernel="clip_grad")
def clip_grad(dy, x, lo=-1.0, hi=1.0):
    """dy where lo <= x <= hi (bounds included, like torch.clamp)."""
    return tw.compute(x.ndim, lambda *i: dy[i] * (x[i] >= lo) * (x[i] <= hi))


@tw.op(reference=lambda dy, a, b: -dy * a / (b * b), kernel="div_grad_divisor")
def div_grad_divisor(dy, a, b):
    """-dy a / b**2: the gradient of a / b with respect to b."""
    return tw.compute(a.ndim, lambda *i: -dy[i] * a[i] / (b[i] * b[i]))


@tw.op(reference=lambda dy, a, b: dy * ((a > b) + 0.5 * (a == b)), kernel="maximum_grad")
def maximum_grad(dy, a, b):
    """Gradient of max(a, b) with respect to a: dy where a > b, dy / 2 on ties (like PyTorch)."""
    return tw.compute(a.ndim, lambda *i: dy[i] * ((a[i] > b[i]) + 0.5 * (a[i] == b[i])))


@tw.op(reference=lambda dy, a, b: 2.0 * dy * (a - b), kernel="squared_difference_grad")
def squared_difference_grad(dy, a, b):
    """2 dy (a - b): the gradient of (a - b)**2 with respect to a."""
    return tw.compute(a.ndim, lambda *i: 2.0 * dy[i] * (a[i] - b[i]))


@tw.op(reference=lambda cond, dy, branch=0: np.where((cond != 0) == (branch == 0), dy, 0.0), kernel="where_grad")
def where_grad(cond, dy, branch=0):
    """dy where the select took `branch` (0: cond != 0, the first value; 1: the second), else 0."""
    if branch == 0:
        return tw.compute(dy.ndim, lambda *i: tw.where(cond[i], dy[i], 0.0))
    return tw.compute(dy.ndim, lambda *i: tw.where(cond[i], 0.0, dy[i]))


@tw.op(reference=lambda a, b: np.asarray([(a * b).sum()]), out_shape=lambda a, b: (1,), kernel="sum_product")
def sum_product(a, b):
    """sum(a * b) as a one-element tensor (the gradient of a one-element scale factor)."""
    return lambda _: tw.Sum(lambda *k: a[k] * b[k], ndim=a.ndim)



# Ops that read every input exactly at the output index (op.is_elementwise).
ELEMENTWISE = ("neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "abs", "square", "sign", "erf", "power",
               "clip", "scale", "add", "sub", "mul", "div", "maximum", "minimum", "squared_difference",
               "axpy", "where", "add_2", "add_3", "sqrt_grad", "rsqrt_grad", "reciprocal_grad", "abs_grad",
               "square_grad", "erf_grad", "power_grad", "clip_grad", "div_grad_divisor", "maximum_grad",
               "squared_difference_grad", "where_grad")

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
    Case("add_2", [(), ()], name="add_2_scalar"),
    Case("add_2", [(7,), (7,)]),
    Case("add_3", [(5, 6), (5, 6), (5, 6)]),
    Case("add_3", [(2, 3, 4, 5)] * 3, name="add_3_4d"),
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
    Case("fill_like", [(3, 4)], {"value": 1.0}),
    Case("fill_like", [(2, 3, 2)], {"value": -2.5}, name="fill_like_3d"),
    Case("sqrt_grad", [(5, 6), (5, 6)], kinds=("normal", "positive")),
    Case("rsqrt_grad", [(5, 6), (5, 6)], kinds=("normal", "positive")),
    Case("reciprocal_grad", [(5, 6), (5, 6)]),
    Case("abs_grad", [(5, 6), (5, 6)]),
    Case("square_grad", [(5, 6), (5, 6)]),
    Case("erf_grad", [(5, 6), (5, 6)]),
    Case("power_grad", [(5, 6), (5, 6)], {"exponent": 0.5}, ("normal", "positive")),
    Case("clip_grad", [(5, 6), (5, 6)], {"lo": -0.5, "hi": 0.75}),
    Case("div_grad_divisor", [(5, 6), (5, 6), (5, 6)], kinds=("normal", "normal", "positive")),
    Case("maximum_grad", [(5, 6), (5, 6), (5, 6)]),
    Case("squared_difference_grad", [(5, 6), (5, 6), (5, 6)]),
    Case("where_grad", [(5, 6), (5, 6)], kinds=("mask",)),
    Case("where_grad", [(2, 3, 4), (2, 3, 4)], {"branch": 1}, ("mask",), name="where_grad_second"),
    Case("sum_product", [(4, 5), (4, 5)]),
]

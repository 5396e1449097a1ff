"""The table of conversion rules: one rule per ONNX operator type (STYLE: one transfer rule per
operator kind), and the element-wise, matrix-product and reduction rules.

A rule is ``rule(ctx, n) -> value`` (a tuple for several outputs): ``n`` is the node
(``n.inputs``, ``n.attr("axis", default)``, ``n.opset``, ``n.out_shapes``), ``ctx`` the Converter
(``ctx.emit(op, *values, **attrs)``, ``ctx.view``, ``ctx.known``, ``ctx.scalar``). A rule that
cannot honour an attribute or an input raises ``Unsupported(reason)``: nothing is approximated.
The other families (``_rules_layers``, ``_rules_shape``) register into the same table; take the
complete table from ``_table``.

Broadcasting uses the library's helpers (``tdl_ops.torch_extra.broadcast_shape``,
``bcast_axes``), as ``from_torch``'s rules do: ONNX and NumPy broadcast alike.
"""

from __future__ import annotations

import math

import numpy as np

import tdl_ops as T

from ._convert import Known, Unsupported


class RuleTable:
    """ONNX operator types -> conversion rules, with a one-line summary each (for the docs)."""

    def __init__(self):
        self._rules: dict = {}
        self.summary: dict = {}

    def register(self, *op_types, doc: str | None = None):
        def wrap(fn):
            for t in op_types:
                if t in self._rules:
                    raise RuntimeError(f"two rules for {t}")
                self._rules[t] = fn
                self.summary[t] = doc or (fn.__doc__ or "").strip().splitlines()[0]
            return fn
        return wrap

    def lookup(self, op_type):
        return self._rules.get(op_type)

    def __contains__(self, op_type):
        return op_type in self._rules


RULES = RuleTable()
rule = RULES.register

_FLT_MAX = float(np.finfo(np.float32).max)


def axis(d, ndim) -> int:
    """An ONNX axis (negative counts from the end) as 0..ndim-1."""
    d = int(d)
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise Unsupported(f"axis {d} out of range for rank {ndim}")
    return d % max(ndim, 1)


def bshape(*shapes) -> tuple:
    try:
        return T.torch_extra.broadcast_shape(*shapes)
    except ValueError:
        raise Unsupported(f"shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast") from None


def expand_to(ctx, x, shape):
    shape = tuple(shape)
    if ctx.shape(x) == shape:
        return x
    return ctx.emit(T.expand, x, shape=shape, bcast=T.torch_extra.bcast_axes(ctx.shape(x), shape))


# ---------------------------------------------------------------- element-wise

_UNARY = {"Relu": T.relu, "Sigmoid": T.sigmoid, "Tanh": T.tanh, "Exp": T.exp, "Log": T.log, "Sqrt": T.sqrt,
          "Neg": T.neg, "Abs": T.abs, "Erf": T.erf, "Reciprocal": T.reciprocal, "Sign": T.sign,
          "Softplus": T.softplus}


def _unary_rule(op):
    def convert(ctx, n):
        return ctx.emit(op, n.inputs[0])
    convert.__doc__ = op.name
    return convert


for _type, _op in _UNARY.items():
    rule(_type)(_unary_rule(_op))


@rule("Identity")
def _identity(ctx, n):
    """the input itself"""
    return n.inputs[0]


@rule("Cast", "CastLike")
def _cast(ctx, n):
    """the input itself (to float32; an integer or bool graph tensor to int64: itself too), or identity
    (an integer or bool graph tensor to float32: ops read integer operands as float32)"""
    to = n.attr("to") if n.op_type == "Cast" else None
    x = n.inputs[0]
    if n.op_type == "CastLike":
        like = n.inputs[1]
        to = 1 if not isinstance(like, Known) or like.value.dtype == np.float32 else -1
    integer = not isinstance(x, Known) and x.dtype in ("int64", "int32", "bool")
    if integer and to == 7:
        return x
    if to != 1:
        raise Unsupported("a cast to a type other than float32")
    if isinstance(x, Known) and x.value.dtype != np.float32:
        return Known(x.value.astype(np.float32), x.name)
    if integer:
        return ctx.emit(T.identity, x)
    return x


@rule("Dropout")
def _dropout(ctx, n):
    """the input (inference: dropout is the identity)"""
    training = n.input(2)
    if training is not None and ctx.scalar(training) != 0.0:
        raise Unsupported("dropout in training mode (training_mode=True)")
    if n.wants(1):
        raise Unsupported("the mask output")
    return n.inputs[0]


@rule("Gelu")
def _gelu(ctx, n):
    """gelu (approximate='none') / gelu_tanh (approximate='tanh')"""
    return ctx.emit(T.gelu_tanh if n.attr("approximate", "none") == "tanh" else T.gelu, n.inputs[0])


@rule("LeakyRelu")
def _leaky_relu(ctx, n):
    """leaky_relu"""
    return ctx.emit(T.leaky_relu, n.inputs[0], slope=float(n.attr("alpha", 0.01)))


@rule("Elu")
def _elu(ctx, n):
    """elu"""
    return ctx.emit(T.elu, n.inputs[0], alpha=float(n.attr("alpha", 1.0)))


@rule("Selu")
def _selu(ctx, n):
    """elu, then scale by gamma"""
    y = ctx.emit(T.elu, n.inputs[0], alpha=float(n.attr("alpha", 1.67326319217681884765625)))
    return ctx.emit(T.scale, y, alpha=float(n.attr("gamma", 1.05070102214813232421875)), beta=0.0)


@rule("HardSigmoid")
def _hard_sigmoid(ctx, n):
    """scale (alpha * x + beta), clip to [0, 1]"""
    y = ctx.emit(T.scale, n.inputs[0], alpha=float(n.attr("alpha", 0.2)), beta=float(n.attr("beta", 0.5)))
    return ctx.emit(T.clip, y, lo=0.0, hi=1.0)


@rule("HardSwish")
def _hard_swish(ctx, n):
    """x * clip(x / 6 + 1/2, 0, 1)"""
    x = n.inputs[0]
    y = ctx.emit(T.clip, ctx.emit(T.scale, x, alpha=1.0 / 6.0, beta=0.5), lo=0.0, hi=1.0)
    return ctx.emit(T.mul, x, y)


@rule("Mish")
def _mish(ctx, n):
    """x * tanh(softplus(x))"""
    x = n.inputs[0]
    return ctx.emit(T.mul, x, ctx.emit(T.tanh, ctx.emit(T.softplus, x)))


@rule("PRelu")
def _prelu(ctx, n):
    """relu(x) - slope * relu(-x) (slope broadcast): x where x > 0, slope * x elsewhere, exactly"""
    x, slope = n.inputs
    neg = ctx.emit(T.relu, ctx.emit(T.neg, x))
    return binary(ctx, "sub", ctx.emit(T.relu, x), binary(ctx, "mul", slope, neg))


@rule("Softsign")
def _softsign(ctx, n):
    """x / (1 + |x|)"""
    x = n.inputs[0]
    return ctx.emit(T.div, x, ctx.emit(T.scale, ctx.emit(T.abs, x), alpha=1.0, beta=1.0))


@rule("Celu")
def _celu(ctx, n):
    """alpha * elu(x / alpha)"""
    alpha = float(n.attr("alpha", 1.0))
    if alpha == 1.0:
        return ctx.emit(T.elu, n.inputs[0], alpha=1.0)
    y = ctx.emit(T.elu, ctx.emit(T.scale, n.inputs[0], alpha=1.0 / alpha, beta=0.0), alpha=1.0)
    return ctx.emit(T.scale, y, alpha=alpha, beta=0.0)


@rule("Swish")
def _swish(ctx, n):
    """silu (alpha 1), else x * sigmoid(alpha * x)"""
    x, alpha = n.inputs[0], float(n.attr("alpha", 1.0))
    if alpha == 1.0:
        return ctx.emit(T.silu, x)
    return ctx.emit(T.mul, x, ctx.emit(T.sigmoid, ctx.emit(T.scale, x, alpha=alpha, beta=0.0)))


@rule("Clip")
def _clip(ctx, n):
    """clip (a missing bound infinite)"""
    x = n.inputs[0]
    if n.opset < 11:
        lo, hi = n.attr("min", -_FLT_MAX), n.attr("max", _FLT_MAX)
        lo = None if lo <= -_FLT_MAX else float(lo)
        hi = None if hi >= _FLT_MAX else float(hi)
    else:
        lo, hi = (None if n.input(k) is None else _bound(ctx, n.input(k), name) for k, name in ((1, "min"), (2, "max")))
    if lo is None and hi is None:
        return x
    return ctx.emit(T.clip, x, lo=-math.inf if lo is None else lo, hi=math.inf if hi is None else hi)


def _bound(ctx, v, name):
    s = ctx.scalar(v)
    if s is None:
        raise Unsupported(f"a {name} bound computed by the graph (it must be known when importing)")
    return float(s)


@rule("Pow")
def _pow(ctx, n):
    """square / sqrt / reciprocal / power by a known scalar exponent"""
    x, e = n.inputs
    s = ctx.scalar(e)
    if s is None:
        raise Unsupported("an exponent that is a tensor (only a known scalar exponent)")
    if ctx.shape(x) != n.out_shapes[0] and n.out_shapes[0] is not None:
        x = expand_to(ctx, x, n.out_shapes[0])
    if s == 1:
        return x
    special = {2.0: T.square, 0.5: T.sqrt, -1.0: T.reciprocal, -0.5: T.rsqrt}
    if s in special:
        return ctx.emit(special[s], x)
    return ctx.emit(T.power, x, exponent=float(s))


# Binary ops: same shapes -> the element-wise op; broadcasting -> broadcast_*; a known scalar -> scale.
_SAME = {"add": T.add, "sub": T.sub, "mul": T.mul, "div": T.div, "maximum": T.maximum, "minimum": T.minimum}
_BROADCAST = {"add": T.broadcast_add, "sub": T.broadcast_sub, "mul": T.broadcast_mul, "div": T.broadcast_div,
              "maximum": T.broadcast_maximum, "minimum": T.broadcast_minimum}


def _with_scalar(ctx, kind, x, s, scalar_first):
    """x (a tensor) combined with the number s, as one scale op where that is exact."""
    if kind == "add":
        return ctx.emit(T.scale, x, alpha=1.0, beta=s)
    if kind == "sub":
        return ctx.emit(T.scale, x, alpha=-1.0 if scalar_first else 1.0, beta=s if scalar_first else -s)
    if kind == "mul":
        return ctx.emit(T.scale, x, alpha=s, beta=0.0)
    if kind == "div" and not scalar_first and s != 0 and math.frexp(s)[0] == 0.5:
        return ctx.emit(T.scale, x, alpha=1.0 / s, beta=0.0)  # a power of two: x * (1/s) is x / s exactly
    return None


def binary(ctx, kind, x, y):
    """x <kind> y with NumPy broadcasting."""
    sx, sy = ctx.scalar(x), ctx.scalar(y)
    out = bshape(ctx.shape(x), ctx.shape(y))
    if sy is not None and not isinstance(x, Known) and ctx.shape(x) == out:
        r = _with_scalar(ctx, kind, x, sy, False)
        if r is not None:
            return r
    if sx is not None and not isinstance(y, Known) and ctx.shape(y) == out:
        r = _with_scalar(ctx, kind, y, sx, True)
        if r is not None:
            return r
    shx, shy = ctx.shape(x), ctx.shape(y)
    if shx == shy == out:
        return ctx.emit(_SAME[kind], x, y)
    native = _native_broadcast(ctx, kind, x, y, shx, shy, out)
    if native is not None:
        return native
    return ctx.emit(_BROADCAST[kind], x, y, a_bcast=T.torch_extra.bcast_axes(shx, out),
                    b_bcast=T.torch_extra.bcast_axes(shy, out))


def _native_broadcast(ctx, kind, x, y, shx, shy, out):
    """x + y and x - y with y a vector along the last or the channel axis, as ops with native
    kernels (bias_add, bias_add_channel; x - y as x + (-y), which IEEE arithmetic makes equal)."""
    if kind not in ("add", "sub") or shx != out or len(out) < 2:
        return None
    ones = tuple(d for d, n in enumerate(shy) if n != 1)
    lead = len(out) - len(shy)
    if len(ones) != 1 or shy[ones[0]] != out[lead + ones[0]]:
        return None
    a = lead + ones[0]
    op = T.bias_add if a == len(out) - 1 else T.bias_add_channel if a == 1 else None
    if op is None:
        return None
    b = ctx.view(y, (out[a],))
    if kind == "sub":
        b = Known(-b.value, b.name) if isinstance(b, Known) and not b.initializer else ctx.emit(T.neg, b)
    return ctx.emit(op, x, b)


def _float_only(ctx, n):
    for v in n.inputs:
        if isinstance(v, Known) and v.value.dtype.kind not in "f" and v.value.size > 1:
            raise Unsupported(f"integer operands ('{v.name}' is {v.value.dtype})")


def _binary_rule(kind):
    def convert(ctx, n):
        _float_only(ctx, n)
        return binary(ctx, kind, n.inputs[0], n.inputs[1])
    convert.__doc__ = f"{_SAME[kind].name} / {_BROADCAST[kind].name} / scale (a known scalar operand)"
    return convert


for _type, _kind in {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}.items():
    rule(_type)(_binary_rule(_kind))


def _variadic(kind):
    def convert(ctx, n):
        _float_only(ctx, n)
        xs = [v for v in n.inputs if v is not None]
        y = xs[0]
        for x in xs[1:]:
            y = binary(ctx, kind, y, x)
        return y
    return convert


rule("Max", doc="maximum / broadcast_maximum, pairwise")(_variadic("maximum"))
rule("Min", doc="minimum / broadcast_minimum, pairwise")(_variadic("minimum"))
rule("Sum", doc="add / broadcast_add, pairwise")(_variadic("add"))


@rule("Mean")
def _mean(ctx, n):
    """add / broadcast_add pairwise, then divided by n"""
    xs = [v for v in n.inputs if v is not None]
    y = _variadic("add")(ctx, n)
    if len(xs) == 1:
        return y
    return binary(ctx, "div", y, Known(np.asarray(len(xs), np.float32), f"{n.name}.count"))


@rule("Where")
def _where(ctx, n):
    """where (condition, both branches expanded to the output shape)"""
    cond, x, y = n.inputs
    out = bshape(ctx.shape(cond), ctx.shape(x), ctx.shape(y))
    c = expand_to(ctx, ctx.mask(cond), out)
    return ctx.emit(T.where, c, expand_to(ctx, x, out), expand_to(ctx, y, out))


# ---------------------------------------------------------------- matrix products


@rule("MatMul")
def _matmul(ctx, n):
    """matmul / matmul_nd / batch_matmul / bmatmul by ranks, batch axes broadcast with expand"""
    x, y = n.inputs
    sx, sy = ctx.shape(x), ctx.shape(y)
    if len(sx) == 1 and len(sy) == 1:
        r = ctx.emit(T.matmul, ctx.view(x, (1, sx[0])), ctx.view(y, (sy[0], 1)))
        return ctx.view(r, ())
    if len(sy) == 1:  # matrix-vector: y as a column
        r = _matmul2(ctx, x, ctx.view(y, (sy[0], 1)), sx, (sy[0], 1))
        return ctx.view(r, tuple(sx[:-1]))
    if len(sx) == 1:
        r = _matmul2(ctx, ctx.view(x, (1, sx[0])), y, (1, sx[0]), sy)
        return ctx.view(r, tuple(sy[:-2]) + (sy[-1],))
    return _matmul2(ctx, x, y, sx, sy)


def _matmul2(ctx, x, y, sx, sy):
    if len(sx) == 2 and len(sy) == 2:
        return ctx.emit(T.matmul, x, y)
    if len(sy) == 2:
        return ctx.emit(T.matmul_nd, x, y)
    batch = bshape(sx[:-2], sy[:-2])
    x = expand_to(ctx, x, batch + tuple(sx[-2:]))
    y = expand_to(ctx, y, batch + tuple(sy[-2:]))
    return ctx.emit(T.batch_matmul if len(batch) == 1 else T.bmatmul, x, y)


@rule("Gemm")
def _gemm(ctx, n):
    """linear (transB, bias of N) / matmul_{nn,tn,nt,tt}, scale by alpha, + beta * C broadcast"""
    a, b = n.inputs[0], n.inputs[1]
    c = n.input(2)
    ta, tb = int(n.attr("transA", 0)), int(n.attr("transB", 0))
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    m = ctx.shape(a)[1 if ta else 0]
    nn = ctx.shape(b)[0 if tb else 1]
    if c is not None and beta == 0.0:
        c = None
    if not ta and tb and alpha == 1.0 and (c is None or (beta == 1.0 and ctx.shape(c) == (nn,))):
        return ctx.emit(T.linear, a, b, c) if c is not None else ctx.emit(T.linear_nobias, a, b)
    op = {(0, 0): T.matmul, (1, 0): T.matmul_tn, (0, 1): T.matmul_nt, (1, 1): T.matmul_tt}[(ta, tb)]
    y = ctx.emit(op, a, b)
    if alpha != 1.0:
        y = ctx.emit(T.scale, y, alpha=alpha, beta=0.0)
    if c is None:
        return y
    if beta != 1.0:
        s = ctx.scalar(c)
        c = Known(np.asarray(beta * np.float32(s), np.float32).reshape(ctx.shape(c)), c.name) if s is not None \
            else ctx.emit(T.scale, c, alpha=beta, beta=0.0)
    bshape(ctx.shape(c), (m, nn))
    return binary(ctx, "add", y, c)


# ---------------------------------------------------------------- reductions


def reduce_axes(ctx, n, x, since: int):
    """The axes to reduce: the ``axes`` attribute (before opset ``since``) or input 1 (from it)."""
    ndim = len(ctx.shape(x))
    if n.opset < since:
        axes = n.attr("axes")
    else:
        axes = None if n.input(1) is None else ctx.ints(n.input(1), "the axes")
    if not axes:
        if n.opset >= since and int(n.attr("noop_with_empty_axes", 0)):
            return ()
        return tuple(range(ndim))
    return tuple(sorted({axis(d, ndim) for d in axes}))


def reduce(ctx, n, x, axes, op):
    """op along each axis (one axis of all the elements when every axis is reduced), keepdims by a view."""
    shape = ctx.shape(x)
    if any(shape[d] == 0 for d in axes):
        raise Unsupported("a reduction over an empty axis")
    keep = int(n.attr("keepdims", 1))
    out = tuple(1 if d in axes else s for d, s in enumerate(shape)) if keep else \
        tuple(s for d, s in enumerate(shape) if d not in axes)
    if not axes:
        return x
    if op in (T.reduce_sum, T.reduce_mean):
        # One sum over every reduced axis (sum_axes has a native kernel); a mean divides by the count.
        y = ctx.emit(T.sum_axes, x, axes=tuple(axes))
        if op is T.reduce_mean:
            y = ctx.emit(T.scale, y, alpha=1.0 / int(np.prod([shape[d] for d in axes])), beta=0.0)
    else:
        y = x
        if len(axes) == len(shape) and len(shape) > 1:
            y, axes = ctx.view(x, (int(np.prod(shape)),)), (0,)
        for d in sorted(axes, reverse=True):
            y = ctx.emit(op, y, axis=d)
    return ctx.view(y, out)


def _reduction(op, since, pre=None, post=None, doc=""):
    def convert(ctx, n):
        x = n.inputs[0]
        axes = reduce_axes(ctx, n, x, since)
        if pre is not None:
            x = ctx.emit(pre, x)
        y = reduce(ctx, n, x, axes, op)
        if post is not None:
            y = ctx.emit(post, y)
        return y
    convert.__doc__ = doc or f"{op.name} along each reduced axis"
    return convert


rule("ReduceSum")(_reduction(T.reduce_sum, 13))
rule("ReduceMean")(_reduction(T.reduce_mean, 18))
rule("ReduceMax")(_reduction(T.reduce_max, 18))
rule("ReduceMin")(_reduction(T.reduce_min, 18))
rule("ReduceProd")(_reduction(T.reduce_prod, 18))
rule("ReduceSumSquare")(_reduction(T.reduce_sum, 18, pre=T.square, doc="square, reduce_sum along each axis"))
rule("ReduceL1")(_reduction(T.reduce_sum, 18, pre=T.abs, doc="abs, reduce_sum along each axis"))
rule("ReduceL2")(_reduction(T.reduce_sum, 18, pre=T.square, post=T.sqrt, doc="square, reduce_sum, sqrt"))
rule("ReduceLogSum")(_reduction(T.reduce_sum, 18, post=T.log, doc="reduce_sum along each axis, log"))
rule("ReduceLogSumExp")(_reduction(T.logsumexp, 18, doc="logsumexp along each reduced axis"))

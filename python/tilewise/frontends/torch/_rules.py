"""The table of conversion rules: one rule per kind of ATen operator (STYLE: one transfer rule per
operator kind, as JAX's ``primitive_batchers[p] = rule``).

A rule is ``rule(ctx, a) -> value``: ``a`` holds the node's arguments by schema name with
defaults filled in (``a.input``, ``a.stride``) and positionally (``a[0]``); ``ctx`` is the
Converter (``ctx.emit(op, *tensors, **attrs)``, ``ctx.view``, ``ctx.scalar``, ``ctx.out_shape``).
A rule that cannot express its arguments raises ``Unsupported(reason)``. The torch op it maps
is looked up by overload (``aten.add.Tensor``), then by packet (``aten.add``); in-place variants
(``aten.relu_``) use their functional rule and rebind the mutated tensor.

``_table.TABLE`` (used for the docs and the report) lists every target with a one-line summary;
``_table`` also imports the other rule families, so take the complete table from there.
"""

from __future__ import annotations

import math

import torch

import tdl_ops as T

from ._convert import Const, Unsupported, prod

aten = torch.ops.aten


class RuleTable:
    """ATen overloads or packets -> conversion rules."""

    def __init__(self):
        self._rules: dict = {}
        self.summary: dict = {}

    def register(self, *targets, doc: str | None = None):
        def wrap(fn):
            for t in targets:
                if t is None:
                    continue
                if t in self._rules:
                    raise RuntimeError(f"two rules for {t}")
                self._rules[t] = fn
                self.summary[str(t)] = doc or (fn.__doc__ or "").strip().splitlines()[0]
            return fn
        return wrap

    def lookup(self, target):
        rule = self._rules.get(target)
        if rule is not None:
            return rule
        packet = getattr(target, "overloadpacket", None)
        if packet is None:
            return None
        rule = self._rules.get(packet)
        if rule is not None:
            return rule
        name = packet.__name__
        if name.endswith("_") and not name.endswith("__"):  # in-place variant: relu_ -> relu
            functional = getattr(aten, name[:-1], None)
            if functional is not None:
                overload = getattr(functional, target._overloadname, None)
                return self._rules.get(overload) or self._rules.get(functional)
        return None

    def __contains__(self, target):
        return self.lookup(target) is not None


RULES = RuleTable()
rule = RULES.register


def _opt(packet, overload):
    """An overload if this torch build has it (rules for ops missing in older releases are skipped)."""
    p = getattr(aten, packet, None)
    return getattr(p, overload, None) if p is not None else None


def _first(a):
    return a[0] if a._positional else next(iter(vars(a).values()))


def _axis(d, ndim) -> int:
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise Unsupported(f"dimension {d} out of range for rank {ndim}")
    return d % max(ndim, 1)


def _pair(v, what) -> int:
    """One int from an int or an (h, w) pair; TDL's 2-D ops take equal height and width values."""
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return int(v[0])
        if len({int(x) for x in v}) != 1:
            raise Unsupported(f"{what}={list(v)}: only equal values for height and width")
        return int(v[0])
    return int(v)


def _bcast(shape, out) -> tuple:
    return T.torch_extra.bcast_axes(shape, out)


def _finite(v: float) -> float:
    """±inf as the extreme float32 values (graph attributes are JSON numbers; exp() of both is 0)."""
    if math.isinf(v):
        return math.copysign(float(torch.finfo(torch.float32).max), v)
    return float(v)


# ---------------------------------------------------------------- no-ops


@rule(aten.contiguous.default, aten.clone.default, aten.alias.default, aten.detach.default,
      aten.lift_fresh_copy.default, aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout,
      aten.to.device, aten.to.other, aten.type_as.default)
def _identity(ctx, a):
    """the input itself (copies and dtype casts change no values the planner sees)"""
    return _first(a)


@rule(aten.sym_size.int)
def _sym_size(ctx, a):
    """an extent, static after export"""
    return ctx.shape(a[0])[a[1]]


# ---------------------------------------------------------------- element-wise


_UNARY = {
    aten.relu: T.relu, aten.sigmoid: T.sigmoid, aten.tanh: T.tanh, aten.exp: T.exp, aten.log: T.log,
    aten.sqrt: T.sqrt, aten.rsqrt: T.rsqrt, aten.neg: T.neg, aten.abs: T.abs, aten.erf: T.erf,
    aten.silu: T.silu, aten.reciprocal: T.reciprocal, aten.square: T.square, aten.sign: T.sign,
    aten.relu6: T.relu6,
}


def _unary_rule(op):
    def convert(ctx, a):
        return ctx.emit(op, _first(a))
    convert.__doc__ = f"{op.name}"
    return convert


for _packet, _op in _UNARY.items():
    rule(_packet)(_unary_rule(_op))


@rule(aten.gelu.default)
def _gelu(ctx, a):
    """gelu (approximate='none') or gelu_tanh (approximate='tanh')"""
    return ctx.emit(T.gelu_tanh if a.approximate == "tanh" else T.gelu, a.self)


@rule(aten.hardtanh.default)
def _hardtanh(ctx, a):
    """relu6 for (0, 6), else hardtanh (gradient 0 at the bounds, as torch's)"""
    lo, hi = float(a.min_val), float(a.max_val)
    if (lo, hi) == (0.0, 6.0):
        return ctx.emit(T.relu6, a.self)
    return ctx.emit(T.hardtanh, a.self, lo=lo, hi=hi)


def _clip(ctx, x, lo, hi):
    """clip to [lo, hi], a missing bound infinite (torch.clamp: gradient dy at the bounds, 0 at NaN)"""
    if lo is None and hi is None:
        raise Unsupported("clamp with neither min nor max")
    for bound in (lo, hi):
        if bound is not None and ctx.scalar(bound) is None:
            raise Unsupported("clamp with a tensor bound (only numbers)")
    lo = -math.inf if lo is None else float(ctx.scalar(lo))
    hi = math.inf if hi is None else float(ctx.scalar(hi))
    return ctx.emit(T.clip, x, lo=lo, hi=hi)


@rule(aten.clamp.default)
def _clamp(ctx, a):
    """clip (a missing bound infinite)"""
    return _clip(ctx, a.self, a.min, a.max)


@rule(aten.clamp_min.default)
def _clamp_min(ctx, a):
    """clip to [min, inf)"""
    return _clip(ctx, a.self, a.min, None)


@rule(aten.clamp_max.default)
def _clamp_max(ctx, a):
    """clip to (-inf, max]"""
    return _clip(ctx, a.self, None, a.max)


@rule(aten.leaky_relu.default)
def _leaky_relu(ctx, a):
    """leaky_relu"""
    return ctx.emit(T.leaky_relu, a.self, slope=float(a.negative_slope))


@rule(aten.elu.default)
def _elu(ctx, a):
    """elu (scale = input_scale = 1)"""
    if float(a.scale) != 1.0 or float(a.input_scale) != 1.0:
        raise Unsupported("elu with scale or input_scale other than 1 (SELU)")
    return ctx.emit(T.elu, a.self, alpha=float(a.alpha))


@rule(aten.softplus.default)
def _softplus(ctx, a):
    """softplus (beta = 1; the threshold's linear region agrees to float precision)"""
    if float(a.beta) != 1.0:
        raise Unsupported(f"softplus with beta={a.beta} (only 1)")
    return ctx.emit(T.softplus, a.self)


@rule(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def _pow(ctx, a):
    """square / sqrt / reciprocal / power by a constant exponent"""
    e = ctx.scalar(a.exponent)
    if e is None:
        raise Unsupported("pow with a tensor exponent")
    if e == 1:
        return a.self
    special = {2: T.square, 0.5: T.sqrt, -1: T.reciprocal, -0.5: T.rsqrt}
    if e in special:
        return ctx.emit(special[e], a.self)
    return ctx.emit(T.power, a.self, exponent=float(e))


# Binary ops: same shapes -> the element-wise op; broadcasting -> tdl_ops.torch_extra.broadcast_*;
# a scalar operand -> scale (alpha * x + beta).
_SAME = {"add": T.add, "sub": T.sub, "mul": T.mul, "div": T.div, "maximum": T.maximum, "minimum": T.minimum}
_BROADCAST = {"add": T.broadcast_add, "sub": T.broadcast_sub, "mul": T.broadcast_mul, "div": T.broadcast_div,
              "maximum": T.broadcast_maximum, "minimum": T.broadcast_minimum}


def _with_scalar(ctx, kind, x, s, scalar_first):
    """x (a tensor) combined with the number s."""
    if kind == "add":
        return ctx.emit(T.scale, x, alpha=1.0, beta=float(s))
    if kind == "sub":
        return ctx.emit(T.scale, x, alpha=-1.0 if scalar_first else 1.0, beta=float(s) if scalar_first else -float(s))
    if kind == "mul":
        return ctx.emit(T.scale, x, alpha=float(s), beta=0.0)
    if kind == "div":
        if scalar_first:
            r = ctx.emit(T.reciprocal, x)
            return r if s == 1 else ctx.emit(T.scale, r, alpha=float(s), beta=0.0)
        return ctx.emit(T.scale, x, alpha=1.0 / float(s), beta=0.0)
    if kind in ("maximum", "minimum"):
        # A one-element constant, broadcast: torch halves the gradient where x ties with the number
        # (relu would give 0 there).
        shape = ctx.shape(x)
        c = Const.of(torch.full((1,) * len(shape), float(s)))
        return ctx.emit(_BROADCAST[kind], x, c, a_bcast=_bcast(shape, shape), b_bcast=_bcast(c.shape, shape))
    raise Unsupported(f"{kind} of a tensor and the number {s}")


def binary(ctx, kind, x, y, out=None):
    """x <kind> y for tensors or numbers, with broadcasting to out (default: the node's output shape)."""
    out = ctx.out_shape if out is None else tuple(out)
    sx, sy = ctx.scalar(x), ctx.scalar(y)
    if sy is not None and ctx.is_tensor(x) and ctx.shape(x) == out:
        return _with_scalar(ctx, kind, x, sy, False)
    if sx is not None and ctx.is_tensor(y) and ctx.shape(y) == out:
        return _with_scalar(ctx, kind, y, sx, True)
    if not (ctx.is_tensor(x) and ctx.is_tensor(y)):
        raise Unsupported(f"{kind} of {type(x).__name__} and {type(y).__name__}")
    # A constant that changes nothing (x * 1, x + 0, masks that are all true) only broadcasts the other side.
    neutral = {"add": 0, "sub": 0, "mul": 1, "div": 1}.get(kind)
    for keep, other, second in ((x, y, True), (y, x, kind in ("add", "mul"))):
        if second and neutral is not None and _all_equal(other, neutral) and not isinstance(keep, Const):
            return _expand_to(ctx, keep, out)
    shx, shy = ctx.shape(x), ctx.shape(y)
    if shx == shy == out:
        return ctx.emit(_SAME[kind], x, y)
    return ctx.emit(_BROADCAST[kind], x, y, a_bcast=_bcast(shx, out), b_bcast=_bcast(shy, out))


def _all_equal(v, number) -> bool:
    return isinstance(v, Const) and v.value is not None and bool((v.value == number).all())


def _alpha(ctx, y, alpha):
    if alpha == 1:
        return y
    s = ctx.scalar(y)
    if s is not None:
        return s * alpha
    return ctx.emit(T.scale, y, alpha=float(alpha), beta=0.0)


@rule(aten.add.Tensor, aten.add.Scalar)
def _add(ctx, a):
    """add / broadcast_add / scale"""
    return binary(ctx, "add", a.self, _alpha(ctx, a.other, a.alpha))


@rule(aten.sub.Tensor, aten.sub.Scalar)
def _sub(ctx, a):
    """sub / broadcast_sub / scale"""
    return binary(ctx, "sub", a.self, _alpha(ctx, a.other, a.alpha))


@rule(aten.rsub.Tensor, aten.rsub.Scalar)
def _rsub(ctx, a):
    """other - alpha * self"""
    return binary(ctx, "sub", a.other, _alpha(ctx, a.self, a.alpha))


@rule(aten.mul.Tensor, aten.mul.Scalar)
def _mul(ctx, a):
    """mul / broadcast_mul / scale"""
    return binary(ctx, "mul", a.self, a.other)


@rule(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode)
def _div(ctx, a):
    """div / broadcast_div / scale (true division only)"""
    if getattr(a, "rounding_mode", None) is not None:
        raise Unsupported(f"division with rounding_mode={a.rounding_mode!r}")
    return binary(ctx, "div", a.self, a.other)


@rule(aten.maximum.default)
def _maximum(ctx, a):
    """maximum / broadcast_maximum"""
    return binary(ctx, "maximum", a.self, a.other)


@rule(aten.minimum.default)
def _minimum(ctx, a):
    """minimum / broadcast_minimum"""
    return binary(ctx, "minimum", a.self, a.other)


@rule(aten.__and__.Tensor, aten.bitwise_and.Tensor, aten.logical_and.default)
def _and(ctx, a):
    """mul (of 0/1 masks)"""
    return binary(ctx, "mul", a[0], a[1])


@rule(aten.__or__.Tensor, aten.bitwise_or.Tensor, aten.logical_or.default)
def _or(ctx, a):
    """maximum (of 0/1 masks)"""
    return binary(ctx, "maximum", a[0], a[1])


@rule(aten.logical_not.default, aten.bitwise_not.default)
def _not_rule(ctx, a):
    """1 - x (of a 0/1 mask)"""
    if ctx.node.meta["val"].dtype != torch.bool:
        raise Unsupported("bitwise not of integers")
    return ctx.emit(T.scale, a[0], alpha=-1.0, beta=1.0)


def _mask_value(ctx, mask, x_shape):
    if not ctx.is_tensor(mask):
        raise Unsupported("a mask that is not a tensor")
    ms = ctx.shape(mask)
    if len(ms) > len(x_shape) or T.torch_extra.broadcast_shape(ms, x_shape) != tuple(x_shape):
        raise Unsupported(f"a mask of shape {ms} that does not broadcast to {tuple(x_shape)}")
    return ms


@rule(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(ctx, a):
    """masked_fill (the mask broadcast against the input)"""
    value = ctx.scalar(a.value)
    if value is None:
        raise Unsupported("masked_fill with a tensor fill value")
    return _fill(ctx, a.self, a.mask, value)


def _not(ctx, mask):
    """1 where mask is 0: a constant (computed once per mask) or a scale op."""
    if isinstance(mask, Const) and mask.value is not None:
        if "not" not in mask.derived:
            name = (mask.name or ctx.scoped(ctx.node.name)) + ".not"
            mask.derived["not"] = Const(~mask.value.bool(), mask.shape, torch.bool, name)
        return mask.derived["not"]
    return ctx.emit(T.scale, mask, alpha=-1.0, beta=1.0)


def _fill(ctx, x, mask, value):
    """value where mask is non-zero, else x (nothing to do for a constant mask of zeros)."""
    if isinstance(mask, Const) and mask.value is not None and not bool(mask.value.any()):
        return x
    shape = ctx.shape(x)
    ms = _mask_value(ctx, mask, shape)
    return ctx.emit(T.masked_fill, x, mask, value=_finite(value), mask_bcast=_bcast(ms, shape))


@rule(aten.ne.Scalar, aten.eq.Scalar)
def _compare_with_a_number(ctx, a):
    """integer x != c as sign(|x - c|), x == c as 1 - sign(|x - c|): 0/1 in float32 (exact for integers
    such as token ids below 2^24; RoBERTa's position ids from its padding mask)"""
    x, c = a.self, ctx.scalar(a.other)
    if c is None or not ctx.is_tensor(x):
        raise Unsupported("a comparison that is not of a tensor with a number")
    source = ctx.node.args[0]
    if getattr(source, "meta", {}).get("val") is None or source.meta["val"].dtype.is_floating_point:
        # sign(|x - c|) would give NaN for NaN where torch gives True (ne) / False (eq)
        raise Unsupported("a comparison of a floating-point tensor (only integer ids and masks are compared)")
    c = float(c)
    if not math.isfinite(c):
        raise Unsupported(f"a comparison with {c}")
    differs = ctx.emit(T.sign, ctx.emit(T.abs, ctx.emit(T.scale, x, alpha=1.0, beta=-c)))
    if ctx.node.target == aten.ne.Scalar:
        return differs
    return ctx.emit(T.scale, differs, alpha=-1.0, beta=1.0)


@rule(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def _where(ctx, a):
    """masked_fill (one side a number), scale (both numbers), where (tensors, expanded to the output)"""
    cond, x, y = a.condition, a.self, a.other
    out = ctx.out_shape
    sx, sy = ctx.scalar(x), ctx.scalar(y)
    if sx is not None and sy is not None:  # cond * (x - y) + y
        y = ctx.emit(T.scale, cond, alpha=_finite(sx) - _finite(sy), beta=_finite(sy))
        return _expand_to(ctx, y, out)
    # One side a number: the tensor side broadcast to the output (T5's position bias, (1, h, q, k)
    # against a (b, 1, q, k) mask), then filled where the condition selects the number.
    if sy is not None and ctx.is_tensor(x):
        return _fill(ctx, _expand_to(ctx, x, out), _not(ctx, cond), sy)
    if sx is not None and ctx.is_tensor(y):
        return _fill(ctx, _expand_to(ctx, y, out), cond, sx)
    if not all(ctx.is_tensor(v) for v in (cond, x, y)):
        raise Unsupported("where with a condition that is not a tensor")
    return ctx.emit(T.where, *(_expand_to(ctx, v, out) for v in (cond, x, y)))


# ---------------------------------------------------------------- matrix products


@rule(aten.linear.default)
def _linear(ctx, a):
    """linear / linear_nobias (x of any rank, W as (out, in))"""
    if len(ctx.shape(a.weight)) != 2:
        raise Unsupported("linear with a weight that is not a matrix")
    if a.bias is None:
        return ctx.emit(T.linear_nobias, a.input, a.weight)
    return ctx.emit(T.linear, a.input, a.weight, a.bias)


@rule(aten.mm.default)
def _mm(ctx, a):
    """matmul"""
    return ctx.emit(T.matmul, a.self, a.mat2)


@rule(aten.bmm.default)
def _bmm(ctx, a):
    """batch_matmul"""
    return ctx.emit(T.batch_matmul, a.self, a.mat2)


@rule(aten.addmm.default)
def _addmm(ctx, a):
    """matmul, then the bias added (beta = alpha = 1)"""
    if a.beta != 1 or a.alpha != 1:
        raise Unsupported(f"addmm with beta={a.beta}, alpha={a.alpha}")
    y = ctx.emit(T.matmul, a.mat1, a.mat2)
    return binary(ctx, "add", y, a.self)


@rule(aten.t.default)
def _t(ctx, a):
    """transpose (2-D), the input (1-D)"""
    return ctx.emit(T.transpose, a.self) if len(ctx.shape(a.self)) == 2 else a.self


@rule(aten.numpy_T.default)
def _numpy_t(ctx, a):
    """x.T: the axes reversed (transpose of a matrix, permute above; the input for rank 0 and 1)"""
    n = len(ctx.shape(a.self))
    if n < 2:
        return a.self
    if n == 2:
        return ctx.emit(T.transpose, a.self)
    return ctx.emit(T.permute, a.self, perm=tuple(reversed(range(n))))


@rule(aten.baddbmm.default)
def _baddbmm(ctx, a):
    """beta * input + alpha * batch_matmul(batch1, batch2) (input broadcast; beta 0: input not read)"""
    y = _alpha(ctx, ctx.emit(T.batch_matmul, a.batch1, a.batch2), a.alpha)
    if a.beta == 0:
        return y
    return binary(ctx, "add", y, _alpha(ctx, a.self, a.beta))


@rule(aten.matmul.default)
def _matmul(ctx, a):
    """matmul / matmul_nd / batch_matmul / bmatmul by ranks, batch axes broadcast with expand"""
    x, y = a.self, a.other
    sx, sy = ctx.shape(x), ctx.shape(y)
    out = ctx.out_shape
    if len(sx) == 1 and len(sy) == 1:
        raise Unsupported("matmul of two vectors (a dot product)")
    if len(sy) == 1:  # matrix-vector: y as a column
        r = _matmul2(ctx, x, ctx.view(y, (sy[0], 1)), sx, (sy[0], 1))
        return ctx.view(r, out)
    if len(sx) == 1:
        r = _matmul2(ctx, ctx.view(x, (1, sx[0])), y, (1, sx[0]), sy)
        return ctx.view(r, out)
    return _matmul2(ctx, x, y, sx, sy)


def _matmul2(ctx, x, y, sx, sy):
    if len(sx) == 2 and len(sy) == 2:
        return ctx.emit(T.matmul, x, y)
    if len(sy) == 2:
        return ctx.emit(T.matmul_nd, x, y)
    batch = T.torch_extra.broadcast_shape(sx[:-2], sy[:-2])
    x = _expand_to(ctx, x, batch + tuple(sx[-2:]))
    y = _expand_to(ctx, y, batch + tuple(sy[-2:]))
    return ctx.emit(T.batch_matmul if len(batch) == 1 else T.bmatmul, x, y)


def _expand_to(ctx, x, shape):
    shape = tuple(shape)
    if ctx.shape(x) == shape:
        return x
    return ctx.emit(T.expand, x, shape=shape, bcast=_bcast(ctx.shape(x), shape))


# ---------------------------------------------------------------- reductions


def _dims(dim, ndim):
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    dim = dim if isinstance(dim, (list, tuple)) else [dim]
    return tuple(sorted({_axis(d, ndim) for d in dim}))


def _reduce(ctx, x, dims, op, keepdim):
    shape = ctx.shape(x)
    if op is T.reduce_mean and len(shape) == 4 and dims == (2, 3):
        y = ctx.emit(T.global_avg_pool2d, x)
    elif op in (T.reduce_max, T.reduce_min) and 1 < len(dims) < len(shape):
        # One reduction over the reduced axes made one (moved last), so a tie is split evenly over all
        # the tied entries as torch.amax's; one axis at a time would split it row by row.
        kept = tuple(d for d in range(len(shape)) if d not in dims)
        perm = kept + tuple(sorted(dims))
        if perm != tuple(range(len(shape))):
            x = ctx.emit(T.permute, x, perm=perm)
        y = ctx.emit(op, ctx.view(x, tuple(shape[d] for d in kept) + (prod(shape[d] for d in dims),)), axis=-1)
    else:
        if len(dims) == len(shape) and len(shape) > 1:
            # Reducing every axis: one axis of all the elements.
            x, dims = ctx.view(x, (prod(shape),)), (0,)
        y = x
        for d in sorted(dims, reverse=True):
            y = ctx.emit(op, y, axis=d)
    return ctx.view(y, ctx.out_shape) if keepdim or ctx.shape(y) != ctx.out_shape else y


def _reduction(op):
    def convert(ctx, a):
        x = a.self
        dims = _dims(getattr(a, "dim", None), len(ctx.shape(x)))
        return _reduce(ctx, x, dims, op, getattr(a, "keepdim", False))
    convert.__doc__ = f"{op.name} along each reduced axis"
    return convert


rule(aten.sum.dim_IntList, aten.sum.default)(_reduction(T.reduce_sum))
rule(aten.mean.dim, aten.mean.default)(_reduction(T.reduce_mean))
rule(aten.amax.default, aten.max.default)(_reduction(T.reduce_max))  # torch splits a tie evenly
rule(aten.amin.default, aten.min.default)(_reduction(T.reduce_min))


@rule(aten.argmax.default, aten.argmin.default)
def _argmax(ctx, a):
    """argmax / argmin along one axis (float indices; the first extremum, the first NaN)"""
    shape = ctx.shape(a.self)
    if a.dim is None:
        x, d = ctx.view(a.self, (prod(shape),)), 0
    else:
        x, d = a.self, _axis(a.dim, len(shape))
    op = T.argmax if ctx.node.target == aten.argmax.default else T.argmin
    return ctx.view(ctx.emit(op, x, axis=d), ctx.out_shape)


class LazyOutputs:
    """The outputs of a multi-output op, each built when a getitem reads it."""

    def __init__(self, *makers):
        self.makers, self.done = makers, {}

    def get_item(self, ctx, i):
        if i not in self.done:
            self.done[i] = self.makers[i](ctx)
        return self.done[i]


@rule(aten.max.dim, aten.min.dim)
def _max_dim(ctx, a):
    """(max_dim, argmax) / (min_dim, argmin) along one axis, each made only if used; the values' gradient
    goes to the returned index, as torch's"""
    x = a.self
    d = _axis(a.dim, len(ctx.shape(x)))
    is_max = ctx.node.target == aten.max.dim
    vshape, ishape = (tuple(v.shape) for v in ctx.node.meta["val"])

    def values(c):
        return c.view(c.emit(T.max_dim if is_max else T.min_dim, x, axis=d), vshape)

    def indices(c):
        return c.view(c.emit(T.argmax if is_max else T.argmin, x, axis=d), ishape)
    return LazyOutputs(values, indices)


@rule(aten.cumsum.default)
def _cumsum(ctx, a):
    """cumsum over the last axis of the input viewed as a matrix (other axes through permutes)"""
    shape = ctx.shape(a.self)
    d = _axis(a.dim, len(shape))
    x = a.self
    if d != len(shape) - 1:
        perm = tuple(k for k in range(len(shape)) if k != d) + (d,)
        x = ctx.emit(T.permute, x, perm=perm)
    pshape = ctx.shape(x)
    y = ctx.emit(T.cumsum, ctx.view(x, (prod(pshape[:-1]), pshape[-1])))
    y = ctx.view(y, pshape)
    if d != len(shape) - 1:
        y = ctx.emit(T.permute, y, perm=tuple(perm.index(k) for k in range(len(shape))))
    return y


@rule(aten.var.correction, aten.var.dim)
def _var(ctx, a):
    """reduce_var along one axis, rescaled by n / (n - correction)"""
    x = a.self
    shape = ctx.shape(x)
    dims = _dims(a.dim, len(shape))
    if len(dims) != 1:
        raise Unsupported("variance over several axes")
    corr = getattr(a, "correction", None)
    if corr is None:
        corr = 1 if getattr(a, "unbiased", True) else 0
    y = ctx.emit(T.reduce_var, x, axis=dims[0])
    n = shape[dims[0]]
    if corr:
        y = ctx.emit(T.scale, y, alpha=n / (n - float(corr)), beta=0.0)
    return ctx.view(y, ctx.out_shape)


# ---------------------------------------------------------------- constants from shapes


@rule(aten.ones_like.default, aten.zeros_like.default, aten.full_like.default, aten.empty_like.default,
      aten.new_ones.default, aten.new_zeros.default, aten.new_full.default, aten.new_empty.default)
def _like(ctx, a):
    """a constant of the output's shape"""
    name = str(ctx.node.target)
    fill = 1.0 if "ones" in name else (getattr(a, "fill_value", 0.0) if "full" in name else 0.0)
    value = torch.full(ctx.out_shape, fill, dtype=ctx.out_dtype)
    return Const(value, ctx.out_shape, ctx.out_dtype)

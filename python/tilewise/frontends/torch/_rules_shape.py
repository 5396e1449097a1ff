"""Conversion rules for data movement: views, expand, permutes, joins, slices, indexing, padding
(registered into ``_rules.RULES``; see ``_rules`` for how a rule works)."""

from __future__ import annotations

import torch

import tdl_ops as T

from ._convert import Const, Unsupported, prod
from ._rules import _axis, _expand_to, _first, aten, rule

# ---------------------------------------------------------------- shapes


@rule(aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.flatten.using_ints,
      aten.unflatten.int, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default, aten.unsqueeze.default,
      aten.view_as.default, aten.reshape_as.default)
def _view(ctx, a):
    """a lazy reshape: flatten / squeeze / unsqueeze / reshape, emitted when needed, chains merged"""
    return ctx.view(_first(a), ctx.out_shape)


@rule(aten.expand.default, aten.expand_as.default, aten.broadcast_to.default)
def _expand(ctx, a):
    """expand (axes of extent 1 read at 0)"""
    return _expand_to(ctx, _first(a), ctx.out_shape)


@rule(aten.permute.default)
def _permute(ctx, a):
    """permute (nothing for the identity permutation)"""
    n = len(ctx.shape(a.self))
    perm = tuple(_axis(d, n) for d in a.dims)
    if perm == tuple(range(n)):
        return a.self
    return ctx.emit(T.permute, a.self, perm=perm)


@rule(aten.transpose.int)
def _transpose(ctx, a):
    """transpose (2-D) or permute"""
    n = len(ctx.shape(a.self))
    d0, d1 = _axis(a.dim0, n), _axis(a.dim1, n)
    if d0 == d1:
        return a.self
    if n == 2:
        return ctx.emit(T.transpose, a.self)
    perm = list(range(n))
    perm[d0], perm[d1] = d1, d0
    return ctx.emit(T.permute, a.self, perm=tuple(perm))


def _concat(ctx, xs, axis):
    xs = [x for x in xs if ctx.shape(x)[axis] > 0]
    if len(xs) == 1:
        return xs[0]
    concat_op = getattr(T.models, "concat_op", None)  # n-input concatenation, one op
    if concat_op is not None:
        return ctx.emit(concat_op(len(xs)), *xs, axis=axis)
    y = xs[0]
    for x in xs[1:]:
        y = ctx.emit(T.concat, y, x, axis=axis)
    return y


@rule(aten.cat.default)
def _cat(ctx, a):
    """concat_n (one n-input op)"""
    xs = [x for x in a.tensors if prod(ctx.shape(x)) > 0 or len(ctx.shape(x)) > 1]
    if not xs:
        raise Unsupported("concatenation of empty tensors")
    return _concat(ctx, xs, _axis(a.dim, len(ctx.out_shape)))


@rule(aten.stack.default)
def _stack(ctx, a):
    """unsqueeze each input, then concat_n"""
    axis = _axis(a.dim, len(ctx.out_shape))
    xs = [ctx.view(x, tuple(ctx.shape(x)[:axis]) + (1,) + tuple(ctx.shape(x)[axis:])) for x in a.tensors]
    return _concat(ctx, xs, axis)


@rule(aten.slice.Tensor)
def _slice(ctx, a):
    """slice_axis (nothing for a full slice)"""
    x = a.self
    shape = ctx.shape(x)
    d = _axis(a.dim, len(shape))
    n = shape[d]
    start = 0 if a.start is None else int(a.start)
    end = n if a.end is None else int(a.end)
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, 0), n)
    step = int(a.step)
    if start == 0 and end == n and step == 1:
        return x
    if end <= start:
        raise Unsupported("an empty slice")
    return ctx.emit(T.slice_axis, x, axis=d, start=start, stop=end, step=step)


@rule(aten.select.int)
def _select(ctx, a):
    """select (one index of an axis, the axis dropped)"""
    shape = ctx.shape(a.self)
    d = _axis(a.dim, len(shape))
    i = int(a.index)
    i = i + shape[d] if i < 0 else i
    if shape[d] == 1:
        return ctx.view(a.self, ctx.out_shape)
    return ctx.emit(T.select, a.self, axis=d, index=i)


@rule(aten.index.Tensor)
def _index(ctx, a):
    """indexing with constant indices that only reshape and broadcast: view + expand"""
    x, indices = a.self, a.indices
    if any(i is not None and not (isinstance(i, Const) and i.value is not None) for i in indices):
        raise Unsupported("indexing with indices computed by the model (a gather)")
    shape = ctx.shape(x)
    # Where every output element comes from, as a flat position in x.
    where = torch.arange(prod(shape)).reshape(shape)[tuple(None if i is None else i.value for i in indices)]
    out = tuple(where.shape)
    broadcast = tuple(d for d in range(where.dim())
                      if out[d] > 1 and bool((where == where.narrow(d, 0, 1)).all()))
    core = where
    for d in broadcast:
        core = core.narrow(d, 0, 1)
    if not bool((core.reshape(-1) == torch.arange(core.numel())).all()) or core.numel() != prod(shape):
        if len(indices) == 1 and ctx.is_tensor(x) and shape:
            return _rows_by_constant_ids(ctx, x, indices[0], shape)
        raise Unsupported("indexing with constant indices that pick, repeat or reorder elements (a gather) "
                          "along an axis other than the first")
    return _expand_to(ctx, ctx.view(x, tuple(core.shape)), out)


def _rows_by_constant_ids(ctx, x, index, shape):
    """x[index] with constant integer ids along the first axis (a relative-position bias table read by
    a constant index, as Swin's): an embedding lookup of x viewed as rows, ids made non-negative."""
    ids = index.value
    if ids.dtype == torch.bool:
        raise Unsupported("indexing with a constant boolean mask that picks elements (a gather)")
    n = shape[0]
    flat = ids.reshape(-1).to(torch.int64)
    flat = torch.where(flat < 0, flat + n, flat)
    if bool(((flat < 0) | (flat >= n)).any()):
        raise Unsupported(f"indexing with constant ids outside 0..{n - 1}")
    rest = prod(shape[1:])
    table = ctx.view(x, (n, rest)) if len(shape) != 2 else x
    name = ctx.scoped(f"{ctx.node.name}.ids")
    rows = ctx.emit(T.embedding, table, Const(flat, (flat.numel(),), torch.int64, name))
    return ctx.view(rows, tuple(ids.shape) + tuple(shape[1:]))


class Pieces:
    """The outputs of split / chunk / unbind, each emitted when an getitem asks for it."""

    def __init__(self, x, axis, sizes, drop_axis):
        self.x, self.axis, self.sizes, self.drop = x, axis, sizes, drop_axis
        self.done = {}

    def get_item(self, ctx, i):
        if i not in self.done:
            start = sum(self.sizes[:i])
            if self.drop:
                self.done[i] = ctx.emit(T.select, self.x, axis=self.axis, index=start)
            elif self.sizes[i] == ctx.shape(self.x)[self.axis]:
                self.done[i] = self.x
            else:
                self.done[i] = ctx.emit(T.slice_axis, self.x, axis=self.axis, start=start,
                                        stop=start + self.sizes[i])
        return self.done[i]


@rule(aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default, aten.unbind.int,
      aten.split.sizes, aten.tensor_split.sections)
def _split(ctx, a):
    """slice_axis per piece used (select for unbind)"""
    x = _first(a)
    shape = ctx.shape(x)
    d = _axis(getattr(a, "dim", 0), len(shape))
    vals = ctx.node.meta["val"]
    drop = ctx.node.target == aten.unbind.int
    sizes = [1 if drop else int(v.shape[d]) for v in vals]
    return Pieces(x, d, sizes, drop)


@rule(aten.constant_pad_nd.default, aten.pad.default)
def _pad(ctx, a):
    """pad (zeros; non-negative widths)"""
    if getattr(a, "mode", "constant") != "constant":
        raise Unsupported(f"padding mode '{a.mode}' (only constant zeros)")
    if a.value is not None and ctx.scalar(a.value) not in (0, 0.0):
        raise Unsupported(f"padding with the value {a.value} (only 0)")
    shape = ctx.shape(a.self)
    pads = [(0, 0)] * len(shape)
    widths = list(a.pad)
    for k in range(len(widths) // 2):
        pads[len(shape) - 1 - k] = (int(widths[2 * k]), int(widths[2 * k + 1]))
    if any(p < 0 for pair in pads for p in pair):
        raise Unsupported("negative padding (cropping)")
    if all(p == (0, 0) for p in pads):
        return a.self
    return ctx.emit(T.pad, a.self, pads=tuple(pads))


@rule(aten.flip.default)
def _flip(ctx, a):
    """flip along each axis"""
    y = a.self
    for d in a.dims:
        y = ctx.emit(T.flip, y, axis=_axis(d, len(ctx.shape(a.self))))
    return y


@rule(aten.gather.default)
def _gather(ctx, a):
    """gather from a constant whose values are all equal: that constant, in the index's shape (RoBERTa's
    token type ids, a zero buffer gathered by position ids); other gathers are refused"""
    src = a.self
    if isinstance(src, Const) and src.value is not None and src.value.numel() > 0:
        flat = src.value.reshape(-1)
        if bool((flat == flat[0]).all()):
            out = ctx.out_shape
            return Const(flat[0].expand(out).clone(), out, src.value.dtype, ctx.scoped(f"{ctx.node.name}.value"))
    raise Unsupported("gather by indices along an axis (only a constant of equal values can be gathered)")

"""Conversion rules for data movement: reshapes, transposes, joins, slices, padding, gathers with
known indices (registered into ``_rules.RULES``; see ``_rules`` for how a rule works). Shapes,
axes, starts and indices must be known at import (initializers, constants, or folded from
``Shape``): tilewise graphs are static."""

from __future__ import annotations

import numpy as np

import tdl_ops as T

from ._convert import Known, Unsupported
from ._rules import axis, bshape, expand_to, rule


def _axes_arg(ctx, n, since, ndim, input_index=1):
    """Axes from the ``axes`` attribute (before opset ``since``) or an input (from it), normalized."""
    if n.opset < since:
        axes = n.attr("axes")
    else:
        v = n.input(input_index)
        axes = None if v is None else ctx.ints(v, "the axes")
    return None if axes is None else [axis(a, ndim) for a in axes]


@rule("Reshape")
def _reshape(ctx, n):
    """a reshape (flatten / squeeze / unsqueeze / reshape op); 0 copies an extent, -1 is inferred"""
    x = n.inputs[0]
    src = ctx.shape(x)
    target = ctx.ints(n.inputs[1], "the shape") if n.opset >= 5 else list(n.attr("shape"))
    allowzero = int(n.attr("allowzero", 0))
    out = [src[k] if d == 0 and not allowzero else d for k, d in enumerate(target)]
    if out.count(-1) > 1:
        raise Unsupported(f"shape {target} with more than one -1")
    if -1 in out:
        rest = int(np.prod([d for d in out if d != -1]))
        if rest == 0:
            raise Unsupported(f"shape {target}: -1 beside a zero extent")
        out[out.index(-1)] = int(np.prod(src)) // rest
    if int(np.prod(out)) != int(np.prod(src)) or any(d <= 0 for d in out):
        raise Unsupported(f"shape {target} does not fit an input of shape {src}")
    return ctx.view(x, tuple(out))


@rule("Flatten")
def _flatten(ctx, n):
    """a view as (product of the axes before ``axis``, product of the rest)"""
    x = n.inputs[0]
    shape = ctx.shape(x)
    a = int(n.attr("axis", 1))
    a = a + len(shape) if a < 0 else a
    return ctx.view(x, (int(np.prod(shape[:a])), int(np.prod(shape[a:]))))


@rule("Squeeze")
def _squeeze(ctx, n):
    """a view without the given axes of extent 1 (all of them by default)"""
    x = n.inputs[0]
    shape = ctx.shape(x)
    axes = _axes_arg(ctx, n, 13, len(shape))
    if axes is None:
        axes = [d for d, s in enumerate(shape) if s == 1]
    if any(shape[a] != 1 for a in axes):
        raise Unsupported(f"squeezing axes {axes} of shape {shape} (extents other than 1)")
    return ctx.view(x, tuple(s for d, s in enumerate(shape) if d not in axes))


@rule("Unsqueeze")
def _unsqueeze(ctx, n):
    """a view with new axes of extent 1"""
    x = n.inputs[0]
    shape = list(ctx.shape(x))
    out_rank = len(shape) + len(ctx.ints(n.inputs[1], "the axes") if n.opset >= 13 else n.attr("axes"))
    axes = sorted(_axes_arg(ctx, n, 13, out_rank))
    for a in axes:
        shape.insert(a, 1)
    return ctx.view(x, tuple(shape))


@rule("Transpose")
def _transpose(ctx, n):
    """permute / transpose (2-D); nothing for the identity permutation"""
    x = n.inputs[0]
    ndim = len(ctx.shape(x))
    perm = tuple(axis(p, ndim) for p in n.attr("perm", list(reversed(range(ndim)))))
    if perm == tuple(range(ndim)):
        return x
    if isinstance(x, Known) and not x.initializer:
        return Known(np.transpose(x.value, perm), x.name)
    if ndim == 2:
        return ctx.emit(T.transpose, x)
    return ctx.emit(T.permute, x, perm=perm)


def concat(ctx, xs, a):
    xs = [x for x in xs if ctx.shape(x)[a] > 0]
    if len(xs) == 1:
        return xs[0]
    return ctx.emit(T.models.concat_op(len(xs)), *xs, axis=a)


@rule("Concat")
def _concat(ctx, n):
    """concat_<n> (one n-input op)"""
    xs = [v for v in n.inputs if v is not None]
    return concat(ctx, xs, axis(n.attr("axis"), len(ctx.shape(xs[0]))))


@rule("Expand")
def _expand(ctx, n):
    """expand (axes of extent 1 read at 0), NumPy broadcasting of the input and the shape"""
    x = n.inputs[0]
    out = bshape(ctx.shape(x), tuple(ctx.ints(n.inputs[1], "the shape")))
    return expand_to(ctx, x, out)


def _slice_one(ctx, x, a, start, end, step):
    size = ctx.shape(x)[a]
    if step == 0:
        raise Unsupported("a slice step of 0")
    if step < 0:
        # x[start:end:step] walks down from start: a positive slice of the flipped axis.
        start = min(max(start + size if start < 0 else start, -1), size - 1)
        end = min(max(end + size if end < 0 else end, -1), size - 1)
        if end >= start:
            raise Unsupported("an empty slice")
        return _slice_one(ctx, ctx.emit(T.flip, x, axis=a), a, size - 1 - start, size - 1 - end, -step)
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start, end = min(max(start, 0), size), min(max(end, 0), size)
    if end <= start:
        raise Unsupported("an empty slice")
    if start == 0 and end == size and step == 1:
        return x
    return ctx.emit(T.slice_axis, x, axis=a, start=start, stop=end, step=step)


@rule("Slice")
def _slice(ctx, n):
    """slice_axis per sliced axis (negative steps: of the flipped axis)"""
    x = n.inputs[0]
    ndim = len(ctx.shape(x))
    if n.opset < 10:
        starts, ends = list(n.attr("starts")), list(n.attr("ends"))
        axes = n.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = ctx.ints(n.inputs[1], "the starts"), ctx.ints(n.inputs[2], "the ends")
        axes = ctx.ints(n.input(3), "the axes") if n.input(3) is not None else list(range(len(starts)))
        steps = ctx.ints(n.input(4), "the steps") if n.input(4) is not None else [1] * len(starts)
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        x = _slice_one(ctx, x, axis(a, ndim), s, e, st)
    return x


@rule("Split")
def _split(ctx, n):
    """slice_axis per output"""
    x = n.inputs[0]
    shape = ctx.shape(x)
    a = axis(n.attr("axis", 0), len(shape))
    outs = len(n.outputs)
    if n.opset < 13:
        sizes = n.attr("split")
    else:
        sizes = ctx.ints(n.input(1), "the split sizes") if n.input(1) is not None else None
    if not sizes:
        if n.opset >= 18 and n.attr("num_outputs") is not None:
            outs = int(n.attr("num_outputs"))
            chunk = -(-shape[a] // outs)
            sizes = [min(chunk, shape[a] - k * chunk) for k in range(outs)]
        else:
            if shape[a] % outs:
                raise Unsupported(f"splitting extent {shape[a]} into {outs} equal parts")
            sizes = [shape[a] // outs] * outs
    if any(s <= 0 for s in sizes):
        raise Unsupported(f"split sizes {list(sizes)} (empty parts)")
    pieces, start = [], 0
    for s in sizes:
        pieces.append(_slice_one(ctx, x, a, start, start + s, 1))
        start += s
    return tuple(pieces)


@rule("Pad")
def _pad(ctx, n):
    """pad (constant mode, non-negative pads; a non-zero value added as a constant border)"""
    x = n.inputs[0]
    ndim = len(ctx.shape(x))
    mode = n.attr("mode", "constant")
    if mode != "constant":
        raise Unsupported(f"mode='{mode}' (only constant)")
    if n.opset < 11:
        pads, value = list(n.attr("pads")), float(n.attr("value", 0.0))
        axes = list(range(ndim))
    else:
        pads = ctx.ints(n.inputs[1], "the pads")
        value = 0.0 if n.input(2) is None else ctx.scalar(n.input(2))
        axes = list(range(ndim)) if n.input(3) is None else [axis(a, ndim) for a in ctx.ints(n.input(3), "the axes")]
    if value is None:
        raise Unsupported("a pad value computed by the graph")
    k = len(axes)
    pairs = [(0, 0)] * ndim
    for j, a in enumerate(axes):
        pairs[a] = (pads[j], pads[j + k])
    if any(p < 0 for pair in pairs for p in pair):
        raise Unsupported("negative pads (cropping)")
    if all(p == (0, 0) for p in pairs):
        return x
    y = ctx.emit(T.pad, x, pads=tuple(pairs))
    if value != 0.0:
        # The border takes the value: + a constant that is the value outside the input, 0 inside.
        border = np.pad(np.zeros(ctx.shape(x), np.float32), pairs, constant_values=np.float32(value))
        y = ctx.emit(T.add, y, Known(border, f"{n.name}.border"))
    return y


@rule("Tile")
def _tile(ctx, n):
    """concat_<n> of copies along each repeated axis"""
    x = n.inputs[0]
    reps = ctx.ints(n.inputs[1], "the repeats")
    for a, r in enumerate(reps):
        if r < 1:
            raise Unsupported(f"repeats {reps} (only positive)")
        if r > 1:
            x = ctx.emit(T.models.concat_op(r), *([x] * r), axis=a)
    return x


@rule("Gather")
def _gather(ctx, n):
    """known indices: select (one), slice_axis (a range), else concat_<n> of selects; indices the graph
    is fed (token ids) into axis 0 of a 2-D table: embedding / embedding_seq"""
    x, idx = n.inputs
    shape = ctx.shape(x)
    a = axis(n.attr("axis", 0), len(shape))
    if not isinstance(idx, Known):
        return _lookup(ctx, x, idx, shape, a)
    ids = np.asarray(ctx.known(idx, "the indices")).astype(np.int64)
    ids = np.where(ids < 0, ids + shape[a], ids)
    if ids.size == 0 or (ids < 0).any() or (ids >= shape[a]).any():
        raise Unsupported(f"indices out of range for extent {shape[a]} (or none)")
    out = tuple(shape[:a]) + tuple(ids.shape) + tuple(shape[a + 1:])
    flat = ids.reshape(-1)
    if ids.ndim == 0:
        return ctx.emit(T.select, x, axis=a, index=int(flat[0]))
    if (np.diff(flat) == 1).all():
        y = _slice_one(ctx, x, a, int(flat[0]), int(flat[-1]) + 1, 1)
    else:
        if flat.size > 64:
            raise Unsupported(f"a gather of {flat.size} scattered indices (at most 64; no gather op)")
        rows = [ctx.view(ctx.emit(T.select, x, axis=a, index=int(i)), tuple(shape[:a]) + (1,) + tuple(shape[a + 1:]))
                for i in flat]
        y = concat(ctx, rows, a) if len(rows) > 1 else rows[0]
    return ctx.view(y, out)


def _lookup(ctx, table, ids, shape, a):
    """Gather of graph-fed indices: an embedding lookup (ids outside the table fail the step, as in
    ONNX Runtime; negative ids are not wrapped)."""
    if a != 0 or len(shape) != 2:
        raise Unsupported(f"indices computed by the graph gather axis {a} of a {len(shape)}-D tensor "
                          "(only axis 0 of a 2-D table: an embedding lookup)")
    rank = len(ctx.shape(ids))
    if rank == 1:
        return ctx.emit(T.embedding, table, ids)
    if rank == 2:
        return ctx.emit(T.embedding_seq, table, ids)
    n = int(np.prod(ctx.shape(ids)))
    flat = ctx.emit(T.embedding, table, ctx.view(ids, (n,)))
    return ctx.view(flat, tuple(ctx.shape(ids)) + (shape[1],))


@rule("CumSum")
def _cumsum(ctx, n):
    """cumsum over the last axis of the input viewed as a matrix (other axes through permutes)"""
    if int(n.attr("exclusive", 0)) or int(n.attr("reverse", 0)):
        raise Unsupported("exclusive or reverse cumulative sums")
    x = n.inputs[0]
    shape = ctx.shape(x)
    a = axis(ctx.ints(n.inputs[1], "the axis")[0], len(shape))
    perm = tuple(k for k in range(len(shape)) if k != a) + (a,)
    if a != len(shape) - 1:
        x = ctx.emit(T.permute, x, perm=perm)
    pshape = ctx.shape(x)
    y = ctx.view(ctx.emit(T.cumsum, ctx.view(x, (int(np.prod(pshape[:-1])), pshape[-1]))), pshape)
    if a != len(shape) - 1:
        y = ctx.emit(T.permute, y, perm=tuple(perm.index(k) for k in range(len(shape))))
    return y


@rule("Shape")
def _shape(ctx, n):
    """a known value (shapes are static): the input's extents from start to end"""
    shape = np.asarray(ctx.shape(n.inputs[0]), np.int64)
    start, end = int(n.attr("start", 0)), n.attr("end")
    return Known(shape[start:None if end is None else int(end)].copy(), n.outputs[0])


@rule("Size")
def _size(ctx, n):
    """a known value: the input's element count"""
    return Known(np.asarray(int(np.prod(ctx.shape(n.inputs[0]))), np.int64), n.outputs[0])


def _blocks(ctx, n, x):
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise Unsupported(f"a rank-{len(shape)} input (NCHW only)")
    return shape, int(n.attr("blocksize"))


@rule("DepthToSpace")
def _depth_to_space(ctx, n):
    """reshape, permute, reshape (DCR and CRD modes)"""
    x = n.inputs[0]
    (b, c, h, w), bs = _blocks(ctx, n, x)
    if n.attr("mode", "DCR") == "DCR":
        y = ctx.emit(T.permute, ctx.view(x, (b, bs, bs, c // (bs * bs), h, w)), perm=(0, 3, 4, 1, 5, 2))
    else:
        y = ctx.emit(T.permute, ctx.view(x, (b, c // (bs * bs), bs, bs, h, w)), perm=(0, 1, 4, 2, 5, 3))
    return ctx.view(y, (b, c // (bs * bs), h * bs, w * bs))


@rule("SpaceToDepth")
def _space_to_depth(ctx, n):
    """reshape, permute, reshape (DCR and CRD modes)"""
    x = n.inputs[0]
    (b, c, h, w), bs = _blocks(ctx, n, x)
    if h % bs or w % bs:
        raise Unsupported(f"extents {h}x{w} that the block size {bs} does not divide")
    perm = (0, 3, 5, 1, 2, 4) if n.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
    y = ctx.emit(T.permute, ctx.view(x, (b, c, h // bs, bs, w // bs, bs)), perm=perm)
    return ctx.view(y, (b, c * bs * bs, h // bs, w // bs))


@rule("Trilu")
def _trilu(ctx, n):
    """masked_fill with 0 outside the triangle (a constant mask of the last two axes, broadcast)"""
    x = n.inputs[0]
    shape = ctx.shape(x)
    k = 0 if n.input(1) is None else ctx.ints(n.input(1), "k")[0]
    rows, cols = shape[-2:]
    keep = np.triu(np.ones((rows, cols)), k) if int(n.attr("upper", 1)) else np.tril(np.ones((rows, cols)), k)
    if keep.all():
        return x
    mask = Known((keep == 0).astype(np.float32), f"{n.name}.mask")
    return ctx.emit(T.masked_fill, x, mask, value=0.0, mask_bcast=())


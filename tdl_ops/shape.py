"""Data movement: transpose, permute, broadcast, concat, slice, split, pad, flatten, flips, upsampling."""

from __future__ import annotations

import numpy as np
import tilewise as tw

from ._cases import Case
from ._util import insert, norm_axis, replace


@tw.op(reference=lambda x: x.T.copy())
def transpose(x):
    """2-D transpose."""
    return lambda i, j: x[j, i]


@tw.op(reference=lambda x, perm=(1, 0): np.transpose(x, perm))
def permute(x, perm=(1, 0)):
    """Axis permutation: out.shape[d] = x.shape[perm[d]]."""
    def f(*i):
        idx = [None] * len(perm)
        for d, p in enumerate(perm):
            idx[p] = i[d]
        return x[tuple(idx)]
    return tw.compute(len(perm), f)


def _new_axes(ndim, shape, new_axes):
    return tuple(new_axes) if new_axes else tuple(range(len(shape) - ndim))


def _expand(x, shape, new_axes):
    axes = _new_axes(x.ndim, shape, new_axes)
    return np.broadcast_to(np.expand_dims(x, axes), shape).copy()


@tw.op(reference=lambda x, shape=(), new_axes=(): _expand(x, shape, new_axes),
       out_shape=lambda x, shape=(), new_axes=(): tuple(shape))
def broadcast_to(x, shape=(), new_axes=()):
    """Broadcast to shape by repeating along new_axes (x has the other axes; default: leading)."""
    axes = _new_axes(x.ndim, shape, new_axes)
    kept = [d for d in range(len(shape)) if d not in axes]
    return tw.compute(len(shape), lambda *i: x[tuple(i[d] for d in kept)])


def _concat_shape(a, b, axis=0):
    ax = norm_axis(axis, len(a))
    return replace(a, ax, a[ax] + b[ax])


@tw.op(reference=lambda a, b, axis=0: np.concatenate([a, b], axis=axis), out_shape=_concat_shape)
def concat(a, b, axis=0):
    """Concatenate two tensors along axis (out-of-bounds reads are 0)."""
    ax = norm_axis(axis, a.ndim)
    return tw.compute(a.ndim, lambda *i: a[i] + b[replace(i, ax, i[ax] - a.shape[ax])])


def _stop(stop, n):
    return stop if stop > 0 else n + stop


def _slice_shape(x, axis=0, start=0, stop=0, step=1):
    ax = norm_axis(axis, len(x))
    return replace(x, ax, len(range(start, _stop(stop, x[ax]), step)))


def _slice_ref(x, axis=0, start=0, stop=0, step=1):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, _stop(stop, x.shape[axis]), step)
    return x[tuple(idx)].copy()


@tw.op(reference=_slice_ref, out_shape=_slice_shape)
def slice_axis(x, axis=0, start=0, stop=0, step=1):
    """x[start:stop:step] along axis (start >= 0, step > 0; stop <= 0 counts from the end)."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim, lambda *i: x[replace(i, ax, step * i[ax] + start)])


def _split_shape(x, axis=0, sections=2, index=0):
    ax = norm_axis(axis, len(x))
    return replace(x, ax, x[ax] // sections)


@tw.op(reference=lambda x, axis=0, sections=2, index=0: np.split(x, sections, axis=axis)[index].copy(),
       out_shape=_split_shape)
def split(x, axis=0, sections=2, index=0):
    """Piece `index` of x split into `sections` equal pieces along axis."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim, lambda *i: x[replace(i, ax, i[ax] + index * (x.shape[ax] // sections))])


def _pad_shape(x, pads=()):
    return tuple(n + sum(pads[d]) if d < len(pads) else n for d, n in enumerate(x))


def _pad_ref(x, pads=()):
    width = [tuple(pads[d]) if d < len(pads) else (0, 0) for d in range(x.ndim)]
    return np.pad(x, width)


@tw.op(reference=_pad_ref, out_shape=_pad_shape)
def pad(x, pads=()):
    """Constant-zero padding; pads = ((before, after), ...) for the leading axes."""
    before = [pads[d][0] if d < len(pads) else 0 for d in range(x.ndim)]
    return tw.compute(x.ndim, lambda *i: x[tuple(v - b for v, b in zip(i, before))])


@tw.op(reference=lambda x, c=1, h=1, w=1: x.reshape(x.shape[0], -1),
       out_shape=lambda x, c=1, h=1, w=1: (x[0], x[1] * x[2] * x[3]))
def flatten(x, c=1, h=1, w=1):
    """(n, c, h, w) -> (n, c*h*w); the extents h, w are attributes (c only for checking)."""
    return lambda n, k: x[n, k // (h * w), (k // w) % h, k % w]


@tw.op(reference=lambda x, c=1, h=1, w=1: x.reshape(x.shape[0], c, h, w),
       out_shape=lambda x, c=1, h=1, w=1: (x[0], c, h, w))
def unflatten(x, c=1, h=1, w=1):
    """(n, c*h*w) -> (n, c, h, w) with c, h, w attributes."""
    return lambda n, ci, y, xx: x[n, ci * (h * w) + y * w + xx]


@tw.op(reference=lambda x, axis=0: np.flip(x, axis=axis).copy(), out_shape=lambda x, axis=0: tuple(x))
def flip(x, axis=0):
    """Reverse along axis: x[n - 1 - i]."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim, lambda *i: x[replace(i, ax, x.shape[ax] - 1 - i[ax])])


@tw.op(reference=lambda x, axis=0: np.squeeze(x, axis=axis))
def squeeze(x, axis=0):
    """Drop a size-1 axis."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim - 1, lambda *i: x[insert(i, ax, 0)])


@tw.op(reference=lambda x, axis=0: np.expand_dims(x, axis),
       out_shape=lambda x, axis=0: insert(tuple(x), norm_axis(axis, len(x) + 1), 1))
def unsqueeze(x, axis=0):
    """Insert a size-1 axis."""
    ax = norm_axis(axis, x.ndim + 1)
    return tw.compute(x.ndim + 1, lambda *i: x[i[:ax] + i[ax + 1:]])


@tw.op(reference=lambda x: np.diagonal(x, axis1=1, axis2=2).copy())
def batch_diagonal(x):
    """Diagonals of a batch of square matrices: (b, n, n) -> (b, n)."""
    return lambda b, i: x[b, i, i]


@tw.op(reference=lambda x, scale=2: x.repeat(scale, axis=2).repeat(scale, axis=3))
def upsample_nearest2d(x, scale=2):
    """Nearest-neighbour upsampling of NCHW by an integer factor: x[b, c, y // s, x // s]."""
    return lambda b, c, y, xx: x[b, c, y // scale, xx // scale]


@tw.op(reference=lambda x: x.copy())
def identity(x):
    """Copy."""
    return tw.compute(x.ndim, lambda *i: x[i])


ELEMENTWISE = ("identity",)

CASES = [
    Case("transpose", [(5, 7)]),
    Case("permute", [(2, 3, 4)], {"perm": (2, 0, 1)}),
    Case("permute", [(2, 3, 4, 5)], {"perm": (0, 2, 3, 1)}, name="permute_nchw_to_nhwc"),
    Case("broadcast_to", [(4, 5)], {"shape": (3, 4, 5)}),
    Case("broadcast_to", [(3, 5)], {"shape": (3, 4, 5), "new_axes": (1,)}, name="broadcast_to_middle"),
    Case("concat", [(3, 4), (2, 4)], {"axis": 0}),
    Case("concat", [(2, 3, 4), (2, 5, 4)], {"axis": 1}, name="concat_axis1"),
    Case("concat", [(2, 3, 4), (2, 3, 2)], {"axis": -1}, name="concat_last"),
    Case("slice_axis", [(7, 5)], {"axis": 0, "start": 2, "stop": 6}),
    Case("slice_axis", [(3, 9, 2)], {"axis": 1, "start": 1, "stop": 8, "step": 3}, name="slice_axis_step"),
    Case("slice_axis", [(3, 8)], {"axis": -1, "start": 2, "stop": -1}, name="slice_axis_neg_stop"),
    Case("split", [(6, 5)], {"axis": 0, "sections": 3, "index": 2}),
    Case("split", [(2, 8, 3)], {"axis": 1, "sections": 2, "index": 1}, name="split_axis1"),
    Case("pad", [(3, 4)], {"pads": ((1, 2), (0, 3))}),
    Case("pad", [(2, 3, 3, 4)], {"pads": ((0, 0), (0, 0), (1, 1), (2, 1))}, name="pad_nchw"),
    Case("flatten", [(2, 3, 4, 5)], {"c": 3, "h": 4, "w": 5}),
    Case("unflatten", [(2, 24)], {"c": 2, "h": 3, "w": 4}),
    Case("flip", [(4, 5)], {"axis": 1}),
    Case("squeeze", [(3, 1, 4)], {"axis": 1}),
    Case("unsqueeze", [(3, 4)], {"axis": 1}),
    Case("batch_diagonal", [(3, 4, 4)]),
    Case("upsample_nearest2d", [(1, 2, 3, 4)], {"scale": 2}),
    Case("identity", [(3, 4)]),
]

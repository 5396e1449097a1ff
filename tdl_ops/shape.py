"""Data movement: transpose, permute, broadcast, concat, slice, split, pad, flatten, flips, upsampling;
their gradient rules (mostly the inverse movement) and the few backward ops they need."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw
from tilewise.tdl.registry import ops

from ._cases import Case
from ._util import insert, norm_axis, replace


@tw.op(reference=lambda x: x.T.copy(), kernel="transpose")
def transpose(x):
    """2-D transpose."""
    return lambda i, j: x[j, i]


@transpose.def_grad
def _(g, x, out):
    return (transpose(g),)


@tw.op(reference=lambda x, perm=(1, 0): np.transpose(x, perm), kernel="permute")
def permute(x, perm=(1, 0)):
    """Axis permutation: out.shape[d] = x.shape[perm[d]]."""
    def f(*i):
        idx = [None] * len(perm)
        for d, p in enumerate(perm):
            idx[p] = i[d]
        return x[tuple(idx)]
    return tw.compute(len(perm), f)


@permute.def_grad
def _(g, x, out, perm):
    inverse = [0] * len(perm)
    for d, p in enumerate(perm):
        inverse[p] = d
    return (permute(g, perm=tuple(inverse)),)


def _new_axes(ndim, shape, new_axes):
    return tuple(new_axes) if new_axes else tuple(range(len(shape) - ndim))


def _expand(x, shape, new_axes):
    axes = _new_axes(x.ndim, shape, new_axes)
    return np.broadcast_to(np.expand_dims(x, axes), shape).copy()


@tw.op(reference=lambda x, shape=(), new_axes=(): _expand(x, shape, new_axes),
       out_shape=lambda x, shape=(), new_axes=(): tuple(shape), kernel="broadcast_to")
def broadcast_to(x, shape=(), new_axes=()):
    """Broadcast to shape by repeating along new_axes (x has the other axes; default: leading)."""
    axes = _new_axes(x.ndim, shape, new_axes)
    kept = [d for d in range(len(shape)) if d not in axes]
    return tw.compute(len(shape), lambda *i: x[tuple(i[d] for d in kept)])


@broadcast_to.def_grad
def _(g, x, out, shape, new_axes):
    axes = _new_axes(x.ndim, shape, new_axes)
    return (ops.sum_axes(g, axes=axes) if axes else g,)


def _concat_shape(a, b, axis=0):
    ax = norm_axis(axis, len(a))
    return replace(a, ax, a[ax] + b[ax])


@tw.op(reference=lambda a, b, axis=0: np.concatenate([a, b], axis=axis), out_shape=_concat_shape, kernel="concat")
def concat(a, b, axis=0):
    """Concatenate two tensors along axis (out-of-bounds reads are 0)."""
    ax = norm_axis(axis, a.ndim)
    return tw.compute(a.ndim, lambda *i: a[i] + b[replace(i, ax, i[ax] - a.shape[ax])])


@concat.def_grad
def _(g, a, b, out, axis):
    ax = norm_axis(axis, a.ndim)
    n = a.shape[ax]
    return slice_axis(g, axis=ax, start=0, stop=n), slice_axis(g, axis=ax, start=n, stop=0)


def _stop(stop, n):
    return stop if stop > 0 else n + stop


def _slice_shape(x, axis=0, start=0, stop=0, step=1):
    ax = norm_axis(axis, len(x))
    return replace(x, ax, len(range(start, _stop(stop, x[ax]), step)))


def _slice_ref(x, axis=0, start=0, stop=0, step=1):
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(start, _stop(stop, x.shape[axis]), step)
    return x[tuple(idx)].copy()


@tw.op(reference=_slice_ref, out_shape=_slice_shape, kernel="slice_axis")
def slice_axis(x, axis=0, start=0, stop=0, step=1):
    """x[start:stop:step] along axis (start >= 0, step > 0; stop <= 0 counts from the end)."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim, lambda *i: x[replace(i, ax, step * i[ax] + start)])


@slice_axis.def_grad
def _(g, x, out, axis, start, stop, step):
    ax = norm_axis(axis, x.ndim)
    return (slice_axis_grad(g, axis=ax, start=start, step=step, size=x.shape[ax]),)


def _split_shape(x, axis=0, sections=2, index=0):
    ax = norm_axis(axis, len(x))
    return replace(x, ax, x[ax] // sections)


@tw.op(reference=lambda x, axis=0, sections=2, index=0: np.split(x, sections, axis=axis)[index].copy(),
       out_shape=_split_shape, kernel="split")
def split(x, axis=0, sections=2, index=0):
    """Piece `index` of x split into `sections` equal pieces along axis."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim, lambda *i: x[replace(i, ax, i[ax] + index * (x.shape[ax] // sections))])


@split.def_grad
def _(g, x, out, axis, sections, index):
    ax = norm_axis(axis, x.ndim)
    return (slice_axis_grad(g, axis=ax, start=index * (x.shape[ax] // sections), size=x.shape[ax]),)


def _pad_shape(x, pads=()):
    return tuple(n + sum(pads[d]) if d < len(pads) else n for d, n in enumerate(x))


def _pad_ref(x, pads=()):
    width = [tuple(pads[d]) if d < len(pads) else (0, 0) for d in range(x.ndim)]
    return np.pad(x, width)


@tw.op(reference=_pad_ref, out_shape=_pad_shape, kernel="pad")
def pad(x, pads=()):
    """Constant-zero padding; pads = ((before, after), ...) for the leading axes."""
    before = [pads[d][0] if d < len(pads) else 0 for d in range(x.ndim)]
    return tw.compute(x.ndim, lambda *i: x[tuple(v - b for v, b in zip(i, before))])


@pad.def_grad
def _(g, x, out, pads):
    return (unpad(g, pads=pads),)


@tw.op(reference=lambda x, c=1, h=1, w=1: x.reshape(x.shape[0], -1),
       out_shape=lambda x, c=1, h=1, w=1: (x[0], x[1] * x[2] * x[3]), kernel="reshape")
def flatten(x, c=1, h=1, w=1):
    """(n, c, h, w) -> (n, c*h*w); the extents h, w are attributes (c only for checking)."""
    return lambda n, k: x[n, k // (h * w), (k // w) % h, k % w]


@flatten.def_grad
def _(g, x, out, c, h, w):
    return (unflatten(g, c=x.shape[1], h=x.shape[2], w=x.shape[3]),)


@tw.op(reference=lambda x, c=1, h=1, w=1: x.reshape(x.shape[0], c, h, w),
       out_shape=lambda x, c=1, h=1, w=1: (x[0], c, h, w), kernel="reshape")
def unflatten(x, c=1, h=1, w=1):
    """(n, c*h*w) -> (n, c, h, w) with c, h, w attributes."""
    return lambda n, ci, y, xx: x[n, ci * (h * w) + y * w + xx]


@unflatten.def_grad
def _(g, x, out, c, h, w):
    return (flatten(g, c=c, h=h, w=w),)


@tw.op(reference=lambda x, axis=0: np.flip(x, axis=axis).copy(), out_shape=lambda x, axis=0: tuple(x), kernel="flip")
def flip(x, axis=0):
    """Reverse along axis: x[n - 1 - i]."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim, lambda *i: x[replace(i, ax, x.shape[ax] - 1 - i[ax])])


@flip.def_grad
def _(g, x, out, axis):
    return (flip(g, axis=axis),)


@tw.op(reference=lambda x, axis=0: np.squeeze(x, axis=axis), kernel="squeeze")
def squeeze(x, axis=0):
    """Drop a size-1 axis."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim - 1, lambda *i: x[insert(i, ax, 0)])


@squeeze.def_grad
def _(g, x, out, axis):
    return (unsqueeze(g, axis=norm_axis(axis, x.ndim)),)


@tw.op(reference=lambda x, axis=0: np.expand_dims(x, axis),
       out_shape=lambda x, axis=0: insert(tuple(x), norm_axis(axis, len(x) + 1), 1), kernel="unsqueeze")
def unsqueeze(x, axis=0):
    """Insert a size-1 axis."""
    ax = norm_axis(axis, x.ndim + 1)
    return tw.compute(x.ndim + 1, lambda *i: x[i[:ax] + i[ax + 1:]])


@unsqueeze.def_grad
def _(g, x, out, axis):
    return (squeeze(g, axis=norm_axis(axis, x.ndim + 1)),)


@tw.op(reference=lambda x: np.diagonal(x, axis1=1, axis2=2).copy(), kernel="batch_diagonal")
def batch_diagonal(x):
    """Diagonals of a batch of square matrices: (b, n, n) -> (b, n)."""
    return lambda b, i: x[b, i, i]


@batch_diagonal.def_grad
def _(g, x, out):
    return (batch_diagonal_grad(g),)


@tw.op(reference=lambda x, scale=2: x.repeat(scale, axis=2).repeat(scale, axis=3), kernel="upsample_nearest2d")
def upsample_nearest2d(x, scale=2):
    """Nearest-neighbour upsampling of NCHW by an integer factor: x[b, c, y // s, x // s]."""
    return lambda b, c, y, xx: x[b, c, y // scale, xx // scale]


@upsample_nearest2d.def_grad
def _(g, x, out, scale):
    return (upsample_nearest2d_grad(g, scale=scale),)


@tw.op(reference=lambda x: x.copy(), kernel="identity")
def identity(x):
    """Copy."""
    return tw.compute(x.ndim, lambda *i: x[i])


@identity.def_grad
def _(g, x, out):
    return (g,)


# ---------------------------------------------------------------- gradients


def _slice_grad_ref(dy, axis=0, start=0, step=1, size=1):
    shape = replace(dy.shape, axis, size)
    out = np.zeros(shape)
    idx = [slice(None)] * dy.ndim
    idx[axis] = slice(start, start + step * (dy.shape[axis] - 1) + 1, step)
    out[tuple(idx)] = dy
    return out


@tw.op(reference=_slice_grad_ref, out_shape=lambda dy, axis=0, start=0, step=1, size=1: replace(dy, axis, size),
       kernel="slice_axis_grad")
def slice_axis_grad(dy, axis=0, start=0, step=1, size=1):
    """Gradient of slice_axis / split: dy scattered back to positions start + step * k of an axis of
    length size (axis >= 0), zero elsewhere."""
    def f(*i):
        k = i[axis] - start
        v = dy[replace(i, axis, k // step if step > 1 else k)]  # reads before start or past the end are 0
        return v if step == 1 else (tw.index_value(k % step) == 0) * v
    return tw.compute(dy.ndim, f)


def _unpad_shape(dy, pads=()):
    return tuple(n - sum(pads[d]) if d < len(pads) else n for d, n in enumerate(dy))


def _unpad_ref(dy, pads=()):
    idx = tuple(slice(pads[d][0], n - pads[d][1]) if d < len(pads) else slice(None) for d, n in enumerate(dy.shape))
    return dy[idx].copy()


@tw.op(reference=_unpad_ref, out_shape=_unpad_shape, kernel="unpad")
def unpad(dy, pads=()):
    """Gradient of pad: the interior, dropping pads = ((before, after), ...) of the leading axes."""
    before = [pads[d][0] if d < len(pads) else 0 for d in range(dy.ndim)]
    return tw.compute(dy.ndim, lambda *i: dy[tuple(v + b for v, b in zip(i, before))])


@unpad.def_grad
def _(g, x, out, pads):
    return (pad(g, pads=pads),)


@tw.op(reference=lambda dy: dy[:, :, None] * np.eye(dy.shape[1]), out_shape=lambda dy: (dy[0], dy[1], dy[1]),
       kernel="batch_diagonal_grad")
def batch_diagonal_grad(dy):
    """Gradient of batch_diagonal: dy on the diagonals of a batch of square matrices, zero elsewhere."""
    return lambda b, i, j: dy[b, i] * (tw.index_value(i) == tw.index_value(j))


def _upsample_grad_ref(dy, scale=2):
    n, c, h, w = dy.shape
    return dy.reshape(n, c, h // scale, scale, w // scale, scale).sum(axis=(3, 5))


@tw.op(reference=_upsample_grad_ref,
       out_shape=lambda dy, scale=2: (dy[0], dy[1], dy[2] // scale, dy[3] // scale), kernel="upsample_nearest2d_grad")
def upsample_nearest2d_grad(dy, scale=2):
    """Gradient of upsample_nearest2d: the sum of each scale x scale block."""
    return lambda b, c, y, x: tw.Sum(lambda i, j: dy[b, c, scale * y + i, scale * x + j], extents=(scale, scale))


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
    Case("squeeze", [(3, 4, 1)], {"axis": -1}, name="squeeze_last"),
    Case("unsqueeze", [(3, 4)], {"axis": 1}),
    Case("unsqueeze", [(3, 4)], {"axis": 2}, name="unsqueeze_last"),
    Case("unsqueeze", [(3, 4)], {"axis": 0}, name="unsqueeze_first"),
    Case("batch_diagonal", [(3, 4, 4)]),
    Case("upsample_nearest2d", [(1, 2, 3, 4)], {"scale": 2}),
    Case("upsample_nearest2d", [(2, 3, 2, 3)], {"scale": 3}, name="upsample_nearest2d_3"),
    Case("identity", [(3, 4)]),
    Case("slice_axis_grad", [(4, 5)], {"axis": 0, "start": 2, "size": 7}),
    Case("slice_axis_grad", [(3, 3, 2)], {"axis": 1, "start": 1, "step": 3, "size": 9}, name="slice_axis_grad_step"),
    Case("slice_axis_grad", [(3, 2)], {"axis": 1, "start": 2, "step": 2, "size": 7}, name="slice_axis_grad_tail"),
    Case("unpad", [(6, 7)], {"pads": ((1, 2), (0, 3))}),
    Case("unpad", [(2, 3, 5, 7)], {"pads": ((0, 0), (0, 0), (1, 1), (2, 1))}, name="unpad_nchw"),
    Case("batch_diagonal_grad", [(3, 4)]),
    Case("upsample_nearest2d_grad", [(1, 2, 6, 8)], {"scale": 2}),
    Case("upsample_nearest2d_grad", [(2, 3, 6, 9)], {"scale": 3}, name="upsample_nearest2d_grad_3"),
    Case("broadcast_to", [(4,)], {"shape": (2, 3, 4)}, name="broadcast_to_two_leading"),
    Case("slice_axis", [(2, 9, 4)], {"axis": 2, "start": 1, "stop": 4}, name="slice_axis_last"),
]

"""Ops the layers of tw.nn and the model zoo need beyond the other families, with gradient rules.

* ``select`` / ``unselect``: one time step of a sequence and its gradient (unrolled LSTMs).
* ``stack_op(n)`` / ``concat_op(n)``: n-input stack and concatenation (LSTM outputs, Inception and
  NasNet branch joins). A TDL op has a fixed number of inputs, so each arity is its own op
  (``stack_4``, ``concat_3``), made on first use; ``tdl_ops.nary_op`` makes one from its name,
  which is how a saved graph using any arity loads back from JSON.
* ``split_heads`` / ``merge_heads``: multi-head attention layouts (PyTorch's packed q|k|v).
* ``add_broadcast`` / ``sum_leading``: y broadcast over x's leading axes (position embeddings)
  and its gradient.
* ``adaptive_avg_pool2d`` / ``adaptive_avg_pool2d_grad``: non-overlapping window averages
  (AdaptiveAvgPool2d when the input divides into the output size).

Ops that move whole rows between tensors (stack, unselect) read through a shifted index
``j + (t - k) * inner``: the read is in bounds only for the matching step, so the region
analysis stays exact (a ``where(t == k, ...)`` mask would read the whole input on every worker).
``inner`` is the extent of the last axis, passed as an attribute because an index variable
times a symbolic extent is not affine.

    >>> import numpy as np, tdl_ops
    >>> tdl_ops.select.evaluate(np.arange(6.0).reshape(3, 2), axis=0, index=1)
    array([2., 3.])
"""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw
from tilewise._core import GraphError, ShapeError

from ._cases import Case
from ._util import insert, nary, norm_axis

# ---------------------------------------------------------------- time steps


def _select_shape(x, axis=0, index=0):
    ax = norm_axis(axis, len(x))
    if not 0 <= index < x[ax]:
        raise ShapeError(f"op 'select': index {index} is outside axis {axis} of extent {x[ax]}")
    return tuple(x[:ax]) + tuple(x[ax + 1:])


@tw.op(reference=lambda x, axis=0, index=0: np.take(x, index, axis=axis), out_shape=_select_shape, kernel="select")
def select(x, axis=0, index=0):
    """x[..., index, ...] along axis: the axis disappears (one time step of a sequence)."""
    ax = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim - 1, lambda *i: x[insert(i, ax, index)])


def _unselect_ref(g, axis=0, index=0, size=1, inner=1):
    ax = norm_axis(axis, g.ndim + 1)
    out = np.zeros(insert(g.shape, ax, size))
    idx = [slice(None)] * out.ndim
    idx[ax] = index
    out[tuple(idx)] = g
    return out


def _unselect_shape(g, axis=0, index=0, size=1, inner=1):
    if not g:
        raise ShapeError("op 'unselect': the gradient must have at least one dimension (its rows are shifted)")
    if g[-1] != inner:
        raise ShapeError(f"op 'unselect': inner={inner} must be the last extent of the gradient {tuple(g)}")
    return insert(tuple(g), norm_axis(axis, len(g) + 1), size)


def _shifted(t, rest, step):
    """t read at ``rest`` with its last index moved by ``step`` rows of ``inner``: in bounds only when step is 0."""
    return t[tuple(rest[:-1]) + (rest[-1] + step,)]


@tw.op(reference=_unselect_ref, out_shape=_unselect_shape, kernel="unselect")
def unselect(g, axis=0, index=0, size=1, inner=1):
    """Gradient of select: g placed at ``index`` of a new axis of extent ``size``, zeros elsewhere.

    ``inner`` must be g's last extent (the shifted read needs it as a number)."""
    ax = norm_axis(axis, g.ndim + 1)

    def f(*i):
        rest = i[:ax] + i[ax + 1:]
        return _shifted(g, rest, (i[ax] - index) * inner)
    return tw.compute(g.ndim + 1, f)


@select.def_grad
def _select_grad(g, x, out=None, axis=0, index=0):
    ax = norm_axis(axis, len(x.shape))
    return (unselect(g, axis=ax, index=index, size=x.shape[ax], inner=g.shape[-1]),)


@unselect.def_grad
def _unselect_grad(g, x, out=None, axis=0, index=0, size=1, inner=1):
    return (select(g, axis=axis, index=index),)


# ---------------------------------------------------------------- n-ary stack and concat

_STACKS: dict[int, tw.Op] = {}
_CONCATS: dict[int, tw.Op] = {}


def _stack_shape(*shapes, axis=0, inner=1):
    first = tuple(shapes[0])
    for k, s in enumerate(shapes):
        if tuple(s) != first:
            raise ShapeError(f"op 'stack_{len(shapes)}': input x{k} has shape {tuple(s)}, x0 has {first}")
    return insert(first, norm_axis(axis, len(first) + 1), len(shapes))


def _stack_body(*xs, axis=0, inner=1):
    ax = norm_axis(axis, xs[0].ndim + 1)

    def f(*i):
        rest = i[:ax] + i[ax + 1:]
        total = _shifted(xs[0], rest, i[ax] * inner)
        for k in range(1, len(xs)):
            total = total + _shifted(xs[k], rest, (i[ax] - k) * inner)
        return total
    return tw.compute(xs[0].ndim + 1, f)


def stack_op(n: int) -> tw.Op:
    """The op stacking n same-shape tensors along a new ``axis`` (``inner`` = their last extent).

        >>> import numpy as np
        >>> stack_op(3).evaluate(np.ones(2), np.zeros(2), np.ones(2), axis=0, inner=2).tolist()
        [[1.0, 1.0], [0.0, 0.0], [1.0, 1.0]]
    """
    if not isinstance(n, int) or n < 1:
        raise GraphError(f"stack needs at least one tensor, got {n!r}")
    op = _STACKS.get(n)
    if op is None:
        name = f"stack_{n}"
        op = tw.op(nary(n, _stack_body, name, {"axis": 0, "inner": 1}), name=name,
                   reference=lambda *xs, axis=0, inner=1: np.stack(xs, axis=axis), out_shape=_stack_shape,
                   kernel="stack")

        def grad(g, *xs, out=None, axis=0, inner=1):
            return tuple(select(g, axis=axis, index=k) for k in range(len(xs)))
        op.def_grad(grad)
        _STACKS[n] = op
    return op


def _concat_shape(*shapes, axis=0):
    first = tuple(shapes[0])
    ax = norm_axis(axis, len(first))
    for k, s in enumerate(shapes):
        if len(s) != len(first) or any(a != b for d, (a, b) in enumerate(zip(s, first)) if d != ax):
            raise ShapeError(f"op 'concat_{len(shapes)}': input x{k} has shape {tuple(s)}, which does not "
                             f"match x0 {first} outside axis {axis}")
    return first[:ax] + (sum(s[ax] for s in shapes),) + first[ax + 1:]


def _concat_body(*xs, axis=0):
    ax = norm_axis(axis, xs[0].ndim)

    def f(*i):
        total, offset = xs[0][i], 0
        for k in range(1, len(xs)):
            offset = offset + xs[k - 1].shape[ax]
            total = total + xs[k][i[:ax] + (i[ax] - offset,) + i[ax + 1:]]
        return total
    return tw.compute(xs[0].ndim, f)


def concat_op(n: int) -> tw.Op:
    """The op concatenating n tensors along ``axis`` (reads outside each input are 0).

        >>> import numpy as np
        >>> concat_op(3).evaluate(np.ones(1), np.zeros(2), np.ones(1), axis=0).tolist()
        [1.0, 0.0, 0.0, 1.0]
    """
    if not isinstance(n, int) or n < 1:
        raise GraphError(f"concat needs at least one tensor, got {n!r}")
    op = _CONCATS.get(n)
    if op is None:
        name = f"concat_{n}"
        op = tw.op(nary(n, _concat_body, name, {"axis": 0}), name=name,
                   reference=lambda *xs, axis=0: np.concatenate(xs, axis=axis), out_shape=_concat_shape,
                   kernel="concat")

        def grad(g, *xs, out=None, axis=0):
            from .shape import slice_axis

            ax = norm_axis(axis, len(g.shape))
            grads, start = [], 0
            for x in xs:
                stop = start + x.shape[ax]
                # slice_axis reads stop <= 0 as counting from the end: 0 is "to the end".
                grads.append(slice_axis(g, axis=ax, start=start, stop=stop if stop < g.shape[ax] else 0))
                start = stop
            return tuple(grads)
        op.def_grad(grad)
        _CONCATS[n] = op
    return op


# ---------------------------------------------------------------- attention heads


def _split_heads_shape(x, heads=1, dim_head=1, piece=0, pieces=1):
    if x[2] != pieces * heads * dim_head:
        raise ShapeError(f"op 'split_heads': last extent {x[2]} is not pieces * heads * dim_head = "
                         f"{pieces} * {heads} * {dim_head}")
    return (x[0] * heads, x[1], dim_head)


def _split_heads_ref(x, heads=1, dim_head=1, piece=0, pieces=1):
    b, s, _ = x.shape
    e = heads * dim_head
    y = x[:, :, piece * e:(piece + 1) * e].reshape(b, s, heads, dim_head)
    return y.transpose(0, 2, 1, 3).reshape(b * heads, s, dim_head)


@tw.op(reference=_split_heads_ref, out_shape=_split_heads_shape, kernel="split_heads")
def split_heads(x, heads=1, dim_head=1, piece=0, pieces=1):
    """(b, s, pieces*heads*dh) -> (b*heads, s, dh), taking piece number ``piece`` (q|k|v packing: pieces=3)."""
    off = piece * heads * dim_head
    return lambda n, s, d: x[n // heads, s, off + (n % heads) * dim_head + d]


def _merge_heads_shape(x, heads=1, dim_head=1, piece=0, pieces=1):
    if x[0] % heads or x[2] != dim_head:
        raise ShapeError(f"op 'merge_heads': shape {tuple(x)} is not (b*{heads}, s, {dim_head})")
    return (x[0] // heads, x[1], pieces * heads * dim_head)


def _merge_heads_ref(x, heads=1, dim_head=1, piece=0, pieces=1):
    bh, s, d = x.shape
    b, e = bh // heads, heads * dim_head
    out = np.zeros((b, s, pieces * e))
    out[:, :, piece * e:(piece + 1) * e] = x.reshape(b, heads, s, d).transpose(0, 2, 1, 3).reshape(b, s, e)
    return out


@tw.op(reference=_merge_heads_ref, out_shape=_merge_heads_shape, kernel="merge_heads")
def merge_heads(x, heads=1, dim_head=1, piece=0, pieces=1):
    """(b*heads, s, dh) -> (b, s, pieces*heads*dh) at piece ``piece``, zeros elsewhere (split_heads' inverse)."""
    e = heads * dim_head
    off = piece * e

    def f(b, s, c):
        v = x[b * heads + (c - off) // dim_head, s, (c - off) % dim_head]
        if pieces == 1:
            return v
        # Outside this piece the floor division lands in another batch row: mask it.
        k = tw.index_value(c - off)
        return tw.where((k >= 0) * (k < e), v, 0.0)
    return f


@split_heads.def_grad
def _split_heads_grad(g, x, out=None, heads=1, dim_head=1, piece=0, pieces=1):
    return (merge_heads(g, heads=heads, dim_head=dim_head, piece=piece, pieces=pieces),)


@merge_heads.def_grad
def _merge_heads_grad(g, x, out=None, heads=1, dim_head=1, piece=0, pieces=1):
    return (split_heads(g, heads=heads, dim_head=dim_head, piece=piece, pieces=pieces),)


# ---------------------------------------------------------------- broadcasting over leading axes


@tw.op(reference=lambda x, y: x + y, kernel="add_broadcast")
def add_broadcast(x, y):
    """x + y with y broadcast over x's leading axes (y's shape = x's trailing shape)."""
    lead = x.ndim - y.ndim
    return tw.compute(x.ndim, lambda *i: x[i] + y[i[lead:]])


@tw.op(reference=lambda x, lead=1: x.sum(axis=tuple(range(lead))), kernel="sum_leading")
def sum_leading(x, lead=1):
    """Sum over the first ``lead`` axes (gradient of a broadcast over them)."""
    return tw.compute(x.ndim - lead, lambda *r: tw.Sum(lambda *k: x[k + r], ndim=lead))


@add_broadcast.def_grad
def _add_broadcast_grad(g, x, y, out=None):
    return g, sum_leading(g, lead=len(x.shape) - len(y.shape))


@sum_leading.def_grad
def _sum_leading_grad(g, x, out=None, lead=1):
    from .shape import broadcast_to

    return (broadcast_to(g, shape=tuple(x.shape)),)


# ---------------------------------------------------------------- non-overlapping window average


def _window_shape(x, kernel_h=1, kernel_w=1):
    if x[2] % kernel_h or x[3] % kernel_w:
        raise ShapeError(f"op 'adaptive_avg_pool2d': input {x[2]}x{x[3]} does not divide into "
                         f"{kernel_h}x{kernel_w} windows")
    return (x[0], x[1], x[2] // kernel_h, x[3] // kernel_w)


def _window_ref(x, kernel_h=1, kernel_w=1):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // kernel_h, kernel_h, w // kernel_w, kernel_w).mean(axis=(3, 5))


@tw.op(reference=_window_ref, out_shape=_window_shape, kernel="adaptive_avg_pool2d")
def adaptive_avg_pool2d(x, kernel_h=1, kernel_w=1):
    """Mean over non-overlapping kernel_h x kernel_w windows (AdaptiveAvgPool2d for divisible sizes)."""
    return lambda b, c, y, z: tw.Sum(lambda i, j: x[b, c, kernel_h * y + i, kernel_w * z + j],
                                     extents=(kernel_h, kernel_w)) / (kernel_h * kernel_w)


@tw.op(reference=lambda dy, kernel_h=1, kernel_w=1: np.repeat(np.repeat(dy, kernel_h, 2), kernel_w, 3)
       / (kernel_h * kernel_w),
       out_shape=lambda dy, kernel_h=1, kernel_w=1: (dy[0], dy[1], dy[2] * kernel_h, dy[3] * kernel_w),
       kernel="adaptive_avg_pool2d_grad")
def adaptive_avg_pool2d_grad(dy, kernel_h=1, kernel_w=1):
    """Gradient of adaptive_avg_pool2d: each window's dy spread evenly over it."""
    return lambda b, c, y, z: dy[b, c, y // kernel_h, z // kernel_w] / (kernel_h * kernel_w)


@adaptive_avg_pool2d.def_grad
def _adaptive_avg_pool2d_grad(g, x, out=None, kernel_h=1, kernel_w=1):
    return (adaptive_avg_pool2d_grad(g, kernel_h=kernel_h, kernel_w=kernel_w),)


@adaptive_avg_pool2d_grad.def_grad
def _adaptive_avg_pool2d_grad_grad(g, dy, out=None, kernel_h=1, kernel_w=1):
    # The gradient op is linear with its transpose equal to window sums / (kh*kw): the forward op.
    return (adaptive_avg_pool2d(g, kernel_h=kernel_h, kernel_w=kernel_w),)


CASES = [
    Case("select", [(4, 3, 5)], {"axis": 0, "index": 2}),
    Case("select", [(3, 4, 5)], {"axis": 1, "index": 3}, name="select_axis1"),
    Case("unselect", [(3, 5)], {"axis": 0, "index": 2, "size": 4, "inner": 5}),
    Case("unselect", [(3, 5)], {"axis": 1, "index": 0, "size": 3, "inner": 5}, name="unselect_axis1"),
    Case("unselect", [(3, 5)], {"axis": 2, "index": 1, "size": 4, "inner": 5}, name="unselect_last"),
    Case("split_heads", [(2, 3, 12)], {"heads": 2, "dim_head": 2, "piece": 1, "pieces": 3}),
    Case("split_heads", [(2, 3, 6)], {"heads": 3, "dim_head": 2}, name="split_heads_single"),
    Case("merge_heads", [(6, 3, 2)], {"heads": 3, "dim_head": 2}),
    Case("merge_heads", [(4, 3, 2)], {"heads": 2, "dim_head": 2, "piece": 2, "pieces": 3}, name="merge_heads_part"),
    Case("add_broadcast", [(2, 3, 4), (3, 4)]),
    Case("add_broadcast", [(2, 3, 4), (4,)], name="add_broadcast_row"),
    Case("sum_leading", [(2, 3, 4)], {"lead": 1}),
    Case("sum_leading", [(2, 3, 4)], {"lead": 2}, name="sum_leading_2"),
    Case("adaptive_avg_pool2d", [(2, 3, 6, 4)], {"kernel_h": 3, "kernel_w": 2}),
    Case("adaptive_avg_pool2d", [(2, 3, 5, 7)], {"kernel_h": 5, "kernel_w": 7}, name="adaptive_avg_pool2d_global"),
    Case("adaptive_avg_pool2d_grad", [(2, 3, 2, 2)], {"kernel_h": 3, "kernel_w": 2}),
]

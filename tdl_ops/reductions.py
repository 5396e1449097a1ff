"""Reductions along an axis attribute (any rank via tw.compute), argmax, logsumexp, cumsum; sums over
several axes (the gradient of a broadcast); the reductions' gradient ops and rules."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw
from tilewise.tdl.registry import ops

from ._cases import Case
from ._util import insert, norm_axis, replace


def _along(x, axis, body):
    """Rank-(ndim-1) output; body(row) gets the reduced row as a function of the reduction variable."""
    a = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim - 1, lambda *i: body(lambda k: x[insert(i, a, k)], a))


@tw.op(reference=lambda x, axis=-1: x.sum(axis=axis), kernel="reduce_sum")
def reduce_sum(x, axis=-1):
    """Sum along axis."""
    return _along(x, axis, lambda row, a: tw.Sum(row))


@reduce_sum.def_grad
def _(g, x, out, axis):
    return (ops.broadcast_to(g, shape=x.shape, new_axes=(norm_axis(axis, x.ndim),)),)


@tw.op(reference=lambda x, axis=-1: x.mean(axis=axis), kernel="reduce_mean")
def reduce_mean(x, axis=-1):
    """Mean along axis."""
    return _along(x, axis, lambda row, a: tw.Sum(row) / x.shape[a])


@reduce_mean.def_grad
def _(g, x, out, axis):
    a = norm_axis(axis, x.ndim)
    return (reduce_mean_grad(g, axis=a, size=x.shape[a]),)


@tw.op(reference=lambda x, axis=-1: x.max(axis=axis), kernel="reduce_max")
def reduce_max(x, axis=-1):
    """Max along axis."""
    return _along(x, axis, lambda row, a: tw.Max(row))


@reduce_max.def_grad
def _(g, x, out, axis):
    return (reduce_extremum_grad(g, x, out, axis=norm_axis(axis, x.ndim)),)


@tw.op(reference=lambda x, axis=-1: x.min(axis=axis), kernel="reduce_min")
def reduce_min(x, axis=-1):
    """Min along axis."""
    return _along(x, axis, lambda row, a: tw.Min(row))


@reduce_min.def_grad
def _(g, x, out, axis):
    return (reduce_extremum_grad(g, x, out, axis=norm_axis(axis, x.ndim)),)


@tw.op(reference=lambda x, axis=-1: x.prod(axis=axis), kernel="reduce_prod")
def reduce_prod(x, axis=-1):
    """Product along axis."""
    return _along(x, axis, lambda row, a: tw.Prod(row))


@reduce_prod.def_grad
def _(g, x, out, axis):
    return (reduce_prod_grad(g, x, axis=norm_axis(axis, x.ndim)),)


@tw.op(reference=lambda x, axis=-1: x.var(axis=axis), kernel="reduce_var")
def reduce_var(x, axis=-1):
    """Biased variance along axis."""
    def body(row, a):
        mu = tw.Sum(row) / x.shape[a]
        return tw.Sum(lambda k: (row(k) - mu) ** 2) / x.shape[a]
    return _along(x, axis, body)


@reduce_var.def_grad
def _(g, x, out, axis):
    return (reduce_var_grad(g, x, axis=norm_axis(axis, x.ndim)),)


@tw.op(reference=lambda x, axis=-1: np.log(np.exp(x - x.max(axis=axis, keepdims=True)).sum(axis=axis))
       + x.max(axis=axis), kernel="logsumexp")
def logsumexp(x, axis=-1):
    """log(sum(exp(x))) along axis, shifted by the max."""
    def body(row, a):
        m = tw.Max(row)
        return m + tw.log(tw.Sum(lambda k: tw.exp(row(k) - m)))
    return _along(x, axis, body)


@logsumexp.def_grad
def _(g, x, out, axis):
    return (logsumexp_grad(g, x, out, axis=norm_axis(axis, x.ndim)),)


def _first_index(row, m):
    """Min over k of k where row(k) == m or row(k) is NaN: the index torch's argmax/argmin and max/min
    along a dim return (the first extremum m; the first NaN in a row holding one, m being NaN there)."""
    def at(k):
        v = row(k)
        return tw.where(v == m, tw.index_value(k), tw.where(v != v, tw.index_value(k), _INF))
    return tw.Min(at)


_INF = float("inf")


@tw.op(reference=lambda x, axis=-1: np.argmax(x, axis=axis).astype(np.float64), kernel="argmax")
def argmax(x, axis=-1):
    """Index of the first maximum along axis (as float64), the first NaN in a row holding one (as torch)."""
    return _along(x, axis, lambda row, a: _first_index(row, tw.Max(row)))


@argmax.def_grad
def _(g, x, out, axis):
    return (None,)  # an index: piecewise constant


@tw.op(reference=lambda x, axis=-1: np.argmin(x, axis=axis).astype(np.float64), kernel="argmin")
def argmin(x, axis=-1):
    """Index of the first minimum along axis (as float64), the first NaN in a row holding one (as torch)."""
    return _along(x, axis, lambda row, a: _first_index(row, tw.Min(row)))


@argmin.def_grad
def _(g, x, out, axis):
    return (None,)


@tw.op(reference=lambda x, axis=-1: x.max(axis=axis), kernel="reduce_max")
def max_dim(x, axis=-1):
    """Max along axis as torch.max(x, dim)'s values: the gradient goes to the index torch returns (the
    first maximum, the first NaN), not split over ties as reduce_max's (torch.amax's)."""
    return _along(x, axis, lambda row, a: tw.Max(row))


@max_dim.def_grad
def _(g, x, out, axis):
    return (reduce_first_extremum_grad(g, x, out, axis=norm_axis(axis, x.ndim)),)


@tw.op(reference=lambda x, axis=-1: x.min(axis=axis), kernel="reduce_min")
def min_dim(x, axis=-1):
    """Min along axis as torch.min(x, dim)'s values: the gradient goes to the index torch returns."""
    return _along(x, axis, lambda row, a: tw.Min(row))


@min_dim.def_grad
def _(g, x, out, axis):
    return (reduce_first_extremum_grad(g, x, out, axis=norm_axis(axis, x.ndim)),)


@tw.op(reference=lambda x: np.cumsum(x, axis=-1), out_shape=lambda x: tuple(x), kernel="cumsum")
def cumsum(x):
    """Inclusive prefix sum over the last axis of a matrix: sum of x[i, k] for k <= j."""
    return lambda i, j: tw.Sum(lambda k: x[i, k] * (tw.index_value(k) <= tw.index_value(j)))


@cumsum.def_grad
def _(g, x, out):
    return (cumsum_grad(g),)


@tw.op(reference=lambda x: x.sum(axis=0), kernel="sum_rows")
def sum_rows(x):
    """Sum over the first axis of a matrix (bias gradient of a linear layer)."""
    return lambda j: tw.Sum(lambda b: x[b, j])


@sum_rows.def_grad
def _(g, x, out):
    return (ops.broadcast_to(g, shape=x.shape, new_axes=(0,)),)


def _kept(ndim, axes):
    return tuple(d for d in range(ndim) if d not in axes)


def _sum_axes_shape(x, axes=()):
    axes = {norm_axis(a, len(x)) for a in axes}
    return tuple(x[d] for d in _kept(len(x), axes))


@tw.op(reference=lambda x, axes=(): x.sum(axis=tuple(axes)), out_shape=_sum_axes_shape, kernel="sum_axes")
def sum_axes(x, axes=()):
    """Sum over several axes (at least one): the gradient of a broadcast, e.g. of a bias."""
    red = tuple(sorted({norm_axis(a, x.ndim) for a in axes}))
    kept = _kept(x.ndim, red)

    def f(*i):
        def elem(*r):
            idx = [None] * x.ndim
            for d, v in zip(kept, i):
                idx[d] = v
            for d, v in zip(red, r):
                idx[d] = v
            return x[tuple(idx)]
        return tw.Sum(elem, ndim=len(red))
    return tw.compute(len(kept), f)


@sum_axes.def_grad
def _(g, x, out, axes):
    return (ops.broadcast_to(g, shape=x.shape, new_axes=tuple(sorted({norm_axis(a, x.ndim) for a in axes}))),)


# ---------------------------------------------------------------- gradients


def _drop(i, a):
    """The index of the reduced tensor: i without position a."""
    return tuple(i[:a]) + tuple(i[a + 1:])


@tw.op(reference=lambda dy, axis=0, size=1: np.repeat(np.expand_dims(dy, axis), size, axis=axis) / size,
       out_shape=lambda dy, axis=0, size=1: insert(tuple(dy), axis, size), kernel="reduce_mean_grad")
def reduce_mean_grad(dy, axis=0, size=1):
    """Gradient of reduce_mean: dy / size repeated `size` times along a new axis (axis >= 0)."""
    return tw.compute(dy.ndim + 1, lambda *i: dy[_drop(i, axis)] / size)


def _extremum_grad_ref(dy, x, y, axis=0):
    hit = x == np.expand_dims(y, axis)
    return hit * np.expand_dims(dy / hit.sum(axis=axis), axis)


@tw.op(reference=_extremum_grad_ref, kernel="reduce_extremum_grad")
def reduce_extremum_grad(dy, x, y, axis=0):
    """Gradient of reduce_max / reduce_min (y the result): dy split evenly over the entries equal to y."""
    def f(*i):
        j = _drop(i, axis)
        return (x[i] == y[j]) * dy[j] / tw.Sum(lambda k: x[replace(i, axis, k)] == y[j])
    return tw.compute(x.ndim, f)


def _first_extremum_grad_ref(dy, x, y, axis=0):
    hit = (x == np.expand_dims(y, axis)) | np.isnan(x)
    first = np.expand_dims(np.argmax(hit, axis=axis), axis)  # the first hit (0 where none: masked below)
    dx = np.zeros_like(x, dtype=np.result_type(dy, x))
    np.put_along_axis(dx, first, np.expand_dims(np.where(hit.any(axis=axis), dy, 0.0), axis), axis=axis)
    return dx


@tw.op(reference=_first_extremum_grad_ref, out_shape=lambda dy, x, y, axis=0: tuple(x),  # i[axis] is only compared
       kernel="reduce_first_extremum_grad")
def reduce_first_extremum_grad(dy, x, y, axis=0):
    """Gradient of max_dim / min_dim (y the result): dy to the index torch returns (the first entry equal
    to y, or the first NaN), 0 to every other entry, ties included."""
    def f(*i):
        j = _drop(i, axis)
        return tw.where(_first_index(lambda k: x[replace(i, axis, k)], y[j]) == tw.index_value(i[axis]),
                        dy[j], 0.0)
    return tw.compute(x.ndim, f)


def _prod_grad_ref(dy, x, axis=0):
    n = x.shape[axis]
    others = np.stack([np.prod(np.delete(x, k, axis=axis), axis=axis) for k in range(n)], axis=axis)
    return np.expand_dims(dy, axis) * others


@tw.op(reference=_prod_grad_ref, out_shape=lambda dy, x, axis=0: tuple(x),  # i[axis] is only compared
       kernel="reduce_prod_grad")
def reduce_prod_grad(dy, x, axis=0):
    """Gradient of reduce_prod: dy times the product of the other entries (exact with zeros)."""
    def f(*i):
        others = tw.Prod(lambda k: tw.where(tw.index_value(k) == tw.index_value(i[axis]), 1.0,
                                            x[replace(i, axis, k)]))
        return dy[_drop(i, axis)] * others
    return tw.compute(x.ndim, f)


@tw.op(reference=lambda dy, x, axis=0: 2.0 * np.expand_dims(dy, axis) * (x - x.mean(axis=axis, keepdims=True))
       / x.shape[axis], kernel="reduce_var_grad")
def reduce_var_grad(dy, x, axis=0):
    """Gradient of reduce_var: 2 dy (x - mean) / n."""
    def f(*i):
        n = x.shape[axis]
        mu = tw.Sum(lambda k: x[replace(i, axis, k)]) / n
        return 2.0 * dy[_drop(i, axis)] * (x[i] - mu) / n
    return tw.compute(x.ndim, f)


@tw.op(reference=lambda dy, x, y, axis=0: np.expand_dims(dy, axis) * np.exp(x - np.expand_dims(y, axis)),
       kernel="logsumexp_grad")
def logsumexp_grad(dy, x, y, axis=0):
    """Gradient of logsumexp (y the result): dy exp(x - y), the softmax along axis."""
    return tw.compute(x.ndim, lambda *i: dy[_drop(i, axis)] * tw.exp(x[i] - y[_drop(i, axis)]))


@tw.op(reference=lambda dy: np.flip(np.cumsum(np.flip(dy, -1), axis=-1), -1).copy(), out_shape=lambda dy: tuple(dy),
       kernel="cumsum_grad")
def cumsum_grad(dy):
    """Gradient of cumsum: the suffix sums, sum of dy[i, k] for k >= j."""
    return lambda i, j: tw.Sum(lambda k: dy[i, k] * (tw.index_value(k) >= tw.index_value(j)))


CASES = [
    Case("reduce_sum", [(4, 5)]),
    Case("reduce_sum", [(3, 4, 5)], {"axis": 1}, name="reduce_sum_axis1"),
    Case("reduce_sum", [(3, 4, 5)], {"axis": 0}, name="reduce_sum_axis0"),
    Case("reduce_mean", [(3, 4, 5)], {"axis": -1}),
    Case("reduce_mean", [(2, 3, 4, 5)], {"axis": 2}, name="reduce_mean_4d"),
    Case("reduce_mean", [(6, 4)], {"axis": 0}, name="reduce_mean_first"),
    Case("reduce_max", [(3, 4, 5)], {"axis": 1}),
    Case("reduce_max", [(6, 5)], {"axis": 0}, name="reduce_max_axis0"),
    Case("reduce_min", [(3, 4, 5)], {"axis": 2}),
    Case("reduce_prod", [(3, 4, 5)], {"axis": 1}),
    Case("reduce_var", [(3, 4, 5)], {"axis": 0}),
    Case("logsumexp", [(3, 6)]),
    Case("argmax", [(4, 7)], kinds=("distinct",)),
    Case("argmax", [(3, 4, 5)], {"axis": 1}, ("distinct",), name="argmax_axis1"),
    Case("argmin", [(4, 7)], kinds=("distinct",)),
    Case("argmin", [(3, 4, 5)], {"axis": 0}, ("distinct",), name="argmin_axis0"),
    Case("max_dim", [(3, 4, 5)], {"axis": 1}),
    Case("min_dim", [(6, 5)], {"axis": 0}),
    Case("cumsum", [(4, 6)]),
    Case("sum_rows", [(6, 5)]),
    Case("sum_axes", [(3, 4, 5)], {"axes": (0, 2)}),
    Case("sum_axes", [(2, 3, 4, 5)], {"axes": (0, 2, 3)}, name="sum_axes_channel"),
    Case("sum_axes", [(3, 4)], {"axes": (0, 1)}, name="sum_axes_all"),
    Case("sum_axes", [(3, 4, 5)], {"axes": (-1,)}, name="sum_axes_negative"),
    Case("reduce_mean_grad", [(3, 5)], {"axis": 1, "size": 4}),
    Case("reduce_mean_grad", [(3, 5)], {"axis": 2, "size": 6}, name="reduce_mean_grad_last"),
    Case("reduce_extremum_grad", [(3, 5), (3, 4, 5), (3, 5)], {"axis": 1}, ("normal", "distinct"),
         prepare=lambda inputs, attrs: [inputs[0], inputs[1], inputs[1].max(axis=1)]),
    Case("reduce_extremum_grad", [(4,), (3, 4), (4,)], {"axis": 0}, name="reduce_extremum_grad_ties",
         prepare=lambda inputs, attrs: [inputs[0], np.round(inputs[1]), np.round(inputs[1]).min(axis=0)]),
    Case("reduce_first_extremum_grad", [(3, 5), (3, 4, 5), (3, 5)], {"axis": 1}, ("normal", "distinct"),
         prepare=lambda inputs, attrs: [inputs[0], inputs[1], inputs[1].max(axis=1)]),
    Case("reduce_first_extremum_grad", [(4,), (3, 4), (4,)], {"axis": 0}, name="reduce_first_extremum_grad_ties",
         prepare=lambda inputs, attrs: [inputs[0], np.round(inputs[1]), np.round(inputs[1]).min(axis=0)]),
    Case("reduce_prod_grad", [(3, 5), (3, 4, 5)], {"axis": 1}),
    Case("reduce_prod_grad", [(4,), (3, 4)], {"axis": 0}, name="reduce_prod_grad_zero",
         prepare=lambda inputs, attrs: [inputs[0], np.where(np.arange(12).reshape(3, 4) == 5, 0.0, inputs[1])]),
    Case("reduce_var_grad", [(4, 5), (3, 4, 5)], {"axis": 0}),
    Case("logsumexp_grad", [(3,), (3, 6), (3,)], {"axis": 1},
         prepare=lambda inputs, attrs: [inputs[0], inputs[1], np.log(np.exp(inputs[1]).sum(axis=1))]),
    Case("cumsum_grad", [(4, 6)]),
]

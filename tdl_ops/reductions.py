"""Reductions along an axis attribute (any rank via tw.compute), argmax, logsumexp, cumsum."""

from __future__ import annotations

import numpy as np
import tilewise as tw

from ._cases import Case
from ._util import insert, norm_axis


def _along(x, axis, body):
    """Rank-(ndim-1) output; body(row) gets the reduced row as a function of the reduction variable."""
    a = norm_axis(axis, x.ndim)
    return tw.compute(x.ndim - 1, lambda *i: body(lambda k: x[insert(i, a, k)], a))


@tw.op(reference=lambda x, axis=-1: x.sum(axis=axis))
def reduce_sum(x, axis=-1):
    """Sum along axis."""
    return _along(x, axis, lambda row, a: tw.Sum(row))


@tw.op(reference=lambda x, axis=-1: x.mean(axis=axis))
def reduce_mean(x, axis=-1):
    """Mean along axis."""
    return _along(x, axis, lambda row, a: tw.Sum(row) / x.shape[a])


@tw.op(reference=lambda x, axis=-1: x.max(axis=axis))
def reduce_max(x, axis=-1):
    """Max along axis."""
    return _along(x, axis, lambda row, a: tw.Max(row))


@tw.op(reference=lambda x, axis=-1: x.min(axis=axis))
def reduce_min(x, axis=-1):
    """Min along axis."""
    return _along(x, axis, lambda row, a: tw.Min(row))


@tw.op(reference=lambda x, axis=-1: x.prod(axis=axis))
def reduce_prod(x, axis=-1):
    """Product along axis."""
    return _along(x, axis, lambda row, a: tw.Prod(row))


@tw.op(reference=lambda x, axis=-1: x.var(axis=axis))
def reduce_var(x, axis=-1):
    """Biased variance along axis."""
    def body(row, a):
        mu = tw.Sum(row) / x.shape[a]
        return tw.Sum(lambda k: (row(k) - mu) ** 2) / x.shape[a]
    return _along(x, axis, body)


@tw.op(reference=lambda x, axis=-1: np.log(np.exp(x - x.max(axis=axis, keepdims=True)).sum(axis=axis))
       + x.max(axis=axis))
def logsumexp(x, axis=-1):
    """log(sum(exp(x))) along axis, shifted by the max."""
    def body(row, a):
        m = tw.Max(row)
        return m + tw.log(tw.Sum(lambda k: tw.exp(row(k) - m)))
    return _along(x, axis, body)


@tw.op(reference=lambda x, axis=-1: np.argmax(x, axis=axis).astype(np.float64))
def argmax(x, axis=-1):
    """Index of the first maximum along axis (as float64): min of k over k where x == max."""
    def body(row, a):
        m = tw.Max(row)
        return tw.Min(lambda k: tw.where(row(k) == m, tw.index_value(k), float("inf")))
    return _along(x, axis, body)


@tw.op(reference=lambda x: np.cumsum(x, axis=-1), out_shape=lambda x: tuple(x))
def cumsum(x):
    """Inclusive prefix sum over the last axis of a matrix: sum of x[i, k] for k <= j."""
    return lambda i, j: tw.Sum(lambda k: x[i, k] * (tw.index_value(k) <= tw.index_value(j)))


@tw.op(reference=lambda x: x.sum(axis=0))
def sum_rows(x):
    """Sum over the first axis of a matrix (bias gradient of a linear layer)."""
    return lambda j: tw.Sum(lambda b: x[b, j])


CASES = [
    Case("reduce_sum", [(4, 5)]),
    Case("reduce_sum", [(3, 4, 5)], {"axis": 1}, name="reduce_sum_axis1"),
    Case("reduce_sum", [(3, 4, 5)], {"axis": 0}, name="reduce_sum_axis0"),
    Case("reduce_mean", [(3, 4, 5)], {"axis": -1}),
    Case("reduce_mean", [(2, 3, 4, 5)], {"axis": 2}, name="reduce_mean_4d"),
    Case("reduce_max", [(3, 4, 5)], {"axis": 1}),
    Case("reduce_max", [(6, 5)], {"axis": 0}, name="reduce_max_axis0"),
    Case("reduce_min", [(3, 4, 5)], {"axis": 2}),
    Case("reduce_prod", [(3, 4, 5)], {"axis": 1}),
    Case("reduce_var", [(3, 4, 5)], {"axis": 0}),
    Case("logsumexp", [(3, 6)]),
    Case("argmax", [(4, 7)], kinds=("distinct",)),
    Case("argmax", [(3, 4, 5)], {"axis": 1}, ("distinct",), name="argmax_axis1"),
    Case("cumsum", [(4, 6)]),
    Case("sum_rows", [(6, 5)]),
]

"""Ops that importing PyTorch models needs beyond the other families (tw.from_torch).

PyTorch's operators are rank-polymorphic and broadcast: ``a + b`` with shapes (2, 1, 8, 8) and
(2, 4, 8, 8), ``view`` between any two shapes of the same size, ``matmul`` over any number of
batch dimensions. TDL descriptions see ranks and attributes, not extents, so what depends on
extents travels as attributes: which axes broadcast (``a_bcast``: axes of ``a`` that have extent 1
and are read at index 0), and both shapes of a reshape.
"""

from __future__ import annotations

import math

import numpy as np

import tilewise.tdl as tw

from ._cases import Case

# ---------------------------------------------------------------- reshape


def _strip_ones(shape):
    return [(d, n) for d, n in enumerate(shape) if n != 1]


def reshape_groups(src, dst) -> list:
    """Pair the dimensions of two shapes of equal size into the smallest groups of equal product.

    Returns ``[(src_dims, dst_dims), ...]`` (dimension numbers; extent-1 dimensions are left out).
    A group with one source dimension is a split (affine access), one with one destination
    dimension a merge.
    """
    a, b = _strip_ones(src), _strip_ones(dst)
    groups, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        ga, gb, pa, pb = [], [], 1, 1
        while True:
            if pa <= pb and i < len(a):
                ga.append(a[i][0])
                pa *= a[i][1]
                i += 1
            elif j < len(b):
                gb.append(b[j][0])
                pb *= b[j][1]
                j += 1
            else:
                raise ValueError(f"reshape between sizes that differ: {tuple(src)} -> {tuple(dst)}")
            if pa == pb:
                break
        groups.append((ga, gb))
    return groups


def _reshape_shape(x, shape=(), in_shape=()):
    if tuple(x) != tuple(in_shape) or math.prod(x) != math.prod(shape):
        raise ValueError(f"reshape of shape {tuple(x)} with in_shape={tuple(in_shape)} to shape={tuple(shape)}")
    return tuple(shape)


@tw.op(reference=lambda x, shape=(), in_shape=(): x.reshape(shape).copy(), out_shape=_reshape_shape, kernel="reshape")
def reshape(x, shape=(), in_shape=()):
    """Row-major reshape of x (whose shape is in_shape) to shape (PyTorch view / reshape / flatten).

    Within each group of dimensions of equal product the flat position is affine in the output
    indices; a split reads x at that position (affine), a merge unravels it with // and %.
    """
    groups = reshape_groups(in_shape, shape)

    def f(*i):
        idx = [0] * len(in_shape)
        for src, dst in groups:
            flat, stride = 0, 1
            for d in reversed(dst):
                flat = i[d] * stride + flat if stride != 1 else i[d] + flat
                stride *= shape[d]
            stride = 1
            for k, d in enumerate(reversed(src)):
                e = flat if stride == 1 else flat // stride
                idx[d] = e if k == len(src) - 1 else e % in_shape[d]
                stride *= in_shape[d]
        return x[tuple(idx)]
    return tw.compute(len(shape), f)


@reshape.def_grad
def _(g, x, out, shape, in_shape):
    return (reshape(g, shape=tuple(in_shape), in_shape=tuple(shape)),)


# ---------------------------------------------------------------- broadcasting


def broadcast_shape(*shapes) -> tuple:
    """NumPy / PyTorch broadcasting of shapes."""
    return tuple(int(n) for n in np.broadcast_shapes(*(tuple(s) for s in shapes)))


def bcast_axes(shape, out) -> tuple:
    """Axes of ``shape`` (right-aligned against ``out``) with extent 1 that ``out`` broadcasts."""
    off = len(out) - len(shape)
    return tuple(d for d, n in enumerate(shape) if n == 1 and out[off + d] != 1)


def _at(t, i, bcast):
    """t read at the output index i, right-aligned, axes in bcast at 0."""
    off = len(i) - t.ndim
    return t[tuple(0 if d in bcast else i[off + d] for d in range(t.ndim))]


@tw.op(reference=lambda x, shape=(), bcast=(): np.broadcast_to(x, shape).copy(),
       out_shape=lambda x, shape=(), bcast=(): tuple(shape), kernel="expand")
def expand(x, shape=(), bcast=()):
    """Broadcast x to shape (PyTorch expand): x right-aligned; its axes in bcast (extent 1) read at 0."""
    return tw.compute(len(shape), lambda *i: _at(x, i, bcast))


def _sum_to_shape(x, shape=(), bcast=()):
    return tuple(shape)


def _sum_to_ref(x, shape=(), bcast=()):
    lead = x.ndim - len(shape)
    y = x.sum(axis=tuple(range(lead))) if lead else x
    return y.sum(axis=tuple(bcast), keepdims=True) if bcast else y.copy()


@tw.op(reference=_sum_to_ref, out_shape=_sum_to_shape, kernel="sum_to")
def sum_to(x, shape=(), bcast=()):
    """x summed down to shape (the gradient of expand): over x's extra leading axes and the axes
    in bcast (where shape has extent 1)."""
    lead = x.ndim - len(shape)
    n = lead + len(bcast)

    def read(i, k):
        k = list(k)
        lead_idx = tuple(k[:lead])
        rest = k[lead:]
        return x[lead_idx + tuple(rest.pop(0) if d in bcast else i[d] for d in range(len(shape)))]
    if n == 0:
        return tw.compute(len(shape), lambda *i: x[i])
    return tw.compute(len(shape), lambda *i: tw.Sum(lambda *k: read(i, k), ndim=n))


def _reduce_to(g, shape, bcast):
    """g (the broadcast shape) summed down to shape: g itself when nothing was broadcast."""
    if tuple(g.shape) == tuple(shape):
        return g
    return sum_to(g, shape=tuple(shape), bcast=tuple(bcast))


@expand.def_grad
def _(g, x, out, shape, bcast):
    return (_reduce_to(g, x.shape, bcast),)


@sum_to.def_grad
def _(g, x, out, shape, bcast):
    if tuple(g.shape) == tuple(x.shape):
        return (g,)
    return (expand(g, shape=tuple(x.shape), bcast=tuple(bcast)),)


def _binary(fn):
    def describe(a, b, a_bcast=(), b_bcast=()):
        return tw.compute(max(a.ndim, b.ndim), lambda *i: fn(_at(a, i, a_bcast), _at(b, i, b_bcast)))
    return describe


def _bshape(a, b, a_bcast=(), b_bcast=()):
    return broadcast_shape(a, b)


def _bop(name, np_fn, fn, doc):
    def ref(a, b, a_bcast=(), b_bcast=()):
        return np_fn(a, b)
    describe = _binary(fn)
    describe.__name__ = name
    describe.__doc__ = doc
    return tw.op(describe, name=name, reference=ref, out_shape=_bshape, kernel=name)


broadcast_add = _bop("broadcast_add", np.add, lambda u, v: u + v,
                     "a + b with broadcasting (a_bcast/b_bcast: axes read at 0).")
broadcast_sub = _bop("broadcast_sub", np.subtract, lambda u, v: u - v, "a - b with broadcasting.")
broadcast_mul = _bop("broadcast_mul", np.multiply, lambda u, v: u * v, "a * b with broadcasting.")
broadcast_div = _bop("broadcast_div", np.divide, lambda u, v: u / v, "a / b with broadcasting.")
broadcast_maximum = _bop("broadcast_maximum", np.maximum, tw.max, "max(a, b) with broadcasting.")
broadcast_minimum = _bop("broadcast_minimum", np.minimum, tw.min, "min(a, b) with broadcasting.")


@broadcast_add.def_grad
def _(g, a, b, out, a_bcast, b_bcast):
    return _reduce_to(g, a.shape, a_bcast), _reduce_to(g, b.shape, b_bcast)


@broadcast_sub.def_grad
def _(g, a, b, out, a_bcast, b_bcast):
    from .elementwise import neg

    return _reduce_to(g, a.shape, a_bcast), _reduce_to(neg(g), b.shape, b_bcast)


@broadcast_mul.def_grad
def _(g, a, b, out, a_bcast, b_bcast):
    return (_reduce_to(broadcast_mul(g, b, b_bcast=b_bcast), a.shape, a_bcast),
            _reduce_to(broadcast_mul(g, a, b_bcast=a_bcast), b.shape, b_bcast))


@broadcast_div.def_grad
def _(g, a, b, out, a_bcast, b_bcast):
    from .elementwise import mul, neg

    da = broadcast_div(g, b, b_bcast=b_bcast)
    db = neg(broadcast_div(mul(g, out), b, b_bcast=b_bcast))  # -g a / b^2 = -g out / b
    return _reduce_to(da, a.shape, a_bcast), _reduce_to(db, b.shape, b_bcast)


def _extremum_grads(g, a, b, out, a_bcast, b_bcast, a_wins_when_greater):
    """Gradients of broadcast max/min(a, b) as torch's: all of g to the winner, half to each on a tie."""
    from .elementwise import maximum_grad

    full_a = a if tuple(a.shape) == tuple(out.shape) else expand(a, shape=tuple(out.shape), bcast=tuple(a_bcast))
    full_b = b if tuple(b.shape) == tuple(out.shape) else expand(b, shape=tuple(out.shape), bcast=tuple(b_bcast))
    first, second = (full_a, full_b) if a_wins_when_greater else (full_b, full_a)
    return (_reduce_to(maximum_grad(g, first, second), a.shape, a_bcast),
            _reduce_to(maximum_grad(g, second, first), b.shape, b_bcast))


@broadcast_maximum.def_grad
def _(g, a, b, out, a_bcast, b_bcast):
    return _extremum_grads(g, a, b, out, a_bcast, b_bcast, True)


@broadcast_minimum.def_grad
def _(g, a, b, out, a_bcast, b_bcast):
    return _extremum_grads(g, a, b, out, a_bcast, b_bcast, False)


@tw.op(reference=lambda x, mask, value=0.0, mask_bcast=(): np.where(mask != 0, value, x),
       out_shape=lambda x, mask, value=0.0, mask_bcast=(): tuple(x), kernel="masked_fill")
def masked_fill(x, mask, value=0.0, mask_bcast=()):
    """value where mask != 0, else x (mask broadcast against x; mask_bcast: its axes read at 0)."""
    return tw.compute(x.ndim, lambda *i: tw.where(_at(mask, i, mask_bcast), value, x[i]))


@masked_fill.def_grad
def _(g, x, mask, out, value, mask_bcast):
    return masked_fill(g, mask, value=0.0, mask_bcast=tuple(mask_bcast)), None


# ---------------------------------------------------------------- batched matrix products, any rank


@tw.op(reference=np.matmul, kernel="bmatmul")
def bmatmul(a, b):
    """a @ b over any number of equal leading batch axes: (..., m, k) x (..., k, n) -> (..., m, n)."""
    return tw.compute(a.ndim, lambda *i: tw.Sum(lambda k: a[tuple(i[:-1]) + (k,)] * b[tuple(i[:-2]) + (k, i[-1])]))


@tw.op(reference=lambda a, b: a @ np.swapaxes(b, -1, -2), kernel="bmatmul_nt")
def bmatmul_nt(a, b):
    """a @ b^T over equal leading batch axes: (..., m, k) x (..., n, k) -> (..., m, n) (attention scores)."""
    return tw.compute(a.ndim, lambda *i: tw.Sum(lambda k: a[tuple(i[:-1]) + (k,)] * b[tuple(i[:-2]) + (i[-1], k)]))


@tw.op(reference=lambda a, b: np.swapaxes(a, -1, -2) @ b, kernel="bmatmul_tn")
def bmatmul_tn(a, b):
    """a^T @ b over equal leading batch axes: (..., k, m) x (..., k, n) -> (..., m, n)."""
    return tw.compute(
        a.ndim, lambda *i: tw.Sum(lambda k: a[tuple(i[:-2]) + (k, i[-2])] * b[tuple(i[:-2]) + (k, i[-1])])
    )


@tw.op(reference=lambda a, b: a @ b, kernel="matmul_nd")
def matmul_nd(a, b):
    """a @ b with a of any rank and b a matrix: (..., m, k) x (k, n) -> (..., m, n)."""
    return tw.compute(a.ndim, lambda *i: tw.Sum(lambda k: a[tuple(i[:-1]) + (k,)] * b[k, i[-1]]))


@tw.op(reference=lambda a, b: a.reshape(-1, a.shape[-1]).T @ b.reshape(-1, b.shape[-1]), kernel="linear_grad_weight")
def matmul_nd_tn(a, b):
    """a^T @ b summed over all leading axes: (..., k) x (..., n) -> (k, n) (matmul_nd's weight gradient)."""
    return lambda k, n: tw.Sum(lambda *r: a[r + (k,)] * b[r + (n,)], ndim=a.ndim - 1)


@bmatmul.def_grad
def _(g, a, b, out):
    return bmatmul_nt(g, b), bmatmul_tn(a, g)


@bmatmul_nt.def_grad
def _(g, a, b, out):
    return bmatmul(g, b), bmatmul_tn(g, a)


@bmatmul_tn.def_grad
def _(g, a, b, out):
    return bmatmul_nt(b, g), bmatmul(a, g)


@matmul_nd.def_grad
def _(g, a, b, out):
    from .linalg import linear_nobias

    return linear_nobias(g, b), matmul_nd_tn(a, g)


@matmul_nd_tn.def_grad
def _(g, a, b, out):
    from .linalg import linear_nobias

    return linear_nobias(b, g), matmul_nd(a, g)


def _mask_prepare(inputs, attrs):
    x, mask = inputs
    return [x, (mask > 0).astype(np.float64)]


CASES = [
    Case("reshape", [(2, 12)], {"shape": (2, 3, 4), "in_shape": (2, 12)}, name="reshape_split"),
    Case("reshape", [(2, 3, 4, 5)], {"shape": (2, 60), "in_shape": (2, 3, 4, 5)}, name="reshape_merge"),
    Case("reshape", [(6, 4)], {"shape": (4, 6), "in_shape": (6, 4)}, name="reshape_regroup"),
    Case("reshape", [(2, 3, 1, 1)], {"shape": (2, 3), "in_shape": (2, 3, 1, 1)}, name="reshape_squeeze"),
    Case("reshape", [(2, 8, 6)], {"shape": (1, 2, 8, 2, 3), "in_shape": (2, 8, 6)}, name="reshape_heads"),
    Case("expand", [(3, 1)], {"shape": (2, 3, 4), "bcast": (1,)}),
    Case("expand", [(1, 5)], {"shape": (4, 5), "bcast": (0,)}, name="expand_rows"),
    Case("expand", [(1, 4, 1, 3)], {"shape": (2, 2, 4, 5, 3), "bcast": (0, 2)}, name="expand_lead_and_inner"),
    Case("broadcast_add", [(2, 1, 4), (3, 1)], {"a_bcast": (1,), "b_bcast": (1,)}),
    Case("broadcast_add", [(2, 8, 6), (1, 8, 6)], {"b_bcast": (0,)}, name="broadcast_add_batch"),
    Case("broadcast_sub", [(4, 5), (5,)]),
    Case("broadcast_mul", [(2, 3, 4, 4), (3, 1, 1)], {"b_bcast": (1, 2)}),
    Case("broadcast_mul", [(2, 8, 1), (2, 8, 6)], {"a_bcast": (2,)}, name="broadcast_mul_rows"),
    Case("broadcast_add", [(6,), (3, 4, 6)], name="broadcast_add_low_rank_first"),
    Case("broadcast_div", [(4, 5), (4, 1)], {"b_bcast": (1,)}, ("normal", "positive")),
    Case("broadcast_maximum", [(1, 5), (4, 1)], {"a_bcast": (0,), "b_bcast": (1,)}),
    Case("broadcast_minimum", [(3, 4), (4,)]),
    Case("masked_fill", [(2, 3, 4), (3, 1)], {"value": -7.5, "mask_bcast": (1,)}, ("normal", "normal"),
         prepare=_mask_prepare),
    Case("masked_fill", [(2, 3, 4, 4), (2, 1, 4, 4)], {"value": -5.0, "mask_bcast": (1,)}, ("normal", "normal"),
         prepare=_mask_prepare, name="masked_fill_attention"),
    Case("masked_fill", [(3, 4), (4,)], {"value": 2.0}, ("normal", "normal"), prepare=_mask_prepare,
         name="masked_fill_row_mask"),
    Case("bmatmul", [(2, 3, 4, 5), (2, 3, 5, 6)]),
    Case("bmatmul_nt", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    Case("bmatmul_tn", [(2, 3, 5, 4), (2, 3, 5, 6)]),
    Case("matmul_nd", [(2, 3, 4, 5), (5, 6)]),
    Case("matmul_nd_tn", [(2, 3, 4, 5), (2, 3, 4, 6)]),
    Case("sum_to", [(2, 3, 4)], {"shape": (3, 1), "bcast": (1,)}),
    Case("sum_to", [(5, 4)], {"shape": (1, 4), "bcast": (0,)}, name="sum_to_rows"),
    Case("sum_to", [(2, 3, 4, 5)], {"shape": (1, 4, 1), "bcast": (0, 2)}, name="sum_to_lead_and_inner"),
    Case("sum_to", [(3, 6, 5)], {"shape": (5,), "bcast": ()}, name="sum_to_leading"),
]

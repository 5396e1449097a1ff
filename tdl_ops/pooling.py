"""2-D max / average pooling (NCHW; kernel, stride, padding), global pooling, their gradient ops and rules."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw

from ._cases import Case

_NEG_INF = float("-inf")
_INF = float("inf")


def _out(n, k, s, p):
    return (n + 2 * p - k) // s + 1


def _pool_shape(x, kernel=2, stride=2, padding=0):
    return (x[0], x[1], _out(x[2], kernel, stride, padding), _out(x[3], kernel, stride, padding))


def _grad_shape(dy, kernel=2, stride=2, padding=0, in_h=0, in_w=0):
    h = in_h or (dy[2] - 1) * stride - 2 * padding + kernel
    w = in_w or (dy[3] - 1) * stride - 2 * padding + kernel
    return (dy[0], dy[1], h, w)


def _inside(e, n):
    """1.0 where the index expression e lies in [0, n)."""
    v = tw.index_value(e)
    return (v >= 0) * (v < n)


def _divides(expr, s):
    return 1.0 if s == 1 else (tw.index_value(expr % s) == 0)


# ---------------------------------------------------------------- NumPy references


def _windows(x, kernel, stride, padding, value):
    xp = np.pad(x, [(0, 0), (0, 0), (padding, padding), (padding, padding)], constant_values=value)
    win = np.lib.stride_tricks.sliding_window_view(xp, (kernel, kernel), axis=(2, 3))
    return win[:, :, ::stride, ::stride]


def _max_pool_ref(x, kernel=2, stride=2, padding=0):
    return _windows(x, kernel, stride, padding, -np.inf).max(axis=(-2, -1))


def _avg_pool_ref(x, kernel=2, stride=2, padding=0):
    return _windows(x, kernel, stride, padding, 0.0).sum(axis=(-2, -1)) / (kernel * kernel)


def pool_winner(values, y):
    """Row-major offset in `values` (a window's in-bounds inputs) that gets the window's gradient, as in
    torch: the last NaN when the max y is NaN, else the first input equal to y; None when none is."""
    flat = values.reshape(-1)
    hits = np.flatnonzero(np.isnan(flat) if np.isnan(y) else flat == y)
    return None if hits.size == 0 else hits[-1] if np.isnan(y) else hits[0]


def _max_pool_grad_ref(x, y, dy, kernel=2, stride=2, padding=0):
    k, s, p = kernel, stride, padding
    dx = np.zeros_like(x)
    n, c, oh, ow = dy.shape
    for b in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    h0, w0 = max(s * i - p, 0), max(s * j - p, 0)
                    win = x[b, ch, h0: s * i - p + k, w0: s * j - p + k]
                    at = pool_winner(win, y[b, ch, i, j])
                    if at is not None:
                        a, e = np.unravel_index(at, win.shape)
                        dx[b, ch, h0 + a, w0 + e] += dy[b, ch, i, j]
    return dx


def _avg_pool_grad_ref(dy, kernel=2, stride=2, padding=0, in_h=0, in_w=0):
    k, s, p = kernel, stride, padding
    n, c, h, w = _grad_shape(dy.shape, k, s, p, in_h, in_w)
    oh, ow = dy.shape[2], dy.shape[3]
    dxp = np.zeros((n, c, max(h + 2 * p, s * (oh - 1) + k), max(w + 2 * p, s * (ow - 1) + k)))
    for i in range(k):
        for j in range(k):
            dxp[:, :, i: i + s * (oh - 1) + 1: s, j: j + s * (ow - 1) + 1: s] += dy / (k * k)
    return dxp[:, :, p: p + h, p: p + w]


# ---------------------------------------------------------------- TDL


@tw.op(reference=_max_pool_ref, out_shape=_pool_shape, kernel="max_pool2d")
def max_pool2d(x, kernel=2, stride=2, padding=0):
    """Max pooling; padded positions are -inf (masked reads), like PyTorch."""
    k, s, p = kernel, stride, padding

    def elem(b, c, y, xx, i, j):
        h, w = s * y + i - p, s * xx + j - p
        if p == 0:
            return x[b, c, h, w]
        return tw.where(_inside(h, x.shape[2]) * _inside(w, x.shape[3]), x[b, c, h, w], _NEG_INF)
    return lambda b, c, y, xx: tw.Max(lambda i, j: elem(b, c, y, xx, i, j), extents=(k, k))


@max_pool2d.def_grad
def _(g, x, out, kernel, stride, padding):
    return (max_pool2d_grad(x, out, g, kernel=kernel, stride=stride, padding=padding),)


@tw.op(reference=_avg_pool_ref, out_shape=_pool_shape, kernel="avg_pool2d")
def avg_pool2d(x, kernel=2, stride=2, padding=0):
    """Average pooling, zero padding counted (count_include_pad=True)."""
    k, s, p = kernel, stride, padding
    return lambda b, c, y, xx: tw.Sum(lambda i, j: x[b, c, s * y + i - p, s * xx + j - p],
                                      extents=(k, k)) / (k * k)


@avg_pool2d.def_grad
def _(g, x, out, kernel, stride, padding):
    return (avg_pool2d_grad(g, kernel=kernel, stride=stride, padding=padding, in_h=x.shape[2], in_w=x.shape[3]),)


def _winner_offset(x, y, b, c, oh, ow, k, s, p):
    """The row-major offset i k + j in window (oh, ow) of the input that gets its gradient, as torch
    picks it: the first input equal to the max y, or the last NaN when y is NaN (NaN wins the max);
    padded positions never (-inf: they never count). inf when no input qualifies (y not the max)."""
    def at(u, v, hit, fallback):
        h, w = s * oh + u - p, s * ow + v - p
        hit = hit(x[b, c, h, w])
        if p:
            hit = hit * _inside(h, x.shape[2]) * _inside(w, x.shape[3])
        return tw.where(hit, tw.index_value(u) * k + tw.index_value(v), fallback)

    def first(u, v):
        return at(u, v, lambda e: e == y[b, c, oh, ow], _INF)

    def last_nan(q, r):
        return at(q, r, lambda e: e != e, _NEG_INF)

    first_max = tw.Min(first, extents=(k, k))
    nan = tw.Max(last_nan, extents=(k, k))
    return tw.where(y[b, c, oh, ow] != y[b, c, oh, ow], nan, first_max)


@tw.op(reference=_max_pool_grad_ref, out_shape=lambda x, y, dy, kernel=2, stride=2, padding=0: tuple(x),
       kernel="max_pool2d_grad")
def max_pool2d_grad(x, y, dy, kernel=2, stride=2, padding=0):
    """Gradient of max_pool2d: each window's dy routed to one input, the one torch's indices name (the
    first equal to the max y in row-major order; the last NaN when y is NaN), so ties do not share it."""
    k, s, p = kernel, stride, padding

    def term(b, c, h, w, i, j):
        oh, ow = (h + p - i) // s, (w + p - j) // s
        mine = _winner_offset(x, y, b, c, oh, ow, k, s, p) == tw.index_value(i) * k + tw.index_value(j)
        return _divides(h + p - i, s) * _divides(w + p - j, s) * mine * dy[b, c, oh, ow]
    return lambda b, c, h, w: tw.Sum(lambda i, j: term(b, c, h, w, i, j), extents=(k, k))


@tw.op(reference=_avg_pool_grad_ref, out_shape=_grad_shape, kernel="avg_pool2d_grad")
def avg_pool2d_grad(dy, kernel=2, stride=2, padding=0, in_h=0, in_w=0):
    """Gradient of avg_pool2d; in_h/in_w = 0: the smallest input size."""
    k, s, p = kernel, stride, padding

    def term(b, c, h, w, i, j):
        return (_divides(h + p - i, s) * _divides(w + p - j, s)
                * dy[b, c, (h + p - i) // s, (w + p - j) // s])
    return lambda b, c, h, w: tw.Sum(lambda i, j: term(b, c, h, w, i, j), extents=(k, k)) / (k * k)


@tw.op(reference=lambda x: x.mean(axis=(2, 3)), kernel="global_avg_pool2d")
def global_avg_pool2d(x):
    """Mean over h, w: (n, c, h, w) -> (n, c)."""
    return lambda b, c: tw.Sum(lambda h, w: x[b, c, h, w]) / (x.shape[2] * x.shape[3])


@global_avg_pool2d.def_grad
def _(g, x, out):
    return (global_avg_pool2d_grad(g, in_h=x.shape[2], in_w=x.shape[3]),)


@tw.op(reference=lambda x: x.max(axis=(2, 3)), kernel="global_max_pool2d")
def global_max_pool2d(x):
    """Max over h, w: (n, c, h, w) -> (n, c)."""
    return lambda b, c: tw.Max(lambda h, w: x[b, c, h, w])


@global_max_pool2d.def_grad
def _(g, x, out):
    return (global_max_pool2d_grad(x, out, g),)


@tw.op(reference=lambda dy, in_h=1, in_w=1: np.broadcast_to(dy[:, :, None, None] / (in_h * in_w),
                                                             dy.shape + (in_h, in_w)).copy(),
       out_shape=lambda dy, in_h=1, in_w=1: tuple(dy) + (in_h, in_w), kernel="global_avg_pool2d_grad")
def global_avg_pool2d_grad(dy, in_h=1, in_w=1):
    """Gradient of global_avg_pool2d: dy[b, c] / (h w) at every position of an (h, w) map."""
    return lambda b, c, h, w: dy[b, c] / (in_h * in_w)


def _global_max_grad_ref(x, y, dy):
    dx = np.zeros_like(x)
    for b, c in np.ndindex(*y.shape):
        at = pool_winner(x[b, c], y[b, c])
        if at is not None:
            dx[b, c].reshape(-1)[at] = dy[b, c]
    return dx


@tw.op(reference=_global_max_grad_ref, out_shape=lambda x, y, dy: tuple(x), kernel="global_max_pool2d_grad")
def global_max_pool2d_grad(x, y, dy):
    """Gradient of global_max_pool2d: dy to one position, the one torch's adaptive_max_pool2d(x, 1) indices
    name (the first equal to the max y, row-major; the last NaN when y is NaN), so ties do not share it."""
    width = x.shape[3]

    def offset(i, j):
        return tw.index_value(i) * width + tw.index_value(j)

    def f(b, c, h, w):
        first_max = tw.Min(lambda i, j: tw.where(x[b, c, i, j] == y[b, c], offset(i, j), _INF))
        nan = tw.Max(lambda q, r: tw.where(x[b, c, q, r] != x[b, c, q, r], offset(q, r), _NEG_INF))
        return (tw.where(y[b, c] != y[b, c], nan, first_max) == offset(h, w)) * dy[b, c]
    return f


def _with_forward_output(inputs, attrs):
    """max_pool2d_grad inputs: replace y by the true forward output of x."""
    x, _, dy = inputs
    return [x, _max_pool_ref(x, **attrs), dy]


def _with_ties(inputs, attrs):
    """max_pool2d_grad inputs with x rounded to a few values, so windows tie, and y its forward output."""
    return _with_forward_output([np.round(inputs[0])] + inputs[1:], attrs)


_POOLS = [  # (suffix, x shape, attrs)
    ("", (2, 3, 6, 6), {}),
    ("_k3_s2_p1", (2, 2, 7, 8), {"kernel": 3, "stride": 2, "padding": 1}),
    ("_k3_s1_p1", (1, 2, 5, 6), {"kernel": 3, "stride": 1, "padding": 1}),
    ("_k2_s3", (1, 2, 8, 7), {"kernel": 2, "stride": 3}),
]


def _pool_cases():
    cases = []
    for suf, xs, attrs in _POOLS:
        out = _pool_shape(xs, **attrs)
        cases.append(Case("max_pool2d", [xs], attrs, name="max_pool2d" + suf))
        cases.append(Case("avg_pool2d", [xs], attrs, name="avg_pool2d" + suf))
        cases.append(Case("max_pool2d_grad", [xs, out, out], attrs, ("distinct",),
                          name="max_pool2d_grad" + suf, prepare=_with_forward_output))
        cases.append(Case("max_pool2d_grad", [xs, out, out], attrs, name="max_pool2d_grad_ties" + suf,
                          prepare=_with_ties))
        cases.append(Case("avg_pool2d_grad", [out], dict(attrs, in_h=xs[2], in_w=xs[3]),
                          name="avg_pool2d_grad" + suf))
    cases.append(Case("max_pool2d", [(1, 2, 5, 5)], {"kernel": 3, "stride": 2, "padding": 1}, ("negative",),
                      name="max_pool2d_negative_padding"))
    cases.append(Case("avg_pool2d_grad", [(1, 2, 3, 3)], {"kernel": 3, "stride": 2, "padding": 1},
                      name="avg_pool2d_grad_natural_size"))
    cases.append(Case("global_avg_pool2d", [(2, 3, 4, 5)]))
    cases.append(Case("global_max_pool2d", [(2, 3, 4, 5)]))
    cases.append(Case("global_avg_pool2d_grad", [(2, 3)], {"in_h": 4, "in_w": 5}))
    cases.append(Case("global_max_pool2d_grad", [(2, 3, 4, 5), (2, 3), (2, 3)], kinds=("distinct",),
                      prepare=lambda inputs, attrs: [inputs[0], inputs[0].max(axis=(2, 3)), inputs[2]]))
    cases.append(Case("global_max_pool2d_grad", [(1, 2, 2, 3), (1, 2), (1, 2)], name="global_max_pool2d_grad_ties",
                      prepare=lambda inputs, attrs: [np.ones((1, 2, 2, 3)), np.ones((1, 2)), inputs[2]]))
    return cases


CASES = _pool_cases()

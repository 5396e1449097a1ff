"""Ops for PyTorch layers that tw.from_torch imports and no other family has: the GRU cell,
nearest upsampling with a factor per axis, non-overlapping 1-D max pooling (AdaptiveMaxPool1d),
each with its NumPy reference, gradient rule and test cases.

The GRU follows torch.nn.GRU (gate order r, z, n):
    r = sigmoid(gi_r + gh_r), z = sigmoid(gi_z + gh_z), n = tanh(gi_n + r * gh_n),
    h' = (1 - z) * n + z * h,
with gi = x W_ih^T + b_ih and gh = h W_hh^T + b_hh of shape (b, 3H) computed by ``linear``. As
for the LSTM (rnn.py), the gate gradients are (b, 3H) tensors written third by third: a third
reads dy at a shifted column, and reads outside dy's H columns are 0.
"""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw

from ._cases import Case
from ._util import np_sigmoid
from .pooling import pool_winner

# ---------------------------------------------------------------- GRU


def _gru_parts(gi, gh):
    gir, giz, gin = np.split(gi, 3, axis=1)
    ghr, ghz, ghn = np.split(gh, 3, axis=1)
    r, z = np_sigmoid(gir + ghr), np_sigmoid(giz + ghz)
    return r, z, np.tanh(gin + r * ghn), ghn


def _gru_ref(gi, gh, h):
    _, z, n, _ = _gru_parts(gi, gh)
    return (1.0 - z) * n + z * h


def _gru_grad_gi_ref(dy, gi, gh, h):
    r, z, n, ghn = _gru_parts(gi, gh)
    dn = dy * (1.0 - z) * (1.0 - n * n)
    return np.concatenate([dn * ghn * r * (1.0 - r), dy * (h - n) * z * (1.0 - z), dn], axis=1)


def _gru_grad_gh_ref(dy, gi, gh, h):
    r, _, _, _ = _gru_parts(gi, gh)
    d = _gru_grad_gi_ref(dy, gi, gh, h)
    k = d.shape[1] // 3
    return np.concatenate([d[:, :2 * k], d[:, 2 * k:] * r], axis=1)


def _gru_grad_h_ref(dy, gi, gh):
    return dy * _gru_parts(gi, gh)[1]


class _Gates:
    """The GRU's gate values at column j (0 <= j < H) of a batch row, as TDL values."""

    def __init__(self, gi, gh, n):
        self.gi, self.gh, self.n = gi, gh, n

    def r(self, b, j):
        return tw.sigmoid(self.gi[b, j] + self.gh[b, j])

    def z(self, b, j):
        n = self.n
        return tw.sigmoid(self.gi[b, j + n] + self.gh[b, j + n])

    def new(self, b, j):
        n = self.n
        return tw.tanh(self.gi[b, j + n + n] + self.r(b, j) * self.gh[b, j + n + n])


@tw.op(reference=_gru_ref, out_shape=lambda gi, gh, h: tuple(h), kernel="gru_cell")
def gru_cell(gi, gh, h):
    """h' = (1 - z) * n + z * h from the input and hidden pre-activations gi, gh (b, 3H) = [r | z | n]."""
    g = _Gates(gi, gh, h.shape[1])
    return lambda b, j: (1.0 - g.z(b, j)) * g.new(b, j) + g.z(b, j) * h[b, j]


@gru_cell.def_grad
def _(g, gi, gh, h, out):
    return gru_cell_grad_gi(g, gi, gh, h), gru_cell_grad_gh(g, gi, gh, h), gru_cell_grad_h(g, gi, gh)


def _gate_grads(dy, gi, gh, h, times_r):
    n = dy.shape[1]
    g = _Gates(gi, gh, n)

    def d_new(b, k):  # the gradient of n's pre-activation at column k
        return dy[b, k] * (1.0 - g.z(b, k)) * (1.0 - g.new(b, k) * g.new(b, k))

    def f(b, j):
        r = g.r(b, j)
        dr = d_new(b, j) * g.gh[b, j + n + n] * r * (1.0 - r)
        k = j - n
        dz = dy[b, k] * (h[b, k] - g.new(b, k)) * g.z(b, k) * (1.0 - g.z(b, k))
        k2 = j - n - n
        dn = d_new(b, k2) * g.r(b, k2) if times_r else d_new(b, k2)
        return dr + dz + dn
    return f


@tw.op(reference=_gru_grad_gi_ref, out_shape=lambda dy, gi, gh, h: tuple(gi), kernel="gru_cell_grad_gi")
def gru_cell_grad_gi(dy, gi, gh, h):
    """d gi of gru_cell: [d r_pre | d z_pre | d n_pre] (b, 3H)."""
    return _gate_grads(dy, gi, gh, h, False)


@tw.op(reference=_gru_grad_gh_ref, out_shape=lambda dy, gi, gh, h: tuple(gh), kernel="gru_cell_grad_gh")
def gru_cell_grad_gh(dy, gi, gh, h):
    """d gh of gru_cell: as d gi, the last third times r."""
    return _gate_grads(dy, gi, gh, h, True)


@tw.op(reference=_gru_grad_h_ref, out_shape=lambda dy, gi, gh: tuple(dy), kernel="gru_cell_grad_h")
def gru_cell_grad_h(dy, gi, gh):
    """d h of gru_cell: dy * z."""
    g = _Gates(gi, gh, dy.shape[1])
    return lambda b, j: dy[b, j] * g.z(b, j)


# ---------------------------------------------------------------- nearest upsampling


def _upsample_ref(x, sh=1, sw=1):
    return x.repeat(sh, axis=2).repeat(sw, axis=3)


@tw.op(reference=_upsample_ref,
       out_shape=lambda x, sh=1, sw=1: (x[0], x[1], x[2] * sh, x[3] * sw), kernel="upsample_nearest2d_hw")
def upsample_nearest2d_hw(x, sh=1, sw=1):
    """Nearest-neighbour upsampling of NCHW by integer factors sh (height) and sw (width)."""
    return lambda b, c, y, xx: x[b, c, y // sh, xx // sw]


@upsample_nearest2d_hw.def_grad
def _(g, x, out, sh, sw):
    return (upsample_nearest2d_hw_grad(g, sh=sh, sw=sw),)


def _upsample_grad_ref(dy, sh=1, sw=1):
    n, c, h, w = dy.shape
    return dy.reshape(n, c, h // sh, sh, w // sw, sw).sum(axis=(3, 5))


@tw.op(reference=_upsample_grad_ref,
       out_shape=lambda dy, sh=1, sw=1: (dy[0], dy[1], dy[2] // sh, dy[3] // sw), kernel="upsample_nearest2d_hw_grad")
def upsample_nearest2d_hw_grad(dy, sh=1, sw=1):
    """Gradient of upsample_nearest2d_hw: the sum of each sh x sw block."""
    return lambda b, c, y, x: tw.Sum(lambda i, j: dy[b, c, sh * y + i, sw * x + j], extents=(sh, sw))


# ---------------------------------------------------------------- 1-D max pooling


def _max_pool1d_ref(x, kernel=2):
    n, c, length = x.shape
    return x[:, :, :length // kernel * kernel].reshape(n, c, length // kernel, kernel).max(axis=3)


@tw.op(reference=_max_pool1d_ref, out_shape=lambda x, kernel=2: (x[0], x[1], x[2] // kernel), kernel="max_pool1d")
def max_pool1d(x, kernel=2):
    """Max over non-overlapping windows of ``kernel`` along the last axis of (n, c, l) (stride = kernel)."""
    return lambda b, c, i: tw.Max(lambda k: x[b, c, kernel * i + k], extents=(kernel,))


@max_pool1d.def_grad
def _(g, x, out, kernel):
    return (max_pool1d_grad(x, out, g, kernel=kernel),)


def _max_pool1d_grad_ref(x, y, dy, kernel=2):
    dx = np.zeros_like(x)
    for b, c, o in np.ndindex(*y.shape):
        at = pool_winner(x[b, c, kernel * o: kernel * (o + 1)], y[b, c, o])
        if at is not None:
            dx[b, c, kernel * o + at] = dy[b, c, o]
    return dx


@tw.op(reference=_max_pool1d_grad_ref, out_shape=lambda x, y, dy, kernel=2: tuple(x), kernel="max_pool1d_grad")
def max_pool1d_grad(x, y, dy, kernel=2):
    """Gradient of max_pool1d: each window's dy to one input, the one torch's indices name (the first
    equal to the max y; the last NaN when y is NaN), so ties do not share it."""
    def f(b, c, i):
        o = i // kernel
        first_max = tw.Min(lambda u: tw.where(x[b, c, kernel * o + u] == y[b, c, o], tw.index_value(u), float("inf")),
                           extents=(kernel,))
        nan = tw.Max(lambda q: tw.where(x[b, c, kernel * o + q] != x[b, c, kernel * o + q], tw.index_value(q),
                                        float("-inf")), extents=(kernel,))
        winner = tw.where(y[b, c, o] != y[b, c, o], nan, first_max)
        return (winner == tw.index_value(i % kernel)) * dy[b, c, o]
    return f


def _with_pool_output(inputs, attrs):
    x, _, dy = inputs
    return [x, _max_pool1d_ref(x, **attrs), dy]


_B, _H = 3, 4

CASES = [
    Case("gru_cell", [(_B, 3 * _H), (_B, 3 * _H), (_B, _H)]),
    Case("gru_cell_grad_gi", [(_B, _H), (_B, 3 * _H), (_B, 3 * _H), (_B, _H)]),
    Case("gru_cell_grad_gh", [(_B, _H), (_B, 3 * _H), (_B, 3 * _H), (_B, _H)]),
    Case("gru_cell_grad_h", [(_B, _H), (_B, 3 * _H), (_B, 3 * _H)]),
    Case("upsample_nearest2d_hw", [(1, 2, 3, 4)], {"sh": 2, "sw": 3}),
    Case("upsample_nearest2d_hw", [(2, 1, 2, 3)], {"sh": 1, "sw": 2}, name="upsample_nearest2d_hw_width"),
    Case("upsample_nearest2d_hw_grad", [(1, 2, 6, 12)], {"sh": 2, "sw": 3}),
    Case("max_pool1d", [(2, 3, 6)], {"kernel": 2}, ("distinct",)),
    Case("max_pool1d", [(1, 2, 7)], {"kernel": 3}, ("distinct",), name="max_pool1d_remainder"),
    Case("max_pool1d_grad", [(2, 3, 6), (2, 3, 3), (2, 3, 3)], {"kernel": 2}, ("distinct",),
         prepare=_with_pool_output),
    Case("max_pool1d_grad", [(2, 3, 7), (2, 3, 2), (2, 3, 2)], {"kernel": 3}, name="max_pool1d_grad_ties",
         prepare=lambda inputs, attrs: _with_pool_output([np.round(inputs[0])] + inputs[1:], attrs)),
]

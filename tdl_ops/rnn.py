"""Recurrent cells: LSTM pieces (gates as one linear, cell and hidden updates; PyTorch gate order i, f, g, o)
and a vanilla tanh RNN cell, with their gradient ops and rules.

The gate gradients are (b, 4H) tensors written quarter by quarter: a quarter reads dy at a shifted
column, and reads outside dy's H columns are 0, so each term is zero outside its own quarter."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw
from tilewise.tdl.registry import ops

from ._cases import Case
from ._util import np_sigmoid


def _gates_ref(x, h, w_ih, w_hh, b_ih, b_hh):
    return x @ w_ih.T + b_ih + h @ w_hh.T + b_hh


def _split4(gates):
    return np.split(gates, 4, axis=1)


def _cell_ref(gates, c):
    i, f, g, _ = _split4(gates)
    return np_sigmoid(f) * c + np_sigmoid(i) * np.tanh(g)


def _hidden_ref(gates, c_new):
    return np_sigmoid(_split4(gates)[3]) * np.tanh(c_new)


@tw.op(reference=_gates_ref, kernel="lstm_gates")
def lstm_gates(x, h, w_ih, w_hh, b_ih, b_hh):
    """x @ W_ih^T + b_ih + h @ W_hh^T + b_hh: (b, 4 * hidden) pre-activations."""
    return lambda b, j: (tw.Sum(lambda k: x[b, k] * w_ih[j, k]) + b_ih[j]
                         + tw.Sum(lambda k: h[b, k] * w_hh[j, k]) + b_hh[j])


@lstm_gates.def_grad
def _(g, x, h, w_ih, w_hh, b_ih, b_hh, out):
    db = ops.sum_axes(g, axes=(0,))
    return (ops.matmul(g, w_ih), ops.matmul(g, w_hh), ops.matmul_tn(g, x), ops.matmul_tn(g, h),
            db, db)


# gates[b, j] reads only a quarter
@tw.op(reference=_cell_ref, out_shape=lambda gates, c: tuple(c), kernel="lstm_cell")
def lstm_cell(gates, c):
    """c' = sigmoid(f) * c + sigmoid(i) * tanh(g), gates (b, 4H) = [i | f | g | o], c (b, H)."""
    n = c.shape[1]
    return lambda b, j: (tw.sigmoid(gates[b, j + n]) * c[b, j]
                         + tw.sigmoid(gates[b, j]) * tw.tanh(gates[b, j + n + n]))


@lstm_cell.def_grad
def _(g, gates, c, out):
    return lstm_cell_grad_gates(g, gates, c), lstm_cell_grad_c(g, gates)


@tw.op(reference=_hidden_ref, kernel="lstm_hidden")
def lstm_hidden(gates, c_new):
    """h' = sigmoid(o) * tanh(c'), o the last quarter of gates."""
    n = c_new.shape[1]
    return lambda b, j: tw.sigmoid(gates[b, j + n + n + n]) * tw.tanh(c_new[b, j])


@lstm_hidden.def_grad
def _(g, gates, c_new, out):
    return lstm_hidden_grad_gates(g, gates, c_new), lstm_hidden_grad_c(g, gates, c_new)


@tw.op(reference=lambda x, h, w_ih, w_hh, b: np.tanh(x @ w_ih.T + h @ w_hh.T + b), kernel="rnn_tanh_cell")
def rnn_tanh_cell(x, h, w_ih, w_hh, b):
    """h' = tanh(x @ W_ih^T + h @ W_hh^T + b)."""
    return lambda i, j: tw.tanh(tw.Sum(lambda k: x[i, k] * w_ih[j, k])
                                + tw.Sum(lambda k: h[i, k] * w_hh[j, k]) + b[j])


@rnn_tanh_cell.def_grad
def _(g, x, h, w_ih, w_hh, b, out):
    dz = ops.tanh_grad(g, out)  # the gradient of the pre-activation, shared by every input
    return (ops.matmul(dz, w_ih), ops.matmul(dz, w_hh), ops.matmul_tn(dz, x), ops.matmul_tn(dz, h),
            ops.sum_axes(dz, axes=(0,)))


# ---------------------------------------------------------------- gradients


def _dsig(s):
    return s * (1.0 - s)


def _cell_grad_gates_ref(dy, gates, c):
    i, f, g, _ = (np_sigmoid(q) if k != 2 else np.tanh(q) for k, q in enumerate(_split4(gates)))
    return np.concatenate([dy * g * _dsig(i), dy * c * _dsig(f), dy * i * (1.0 - g * g), np.zeros_like(dy)], axis=1)


@tw.op(reference=_cell_grad_gates_ref, out_shape=lambda dy, gates, c: tuple(gates), kernel="lstm_cell_grad_gates")
def lstm_cell_grad_gates(dy, gates, c):
    """d gates of lstm_cell: [dy tanh(g) si' | dy c sf' | dy si (1 - tanh(g)**2) | 0]."""
    n = c.shape[1]

    def f(b, j):
        s, t = tw.sigmoid(gates[b, j]), tw.tanh(gates[b, j])  # this column's gate, whichever quarter it is in
        return (dy[b, j] * tw.tanh(gates[b, j + 2 * n]) * s * (1.0 - s)
                + dy[b, j - n] * c[b, j - n] * s * (1.0 - s)
                + dy[b, j - 2 * n] * tw.sigmoid(gates[b, j - 2 * n]) * (1.0 - t * t))
    return f


@tw.op(reference=lambda dy, gates: dy * np_sigmoid(_split4(gates)[1]), out_shape=lambda dy, gates: tuple(dy),
       kernel="lstm_cell_grad_c")
def lstm_cell_grad_c(dy, gates):
    """d c of lstm_cell: dy sigmoid(f)."""
    n = dy.shape[1]
    return lambda b, j: dy[b, j] * tw.sigmoid(gates[b, j + n])


def _hidden_grad_gates_ref(dy, gates, c_new):
    o = np_sigmoid(_split4(gates)[3])
    z = np.zeros_like(dy)
    return np.concatenate([z, z, z, dy * np.tanh(c_new) * _dsig(o)], axis=1)


@tw.op(reference=_hidden_grad_gates_ref, out_shape=lambda dy, gates, c_new: tuple(gates),
       kernel="lstm_hidden_grad_gates")
def lstm_hidden_grad_gates(dy, gates, c_new):
    """d gates of lstm_hidden: dy tanh(c') so' in the o quarter, zero elsewhere."""
    n = c_new.shape[1]

    def f(b, j):
        so = tw.sigmoid(gates[b, j])
        return dy[b, j - 3 * n] * tw.tanh(c_new[b, j - 3 * n]) * so * (1.0 - so)
    return f


@tw.op(reference=lambda dy, gates, c_new: dy * np_sigmoid(_split4(gates)[3]) * (1.0 - np.tanh(c_new) ** 2),
       kernel="lstm_hidden_grad_c")
def lstm_hidden_grad_c(dy, gates, c_new):
    """d c' of lstm_hidden: dy sigmoid(o) (1 - tanh(c')**2)."""
    n = c_new.shape[1]

    def f(b, j):
        t = tw.tanh(c_new[b, j])
        return dy[b, j] * tw.sigmoid(gates[b, j + 3 * n]) * (1.0 - t * t)
    return f


_B, _I, _H = 3, 5, 4
CASES = [
    Case("lstm_gates", [(_B, _I), (_B, _H), (4 * _H, _I), (4 * _H, _H), (4 * _H,), (4 * _H,)]),
    Case("lstm_cell", [(_B, 4 * _H), (_B, _H)]),
    Case("lstm_hidden", [(_B, 4 * _H), (_B, _H)]),
    Case("rnn_tanh_cell", [(_B, _I), (_B, _H), (_H, _I), (_H, _H), (_H,)]),
    Case("lstm_cell_grad_gates", [(_B, _H), (_B, 4 * _H), (_B, _H)]),
    Case("lstm_cell_grad_c", [(_B, _H), (_B, 4 * _H)]),
    Case("lstm_hidden_grad_gates", [(_B, _H), (_B, 4 * _H), (_B, _H)]),
    Case("lstm_hidden_grad_c", [(_B, _H), (_B, 4 * _H), (_B, _H)]),
]

"""Recurrent cells: LSTM pieces (gates as one linear, cell and hidden updates; PyTorch gate order i, f, g, o)
and a vanilla tanh RNN cell."""

from __future__ import annotations

import numpy as np
import tilewise as tw

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


@tw.op(reference=_gates_ref)
def lstm_gates(x, h, w_ih, w_hh, b_ih, b_hh):
    """x @ W_ih^T + b_ih + h @ W_hh^T + b_hh: (b, 4 * hidden) pre-activations."""
    return lambda b, j: (tw.Sum(lambda k: x[b, k] * w_ih[j, k]) + b_ih[j]
                         + tw.Sum(lambda k: h[b, k] * w_hh[j, k]) + b_hh[j])


@tw.op(reference=_cell_ref, out_shape=lambda gates, c: tuple(c))  # gates[b, j] reads only a quarter
def lstm_cell(gates, c):
    """c' = sigmoid(f) * c + sigmoid(i) * tanh(g), gates (b, 4H) = [i | f | g | o], c (b, H)."""
    n = c.shape[1]
    return lambda b, j: (tw.sigmoid(gates[b, j + n]) * c[b, j]
                         + tw.sigmoid(gates[b, j]) * tw.tanh(gates[b, j + n + n]))


@tw.op(reference=_hidden_ref)
def lstm_hidden(gates, c_new):
    """h' = sigmoid(o) * tanh(c'), o the last quarter of gates."""
    n = c_new.shape[1]
    return lambda b, j: tw.sigmoid(gates[b, j + n + n + n]) * tw.tanh(c_new[b, j])


@tw.op(reference=lambda x, h, w_ih, w_hh, b: np.tanh(x @ w_ih.T + h @ w_hh.T + b))
def rnn_tanh_cell(x, h, w_ih, w_hh, b):
    """h' = tanh(x @ W_ih^T + h @ W_hh^T + b)."""
    return lambda i, j: tw.tanh(tw.Sum(lambda k: x[i, k] * w_ih[j, k])
                                + tw.Sum(lambda k: h[i, k] * w_hh[j, k]) + b[j])


_B, _I, _H = 3, 5, 4
CASES = [
    Case("lstm_gates", [(_B, _I), (_B, _H), (4 * _H, _I), (4 * _H, _H), (4 * _H,), (4 * _H,)]),
    Case("lstm_cell", [(_B, 4 * _H), (_B, _H)]),
    Case("lstm_hidden", [(_B, 4 * _H), (_B, _H)]),
    Case("rnn_tanh_cell", [(_B, _I), (_B, _H), (_H, _I), (_H, _H), (_H,)]),
]

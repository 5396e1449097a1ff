"""Losses (scalar outputs, mean over the batch / elements) and their input gradients."""

from __future__ import annotations

import numpy as np
import tilewise as tw

from ._cases import Case
from ._util import np_log_softmax, np_softmax


def _log_softmax_at(x, b, k):
    """log_softmax(x)[b, k] for a (batch, classes) matrix."""
    m = tw.Max(lambda j: x[b, j])
    return x[b, k] - m - tw.log(tw.Sum(lambda j: tw.exp(x[b, j] - m)))


def _numel(x):
    n = x.shape[0]
    for d in range(1, x.ndim):
        n = n * x.shape[d]
    return n


@tw.op(reference=lambda logits, target: np.asarray(-(target * np_log_softmax(logits)).sum() / len(logits)))
def cross_entropy(logits, target):
    """-mean_b sum_k target[b, k] * log_softmax(logits)[b, k] (one-hot or probability targets)."""
    return lambda: -tw.Sum(lambda b, k: target[b, k] * _log_softmax_at(logits, b, k)) / logits.shape[0]


@tw.op(reference=lambda logits, target: (np_softmax(logits) - target) / logits.shape[0])
def cross_entropy_grad(logits, target):
    """(softmax(logits) - target) / batch (targets summing to 1 per row)."""
    def f(b, k):
        m = tw.Max(lambda j: logits[b, j])
        return (tw.exp(logits[b, k] - m) / tw.Sum(lambda j: tw.exp(logits[b, j] - m)) - target[b, k]) \
            / logits.shape[0]
    return f


@tw.op(reference=lambda logp, target: np.asarray(-(target * logp).sum() / logp.shape[0]))
def nll_loss(logp, target):
    """-mean_b sum_k target[b, k] * logp[b, k] with dense targets."""
    return lambda: -tw.Sum(lambda b, k: target[b, k] * logp[b, k]) / logp.shape[0]


@tw.op(reference=lambda a, b: np.asarray(((a - b) ** 2).mean()))
def mse_loss(a, b):
    """mean((a - b)**2) over all elements, any rank."""
    return lambda: tw.Sum(lambda *i: (a[i] - b[i]) ** 2, ndim=a.ndim) / _numel(a)


@tw.op(reference=lambda a, b: 2.0 * (a - b) / a.size)
def mse_loss_grad(a, b):
    """d mse / d a = 2 (a - b) / numel."""
    return tw.compute(a.ndim, lambda *i: 2.0 * (a[i] - b[i]) / _numel(a))


@tw.op(reference=lambda a, b: np.asarray(np.abs(a - b).mean()))
def l1_loss(a, b):
    """mean(|a - b|) over all elements, any rank."""
    return lambda: tw.Sum(lambda *i: tw.abs(a[i] - b[i]), ndim=a.ndim) / _numel(a)


def _smooth_l1_ref(a, b, beta=1.0):
    d = np.abs(a - b)
    return np.asarray(np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta).mean())


@tw.op(reference=_smooth_l1_ref)
def smooth_l1_loss(a, b, beta=1.0):
    """Huber-style loss, mean over elements: 0.5 d^2 / beta if |d| < beta else |d| - beta / 2."""
    def term(*i):
        d = tw.abs(a[i] - b[i])
        return tw.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return lambda: tw.Sum(term, ndim=a.ndim) / _numel(a)


@tw.op(reference=lambda x, t: np.asarray((np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))).mean()))
def bce_with_logits(x, t):
    """mean(max(x, 0) - x t + log(1 + exp(-|x|))), binary cross-entropy on logits."""
    def term(*i):
        return tw.max(x[i], 0.0) - x[i] * t[i] + tw.log(1.0 + tw.exp(-tw.abs(x[i])))
    return lambda: tw.Sum(term, ndim=x.ndim) / _numel(x)


ELEMENTWISE = ("mse_loss_grad",)

CASES = [
    Case("cross_entropy", [(5, 6), (5, 6)], kinds=("normal", "onehot")),
    Case("cross_entropy", [(4, 3), (4, 3)], kinds=("wide", "prob"), name="cross_entropy_prob"),
    Case("cross_entropy_grad", [(5, 6), (5, 6)], kinds=("normal", "onehot")),
    Case("nll_loss", [(5, 6), (5, 6)], kinds=("normal", "onehot")),
    Case("mse_loss", [(5, 6), (5, 6)]),
    Case("mse_loss", [(2, 3, 4), (2, 3, 4)], name="mse_loss_3d"),
    Case("mse_loss_grad", [(5, 6), (5, 6)]),
    Case("l1_loss", [(5, 6), (5, 6)]),
    Case("smooth_l1_loss", [(5, 6), (5, 6)], {"beta": 0.5}),
    Case("bce_with_logits", [(4, 5), (4, 5)], kinds=("normal", "mask")),
]

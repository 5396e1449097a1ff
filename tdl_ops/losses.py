"""Losses (scalar outputs, mean over the batch / elements), their input gradients and gradient rules.

The backward ops take the loss's own gradient dy (0-d; 1 when the loss is the one differentiated)
so that scaled or summed losses differentiate correctly."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw
from tilewise.tdl.registry import ops

from ._cases import Case
from ._util import np_log_softmax, np_sigmoid, np_softmax, scalar


def _log_softmax_at(x, b, k):
    """log_softmax(x)[b, k] for a (batch, classes) matrix."""
    m = tw.Max(lambda j: x[b, j])
    return x[b, k] - m - tw.log(tw.Sum(lambda j: tw.exp(x[b, j] - m)))


def _numel(x):
    n = x.shape[0]
    for d in range(1, x.ndim):
        n = n * x.shape[d]
    return n


@tw.op(reference=lambda logits, target: np.asarray(-(target * np_log_softmax(logits)).sum() / len(logits)),
       kernel="cross_entropy")
def cross_entropy(logits, target):
    """-mean_b sum_k target[b, k] * log_softmax(logits)[b, k] (one-hot or probability targets)."""
    return lambda: -tw.Sum(lambda b, k: target[b, k] * _log_softmax_at(logits, b, k)) / logits.shape[0]


@cross_entropy.def_grad
def _(g, logits, target, out):
    return cross_entropy_backward(logits, target, g), nll_loss_backward(ops.log_softmax(logits), g)


@tw.op(reference=lambda logits, target: (np_softmax(logits) - target) / logits.shape[0], kernel="cross_entropy_grad")
def cross_entropy_grad(logits, target):
    """(softmax(logits) - target) / batch (targets summing to 1 per row)."""
    def f(b, k):
        m = tw.Max(lambda j: logits[b, j])
        return (tw.exp(logits[b, k] - m) / tw.Sum(lambda j: tw.exp(logits[b, j] - m)) - target[b, k]) \
            / logits.shape[0]
    return f


@tw.op(reference=lambda logp, target: np.asarray(-(target * logp).sum() / logp.shape[0]), kernel="nll_loss")
def nll_loss(logp, target):
    """-mean_b sum_k target[b, k] * logp[b, k] with dense targets."""
    return lambda: -tw.Sum(lambda b, k: target[b, k] * logp[b, k]) / logp.shape[0]


@nll_loss.def_grad
def _(g, logp, target, out):
    return nll_loss_backward(target, g), nll_loss_backward(logp, g)


@tw.op(reference=lambda a, b: np.asarray(((a - b) ** 2).mean()), kernel="mse_loss")
def mse_loss(a, b):
    """mean((a - b)**2) over all elements, any rank."""
    return lambda: tw.Sum(lambda *i: (a[i] - b[i]) ** 2, ndim=a.ndim) / _numel(a)


@mse_loss.def_grad
def _(g, a, b, out):
    return mse_loss_backward(a, b, g), mse_loss_backward(b, a, g)


@tw.op(reference=lambda a, b: 2.0 * (a - b) / a.size, kernel="mse_loss_grad")
def mse_loss_grad(a, b):
    """d mse / d a = 2 (a - b) / numel."""
    return tw.compute(a.ndim, lambda *i: 2.0 * (a[i] - b[i]) / _numel(a))


@tw.op(reference=lambda a, b: np.asarray(np.abs(a - b).mean()), kernel="l1_loss")
def l1_loss(a, b):
    """mean(|a - b|) over all elements, any rank."""
    return lambda: tw.Sum(lambda *i: tw.abs(a[i] - b[i]), ndim=a.ndim) / _numel(a)


@l1_loss.def_grad
def _(g, a, b, out):
    return l1_loss_backward(a, b, g), l1_loss_backward(b, a, g)


def _smooth_l1_ref(a, b, beta=1.0):
    d = np.abs(a - b)
    return np.asarray(np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta).mean())


@tw.op(reference=_smooth_l1_ref, kernel="smooth_l1_loss")
def smooth_l1_loss(a, b, beta=1.0):
    """Huber-style loss, mean over elements: 0.5 d^2 / beta if |d| < beta else |d| - beta / 2."""
    def term(*i):
        d = tw.abs(a[i] - b[i])
        return tw.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return lambda: tw.Sum(term, ndim=a.ndim) / _numel(a)


@smooth_l1_loss.def_grad
def _(g, a, b, out, beta):
    return smooth_l1_loss_backward(a, b, g, beta=beta), smooth_l1_loss_backward(b, a, g, beta=beta)


@tw.op(reference=lambda x, t: np.asarray((np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))).mean()),
       kernel="bce_with_logits")
def bce_with_logits(x, t):
    """mean(max(x, 0) - x t + log(1 + exp(-|x|))), binary cross-entropy on logits."""
    def term(*i):
        return tw.max(x[i], 0.0) - x[i] * t[i] + tw.log(1.0 + tw.exp(-tw.abs(x[i])))
    return lambda: tw.Sum(term, ndim=x.ndim) / _numel(x)


@bce_with_logits.def_grad
def _(g, x, t, out):
    return bce_with_logits_backward(x, t, g), None  # t holds labels


# ---------------------------------------------------------------- gradients (dy: the loss's gradient, 0-d)


def _ce_backward_ref(logits, target, dy):
    return (np_softmax(logits) * target.sum(axis=1, keepdims=True) - target) * dy / logits.shape[0]


@tw.op(reference=_ce_backward_ref, kernel="cross_entropy_backward")
def cross_entropy_backward(logits, target, dy):
    """d cross_entropy / d logits: (softmax(logits) sum_k target - target) dy / batch."""
    def f(b, k):
        m = tw.Max(lambda j: logits[b, j])
        p = tw.exp(logits[b, k] - m) / tw.Sum(lambda j: tw.exp(logits[b, j] - m))
        return (p * tw.Sum(lambda j: target[b, j]) - target[b, k]) * scalar(dy) / logits.shape[0]
    return f


@tw.op(reference=lambda other, dy: -other * dy / other.shape[0], kernel="nll_loss_backward")
def nll_loss_backward(other, dy):
    """d nll_loss / d logp = -target dy / batch (and d / d target = -logp dy / batch): the other operand."""
    return lambda b, k: -other[b, k] * scalar(dy) / other.shape[0]


@tw.op(reference=lambda a, b, dy: 2.0 * (a - b) * dy / a.size, kernel="mse_loss_backward")
def mse_loss_backward(a, b, dy):
    """d mse_loss / d a = 2 (a - b) dy / numel."""
    return tw.compute(a.ndim, lambda *i: 2.0 * (a[i] - b[i]) * scalar(dy) / _numel(a))


@tw.op(reference=lambda a, b, dy: np.sign(a - b) * dy / a.size, kernel="l1_loss_backward")
def l1_loss_backward(a, b, dy):
    """d l1_loss / d a = sign(a - b) dy / numel."""
    return tw.compute(a.ndim, lambda *i: ((a[i] > b[i]) - (a[i] < b[i])) * scalar(dy) / _numel(a))


def _smooth_l1_backward_ref(a, b, dy, beta=1.0):
    d = a - b
    return np.where(np.abs(d) < beta, d / beta, np.sign(d)) * dy / a.size


@tw.op(reference=_smooth_l1_backward_ref, kernel="smooth_l1_loss_backward")
def smooth_l1_loss_backward(a, b, dy, beta=1.0):
    """d smooth_l1_loss / d a = (d / beta if |d| < beta else sign(d)) dy / numel, d = a - b."""
    def f(*i):
        d = a[i] - b[i]
        return tw.where(tw.abs(d) < beta, d / beta, (d > 0) - (d < 0)) * scalar(dy) / _numel(a)
    return tw.compute(a.ndim, f)


@tw.op(reference=lambda x, t, dy: (np_sigmoid(x) - t) * dy / x.size, kernel="bce_with_logits_backward")
def bce_with_logits_backward(x, t, dy):
    """d bce_with_logits / d x = (sigmoid(x) - t) dy / numel."""
    return tw.compute(x.ndim, lambda *i: (tw.sigmoid(x[i]) - t[i]) * scalar(dy) / _numel(x))


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
    Case("cross_entropy_backward", [(5, 6), (5, 6), ()], kinds=("normal", "onehot")),
    Case("cross_entropy_backward", [(4, 3), (4, 3), ()], kinds=("wide", "prob"), name="cross_entropy_backward_prob"),
    Case("nll_loss_backward", [(5, 6), ()], kinds=("onehot",)),
    Case("mse_loss_backward", [(2, 3, 4), (2, 3, 4), ()]),
    Case("l1_loss_backward", [(5, 6), (5, 6), ()]),
    Case("smooth_l1_loss_backward", [(5, 6), (5, 6), ()], {"beta": 0.5}),
    Case("bce_with_logits_backward", [(4, 5), (4, 5), ()], kinds=("normal", "mask")),
]

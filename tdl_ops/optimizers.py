"""Optimizer updates (one output each, any rank): SGD, momentum, Adam / AdamW, RMSprop; dropout and its rule.

The updates are not differentiated (they run after the backward pass): they have no gradient rules."""

from __future__ import annotations

import math

import numpy as np

import tilewise.tdl as tw

from ._cases import Case


def _each(x, f):
    return tw.compute(x.ndim, f)


@tw.op(reference=lambda w, g, lr=0.01, weight_decay=0.0: w - lr * (g + weight_decay * w), kernel="sgd")
def sgd(w, g, lr=0.01, weight_decay=0.0):
    """w - lr * (g + weight_decay * w)."""
    return _each(w, lambda *i: w[i] - lr * (g[i] + weight_decay * w[i]))


@tw.op(reference=lambda v, g, momentum=0.9, dampening=0.0: momentum * v + (1.0 - dampening) * g,
       kernel="momentum_velocity")
def momentum_velocity(v, g, momentum=0.9, dampening=0.0):
    """v' = momentum * v + (1 - dampening) * g."""
    return _each(v, lambda *i: momentum * v[i] + (1.0 - dampening) * g[i])


@tw.op(reference=lambda w, v, lr=0.01: w - lr * v, kernel="momentum_weight")
def momentum_weight(w, v, lr=0.01):
    """w' = w - lr * v' (v' from momentum_velocity)."""
    return _each(w, lambda *i: w[i] - lr * v[i])


@tw.op(reference=lambda m, g, beta1=0.9: beta1 * m + (1.0 - beta1) * g, kernel="adam_m")
def adam_m(m, g, beta1=0.9):
    """First moment m' = beta1 * m + (1 - beta1) * g."""
    return _each(m, lambda *i: beta1 * m[i] + (1.0 - beta1) * g[i])


@tw.op(reference=lambda v, g, beta2=0.999: beta2 * v + (1.0 - beta2) * g * g, kernel="adam_v")
def adam_v(v, g, beta2=0.999):
    """Second moment v' = beta2 * v + (1 - beta2) * g^2."""
    return _each(v, lambda *i: beta2 * v[i] + (1.0 - beta2) * g[i] * g[i])


@tw.op(reference=lambda t: t + 1.0, kernel="step_count")
def step_count(t):
    """The optimizer's step counter t' = t + 1 (a (1,) optimizer-state tensor, zero before the first step)."""
    return _each(t, lambda *i: t[i] + 1.0)


def _bias_correction(beta, t):
    """1 / (1 - beta**t) for the step t read from the counter (beta**t = exp(t log beta)); 1 when beta is 0."""
    if beta == 0.0:
        return 1.0
    return 1.0 / (1.0 - tw.exp(t[0] * math.log(beta)))


def _adam_ref(w, m, v, t, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    step = t[0]
    m_hat = m / (1.0 - beta1**step)
    v_hat = v / (1.0 - beta2**step)
    return w - lr * (m_hat / (np.sqrt(v_hat) + eps) + weight_decay * w)


@tw.op(reference=_adam_ref, kernel="adam_weight")
def adam_weight(w, m, v, t, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    """w - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w) (AdamW decay), with the bias corrections
    m_hat = m / (1 - beta1**t), v_hat = v / (1 - beta2**t) of step t = t[0], the updated step counter: read
    at run time, so one graph runs every step as torch.optim.Adam does."""
    def body(*i):
        c1, c2 = _bias_correction(beta1, t), _bias_correction(beta2, t)
        return w[i] - lr * (m[i] * c1 / (tw.sqrt(v[i] * c2) + eps) + weight_decay * w[i])

    return _each(w, body)


@tw.op(reference=lambda s, g, alpha=0.99: alpha * s + (1.0 - alpha) * g * g, kernel="rmsprop_sq")
def rmsprop_sq(s, g, alpha=0.99):
    """Squared-gradient average s' = alpha * s + (1 - alpha) * g^2."""
    return _each(s, lambda *i: alpha * s[i] + (1.0 - alpha) * g[i] * g[i])


@tw.op(reference=lambda w, g, s, lr=0.01, eps=1e-8: w - lr * g / (np.sqrt(s) + eps), kernel="rmsprop_weight")
def rmsprop_weight(w, g, s, lr=0.01, eps=1e-8):
    """w - lr * g / (sqrt(s') + eps)."""
    return _each(w, lambda *i: w[i] - lr * g[i] / (tw.sqrt(s[i]) + eps))


@tw.op(reference=lambda x, mask, p=0.5: x * mask / (1.0 - p), kernel="dropout")
def dropout(x, mask, p=0.5):
    """x * mask / (1 - p) with a given 0/1 mask (also its own gradient with dy for x)."""
    return _each(x, lambda *i: x[i] * mask[i] / (1.0 - p))


@dropout.def_grad
def _(g, x, mask, out, p):
    return dropout(g, mask, p=p), None  # the mask is sampled, not learned


ELEMENTWISE = ("sgd", "momentum_velocity", "momentum_weight", "adam_m", "adam_v", "step_count", "rmsprop_sq",
               "rmsprop_weight", "dropout")

CASES = [
    Case("sgd", [(5, 6), (5, 6)], {"lr": 0.1}),
    Case("sgd", [(3, 4, 2), (3, 4, 2)], {"lr": 0.05, "weight_decay": 0.01}, name="sgd_weight_decay"),
    Case("momentum_velocity", [(5, 6), (5, 6)], {"momentum": 0.8}),
    Case("momentum_weight", [(5, 6), (5, 6)], {"lr": 0.1}),
    Case("adam_m", [(5, 6), (5, 6)], {"beta1": 0.8}),
    Case("adam_v", [(5, 6), (5, 6)], {"beta2": 0.95}, ("positive",)),
    Case("step_count", [(1,)]),
    Case("adam_weight", [(5, 6), (5, 6), (5, 6), (1,)], {"lr": 0.01}, ("normal", "normal", "positive", "positive")),
    Case("adam_weight", [(4, 3), (4, 3), (4, 3), (1,)], {"lr": 0.01, "beta1": 0.85, "beta2": 0.99, "eps": 1e-6,
                                                         "weight_decay": 0.1},
         ("normal", "normal", "positive", "positive"), name="adamw_weight"),
    Case("adam_weight", [(3,), (3,), (3,), (1,)], {"beta1": 0.0}, ("normal", "normal", "positive", "positive"),
         name="adam_weight_beta1_zero"),
    Case("rmsprop_sq", [(5, 6), (5, 6)], {"alpha": 0.9}, ("positive",)),
    Case("rmsprop_weight", [(5, 6), (5, 6), (5, 6)], {"lr": 0.1}, ("normal", "normal", "positive")),
    Case("dropout", [(5, 6), (5, 6)], {"p": 0.3}, ("normal", "mask")),
]

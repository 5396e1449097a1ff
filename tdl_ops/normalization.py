"""Layer norm, RMS norm (last axis) and batch norm (NCHW; training statistics as reductions)."""

from __future__ import annotations

import numpy as np
import tilewise as tw

from ._cases import Case


def _layer_norm_ref(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def _bn_stats(x):
    return x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))


def _bn_train_ref(x, gamma, beta, eps=1e-5):
    mu, var = _bn_stats(x)
    c = (1, -1, 1, 1)
    return (x - mu.reshape(c)) / np.sqrt(var.reshape(c) + eps) * gamma.reshape(c) + beta.reshape(c)


def _bn_infer_ref(x, mean, var, gamma, beta, eps=1e-5):
    c = (1, -1, 1, 1)
    return (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + eps) * gamma.reshape(c) + beta.reshape(c)


def _row(x, i):
    return lambda k: x[tuple(i[:-1]) + (k,)]


@tw.op(reference=_layer_norm_ref)
def layer_norm(x, gamma, beta, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis, any rank."""
    def f(*i):
        row, n = _row(x, i), x.shape[x.ndim - 1]
        mu = tw.Sum(row) / n
        var = tw.Sum(lambda k: (row(k) - mu) ** 2) / n
        return (x[i] - mu) / tw.sqrt(var + eps) * gamma[i[-1]] + beta[i[-1]]
    return tw.compute(x.ndim, f)


@tw.op(reference=lambda x, gamma, eps=1e-6: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * gamma)
def rms_norm(x, gamma, eps=1e-6):
    """x / sqrt(mean(x**2) + eps) * gamma over the last axis, any rank."""
    def f(*i):
        row = _row(x, i)
        return x[i] / tw.sqrt(tw.Sum(lambda k: row(k) * row(k)) / x.shape[x.ndim - 1] + eps) * gamma[i[-1]]
    return tw.compute(x.ndim, f)


def _bn_mean(x, c):
    """Per-channel mean (reduction variables named apart from the op's own b, c, h, w)."""
    return tw.Sum(lambda n, y, z: x[n, c, y, z]) / (x.shape[0] * x.shape[2] * x.shape[3])


def _bn_var(x, c):
    """Biased variance as E[x^2] - E[x]^2 (one pass, no nested reduction)."""
    n = x.shape[0] * x.shape[2] * x.shape[3]
    return tw.Sum(lambda m, y, z: x[m, c, y, z] * x[m, c, y, z]) / n - _bn_mean(x, c) ** 2


@tw.op(reference=lambda x: _bn_stats(x)[0])
def batch_norm_mean(x):
    """Per-channel mean over n, h, w: (n, c, h, w) -> (c,)."""
    return lambda c: _bn_mean(x, c)


@tw.op(reference=lambda x: _bn_stats(x)[1])
def batch_norm_var(x):
    """Per-channel biased variance over n, h, w: (n, c, h, w) -> (c,)."""
    return lambda c: _bn_var(x, c)


@tw.op(reference=_bn_train_ref)
def batch_norm_train(x, gamma, beta, eps=1e-5):
    """Batch norm forward in training mode (batch statistics), NCHW."""
    return lambda b, c, h, w: ((x[b, c, h, w] - _bn_mean(x, c)) / tw.sqrt(_bn_var(x, c) + eps) * gamma[c]
                               + beta[c])


@tw.op(reference=_bn_infer_ref)
def batch_norm_inference(x, mean, var, gamma, beta, eps=1e-5):
    """Batch norm forward with running statistics, NCHW."""
    return lambda b, c, h, w: (x[b, c, h, w] - mean[c]) / tw.sqrt(var[c] + eps) * gamma[c] + beta[c]


@tw.op(reference=lambda r, s, momentum=0.1: (1.0 - momentum) * r + momentum * s)
def running_stat_update(running, stat, momentum=0.1):
    """(1 - momentum) * running + momentum * stat (batch-norm running mean / var)."""
    return tw.compute(running.ndim, lambda *i: (1.0 - momentum) * running[i] + momentum * stat[i])


ELEMENTWISE = ("running_stat_update",)

CASES = [
    Case("layer_norm", [(4, 8), (8,), (8,)]),
    Case("layer_norm", [(2, 3, 6), (6,), (6,)], {"eps": 1e-3}, name="layer_norm_3d"),
    Case("rms_norm", [(2, 3, 6), (6,)]),
    Case("batch_norm_mean", [(3, 4, 3, 3)]),
    Case("batch_norm_var", [(3, 4, 3, 3)]),
    Case("batch_norm_train", [(3, 2, 3, 4), (2,), (2,)]),
    Case("batch_norm_train", [(2, 3, 3, 3), (3,), (3,)], {"eps": 0.1}, name="batch_norm_train_eps"),
    Case("batch_norm_inference", [(2, 3, 4, 4), (3,), (3,), (3,), (3,)], {"eps": 1e-3},
         ("normal", "normal", "positive")),
    Case("running_stat_update", [(5,), (5,)], {"momentum": 0.2}),
]

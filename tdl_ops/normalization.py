"""Layer norm, RMS norm (last axis) and batch norm (NCHW; training statistics as reductions), with their
gradient ops and rules.

Each backward op recomputes the statistics it needs from x (one fused kernel, like cuDNN's batch-norm
backward) instead of reading saved means and variances: the graph keeps one op per gradient."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw
from tilewise.tdl.registry import ops

from ._cases import Case
from ._util import leading


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


@tw.op(reference=_layer_norm_ref, kernel="layer_norm")
def layer_norm(x, gamma, beta, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis, any rank."""
    def f(*i):
        row, n = _row(x, i), x.shape[x.ndim - 1]
        mu = tw.Sum(row) / n
        var = tw.Sum(lambda k: (row(k) - mu) ** 2) / n
        return (x[i] - mu) / tw.sqrt(var + eps) * gamma[i[-1]] + beta[i[-1]]
    return tw.compute(x.ndim, f)


@layer_norm.def_grad
def _(g, x, gamma, beta, out, eps):
    return (layer_norm_grad_input(g, x, gamma, eps=eps), layer_norm_grad_gamma(g, x, eps=eps),
            ops.sum_axes(g, axes=leading(g.ndim)))


@tw.op(reference=lambda x, gamma, eps=1e-6: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * gamma,
       kernel="rms_norm")
def rms_norm(x, gamma, eps=1e-6):
    """x / sqrt(mean(x**2) + eps) * gamma over the last axis, any rank."""
    def f(*i):
        row = _row(x, i)
        return x[i] / tw.sqrt(tw.Sum(lambda k: row(k) * row(k)) / x.shape[x.ndim - 1] + eps) * gamma[i[-1]]
    return tw.compute(x.ndim, f)


@rms_norm.def_grad
def _(g, x, gamma, out, eps):
    return rms_norm_grad_input(g, x, gamma, eps=eps), rms_norm_grad_gamma(g, x, eps=eps)


def _bn_mean(x, c):
    """Per-channel mean (reduction variables named apart from the op's own b, c, h, w)."""
    return tw.Sum(lambda n, y, z: x[n, c, y, z]) / (x.shape[0] * x.shape[2] * x.shape[3])


def _bn_var(x, c):
    """Biased variance as E[x^2] - E[x]^2 (one pass, no nested reduction)."""
    n = x.shape[0] * x.shape[2] * x.shape[3]
    return tw.Sum(lambda m, y, z: x[m, c, y, z] * x[m, c, y, z]) / n - _bn_mean(x, c) ** 2


@tw.op(reference=lambda x: _bn_stats(x)[0], kernel="batch_norm_mean")
def batch_norm_mean(x):
    """Per-channel mean over n, h, w: (n, c, h, w) -> (c,)."""
    return lambda c: _bn_mean(x, c)


@batch_norm_mean.def_grad
def _(g, x, out):
    return (batch_norm_mean_grad(g, x),)


@tw.op(reference=lambda x: _bn_stats(x)[1], kernel="batch_norm_var")
def batch_norm_var(x):
    """Per-channel biased variance over n, h, w: (n, c, h, w) -> (c,)."""
    return lambda c: _bn_var(x, c)


@batch_norm_var.def_grad
def _(g, x, out):
    return (batch_norm_var_grad(g, x),)


@tw.op(reference=_bn_train_ref, kernel="batch_norm_train")
def batch_norm_train(x, gamma, beta, eps=1e-5):
    """Batch norm forward in training mode (batch statistics), NCHW."""
    return lambda b, c, h, w: ((x[b, c, h, w] - _bn_mean(x, c)) / tw.sqrt(_bn_var(x, c) + eps) * gamma[c]
                               + beta[c])


@batch_norm_train.def_grad
def _(g, x, gamma, beta, out, eps):
    return (batch_norm_grad_input(g, x, gamma, eps=eps), batch_norm_grad_gamma(g, x, eps=eps),
            ops.sum_axes(g, axes=(0, 2, 3)))


@tw.op(reference=_bn_infer_ref, kernel="batch_norm_inference")
def batch_norm_inference(x, mean, var, gamma, beta, eps=1e-5):
    """Batch norm forward with running statistics, NCHW."""
    return lambda b, c, h, w: (x[b, c, h, w] - mean[c]) / tw.sqrt(var[c] + eps) * gamma[c] + beta[c]


@batch_norm_inference.def_grad
def _(g, x, mean, var, gamma, beta, out, eps):
    # mean and var are running statistics (buffers, not trained): no gradient.
    return (batch_norm_inference_grad_input(g, var, gamma, eps=eps), None, None,
            batch_norm_inference_grad_gamma(g, x, mean, var, eps=eps), ops.sum_axes(g, axes=(0, 2, 3)))


@tw.op(reference=lambda r, s, momentum=0.1: (1.0 - momentum) * r + momentum * s, kernel="running_stat_update")
def running_stat_update(running, stat, momentum=0.1):
    """(1 - momentum) * running + momentum * stat (batch-norm running mean / var)."""
    return tw.compute(running.ndim, lambda *i: (1.0 - momentum) * running[i] + momentum * stat[i])


# ---------------------------------------------------------------- gradients


def _xhat_ref(x, axes, eps):
    mu = x.mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def _norm_grad_input_ref(dy, x, gamma, eps, axes, gamma_shape):
    """rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), the statistics over `axes`."""
    rstd = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    xhat = _xhat_ref(x, axes, eps)
    dxhat = dy * gamma.reshape(gamma_shape)
    return rstd * (dxhat - dxhat.mean(axis=axes, keepdims=True) - xhat * (dxhat * xhat).mean(axis=axes, keepdims=True))


@tw.op(reference=lambda dy, x, gamma, eps=1e-5: _norm_grad_input_ref(dy, x, gamma, eps, -1, (-1,)),
       kernel="layer_norm_grad_input")
def layer_norm_grad_input(dy, x, gamma, eps=1e-5):
    """dx of layer_norm: rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy gamma, over the last axis."""
    def f(*i):
        row, drow, n = _row(x, i), _row(dy, i), x.shape[x.ndim - 1]
        mu = tw.Sum(row) / n
        rstd = 1.0 / tw.sqrt(tw.Sum(lambda k: (row(k) - mu) ** 2) / n + eps)
        m1 = tw.Sum(lambda k: drow(k) * gamma[k]) / n
        m2 = tw.Sum(lambda k: drow(k) * gamma[k] * (row(k) - mu)) / n
        return rstd * (dy[i] * gamma[i[-1]] - m1 - (x[i] - mu) * rstd * rstd * m2)
    return tw.compute(x.ndim, f)


@tw.op(reference=lambda dy, x, eps=1e-5: (dy * _xhat_ref(x, -1, eps)).reshape(-1, x.shape[-1]).sum(axis=0),
       kernel="layer_norm_grad_gamma")
def layer_norm_grad_gamma(dy, x, eps=1e-5):
    """dgamma of layer_norm: sum over the leading axes of dy xhat."""
    def term(j, r):
        row, n = (lambda k: x[r + (k,)]), x.shape[x.ndim - 1]
        mu = tw.Sum(row) / n
        var = tw.Sum(lambda k: (row(k) - mu) ** 2) / n
        return dy[r + (j,)] * (x[r + (j,)] - mu) / tw.sqrt(var + eps)
    return lambda j: tw.Sum(lambda *r: term(j, tuple(r)), ndim=x.ndim - 1)


def _rms_grad_input_ref(dy, x, gamma, eps=1e-6):
    r = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return r * gamma * dy - x * r**3 * (dy * gamma * x).mean(axis=-1, keepdims=True)


@tw.op(reference=_rms_grad_input_ref, kernel="rms_norm_grad_input")
def rms_norm_grad_input(dy, x, gamma, eps=1e-6):
    """dx of rms_norm: r gamma dy - x r**3 mean(dy gamma x), r = 1 / sqrt(mean(x**2) + eps)."""
    def f(*i):
        row, drow, n = _row(x, i), _row(dy, i), x.shape[x.ndim - 1]
        r = 1.0 / tw.sqrt(tw.Sum(lambda k: row(k) * row(k)) / n + eps)
        return r * gamma[i[-1]] * dy[i] - x[i] * r * r * r * tw.Sum(lambda k: drow(k) * gamma[k] * row(k)) / n
    return tw.compute(x.ndim, f)


@tw.op(reference=lambda dy, x, eps=1e-6: (dy * x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps))
       .reshape(-1, x.shape[-1]).sum(axis=0), kernel="rms_norm_grad_gamma")
def rms_norm_grad_gamma(dy, x, eps=1e-6):
    """dgamma of rms_norm: sum over the leading axes of dy x r."""
    def term(j, r):
        ms = tw.Sum(lambda k: x[r + (k,)] * x[r + (k,)]) / x.shape[x.ndim - 1]
        return dy[r + (j,)] * x[r + (j,)] / tw.sqrt(ms + eps)
    return lambda j: tw.Sum(lambda *r: term(j, tuple(r)), ndim=x.ndim - 1)


_NHW = (0, 2, 3)
_C = (1, -1, 1, 1)


@tw.op(reference=lambda dy, x, gamma, eps=1e-5: _norm_grad_input_ref(dy, x, gamma, eps, _NHW, _C),
       kernel="batch_norm_grad_input")
def batch_norm_grad_input(dy, x, gamma, eps=1e-5):
    """dx of batch_norm_train: gamma rstd (dy - mean(dy) - xhat mean(dy xhat)), statistics per channel."""
    def f(b, c, h, w):
        n = x.shape[0] * x.shape[2] * x.shape[3]
        mu = _bn_mean(x, c)
        rstd = 1.0 / tw.sqrt(_bn_var(x, c) + eps)
        mdy = tw.Sum(lambda p, q, r: dy[p, c, q, r]) / n
        mdyx = tw.Sum(lambda p, q, r: dy[p, c, q, r] * (x[p, c, q, r] - mu)) / n
        return gamma[c] * rstd * (dy[b, c, h, w] - mdy - (x[b, c, h, w] - mu) * rstd * rstd * mdyx)
    return f


@tw.op(reference=lambda dy, x, eps=1e-5: (dy * _xhat_ref(x, _NHW, eps)).sum(axis=_NHW),
       kernel="batch_norm_grad_gamma")
def batch_norm_grad_gamma(dy, x, eps=1e-5):
    """dgamma of batch_norm_train: per-channel sum of dy xhat."""
    return lambda c: (tw.Sum(lambda p, q, r: dy[p, c, q, r] * (x[p, c, q, r] - _bn_mean(x, c)))
                      / tw.sqrt(_bn_var(x, c) + eps))


@tw.op(reference=lambda dy, var, gamma, eps=1e-5: dy * (gamma / np.sqrt(var + eps)).reshape(_C),
       kernel="batch_norm_inference_grad_input")
def batch_norm_inference_grad_input(dy, var, gamma, eps=1e-5):
    """dx of batch_norm_inference: dy gamma / sqrt(var + eps), per channel."""
    return lambda b, c, h, w: dy[b, c, h, w] * gamma[c] / tw.sqrt(var[c] + eps)


@tw.op(reference=lambda dy, x, mean, var, eps=1e-5: (dy * (x - mean.reshape(_C))).sum(axis=_NHW)
       / np.sqrt(var + eps), kernel="batch_norm_inference_grad_gamma")
def batch_norm_inference_grad_gamma(dy, x, mean, var, eps=1e-5):
    """dgamma of batch_norm_inference: per-channel sum of dy (x - mean) / sqrt(var + eps)."""
    return lambda c: tw.Sum(lambda p, q, r: dy[p, c, q, r] * (x[p, c, q, r] - mean[c])) / tw.sqrt(var[c] + eps)


@tw.op(reference=lambda dy, x: np.broadcast_to((dy / (x.size / x.shape[1])).reshape(_C), x.shape).copy(),
       out_shape=lambda dy, x: tuple(x), kernel="batch_norm_mean_grad")
def batch_norm_mean_grad(dy, x):
    """Gradient of batch_norm_mean: dy[c] / (n h w) everywhere (x only gives the shape)."""
    return lambda b, c, h, w: dy[c] / (x.shape[0] * x.shape[2] * x.shape[3])


@tw.op(reference=lambda dy, x: 2.0 * dy.reshape(_C) * (x - x.mean(axis=_NHW, keepdims=True)) / (x.size / x.shape[1]),
       kernel="batch_norm_var_grad")
def batch_norm_var_grad(dy, x):
    """Gradient of batch_norm_var: 2 dy[c] (x - mean) / (n h w)."""
    return lambda b, c, h, w: 2.0 * dy[c] * (x[b, c, h, w] - _bn_mean(x, c)) / (x.shape[0] * x.shape[2] * x.shape[3])


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
    Case("layer_norm_grad_input", [(4, 6), (4, 6), (6,)]),
    Case("layer_norm_grad_input", [(2, 3, 5), (2, 3, 5), (5,)], {"eps": 1e-3}, name="layer_norm_grad_input_3d"),
    Case("layer_norm_grad_gamma", [(4, 6), (4, 6)]),
    Case("layer_norm_grad_gamma", [(2, 3, 5), (2, 3, 5)], {"eps": 1e-3}, name="layer_norm_grad_gamma_3d"),
    Case("rms_norm_grad_input", [(2, 3, 6), (2, 3, 6), (6,)]),
    Case("rms_norm_grad_gamma", [(2, 3, 6), (2, 3, 6)]),
    Case("batch_norm_grad_input", [(3, 2, 3, 4), (3, 2, 3, 4), (2,)]),
    Case("batch_norm_grad_gamma", [(3, 2, 3, 4), (3, 2, 3, 4)], {"eps": 0.1}),
    Case("batch_norm_inference_grad_input", [(2, 3, 4, 4), (3,), (3,)], {"eps": 1e-3}, ("normal", "positive")),
    Case("batch_norm_inference_grad_gamma", [(2, 3, 4, 4), (2, 3, 4, 4), (3,), (3,)], {"eps": 1e-3},
         ("normal", "normal", "normal", "positive")),
    Case("batch_norm_mean_grad", [(4,), (3, 4, 2, 3)]),
    Case("batch_norm_var_grad", [(4,), (3, 4, 2, 3)]),
]

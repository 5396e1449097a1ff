"""Matrix products: matmul, batched, transposed operands, linear layers, matvec, outer; their gradient rules.

The gradient of a product is a product with a transposed operand, so most rules reuse the forward ops
(matmul_nt, matmul_tn, ...); linear layers of any rank have their own data and weight gradient ops."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw
from tilewise.tdl.registry import ops

from ._cases import Case
from ._util import leading


@tw.op(reference=lambda a, b: a @ b, kernel="matmul")
def matmul(a, b):
    """A @ B: (m, k) x (k, n) -> (m, n)."""
    return lambda i, j: tw.Sum(lambda k: a[i, k] * b[k, j])


@matmul.def_grad
def _(g, a, b, out):
    return matmul_nt(g, b), matmul_tn(a, g)


@tw.op(reference=lambda a, b: a.T @ b, kernel="matmul_tn")
def matmul_tn(a, b):
    """A^T @ B: (k, m) x (k, n) -> (m, n) (weight gradient of a linear layer)."""
    return lambda i, j: tw.Sum(lambda k: a[k, i] * b[k, j])


@matmul_tn.def_grad
def _(g, a, b, out):
    return matmul_nt(b, g), matmul(a, g)


@tw.op(reference=lambda a, b: a @ b.T, kernel="matmul_nt")
def matmul_nt(a, b):
    """A @ B^T: (m, k) x (n, k) -> (m, n)."""
    return lambda i, j: tw.Sum(lambda k: a[i, k] * b[j, k])


@matmul_nt.def_grad
def _(g, a, b, out):
    return matmul(g, b), matmul_tn(g, a)


@tw.op(reference=lambda a, b: a.T @ b.T, kernel="matmul_tt")
def matmul_tt(a, b):
    """A^T @ B^T: (k, m) x (n, k) -> (m, n)."""
    return lambda i, j: tw.Sum(lambda k: a[k, i] * b[j, k])


@matmul_tt.def_grad
def _(g, a, b, out):
    return matmul_tt(b, g), matmul_tt(g, a)


@tw.op(reference=np.matmul, kernel="batch_matmul")
def batch_matmul(a, b):
    """Batched A @ B: (b, m, k) x (b, k, n) -> (b, m, n)."""
    return lambda n, i, j: tw.Sum(lambda k: a[n, i, k] * b[n, k, j])


@batch_matmul.def_grad
def _(g, a, b, out):
    return batch_matmul_nt(g, b), batch_matmul_tn(a, g)


@tw.op(reference=lambda a, b: a @ np.swapaxes(b, 1, 2), kernel="batch_matmul_nt")
def batch_matmul_nt(a, b):
    """Batched A @ B^T: (b, m, k) x (b, n, k) -> (b, m, n) (attention scores)."""
    return lambda n, i, j: tw.Sum(lambda k: a[n, i, k] * b[n, j, k])


@batch_matmul_nt.def_grad
def _(g, a, b, out):
    return batch_matmul(g, b), batch_matmul_tn(g, a)


@tw.op(reference=lambda a, b: np.swapaxes(a, 1, 2) @ b, kernel="batch_matmul_tn")
def batch_matmul_tn(a, b):
    """Batched A^T @ B: (b, k, m) x (b, k, n) -> (b, m, n)."""
    return lambda n, i, j: tw.Sum(lambda k: a[n, k, i] * b[n, k, j])


@batch_matmul_tn.def_grad
def _(g, a, b, out):
    return batch_matmul_nt(b, g), batch_matmul(a, g)


@tw.op(reference=lambda x, w, b: x @ w.T + b, kernel="linear")
def linear(x, w, b):
    """x @ W^T + b with PyTorch layout W (out, in); x of any rank (..., in)."""
    return tw.compute(x.ndim, lambda *i: tw.Sum(lambda k: x[tuple(i[:-1]) + (k,)] * w[i[-1], k]) + b[i[-1]])


def _linear_input_and_weight_grads(g, x, w):
    """dx = dy W and dW = dy^T x, as plain matrix products when x is a vector or a matrix."""
    if x.ndim == 1:
        return vecmat(g, w), outer(g, x)
    if x.ndim == 2:
        return matmul(g, w), matmul_tn(g, x)
    return linear_grad_input(g, w), linear_grad_weight(g, x)


@linear.def_grad
def _(g, x, w, b, out):
    dx, dw = _linear_input_and_weight_grads(g, x, w)
    return dx, dw, ops.sum_axes(g, axes=leading(g.ndim)) if g.ndim > 1 else g


@tw.op(reference=lambda x, w: x @ w.T, kernel="linear_nobias")
def linear_nobias(x, w):
    """x @ W^T with W (out, in); x of any rank (..., in)."""
    return tw.compute(x.ndim, lambda *i: tw.Sum(lambda k: x[tuple(i[:-1]) + (k,)] * w[i[-1], k]))


@linear_nobias.def_grad
def _(g, x, w, out):
    return _linear_input_and_weight_grads(g, x, w)


@tw.op(reference=lambda a, v: a @ v, kernel="matvec")
def matvec(a, v):
    """A @ v: (m, n) x (n,) -> (m,)."""
    return lambda i: tw.Sum(lambda k: a[i, k] * v[k])


@matvec.def_grad
def _(g, a, v, out):
    return outer(g, v), vecmat(g, a)


@tw.op(reference=np.outer, kernel="outer")
def outer(u, v):
    """u v^T: (m,) x (n,) -> (m, n)."""
    return lambda i, j: u[i] * v[j]


@outer.def_grad
def _(g, u, v, out):
    return matvec(g, v), vecmat(u, g)


# ---------------------------------------------------------------- gradients


@tw.op(reference=lambda dy, w: dy @ w, out_shape=lambda dy, w: tuple(dy[:-1]) + (w[1],), kernel="linear_grad_input")
def linear_grad_input(dy, w):
    """dx = dy @ W for a linear layer of any rank: (..., out) x (out, in) -> (..., in)."""
    return tw.compute(dy.ndim, lambda *i: tw.Sum(lambda j: dy[tuple(i[:-1]) + (j,)] * w[j, i[-1]]))


@tw.op(reference=lambda dy, x: dy.reshape(-1, dy.shape[-1]).T @ x.reshape(-1, x.shape[-1]),
       out_shape=lambda dy, x: (dy[-1], x[-1]), kernel="linear_grad_weight")
def linear_grad_weight(dy, x):
    """dW = sum over the leading axes of dy[..., j] x[..., k]: (..., out) x (..., in) -> (out, in)."""
    return lambda j, k: tw.Sum(lambda *r: dy[tuple(r) + (j,)] * x[tuple(r) + (k,)], ndim=dy.ndim - 1)


@tw.op(reference=lambda v, a: v @ a, kernel="vecmat")
def vecmat(v, a):
    """v @ A: (m,) x (m, n) -> (n,) (the vector gradient of matvec)."""
    return lambda j: tw.Sum(lambda i: v[i] * a[i, j])


@vecmat.def_grad
def _(g, v, a, out):
    return matvec(a, g), outer(v, g)


CASES = [
    Case("matmul", [(5, 7), (7, 6)]),
    Case("matmul_tn", [(7, 5), (7, 6)]),
    Case("matmul_nt", [(5, 7), (6, 7)]),
    Case("matmul_tt", [(7, 5), (6, 7)]),
    Case("batch_matmul", [(3, 4, 5), (3, 5, 6)]),
    Case("batch_matmul_nt", [(3, 4, 5), (3, 6, 5)]),
    Case("batch_matmul_tn", [(3, 5, 4), (3, 5, 6)]),
    Case("linear", [(6, 5), (4, 5), (4,)]),
    Case("linear", [(2, 3, 5), (4, 5), (4,)], name="linear_3d"),
    Case("linear_nobias", [(6, 5), (4, 5)]),
    Case("matvec", [(6, 5), (5,)]),
    Case("outer", [(6,), (5,)]),
    Case("linear_grad_input", [(2, 3, 4), (4, 5)]),
    Case("linear_grad_input", [(6, 4), (4, 5)], name="linear_grad_input_2d"),
    Case("linear_grad_weight", [(2, 3, 4), (2, 3, 5)]),
    Case("linear_grad_weight", [(6, 4), (6, 5)], name="linear_grad_weight_2d"),
    Case("vecmat", [(6,), (6, 5)]),
]

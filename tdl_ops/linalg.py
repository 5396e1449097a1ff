"""Matrix products: matmul, batched, transposed operands, linear layers, matvec, outer."""

from __future__ import annotations

import numpy as np
import tilewise as tw

from ._cases import Case


@tw.op(reference=lambda a, b: a @ b)
def matmul(a, b):
    """A @ B: (m, k) x (k, n) -> (m, n)."""
    return lambda i, j: tw.Sum(lambda k: a[i, k] * b[k, j])


@tw.op(reference=lambda a, b: a.T @ b)
def matmul_tn(a, b):
    """A^T @ B: (k, m) x (k, n) -> (m, n) (weight gradient of a linear layer)."""
    return lambda i, j: tw.Sum(lambda k: a[k, i] * b[k, j])


@tw.op(reference=lambda a, b: a @ b.T)
def matmul_nt(a, b):
    """A @ B^T: (m, k) x (n, k) -> (m, n)."""
    return lambda i, j: tw.Sum(lambda k: a[i, k] * b[j, k])


@tw.op(reference=lambda a, b: a.T @ b.T)
def matmul_tt(a, b):
    """A^T @ B^T: (k, m) x (n, k) -> (m, n)."""
    return lambda i, j: tw.Sum(lambda k: a[k, i] * b[j, k])


@tw.op(reference=np.matmul)
def batch_matmul(a, b):
    """Batched A @ B: (b, m, k) x (b, k, n) -> (b, m, n)."""
    return lambda n, i, j: tw.Sum(lambda k: a[n, i, k] * b[n, k, j])


@tw.op(reference=lambda a, b: a @ np.swapaxes(b, 1, 2))
def batch_matmul_nt(a, b):
    """Batched A @ B^T: (b, m, k) x (b, n, k) -> (b, m, n) (attention scores)."""
    return lambda n, i, j: tw.Sum(lambda k: a[n, i, k] * b[n, j, k])


@tw.op(reference=lambda a, b: np.swapaxes(a, 1, 2) @ b)
def batch_matmul_tn(a, b):
    """Batched A^T @ B: (b, k, m) x (b, k, n) -> (b, m, n)."""
    return lambda n, i, j: tw.Sum(lambda k: a[n, k, i] * b[n, k, j])


@tw.op(reference=lambda x, w, b: x @ w.T + b)
def linear(x, w, b):
    """x @ W^T + b with PyTorch layout W (out, in); x of any rank (..., in)."""
    return tw.compute(x.ndim, lambda *i: tw.Sum(lambda k: x[tuple(i[:-1]) + (k,)] * w[i[-1], k]) + b[i[-1]])


@tw.op(reference=lambda x, w: x @ w.T)
def linear_nobias(x, w):
    """x @ W^T with W (out, in); x of any rank (..., in)."""
    return tw.compute(x.ndim, lambda *i: tw.Sum(lambda k: x[tuple(i[:-1]) + (k,)] * w[i[-1], k]))


@tw.op(reference=lambda a, v: a @ v)
def matvec(a, v):
    """A @ v: (m, n) x (n,) -> (m,)."""
    return lambda i: tw.Sum(lambda k: a[i, k] * v[k])


@tw.op(reference=np.outer)
def outer(u, v):
    """u v^T: (m,) x (n,) -> (m, n)."""
    return lambda i, j: u[i] * v[j]


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
]

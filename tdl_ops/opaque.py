"""Batched linear algebra and sorting through opaque functions (splittable along the batch only)."""

from __future__ import annotations

import numpy as np

import tilewise.tdl as tw

from ._cases import Case

Cholesky = tw.opaque("Cholesky", fn=np.linalg.cholesky)
Inverse = tw.opaque("Inverse", fn=np.linalg.inv)
Solve = tw.opaque("Solve", fn=np.linalg.solve, shape=lambda a, rhs: rhs)
Sort = tw.opaque("Sort", fn=np.sort)


@tw.op(reference=np.linalg.cholesky)
def batch_cholesky(batch_mat):
    """Lower Cholesky factor of each matrix of a batch (Tofu Fig. 3)."""
    return lambda b, i, j: Cholesky(batch_mat[b, :, :])[i, j]


@tw.op(reference=np.linalg.inv)
def batch_inverse(batch_mat):
    """Inverse of each matrix of a batch."""
    return lambda b, i, j: Inverse(batch_mat[b, :, :])[i, j]


@tw.op(reference=np.linalg.solve, out_shape=lambda a, rhs: tuple(rhs))
def batch_solve(a, rhs):
    """Solve a[b] @ x[b] = rhs[b] for each batch element: (b, n, n), (b, n, k) -> (b, n, k)."""
    return lambda b, i, j: Solve(a[b, :, :], rhs[b, :, :])[i, j]


@tw.op(reference=lambda x: np.sort(x, axis=-1))
def sort_rows(x):
    """Sort each row of a matrix ascending."""
    return lambda b, j: Sort(x[b, :])[j]


CASES = [
    Case("batch_cholesky", [(3, 4, 4)], kinds=("spd",)),
    Case("batch_inverse", [(3, 4, 4)], kinds=("spd",)),
    Case("batch_solve", [(2, 4, 4), (2, 4, 3)], kinds=("spd",)),
    Case("sort_rows", [(4, 6)]),
]

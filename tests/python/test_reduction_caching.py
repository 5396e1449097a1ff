"""Reductions are computed once per value of the variables they depend on, in the interpreter
and in the cost counts alike (a row mean once per row, not once per element)."""

import numpy as np

import tdl_ops
import tilewise as tw


@tw.op
def centred_second_moment(x):
    # mean(i) does not depend on k: computed once per i.
    return lambda i: tw.Sum(lambda k: (x[i, k] - tw.Sum(lambda j: x[i, j]) / x.shape[1]) ** 2)


@tw.op
def nested_dependent(x, y):
    # The inner sum depends on k: it must be recomputed for every k.
    return lambda i: tw.Sum(lambda k: x[i, k] * tw.Sum(lambda j: x[i, j] * y[j, k]))


def test_invariant_inner_reduction_is_correct_and_counted_once():
    x = np.random.default_rng(0).standard_normal((3, 7))
    expected = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
    np.testing.assert_allclose(centred_second_moment.evaluate(x), expected, rtol=1e-12)
    # Per output element: the inner Sum once (7 reads, 7 combines); the outer 7 times read, sub,
    # div (the division sits outside the cached Sum), pow, plus 7 combines.
    c = centred_second_moment.cost(x=(3, 7))
    assert c["reads_per_element"] == 7 + 7
    assert c["flops_per_element"] == 7 + 7 * 3 + 7


def test_dependent_inner_reduction_is_recomputed():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 5)), rng.standard_normal((5, 5))
    expected = np.einsum("ik,ik->i", x, x @ y)
    np.testing.assert_allclose(nested_dependent.evaluate(x, y), expected, rtol=1e-12)
    assert nested_dependent.cost(x=(2, 5), y=(5, 5))["reads_per_element"] == 5 * (1 + 5 * 2)


def test_normalisation_costs_grow_linearly():
    small = tdl_ops.layer_norm.cost(x=(4, 64), gamma=(64,), beta=(64,))["flops"]
    large = tdl_ops.layer_norm.cost(x=(4, 512), gamma=(512,), beta=(512,))["flops"]
    assert large / small == 8  # linear in the row length, not quadratic
    assert tdl_ops.softmax.cost(x=(4, 512))["flops_per_element"] < 20

"""Tofu's worked examples give Tofu's answers (Tofu §4.1-4.2, Fig. 2-3)."""

import numpy as np
import pytest

import tilewise as tw


@tw.op
def conv1d(data, filters):
    return lambda b, co, x: tw.Sum(lambda ci, dx: data[b, ci, x + dx] * filters[ci, co, dx])


@tw.op
def shift_two(A):
    return lambda i: A[i + 2]


Cholesky = tw.opaque("Cholesky", fn=np.linalg.cholesky)


@tw.op(reference=np.linalg.cholesky)
def batch_cholesky(batch_mat):
    return lambda b, i, j: Cholesky(batch_mat[b, :, :])[i, j]


SHAPES = dict(data=(8, 16, 34), filters=(16, 32, 3))


def by_dim(strategies):
    return {s.dim: s for s in strategies}


def test_shift_two_regions():
    (split_i, replicate) = shift_two.strategies(parts=2, out=(10,), A=(12,))
    assert split_i.kind == "output" and split_i.dim == "i"
    assert split_i.input_regions["A"] == [((2, 6),), ((7, 11),)]
    assert split_i.output_regions == [((0, 4),), ((5, 9),)]
    assert replicate.kind == "replicate" and replicate.input_regions["A"] == [((2, 11),)] * 2


def test_shift_two_needs_out_shape():
    with pytest.raises(tw.ShapeError, match="output variable `i`.*out="):
        shift_two.infer_shape(A=(12,))


def test_conv1d_has_exactly_tofus_strategies():
    strategies = conv1d.strategies(parts=2, **SHAPES)
    assert [(s.kind, s.dim) for s in strategies] == [
        ("output", "b"), ("output", "co"), ("output", "x"), ("reduce", "ci"), ("reduce", "dx"), ("replicate", None)
    ]
    assert all(s.reducer == "Sum" for s in strategies if s.kind == "reduce")
    assert conv1d.infer_shape(**SHAPES) == (8, 32, 32)


def test_conv1d_fig2a_batch_split_reads_half_data_all_filters():
    s = by_dim(conv1d.strategies(parts=2, **SHAPES))["b"]
    assert s.input_regions["data"] == [((0, 3), (0, 15), (0, 33)), ((4, 7), (0, 15), (0, 33))]
    assert s.input_regions["filters"] == [((0, 15), (0, 31), (0, 2))] * 2
    assert s.output_regions == [((0, 3), (0, 31), (0, 31)), ((4, 7), (0, 31), (0, 31))]


def test_conv1d_fig2b_channel_reduction_reads_half_of_both():
    s = by_dim(conv1d.strategies(parts=2, **SHAPES))["ci"]
    assert s.kind == "reduce"
    assert s.input_regions["data"] == [((0, 7), (0, 7), (0, 33)), ((0, 7), (8, 15), (0, 33))]
    assert s.input_regions["filters"] == [((0, 7), (0, 31), (0, 2)), ((8, 15), (0, 31), (0, 2))]
    # Partial outputs are whole-sized; they are summed afterwards.
    assert s.output_regions == [((0, 7), (0, 31), (0, 31))] * 2


def test_conv1d_halo_along_x():
    s = by_dim(conv1d.strategies(parts=2, **SHAPES))["x"]
    # Each half of the output needs its pixels plus a halo of kernel-1 = 2.
    assert [r[2] for r in s.input_regions["data"]] == [(0, 17), (16, 33)]


def test_conv1d_symbolic_regions_as_in_tofu():
    s = by_dim(conv1d.symbolic_strategies())
    assert s["b"].input_regions["data"][0] == ("[0, X_b/2 - 1]", "[0, X_ci - 1]", "[0, X_x + X_dx - 2]")
    assert s["b"].input_regions["data"][1][0] == "[X_b/2, X_b - 1]"
    assert s["ci"].input_regions["filters"][1][0] == "[X_ci/2, X_ci - 1]"
    assert s["x"].input_regions["data"][1][2] == "[X_x/2, X_x + X_dx - 2]"


def test_batch_cholesky_splits_only_along_b():
    strategies = batch_cholesky.strategies(parts=2, batch_mat=(4, 3, 3))
    assert [(s.kind, s.dim) for s in strategies] == [("output", "b"), ("replicate", None)]
    assert strategies[0].input_regions["batch_mat"] == [((0, 1), (0, 2), (0, 2)), ((2, 3), (0, 2), (0, 2))]


def test_batch_cholesky_evaluates_through_the_opaque_function():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 4, 4))
    spd = a @ a.transpose(0, 2, 1) + 4 * np.eye(4)
    np.testing.assert_allclose(batch_cholesky.evaluate(spd), np.linalg.cholesky(spd), rtol=1e-12)


def test_conv1d_interpreter_matches_numpy():
    rng = np.random.default_rng(1)
    d, f = rng.standard_normal((2, 3, 10)), rng.standard_normal((3, 4, 3))
    expected = sum(np.einsum("bcx,co->box", d[:, :, k : k + 8], f[:, :, k]) for k in range(3))
    np.testing.assert_allclose(conv1d.evaluate(d, f), expected, rtol=1e-12)


def test_k_parts_not_only_two():
    s = by_dim(conv1d.strategies(parts=4, **SHAPES))["co"]
    assert [r[1] for r in s.input_regions["filters"]] == [(0, 7), (8, 15), (16, 23), (24, 31)]
    # Uneven splits follow numpy.array_split.
    s = by_dim(conv1d.strategies(parts=3, **SHAPES))["b"]
    assert [r[0] for r in s.output_regions] == [(0, 2), (3, 5), (6, 7)]
    assert s.parts == 3


def test_elementwise_detection():
    @tw.op
    def add(a, b):
        return lambda i, j: a[i, j] + b[i, j]

    @tw.op
    def bias_add(a, b):
        return lambda i, j: a[i, j] + b[j]

    assert add.is_elementwise
    assert not bias_add.is_elementwise
    assert not conv1d.is_elementwise


def test_cost_counts_flops_from_the_description():
    c = conv1d.cost(**SHAPES)
    # Per output element: ci*dx = 48 products and 48 accumulations.
    assert c["flops_per_element"] == 2 * 16 * 3
    assert c["flops"] == 2 * 16 * 3 * 8 * 32 * 32
    assert c["reads_per_element"] == 2 * 16 * 3

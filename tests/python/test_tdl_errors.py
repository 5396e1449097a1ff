"""A corpus of bad descriptions and bad calls, each asserting the error type and message
(Halide test/error style). Messages must name the op and the offending sub-expression."""

import numpy as np
import pytest

import tilewise as tw


def traced(fn, name="bad"):
    """Trace a description with unknown ranks, as analysis does."""
    return tw.op(fn, name=name).trace()


def test_tdl_error_is_a_value_error():
    assert issubclass(tw.TDLError, ValueError)
    assert issubclass(tw.ShapeError, ValueError)


CASES = [
    ("index product", lambda A: lambda i, j: A[i * j], r"op 'bad': index product of two variables is not affine: `i \* j`"),
    ("index product via sum", lambda A: lambda i, j: A[(i + 1) * (j - 1)],
     r"index product of two variables is not affine: `\(i \+ 1\) \* \(j - 1\)`"),
    ("comparison of indices", lambda A: lambda i: tw.where(i < 3, A[i], 0.0), r"comparison of indices `i < 3`"),
    ("index equality", lambda A: lambda i, j: tw.where(i == j, A[i], 0.0), r"comparison of indices `i == j`"),
    ("index as bool", lambda A: lambda i: A[i] if i else A[0], r"`i` was used as a Python bool"),
    ("float division of index", lambda A: lambda i: A[i / 2], r"`i / 2` is not affine: use //"),
    ("zero divisor", lambda A: lambda i: A[i // 0], r"`i // 0` is not affine: // needs a positive integer"),
    ("index power", lambda A: lambda i: A[i**2], r"`i \*\* 2` is not affine"),
    ("data-dependent index", lambda A, B: lambda i: A[B[i]], r"A\[B\[i\]\]: data-dependent indexing"),
    ("value as bool", lambda A: lambda i: 1.0 if A[i] > 0 else 0.0, r"value `\(A\[i\] > 0\)` was used as a Python bool"),
    ("value exponent", lambda A: lambda i: A[i] ** A[i], r"the exponent must be a constant number"),
    ("reused variable name", lambda A: lambda i: tw.Sum(lambda i: A[i]), r"index variable name `i` is used twice"),
    ("variable named like a tensor", lambda A: lambda A_: tw.Sum(lambda A: A_), r"has the name of input tensor 'A'"),
    ("wrong number of indices", lambda A: lambda i, j: A[i, j] + A[i],
     r"wrong number of indices: tensor 'A' has 2 dimensions but `A\[i\]` uses 1"),
    ("partial slice", lambda A: lambda i: tw.Sum(A[1:3]), r"only whole-dimension slices"),
    ("reduction variable never used", lambda A: lambda i: A[i] + tw.Sum(lambda k: 1.0),
     r"reduction variable `k` is never used to index a tensor"),
    ("returns a value, not a lambda", lambda A: A, r"must return a lambda over the output indices"),
    ("slice used as value", lambda A: lambda i: A[i, :] + 1.0, r"slice `A\[i, :\]` used as a value"),
    ("indexing a non-input", lambda A: lambda i: A[i] + [1.0, 2.0][i], r"used as a Python integer.*input tensor"),
    ("scalar indexed", lambda A: lambda i: A[i][0], r"value `A\[i\]` is a scalar and cannot be indexed"),
]


@pytest.mark.parametrize("fn, pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_description(fn, pattern):
    with pytest.raises(tw.TDLError, match=pattern):
        traced(fn)


def test_variable_used_outside_its_reduction():
    leaked = []

    def fn(A):
        def out(i):
            s = tw.Sum(lambda k: leaked.append(k) or A[k])
            return s + A[leaked[0]]

        return out

    with pytest.raises(tw.TDLError, match=r"op 'bad': variable `k` is used outside the lambda that binds it, in `A\[k\]`"):
        traced(fn)


def test_tensor_of_another_op():
    stolen = []

    @tw.op
    def first(A):
        stolen.append(A)
        return lambda i: A[i]

    first.trace()

    @tw.op
    def second(B):
        return lambda i: B[i] + stolen[0][i]

    with pytest.raises(tw.TDLError, match=r"unknown tensor 'A': it is an input of op 'first'"):
        second.trace()


@tw.op
def matmul(a, b):
    return lambda i, j: tw.Sum(lambda k: a[i, k] * b[k, j])


@tw.op
def conv(data, filters, stride=1):
    return lambda b, x: tw.Sum(lambda dx: data[b, stride * x + dx] * filters[dx])


def test_inconsistent_extents():
    with pytest.raises(tw.ShapeError, match=r"op 'matmul': inconsistent extents for `k`: a dimension 1 .* gives 3 but b dimension 0 .* gives 4"):
        matmul.infer_shape(a=(2, 3), b=(4, 5))


def test_wrong_rank_shape():
    with pytest.raises(tw.ShapeError, match=r"op 'matmul': input 'a' must have 2 dimensions, got shape \(2, 3, 4\)"):
        matmul.strategies(a=(2, 3, 4), b=(4, 5))


def test_missing_shape():
    with pytest.raises(tw.ShapeError, match=r"missing shape for input\(s\) b"):
        matmul.infer_shape(a=(2, 3))


def test_unknown_keyword_names_valid_ones():
    with pytest.raises(tw.TDLError, match=r"op 'conv' has no input or attribute 'strid' \(inputs: data, filters; attributes: stride\)"):
        conv.infer_shape(data=(2, 9), filters=(3,), strid=2)
    with pytest.raises(tw.TDLError, match=r"no attribute 'pad' \(attributes: stride\)"):
        conv.with_attrs(pad=1)


def test_attributes_change_the_trace():
    assert conv.infer_shape(data=(2, 9), filters=(3,)) == (2, 7)
    assert conv.infer_shape(data=(2, 9), filters=(3,), stride=2) == (2, 4)
    assert conv.with_attrs(stride=3).infer_shape(data=(2, 9), filters=(3,)) == (2, 3)


def test_bad_parts():
    with pytest.raises(ValueError, match="parts must be a positive integer"):
        matmul.strategies(parts=0, a=(2, 3), b=(3, 4))


def test_out_with_wrong_rank():
    with pytest.raises(tw.ShapeError, match=r"out has 1 dimensions but the output lambda has 2"):
        matmul.strategies(out=(3,), a=(2, 3), b=(3, 4))


def test_negative_extent():
    with pytest.raises(tw.ShapeError, match="negative extent"):
        matmul.infer_shape(a=(2, -3), b=(3, 4))


def test_opaque_without_implementation():
    F = tw.opaque("Mystery")

    @tw.op
    def mystery(x):
        return lambda b, i: F(x[b, :])[i]

    assert mystery.infer_shape(x=(2, 3)) == (2, 3)
    with pytest.raises(tw.TDLError, match="opaque function 'Mystery' has no implementation"):
        mystery.evaluate(np.ones((2, 3)))


def test_opaque_error_propagates_from_worker_threads():
    def broken(a):
        raise RuntimeError("kernel failed")

    F = tw.opaque("Broken", fn=broken)

    @tw.op
    def use(x):
        return lambda b, i: F(x[b, :])[i]

    with pytest.raises(RuntimeError, match="kernel failed"):
        use.evaluate(np.ones((4096, 2)))


def test_reference_missing():
    with pytest.raises(tw.TDLError, match="has no NumPy reference"):
        matmul.reference(np.ones((2, 2)), np.ones((2, 2)))


def test_ambiguous_output_shape_under_padding():
    @tw.op
    def padded(x):
        return lambda i: x[i - 1]

    with pytest.raises(tw.ShapeError, match=r"output variable `i`.*padding or shifts.*pass out="):
        padded.infer_shape(x=(5,))
    assert padded.infer_shape(x=(5,), out=None) if False else True
    np.testing.assert_array_equal(padded.evaluate(np.arange(1.0, 6.0), out=(7,)), [0, 1, 2, 3, 4, 5, 0])


def test_huge_extents_through_the_op_api_are_a_shape_error_at_once():
    # 2^62 used to overflow the extent inference (k * D - 1), which then retried forever.
    import tdl_ops

    with pytest.raises(tw.ShapeError, match=r"extents may be at most 2\^40"):
        tdl_ops.upsample_nearest2d.infer_shape(x=(1, 2**62, 4, 4))
    with pytest.raises(tw.ShapeError, match=r"extents may be at most 2\^40"):
        tdl_ops.matmul.strategies(parts=2, a=(2**41, 3), b=(3, 4))


# ----- found by the libFuzzer harness (tests/fuzz/cpp/tdl_desc_fuzzer.cpp) -----------------------


def test_an_index_coefficient_overflowing_int64_is_a_tdl_error():
    with pytest.raises(tw.TDLError, match="overflows int64"):
        traced(lambda A: lambda i: A[i * 2**62 * 4])


def test_indices_reaching_past_int64_for_the_shapes_are_shape_errors():
    big = tw.op(lambda A: lambda i: A[i * 2**40], name="stride_2_40")
    with pytest.raises(tw.ShapeError, match="past 2\\^61"):
        big.infer_shape(A=(2**30,))


def test_an_extent_of_a_dimension_the_tensor_does_not_have_is_a_tdl_error():
    @tw.op
    def row_sum(A):
        return lambda i: tw.Sum(lambda k: A[i, k], extents=(A.shape[3],))

    with pytest.raises(tw.TDLError, match="out of range|dimension 3 of 'A'"):
        row_sum.infer_shape(A=(2, 3))


def test_an_explicit_extent_past_2_40_is_a_shape_error():
    @tw.op
    def long_sum(A):
        return lambda i: tw.Sum(lambda k: A[i, k], extents=(2**50,))

    with pytest.raises((tw.ShapeError, tw.TDLError)):
        long_sum.infer_shape(A=(2, 3))

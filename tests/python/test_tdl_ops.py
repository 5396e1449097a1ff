"""The TDL operator library: the C++ interpreter (op.evaluate) agrees with each op's NumPy reference."""

from __future__ import annotations

import os
import sys
import zlib

import numpy as np
import pytest

try:
    import tdl_ops
except ImportError:  # running from a checkout without the editable install
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    import tdl_ops

CASES = tdl_ops.CASES


def _rng(case) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(case.id.encode()))


def _input_names(op) -> list:
    return [getattr(n, "name", n) for n in op.inputs]


def test_case_ids_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_library_size_and_coverage():
    assert len(tdl_ops.ALL) >= 50
    covered = {c.op for c in CASES}
    assert not covered - set(tdl_ops.ALL), f"cases for unknown ops: {sorted(covered - set(tdl_ops.ALL))}"
    assert not set(tdl_ops.ALL) - covered, f"ops without a case: {sorted(set(tdl_ops.ALL) - covered)}"
    for name, op in tdl_ops.ALL.items():
        assert callable(op.reference), name


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_evaluate_matches_reference(case):
    op = tdl_ops.ALL[case.op]
    inputs = tdl_ops.make_inputs(case, _rng(case))
    expected = np.asarray(op.reference(*inputs, **case.attrs), dtype=np.float64)
    got = np.asarray(op.evaluate(*inputs, **case.attrs))
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def test_elementwise_names_are_ops():
    assert tdl_ops.ELEMENTWISE <= set(tdl_ops.ALL)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_is_elementwise(case):
    op = tdl_ops.ALL[case.op]
    ranks = {n: len(s) for n, s in zip(op.inputs, case.shapes)}
    assert op.is_elementwise_for(**ranks, **case.attrs) == (case.op in tdl_ops.ELEMENTWISE)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_infer_shape_matches_reference(case):
    op = tdl_ops.ALL[case.op]
    inputs = tdl_ops.make_inputs(case, _rng(case))
    expected = np.asarray(op.reference(*inputs, **case.attrs)).shape
    shapes = dict(zip(_input_names(op), (tuple(x.shape) for x in inputs)))
    assert len(shapes) == len(inputs)
    assert tuple(op.infer_shape(**shapes, **case.attrs)) == expected


def test_add_n_family_of_any_arity():
    import tilewise as tw

    op = tdl_ops.elementwise.add_n(257)
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((3, 2)) for _ in range(257)]
    np.testing.assert_allclose(op.evaluate(*xs), op.reference(*xs), rtol=1e-12)
    assert op.name == "add_257" and op.is_elementwise_for(**{f"x{k}": 2 for k in range(257)})
    assert tdl_ops.nary_op("add_257") is op and tdl_ops.nary_op("add_3") is tdl_ops.add_3
    assert tdl_ops.nary_op("concat_70").name == "concat_70" and tdl_ops.nary_op("stack_65").name == "stack_65"
    assert tdl_ops.nary_op("add_row") is None and tdl_ops.nary_op("add_07") is None
    assert tdl_ops.nary_op("mul_3") is None and tdl_ops.nary_op("add") is None and tdl_ops.nary_op("add_0") is None
    g = tw.Graph()
    a, b = g.input("a", (2, 3)), g.input("b", (3, 2))
    with pytest.raises(tw.ShapeError, match=r"op 'add_3': input x2 has shape \(3, 2\), x0 has \(2, 3\)"):
        tdl_ops.add_3(a, a, b)
    with pytest.raises(tw.GraphError, match="add_n sums at least one tensor, got 0"):
        tdl_ops.elementwise.add_n(0)

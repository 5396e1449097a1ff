"""Ops are bound to native kernels by declaration (``@tw.op(kernel=...)``), not by their names or
their lambda variables' names: every declared kernel is used on every case of its op, renaming a
variable changes nothing, and a wrong declaration is an error where it is written."""
import numpy as np
import pytest

import tdl_ops
import tilewise as tw
from tilewise.tdl import native_kernel_roles


def _run_one(op, shapes, arrays, attrs=None):
    g = tw.Graph()
    ins = [g.input(f"in{i}", s) for i, s in enumerate(shapes)]
    y = g.apply(op, ins, dict(attrs or {}))
    feeds = {f"in{i}": np.asarray(a, np.float32) for i, a in enumerate(arrays)}
    exe = tw.compile(g, tw.partition(g, devices=1, algorithm="data_parallel"))
    exe.step(feeds)
    want = tw.run_reference(g, {k: v.astype(np.float64) for k, v in feeds.items()})[y.name]
    return exe.stats.native_ops, exe.get(y), want


_DECLARED = [c for c in tdl_ops.CASES if tdl_ops.ALL[c.op].kernel is not None]


@pytest.mark.parametrize("case", _DECLARED, ids=[c.name or c.op for c in _DECLARED])
def test_every_declared_kernel_runs_its_cases(case):
    rng = np.random.default_rng(0)
    native, got, want = _run_one(tdl_ops.ALL[case.op], case.shapes, tdl_ops.make_inputs(case, rng), case.attrs)
    assert native == 1, f"{case.op} declares kernel '{tdl_ops.ALL[case.op].kernel}' but ran on the interpreter"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_every_kernel_is_declared_by_a_library_op():
    declared = {op.kernel for op in tdl_ops.ALL.values() if op.kernel is not None}
    declared.update(tdl_ops.nary_op(name).kernel for name in ("add_2", "concat_2", "stack_2"))
    assert set(native_kernel_roles()) == declared
    assert len(_DECLARED) >= 90


def test_renamed_variables_keep_the_kernel():
    @tw.op(kernel="matmul")
    def renamed_matmul(a, b):
        return lambda row, col: tw.Sum(lambda inner: a[row, inner] * b[inner, col])

    rng = np.random.default_rng(1)
    native, got, want = _run_one(renamed_matmul, [(5, 4), (4, 3)], [rng.standard_normal((5, 4)),
                                                                      rng.standard_normal((4, 3))])
    assert native == 1
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_kernel_vars_put_variables_in_the_kernels_role_order():
    # The filter gradient with its reduction variables written (y, x, b): the description's order
    # is (co, ci, kh, kw, y, x, b); kernel_vars gives the kernel's (co, ci, kh, kw, b, y, x).
    @tw.op(kernel="conv2d_backward_filter", kernel_vars=("co", "ci", "kh", "kw", "b", "y", "x"))
    def filter_grad(data, dy):
        return lambda co, ci, kh, kw: tw.Sum(lambda y, x, b: dy[b, co, y, x] * data[b, ci, y + kh, x + kw])

    assert filter_grad.trace((4, 4)).kernel_vars == [0, 1, 2, 3, 6, 4, 5]
    rng = np.random.default_rng(2)
    shapes = [(2, 3, 6, 6), (2, 4, 4, 4)]
    native, got, want = _run_one(filter_grad, shapes, [rng.standard_normal(s) for s in shapes])
    assert native == 1
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_an_undeclared_op_is_interpreted_whatever_its_name():
    @tw.op(name="my_matmul")
    def matmul_lookalike(a, b):
        return lambda i, j: tw.Sum(lambda k: a[i, k] * b[k, j])

    rng = np.random.default_rng(3)
    native, got, want = _run_one(matmul_lookalike, [(3, 4), (4, 2)], [rng.standard_normal((3, 4)),
                                                                        rng.standard_normal((4, 2))])
    assert native == 0
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_wrong_declarations_are_errors_where_they_are_written():
    with pytest.raises(tw.TDLError, match=r"no native kernel named 'matmull' \(did you mean 'matmul'"):
        @tw.op(kernel="matmull")
        def a(x, y):
            return lambda i, j: tw.Sum(lambda k: x[i, k] * y[k, j])

    @tw.op(kernel="conv2d")
    def b(x, y):
        return lambda i, j: tw.Sum(lambda k: x[i, k] * y[k, j])
    with pytest.raises(tw.TDLError, match=r"kernel 'conv2d' takes variables in the roles \(b, co, y, x, ci, dy, dx\)"):
        b.trace((2, 2))

    @tw.op(kernel="matmul", kernel_vars=("i", "j", "q"))
    def c(x, y):
        return lambda i, j: tw.Sum(lambda k: x[i, k] * y[k, j])
    with pytest.raises(tw.TDLError, match=r"kernel_vars \['i', 'j', 'q'\] must name each"):
        c.trace((2, 2))
    with pytest.raises(tw.TDLError, match="kernel_vars given without a kernel"):
        tw.op(kernel_vars=("i",))(lambda x: lambda i: x[i])


@pytest.mark.parametrize("bad", [-1.0, 1.7, 7.0, np.nan])
def test_an_id_outside_the_table_fails_the_step_with_a_typed_error(bad):
    # The lookup used to read row -1 as the last row and 1.7 as row 1.
    g = tw.Graph()
    table, ids = g.parameter("table", (7, 3)), g.input("ids", (2, 4))
    out = tdl_ops.embedding_seq(table, ids)
    exe = tw.compile(g, tw.partition(g, devices=2, algorithm="data_parallel"))
    exe.set(table, np.arange(21, dtype=np.float32).reshape(7, 3))
    good = np.array([[0, 1, 2, 3], [4, 5, 6, 0]], np.float32)
    exe.step({"ids": good})
    np.testing.assert_array_equal(exe.get(out), np.arange(21, dtype=np.float32).reshape(7, 3)[good.astype(int)])
    ids_bad = good.copy()
    ids_bad[1, 2] = bad
    exe2 = tw.compile(g, tw.partition(g, devices=2, algorithm="data_parallel"))
    exe2.set(table, np.zeros((7, 3), np.float32))
    with pytest.raises(tw.ExecError, match=r"is not a row of the table \(0 \.\. 6\)"):
        exe2.step({"ids": ids_bad})


def test_the_zoo_transformer_runs_its_lookups_natively():
    g = tw.models.get("transformer-1-32-2", batch=2, seq=8, vocab=50)
    exe = tw.compile(g, tw.partition(g, devices=2, algorithm="tofu")).initialize(seed=0)
    rng = np.random.default_rng(0)
    feeds = {"ids": rng.integers(0, 50, (2, 8)).astype(np.float32),
             "token_type_ids": rng.integers(0, 2, (2, 8)).astype(np.float32),
             "label": np.eye(2, dtype=np.float32)[rng.integers(0, 2, 2)]}
    for t in g.tensors:
        if t.producer is None and t.role == "input" and t.name not in feeds:
            feeds[t.name] = np.ones(t.shape, np.float32)  # dropout masks: keep everything
    exe.step(feeds)
    types = {o.type: nat for o, nat in zip(g.ops, exe._core.stats.op_native)}
    assert types["embedding_seq"] and types["embedding_seq_grad"]


@pytest.mark.parametrize("devices, algorithm", [(2, "kcuts"), (3, "equal_chop"), (4, "tofu")])
def test_declared_kernels_on_devices_shares_match_the_reference(devices, algorithm):
    # Every declared op split over devices (uneven 3-way cuts included): each device's kernel
    # computes its block of the output (or declines a split it does not handle, and the
    # interpreter computes it); together they equal the reference.
    rng = np.random.default_rng(5)
    wrong, native = [], 0
    for case in _DECLARED:
        g = tw.Graph()
        ins = [g.input(f"in{i}", s) for i, s in enumerate(case.shapes)]
        y = g.apply(tdl_ops.ALL[case.op], ins, dict(case.attrs))
        feeds = {f"in{i}": np.asarray(a, np.float32) for i, a in enumerate(tdl_ops.make_inputs(case, rng))}
        exe = tw.compile(g, tw.partition(g, devices=devices, algorithm=algorithm))
        exe.step(feeds)
        want = tw.run_reference(g, {k: v.astype(np.float64) for k, v in feeds.items()})[y.name]
        native += exe.stats.native_ops
        if not np.allclose(exe.get(y), want, rtol=1e-4, atol=1e-4):
            wrong.append(case.name or case.op)
    assert not wrong, wrong
    assert native >= 0.9 * len(_DECLARED), f"only {native} of {len(_DECLARED)} ran natively on every device"


_NARY = [("concat_3", [(2, 3, 4), (2, 1, 4), (2, 5, 4)], {"axis": 1}),
         ("concat_2", [(3, 2), (3, 5)], {"axis": -1}),
         ("concat_4", [(1, 3), (2, 3), (4, 3), (1, 3)], {"axis": 0}),
         ("stack_2", [(3, 4), (3, 4)], {"axis": 0, "inner": 4}),
         ("stack_5", [(2, 6), (2, 6), (2, 6), (2, 6), (2, 6)], {"axis": 1, "inner": 6}),
         ("stack_3", [(2, 3), (2, 3), (2, 3)], {"axis": 2, "inner": 3})]


@pytest.mark.parametrize("devices, algorithm", [(1, "data_parallel"), (2, "kcuts"), (3, "equal_chop"), (4, "tofu")])
@pytest.mark.parametrize("name, shapes, attrs", _NARY, ids=[f"{n}-{a}" for n, _, a in _NARY])
def test_nary_concat_and_stack_run_natively(name, shapes, attrs, devices, algorithm):
    # The n-ary families are made per arity on first use, so tdl_ops.CASES cannot list them.
    rng = np.random.default_rng(6)
    g = tw.Graph()
    ins = [g.input(f"in{i}", s) for i, s in enumerate(shapes)]
    y = g.apply(tdl_ops.nary_op(name), ins, attrs)
    feeds = {f"in{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
    exe = tw.compile(g, tw.partition(g, devices=devices, algorithm=algorithm))
    exe.step(feeds)
    assert exe.stats.native_ops == 1, f"{name} ran on the interpreter"
    want = tw.run_reference(g, {k: v.astype(np.float64) for k, v in feeds.items()})[y.name]
    np.testing.assert_array_equal(exe.get(y), want.astype(np.float32))

"""Property: the regions from the interval analysis equal the regions found by enumerating
every index each worker touches (tinygrad fuzz_symbolic style differential test)."""

import itertools

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilewise as tw


@st.composite
def affine_ops(draw):
    """A random op: output variables, reduction variables with given extents, and inputs read
    through random affine indices (each variable at most once per access)."""
    n_out = draw(st.integers(1, 3))
    n_red = draw(st.integers(0, 2))
    out_shape = tuple(draw(st.integers(1, 6)) for _ in range(n_out))
    red_ext = tuple(draw(st.integers(1, 4)) for _ in range(n_red))
    n_vars = n_out + n_red
    n_inputs = draw(st.integers(1, 2))
    inputs = []
    for _ in range(n_inputs):
        rank = draw(st.integers(1, 3))
        shape = tuple(draw(st.integers(1, 7)) for _ in range(rank))
        accesses = []
        for _ in range(draw(st.integers(1, 2))):
            free = list(range(n_vars))
            dims = []
            for _ in range(rank):
                k = draw(st.integers(0, min(2, len(free))))
                chosen = draw(st.permutations(free))[:k]
                free = [v for v in free if v not in chosen]
                terms = [(v, draw(st.integers(-3, 3).filter(lambda c: c != 0))) for v in chosen]
                const = draw(st.integers(-4, 4))
                div = draw(st.sampled_from([1, 1, 1, 2, 3]))
                dims.append((terms, const, div))
            accesses.append(dims)
        inputs.append((shape, accesses))
    parts = draw(st.integers(1, 4))
    return n_out, n_red, out_shape, red_ext, inputs, parts


def index_value(dim, env):
    terms, const, div = dim
    return (sum(c * env[v] for v, c in terms) + const) // div


def build_op(n_out, n_red, red_ext, inputs):
    names = [f"t{i}" for i in range(len(inputs))]

    def index(dim, vs):
        terms, const, div = dim
        e = const
        for v, c in terms:
            e = vs[v] * c + e
        return e // div if div > 1 else e

    def body(tensors, vs):
        total = 0.0
        for t, (_, accesses) in zip(tensors, inputs):
            for dims in accesses:
                total = total + t[tuple(index(d, vs) for d in dims)]
        return total

    def describe(*tensors):
        def out(*ov):
            if n_red == 0:
                return body(tensors, list(ov))
            return tw.Sum(lambda *rv: body(tensors, list(ov) + list(rv)), extents=red_ext, ndim=n_red)

        return tw.compute(n_out, out)

    describe.__signature__ = __import__("inspect").Signature(
        [__import__("inspect").Parameter(n, __import__("inspect").Parameter.POSITIONAL_OR_KEYWORD) for n in names]
    )
    return tw.Op(describe, "random_affine"), names


def split(n, k, w):
    return np.array_split(np.arange(n), k)[w]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(affine_ops())
def test_regions_equal_enumeration(case):
    n_out, n_red, out_shape, red_ext, inputs, parts = case
    op, names = build_op(n_out, n_red, red_ext, inputs)
    shapes = {n: shape for n, (shape, _) in zip(names, inputs)}
    extents = list(out_shape) + list(red_ext)
    for s in op.strategies(parts=parts, out=out_shape, **shapes):
        for w in range(parts):
            ranges = [np.arange(e) for e in extents]
            if s.dim is not None:
                v = int(s.dim[1:])  # variables are i0.. (outputs) and r0.. (reductions)
                v = v if s.dim.startswith("i") else n_out + v
                ranges[v] = split(extents[v], parts, w)
            for name, (shape, accesses) in zip(names, inputs):
                lo = [None] * len(shape)
                hi = [None] * len(shape)
                for env in itertools.product(*ranges):
                    for dims in accesses:
                        idx = [index_value(d, env) for d in dims]
                        if all(0 <= i < n for i, n in zip(idx, shape)):
                            lo = [i if a is None else min(a, i) for a, i in zip(lo, idx)]
                            hi = [i if a is None else max(a, i) for a, i in zip(hi, idx)]
                expected = None if lo[0] is None else tuple(zip(lo, hi))
                assert s.input_regions[name][w] == expected, (s, w, name)


@settings(max_examples=60, deadline=None)
@given(affine_ops(), st.integers(0, 2**31 - 1))
def test_interpreter_matches_direct_evaluation(case, seed):
    n_out, n_red, out_shape, red_ext, inputs, _ = case
    op, names = build_op(n_out, n_red, red_ext, inputs)
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape) for shape, _ in inputs]
    got = op.evaluate(*arrays, out=out_shape)
    expected = np.zeros(out_shape)
    for o in itertools.product(*[range(e) for e in out_shape]):
        total = 0.0
        for r in itertools.product(*[range(e) for e in red_ext]):
            env = list(o) + list(r)
            for a, (shape, accesses) in zip(arrays, inputs):
                for dims in accesses:
                    idx = [index_value(d, env) for d in dims]
                    if all(0 <= i < n for i, n in zip(idx, shape)):
                        total += a[tuple(idx)]
        expected[o] = total
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)

"""exe.step(check_finite=True) (issue 15): the first op whose output holds NaN or Inf raises
tw.NumericalError naming it, and the step is taken back (parameters as before, training goes on)."""

import numpy as np
import pytest

import tilewise as tw
from tilewise.graph.feeds import example_feeds


def _mlp():
    return tw.models.mlp(layers=3, hidden=32, batch=16)


def _params(exe, g):
    return {t.name: exe.get(t.name).copy() for t in g.tensors if t.producer is None and t.role == "parameter"}


def _input_name(g):
    return next(t.name for t in g.tensors if t.producer is None and t.role == "input")


@pytest.mark.parametrize("devices,atomic", [(1, False), (2, False), (3, True)])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_value_names_its_op_and_changes_nothing(devices, atomic, bad):
    g = _mlp()
    exe = tw.compile(g, tw.partition(g, devices), atomic=atomic).initialize(0)
    feeds = example_feeds(g)
    exe.step(feeds, check_finite=True)
    before = _params(exe, g)
    name = _input_name(g)
    poisoned = dict(feeds)
    poisoned[name] = np.array(feeds[name], dtype=np.float32)
    poisoned[name][3, 5] = bad
    with pytest.raises(tw.NumericalError) as info:
        exe.step(poisoned, check_finite=True)
    e = info.value
    first = next(op for op in g.ops if name in [t.name for t in op.inputs])
    assert e.op == first.name and e.tensor == first.output.name, str(e)
    assert 0 <= e.device < devices
    assert e.nan + e.inf > 0 and (e.nan > 0 if np.isnan(bad) else True)
    assert isinstance(e, tw.ExecError)
    for k, v in before.items():
        assert np.array_equal(exe.get(k), v), k
    # Training goes on exactly as if the bad batch had never been fed.
    ref = tw.compile(g, tw.partition(g, devices)).initialize(0)
    ref.step(feeds)
    a, b = exe.step(feeds, check_finite=True), ref.step(feeds)
    assert np.array_equal(a["loss"], b["loss"])


def test_without_the_check_non_finite_values_flow_through():
    g = _mlp()
    exe = tw.compile(g, tw.partition(g, 2)).initialize(0)
    feeds = example_feeds(g)
    name = _input_name(g)
    feeds[name] = np.full_like(np.asarray(feeds[name], dtype=np.float32), np.nan)
    out = exe.step(feeds)
    assert np.isnan(out["loss"]).all()


def test_an_overflow_is_found_and_taken_back():
    g = _mlp()
    exe = tw.compile(g, tw.partition(g, 2), atomic=True).initialize(0)
    feeds = example_feeds(g)
    exe.step(feeds)
    w = next(t.name for t in g.tensors if t.producer is None and t.role == "parameter" and "weight" in t.name)
    big = np.full(exe.get(w).shape, 3e38, dtype=np.float32)  # finite; its products overflow
    exe.set(w, big)
    before = _params(exe, g)
    with pytest.raises(tw.NumericalError):
        exe.step(feeds, check_finite=True)
    for k, v in before.items():
        assert np.array_equal(exe.get(k), v), k


def test_check_finite_must_be_a_bool():
    g = _mlp()
    exe = tw.compile(g, tw.partition(g, 1)).initialize(0)
    with pytest.raises(TypeError, match="check_finite"):
        exe.step(example_feeds(g), check_finite="yes")

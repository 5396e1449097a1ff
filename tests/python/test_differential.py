"""Differential testing at scale (docs/RELIABILITY.md): random training graphs (dense, convolutional,
attention and recurrent layers; MSE or cross-entropy; SGD, momentum or Adam) on 1-8 devices under a
random planner or a random plan, run by the runtime and compared with the float64 reference
interpreter and with torch (float64) over 3 steps: loss, output, every gradient, and the parameters
and optimizer state after them (``tilewise.testing``).

CI runs 200 cases, derandomized (the same cases every run). ``TILEWISE_DIFF_CASES=5000`` runs more
(hypothesis draws them from the same strategy; or ``python -m tilewise.testing.differential --cases
5000 --seed S`` without hypothesis). A failing case is shrunk by hypothesis and printed as
``Case(...)``: ``tilewise.testing.run_case(Case(...)).report()`` runs it again.
"""

from __future__ import annotations

import collections
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import tdl_ops
import tilewise as tw
from tilewise.testing import Case, RandomChooser, generate_case, random_case, run_case
from tilewise.testing import random_graphs as rg
from tilewise.testing.differential import main

CASES = int(os.environ.get("TILEWISE_DIFF_CASES", "200"))


class _Draw:
    """The generator's chooser over hypothesis's ``draw``: integers shrink to their lowest value and
    options to the first (the simplest), so a failure shrinks to a small model."""

    def __init__(self, draw):
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def choice(self, options):
        return self.draw(st.sampled_from(tuple(options)))


@st.composite
def cases(draw) -> Case:
    return generate_case(_Draw(draw), seed=draw(st.integers(0, 2**31 - 1)))


_RUN = collections.Counter()


@settings(max_examples=CASES, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_random_training_graphs_agree_with_the_reference_and_torch(case):
    note(f"reproduce: tilewise.testing.run_case({case!r}).report()")
    result = run_case(case)
    _RUN["cases"] += 1
    _RUN["torch"] += result.torch
    _RUN["tensors"] += result.compared
    assert result.ok, result.report()


def test_the_ci_run_was_as_large_as_promised(capsys):
    """Runs after the hypothesis test (file order): it tried at least CASES cases and compared with torch."""
    if not _RUN["cases"]:
        pytest.skip("run with the differential test above")
    with capsys.disabled():
        print(f"\n[differential] {_RUN['cases']} cases, {_RUN['torch']} also against torch, "
              f"{_RUN['tensors']} tensors compared")
    assert _RUN["cases"] >= CASES
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    assert _RUN["torch"] == _RUN["cases"]


def test_the_generator_covers_every_family_kind_planner_and_device_count():
    seen = collections.defaultdict(set)
    for seed in range(400):
        c = random_case(seed)
        seen["family"].add(c.family)
        seen["planner"].add(c.planner)
        seen["devices"].add(c.devices)
        seen["loss"].add(c.loss)
        seen["optimizer"].add(c.optimizer)
        seen["batch"].add(c.batch)
        seen["kinds"].update(f"{c.family}.{layer[0]}" for layer in c.layers)
    assert seen["family"] == set(rg.FAMILIES)
    assert seen["planner"] == set(rg.PLANNERS) and "random" in seen["planner"]
    assert seen["devices"] == set(range(1, 9))
    assert seen["loss"] == set(rg.LOSSES) and seen["optimizer"] == set(rg.OPTIMIZERS)
    assert {3, 5, 7, 11} <= seen["batch"]  # primes: no device count above 1 divides them
    want = {"dense.linear", "dense.act", "dense.layer_norm", "dense.residual", "dense.concat", "dense.softmax",
            "dense.transpose", "dense.gram", "conv.conv", "conv.batch_norm", "conv.act", "conv.max_pool",
            "conv.avg_pool", "conv.conv_residual", "conv.concat", "seq.attention", "seq.layer_norm", "seq.linear",
            "seq.act", "seq.residual", "seq.softmax", "rnn.lstm", "rnn.gru", "rnn.linear", "rnn.act"}
    assert want <= seen["kinds"], want - seen["kinds"]


def test_cases_are_deterministic_and_their_repr_rebuilds_them():
    assert random_case(12345) == random_case(12345)
    assert generate_case(RandomChooser(5), seed=1) == generate_case(RandomChooser(5), seed=1)
    c = random_case(99)
    assert eval(repr(c), {"Case": Case}) == c


def test_the_comparison_sees_a_difference():
    """With no tolerance, float32 against float64 differs somewhere: the comparisons do run."""
    c = Case("dense", 3, (5,), (("linear", 7), ("act", "tanh")), 3, "cross_entropy", "adam", 2, "tofu", 1)
    assert run_case(c).ok
    strict = run_case(c, rtol=0.0)
    assert not strict.ok and strict.compared > 0
    assert "reproduce: run_case(Case(family='dense'" in strict.report()


def test_a_case_that_raises_is_reported_not_raised():
    bad = Case("dense", 3, (5,), (("no_such_layer",),), 3, "mse", "sgd", 2, "tofu", 1)
    result = run_case(bad, use_torch=False)
    assert not result.ok and "unknown layer kind 'no_such_layer'" in result.error


def test_the_long_mode_command_runs_cases_by_seed(capsys):
    assert main(["--cases", "3", "--seed", "4", "--no-torch", "--quiet"]) == 0
    assert "[differential] 3 cases" in capsys.readouterr().out
    assert main(["--case-seed", "7", "--no-torch"]) == 0
    assert "1 cases" in capsys.readouterr().out


@pytest.mark.parametrize("devices", [1, 2])
def test_max_pool_gradient_with_a_tie_is_a_subgradient(devices):
    """A window of equal values: any valid gradient of max sums to dL/dy; torch gives all of it to the
    first maximum, and so do the reference and the runtime (it once gave every tied input all of it).
    Found by the differential run: a padded 1x1 convolution's border is its bias, so the pool's border
    windows tie (the case seeds in test_the_max_pool_tie_cases_agree_with_torch)."""
    g = tw.Graph()
    x = g.parameter("x", (1, 1, 2, 4))
    y = tdl_ops.max_pool2d(x, kernel=2, stride=2)
    loss = tdl_ops.mse_loss(y, g.label("t", (1, 1, 1, 2)))
    grads = tw.grad(g, loss)
    feeds = {"x": np.array([[[[1.0, 1.0, 0.0, 3.0], [1.0, 1.0, 3.0, 3.0]]]]), "t": np.zeros((1, 1, 1, 2))}
    want = np.array([[[[1.0, 0.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0]]]])  # dL/dy = 2 (y - t) / 2 = y
    dx = tw.run_reference(g, feeds)[grads["x"].name]
    np.testing.assert_array_equal(dx, want)
    exe = tw.compile(g, tw.partition(g, devices=devices, algorithm="tofu"))
    exe.set(x, feeds["x"].astype(np.float32))
    exe.step({"t": feeds["t"].astype(np.float32)})
    np.testing.assert_allclose(exe.get(grads["x"]), want)


@pytest.mark.parametrize("seed", [345512145, 939625287, 114661864])
def test_the_max_pool_tie_cases_agree_with_torch(seed):
    """The cases of the seed-0 run that found the tie defect (before the generator kept ties out)."""
    pytest.importorskip("torch")
    result = run_case(random_case(seed))
    assert result.ok, result.report()

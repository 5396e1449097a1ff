"""Determinism (issue 15; docs/RELIABILITY.md): the same graph, seed, feeds and plan give bitwise
the same parameters and optimizer state after several steps — across executables, processes, BLAS
thread counts, and executables stepping in two threads at once. Across plans the sums of partials
run in other orders: equal to rounding, not bitwise."""

import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import tilewise as tw
from tilewise.graph.feeds import example_feeds

SCRIPT = pathlib.Path(__file__).parent / "determinism_scripts" / "train_hash.py"


def _state(g, exe):
    return {t.name: exe.get(t.name).copy() for t in g.tensors
            if t.producer is None and t.role in ("parameter", "optimizer_state")}


def _train(g, plan, steps=4):
    exe = tw.compile(g, plan).initialize(0)
    feeds = example_feeds(g, 0)
    for _ in range(steps):
        exe.step(feeds)
    return _state(g, exe)


@pytest.mark.parametrize("model,devices,algorithm", [("mlp-2-64", 2, "tofu"), ("transformer-1-32-2", 3, "kcuts")])
def test_the_same_plan_gives_bitwise_the_same_state(model, devices, algorithm):
    g = tw.models.get(model, batch=8, optimizer="adam")
    plan = tw.partition(g, devices, algorithm=algorithm)
    a, b = _train(g, plan), _train(g, plan)
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name


@pytest.mark.parametrize("threads", ["1", "2", "4"])
def test_blas_thread_counts_do_not_change_the_result(threads):
    """A step runs every kernel on its device's one thread (the BLAS is set to one thread for the
    step), so OPENBLAS_NUM_THREADS does not reach the arithmetic: hashes equal across processes."""
    def run(n):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n)
        out = subprocess.run([sys.executable, str(SCRIPT), "mlp-2-256", "2", "tofu"], env=env, capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    assert run(threads) == run("1")


def test_two_executables_stepping_in_two_threads_at_once_equal_alone():
    g = tw.models.get("mlp-2-128", batch=16, optimizer="adam")
    plan = tw.partition(g, 2)
    alone = _train(g, plan, steps=6)
    results = [None, None]

    def worker(i):
        results[i] = _train(g, plan, steps=6)

    for _ in range(5):
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            for name in alone:
                assert r[name].tobytes() == alone[name].tobytes(), name


def test_other_plans_agree_to_rounding_not_bitwise():
    g = tw.models.get("mlp-2-64", batch=8, optimizer="sgd")
    one = _train(g, tw.Plan.one_device(g))
    for devices, algorithm in ((2, "tofu"), (3, "kcuts"), (4, "equal_chop")):
        other = _train(g, tw.partition(g, devices, algorithm=algorithm))
        for name in one:
            np.testing.assert_allclose(other[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)

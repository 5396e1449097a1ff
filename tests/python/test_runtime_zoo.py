"""Zoo models at small sizes, partitioned over 2 devices: one training step against the float64
reference executor (loss), bytes moved against the plan (exactly), memory against the prediction.
AlexNet and Inception-v4 need ~13 s of reference execution each: set TILEWISE_SLOW=1 to run them."""
import os

import numpy as np
import pytest

import tilewise as tw

SLOW = pytest.mark.skipif(not os.environ.get("TILEWISE_SLOW"), reason="slow reference run; set TILEWISE_SLOW=1")

CASES = {
    "nasnet": (lambda: tw.models.nasnet(cells=2, filters=8, batch=2, image=32, classes=4), 1e-5),
    "brnn": (lambda: tw.models.brnn(layers=1, hidden=8, steps=3, batch=4, in_features=6), 1e-5),
    "alexnet": (lambda: tw.models.alexnet(batch=2, image=224, classes=4), 1e-5),
    # Batch norm over 4 x 1 x 1 values in the last stage amplifies float32 rounding (docs/RUNTIME.md).
    "inception_v4": (lambda: tw.models.inception_v4(width=1, batch=4, image=75, classes=4), 1e-4),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=SLOW) if n in ("alexnet", "inception_v4") else n
                                  for n in CASES])
def test_zoo_model_step_matches_the_reference(name):
    build, rtol = CASES[name]
    g = build()
    rng = np.random.default_rng(0)
    feeds = {t.name: (0.1 * rng.standard_normal(t.shape)).astype(np.float32) for t in g.tensors
             if t.producer is None}
    expected = tw.run_reference(g, feeds, outputs=[g.outputs["loss"]])[g.outputs["loss"].name]
    plan = tw.partition(g, devices=2, algorithm="tofu")
    exe = tw.compile(g, plan)
    for k, v in feeds.items():
        exe.set(k, v)
    loss = float(exe.step()["loss"])
    assert abs(loss - float(expected)) <= rtol * abs(float(expected))
    assert exe.stats.bytes_moved == plan.comm_bytes
    assert exe.stats.memory_error <= 0.10


@pytest.mark.parametrize("algorithm", ["tofu", "data_parallel"])
def test_transformer_with_embedding_lookups_runs_partitioned(algorithm):
    """Embedding lookups (int ids) and every other op of the zoo transformer run on native kernels,
    partitioned over 2 devices (issue 14: nothing falls back to the interpreter)."""
    g = tw.models.transformer(layers=1, hidden=16, heads=2, seq=4, batch=2, vocab=11, classes=3, dropout=0.0)
    rng = np.random.default_rng(0)
    feeds = {}
    for t in g.tensors:
        if t.producer is None:
            if t.name in ("ids", "token_type_ids"):
                feeds[t.name] = rng.integers(0, 2 if t.name == "token_type_ids" else 11, size=t.shape).astype(np.float32)
            else:
                feeds[t.name] = (0.1 * rng.standard_normal(t.shape)).astype(np.float32)
    expected = float(tw.run_reference(g, feeds, outputs=[g.outputs["loss"]])[g.outputs["loss"].name])
    plan = tw.partition(g, devices=2, algorithm=algorithm)
    exe = tw.compile(g, plan)
    for k, v in feeds.items():
        exe.set(k, v)
    assert abs(float(exe.step()["loss"]) - expected) <= 1e-5 * abs(expected)
    assert exe.stats.bytes_moved == plan.comm_bytes
    assert exe.stats.interpreted_ops == 0

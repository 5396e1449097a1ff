"""Kernel scratch in the programs (issue 11: executor costs the plan does not show). Each Compute
instruction whose kernel needs scratch (im2col matrices, packed blocks, accumulators, float32 copies
of integer inputs, the interpreter's float64 copies) has a scratch buffer of its program alive only
during it: the arena plans it, so the predicted peak memory is the measured one, and kernels take
nothing from the heap."""

import json

import numpy as np
import pytest

import tilewise as tw
from tilewise import _core
from tilewise.graph.feeds import example_feeds
from tilewise.plan.plan import Plan
from tilewise.plan.swapping import swap_problem

MODELS = {
    "wresnet": lambda: tw.models.wresnet(depth=50, width=1, batch=2, image=32, classes=10),
    "transformer": lambda: tw.models.transformer(layers=1, hidden=32, heads=2, seq=8, batch=2, vocab=50, classes=3,
                                                 dropout=0.0, padding_mask=True),
    "rnn": lambda: tw.models.rnn(layers=1, hidden=16, steps=3, batch=4, in_features=8),
}


def _cluster(devices):
    kinds = {k: 1e9 for k in tw.DeviceProfile.KINDS}
    intra = tw.Link("intra", bandwidth=1e9, latency=1e-6)
    return tw.Cluster("test", devices, device=tw.DeviceProfile("core", 0, kinds), intra=intra if devices > 1 else None)


def _compute_scratch(exe, devices):
    """Per device: {op name: scratch bytes} of its Compute instructions."""
    out = []
    for d in range(devices):
        prog = json.loads(exe.program(d).to_json())
        out.append({i["op"]: prog["buffers"][i["scratch"]]["bytes"] for i in prog["instructions"]
                    if i["kind"] == "compute" and "scratch" in i})
    return out


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("devices", [1, 2])
def test_scratch_is_planned_and_kernels_take_none_from_the_heap(model, devices):
    g = MODELS[model]()
    plan = Plan.one_device(g) if devices == 1 else tw.partition(g, devices=devices, algorithm="tofu")
    exe = tw.compile(g, plan).initialize(0)
    feeds = example_feeds(g)
    heap = _core.kernel_heap_scratch_bytes()
    for _ in range(2):  # the recorded step and a planned one
        exe.step(feeds)
        assert _core.kernel_heap_scratch_bytes() == heap
        assert exe.stats.scratch_bytes_per_device == [0] * devices
        measured = exe.stats.peak_memory_per_device
        assert exe.stats.predicted_memory_per_device == measured
        assert plan.predict(_cluster(devices)).memory_per_device == measured
    scratch = _compute_scratch(exe, devices)
    assert all(b > 0 and b % 16 == 0 for per in scratch for b in per.values())
    if model == "wresnet":
        # Every 3x3 and strided convolution runs in its planned scratch: the stem's holds an image's
        # zero-padded, stride-split copy (3 x 4 phases of 19 x 19, the AVX-512 window kernels) or its
        # im2col matrix (3 * 7 * 7 rows, 16 * 16 output positions) at least.
        assert scratch[0]["conv1.conv2d"] >= min(3 * 4 * 19 * 19, 3 * 7 * 7 * 16 * 16) * 4
        assert sum("conv2d" in op for op in scratch[0]) >= 16
    if model == "transformer" and devices == 1:
        # The boolean padding mask reaches a float32 kernel as a float32 copy in the scratch.
        assert scratch[0]["encoder.0.attention.reshape"] >= 2 * 8 * 4


def test_swapped_programs_take_scratch_from_the_heap_and_say_so():
    """A swap plan places the graph's tensors only: its Compute instructions' scratch buffers have no
    place in the pool, so their kernels take scratch from the heap, counted in the stats (the swap
    planner does not see scratch yet)."""
    g = tw.models.transformer(layers=1, hidden=32, heads=2, seq=16, batch=4, vocab=64)
    problem = swap_problem(g, "swapadvisor", device_memory=10**12)
    exe = tw.compile(g, problem.plan()).initialize(0)
    ref = tw.compile(g, Plan.one_device(g)).initialize(0)
    feeds = example_feeds(g)
    heap = _core.kernel_heap_scratch_bytes()
    assert np.array_equal(exe.step(feeds)["loss"], ref.step(feeds)["loss"])
    assert _core.kernel_heap_scratch_bytes() > heap
    assert exe.stats.scratch_bytes > 0
    assert ref.stats.scratch_bytes_per_device == [0]

"""Swapped execution (issue 17): a swap plan run on one CPU device whose memory is the plan's pool.

Swapped training must equal unswapped training bitwise (same kernels, same order of every sum), the
device must hold no more than the pool, the program must move exactly the plan's bytes, and bad
input must fail with typed errors. Plans come from ``Problem.plan`` (the swap planner on the given
order and the default pool): fast, and deterministic.
"""

import json

import numpy as np
import pytest

import tilewise as tw
from tilewise import _core
from tilewise.graph.feeds import example_feeds
from tilewise.plan.plan import Plan
from tilewise.plan.swapping import in_place_sums, swap_problem

MODELS = {
    "mlp": lambda: tw.models.mlp(layers=3, hidden=256, batch=32),
    "transformer": lambda: tw.models.transformer(layers=2, hidden=64, heads=2, seq=32, batch=8, vocab=64),
}
STEPS = 3


def unswapped(graph):
    """The one-device executable and its measured peak (what the graph needs without swapping)."""
    ref = tw.compile(graph, Plan.one_device(graph)).initialize(0)
    return ref


def tight_plan(graph, fraction):
    """The swap planner's plan for a device with ``fraction`` of the unswapped peak (or the least
    memory any pool works in, when that is more)."""
    ref = unswapped(graph)
    ref.step(example_feeds(graph, 0))
    need = ref.stats.peak_memory_per_device[0]
    problem = swap_problem(graph, "swapadvisor", device_memory=10**12)
    memory = max(problem.least_memory, int(need * fraction))
    return swap_problem(graph, "swapadvisor", device_memory=memory).plan(), memory, need


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request):
    graph = MODELS[request.param]()
    plan, memory, need = tight_plan(graph, 1 / 3)
    return request.param, graph, plan, memory, need


def test_swapped_training_equals_unswapped_training_bitwise(case):
    name, graph, plan, memory, need = case
    assert plan.swap_ins and plan.swap_outs, "the memory is tight enough to swap"
    assert memory <= need / 2, f"{name}: the device has {memory} of the {need} bytes it needs unswapped"
    exe = tw.compile(graph, plan).initialize(0)
    ref = unswapped(graph)
    for step in range(STEPS):
        feeds = example_feeds(graph, step)
        a, b = exe.step(feeds), ref.step(feeds)
        for key in b:
            assert np.array_equal(a[key], b[key]), f"{name}: {key} differs at step {step}"
    for key, value in ref.parameters().items():
        assert np.array_equal(exe.parameters()[key], value), f"{name}: parameter {key} differs"
    sa, sb = exe.state_dict(), ref.state_dict()
    assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)


def test_state_set_between_steps_reaches_the_right_copy(case):
    """Parameters live in the pool (the plan's initial residents) or on the host between steps: loading
    a state dict mid-training writes both, reading it back finds the current one."""
    name, graph, plan, _, _ = case
    exe = tw.compile(graph, plan).initialize(0)
    ref = unswapped(graph)
    feeds = example_feeds(graph, 0)
    exe.step(feeds), ref.step(feeds)
    state = {k: v * np.float32(0.5) for k, v in ref.state_dict().items()}
    exe.load_state_dict(state), ref.load_state_dict(state)
    assert all(np.array_equal(exe.state_dict()[k], v) for k, v in state.items())
    assert np.array_equal(exe.step(feeds)["loss"], ref.step(feeds)["loss"]), name
    assert all(np.array_equal(v, ref.parameters()[k]) for k, v in exe.parameters().items())


def test_the_device_holds_no_more_than_the_pool_and_moves_the_plans_bytes(case):
    name, graph, plan, memory, _ = case
    exe = tw.compile(graph, plan).initialize(0)
    exe.step(example_feeds(graph, 0))
    stats = exe.stats
    assert stats.peak_memory == stats.memory_bytes == plan.memory_bytes <= memory
    assert 0 < stats.pool_peak_bytes <= stats.memory_bytes
    assert stats.swapped_bytes == plan.swapped_bytes == exe.swap_bytes
    assert "swapped: in" in stats.summary(predict=False)
    prog = json.loads(exe.program(0).to_json())
    assert prog["streams"] == ["compute", "swap-in", "swap-out"]
    kinds = {ins["kind"] for ins in prog["instructions"]}
    assert {"swap_in", "swap_out", "record", "wait"} <= kinds
    for ins in prog["instructions"]:
        if ins["kind"] in ("swap_in", "swap_out"):
            assert ins["stream"] == ins["kind"].replace("_", "-") and ins["bytes"] > 0
            assert 0 <= ins["offset"] and ins["offset"] + ins["bytes"] <= plan.memory_bytes
    # the ops run in the plan's schedule order on the compute stream
    order = [ins["op"] for ins in prog["instructions"] if ins["kind"] == "compute"]
    assert order == plan.schedule


def test_the_simulator_prices_the_swapped_program_on_the_host_link(case):
    _, graph, plan, _, _ = case
    exe = tw.compile(graph, plan).initialize(0)
    cluster = tw.Cluster.preset("swapadvisor")
    pred = exe.predict(cluster)
    assert pred.bytes_per_link["host"] == sum(plan.swapped_bytes.values())
    seconds = pred.instruction_seconds()
    swaps = [(seconds[(0, i)], nbytes) for i, (kind, _, _, _, nbytes, _) in enumerate(exe.program(0).instructions())
             if kind in ("swap_in", "swap_out")]
    assert len(swaps) == len(plan.swap_ins) + len(plan.swap_outs)
    # a copy takes at least its bytes at the link's bandwidth
    link = cluster.host
    assert all(s >= nbytes / link.bandwidth_at(nbytes) * 0.999 for s, nbytes in swaps)
    # the copies overlap compute: the step is shorter than computing and copying one after the other
    assert pred.step_seconds < sum(seconds.values())


def test_a_profiled_step_traces_the_three_streams(case):
    _, graph, plan, _, _ = case
    exe = tw.compile(graph, plan, profile=True).initialize(0)
    exe.step(example_feeds(graph, 0))
    events = exe.trace()["traceEvents"]
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads == {"compute", "swap-in", "swap-out"}
    copies = [e for e in events if e.get("cat") in ("swap_in", "swap_out")]
    assert len(copies) == len(plan.swap_ins) + len(plan.swap_outs) and all(e["dur"] >= 0 for e in copies)


def test_unlimited_memory_has_no_swap_instructions():
    graph = MODELS["mlp"]()
    ideal = swap_problem(graph, "swapadvisor", device_memory=10**12).ideal()
    exe = tw.compile(graph, ideal).initialize(0)
    kinds = {kind for kind, *_ in exe.program(0).instructions()}
    assert not kinds & {"swap_in", "swap_out"}
    ref = unswapped(graph)
    feeds = example_feeds(graph, 0)
    assert np.array_equal(exe.step(feeds)["loss"], ref.step(feeds)["loss"])
    assert exe.stats.swapped_bytes == {"in": 0, "out": 0}


def test_bad_input_gives_typed_errors():
    graph = MODELS["mlp"]()
    plan, memory, _ = tight_plan(graph, 1 / 3)
    other = tw.models.mlp(layers=2, hidden=256, batch=32)
    with pytest.raises(tw.ExecError, match="another graph"):
        tw.compile(other, plan)
    with pytest.raises(tw.OutOfMemory, match="swap plan's pool"):
        tw.compile(graph, plan, memory_per_device=plan.memory_bytes - 4)
    with pytest.raises(tw.ExecError, match="cpu or cuda backend"):
        tw.compile(graph, plan, backend="mpi")
    odswap = swap_problem(graph, "swapadvisor", device_memory=memory).odswap()
    with pytest.raises(tw.ExecError, match="ODSwap"):
        tw.compile(graph, odswap)
    single_pass = swap_problem(graph, "swapadvisor", device_memory=memory).plan(double_pass=False)
    with pytest.raises(tw.ExecError, match="double_pass=True"):
        tw.compile(graph, single_pass)
    exe = tw.compile(graph, plan)
    with pytest.raises(ValueError, match="not fed yet"):
        exe.step(example_feeds(graph, 0))  # parameters not initialised
    with pytest.raises(tw.ExecError, match="computed by the graph"):
        exe._core.set_tensor(graph.tensor("loss").id, np.zeros((), np.float32))


def test_a_failed_step_is_undone_when_nothing_was_updated():
    """A bad token id fails the forward pass before any update in place: the initial residents that
    left their objects come back from the host store and training goes on as if nothing happened."""
    graph = MODELS["transformer"]()
    plan, _, _ = tight_plan(graph, 1 / 3)
    exe = tw.compile(graph, plan).initialize(0)
    ref = unswapped(graph)
    feeds = example_feeds(graph, 0)
    bad = dict(feeds, ids=feeds["ids"].copy())
    bad["ids"][0, 0] = 1e9
    exe.step(feeds), ref.step(feeds)
    with pytest.raises(tw.ExecError, match="is not a row of the table"):
        exe.step(bad)
    for step in range(2):
        assert np.array_equal(exe.step(feeds)["loss"], ref.step(feeds)["loss"]), step
    assert all(np.array_equal(v, ref.parameters()[k]) for k, v in exe.parameters().items())


def test_compile_takes_the_search_result_of_swap_plan():
    graph = tw.models.mlp(layers=2, hidden=128, batch=16)
    problem = swap_problem(graph, device_memory=10**12)
    result = tw.swap_plan(graph, device_memory=max(problem.least_memory, problem.total_bytes // 3), time_limit=2,
                          population=16)
    exe = tw.compile(graph, result).initialize(0)
    ref = unswapped(graph)
    feeds = example_feeds(graph, 0)
    assert np.array_equal(exe.step(feeds)["loss"], ref.step(feeds)["loss"])
    assert "SwapExecutable" in repr(exe) and "pool" in repr(exe.stats)


def test_gradient_sums_in_place_train_bitwise_in_less_memory():
    """A plan made with in-place sums (swap_problem(accumulate_in_place=True)) runs: each running
    sum's add writes into its total's buffer; training equals unswapped training bitwise (same adds in
    the same order), in a pool below the least memory of the plan without in-place sums."""
    from tilewise.graph.autodiff import gradient_accumulation

    with gradient_accumulation("running"):
        graph = tw.models.rnn(layers=1, hidden=64, steps=4, batch=8, in_features=32)
    fresh = swap_problem(graph, "swapadvisor", device_memory=10**12)
    folded = swap_problem(graph, "swapadvisor", device_memory=10**12, accumulate_in_place=True)
    memory = folded.least_memory
    assert memory < fresh.least_memory
    plan = swap_problem(graph, "swapadvisor", device_memory=memory, accumulate_in_place=True).plan()
    assert plan.swap_ins and plan.swap_outs
    exe = tw.compile(graph, plan).initialize(0)
    ref = unswapped(graph)
    for step in range(STEPS):
        feeds = example_feeds(graph, step)
        a, b = exe.step(feeds), ref.step(feeds)
        assert all(np.array_equal(a[k], b[k]) for k in b), f"step {step}"
    assert all(np.array_equal(exe.parameters()[k], v) for k, v in ref.parameters().items())
    stats = exe.stats
    assert stats.memory_bytes <= memory and stats.pool_peak_bytes <= stats.memory_bytes
    assert stats.swapped_bytes == stats.planned_swapped_bytes
    # The program computes each sum in its total's tile: no buffer is named after a sum.
    buffers = {name for _, name, *_ in _core.swap_buffers(graph._g, [t.id for t in graph.results().values()],
                                                          exe._core_in_place)}
    assert not any(name in buffers for name in in_place_sums(graph))
    assert any(total in buffers for total in in_place_sums(graph).values())


def test_in_place_storage_is_checked_by_the_lowering():
    """The lowering refuses storage in place that could read a value already overwritten."""
    graph = tw.models.mlp(layers=2, hidden=16, batch=4, train=False)
    keep = [t.id for t in graph.results().values()]
    relu = next(op for op in graph.ops if op.type == "relu")
    second = next(op for op in graph.ops if op.type == "linear" and op.inputs[0].id == relu.output.id)
    with pytest.raises(tw.ExecError, match="both must be computed"):
        _core.swap_buffers(graph._g, keep, [(relu.output.id, graph.tensor("x").id)])
    with pytest.raises(tw.ExecError, match="does not read it at exactly its output index"):  # a GEMM
        _core.swap_buffers(graph._g, keep, [(second.output.id, relu.output.id)])
    with pytest.raises(tw.ExecError, match="out of range"):
        _core.swap_buffers(graph._g, keep, [(10**6, 0)])
    trained = tw.models.mlp(layers=2, hidden=16, batch=4)
    relu = next(op for op in trained.ops if op.type == "relu")
    with pytest.raises(tw.ExecError, match="alone"):  # the backward pass reads the linear's output too
        _core.swap_buffers(trained._g, [], [(relu.output.id, relu.inputs[0].id)])


def test_a_swapped_hugging_face_model_with_adam_trains_as_torch():
    """GPT-2 from a config, imported with Adam (whose weight update reads the moments updated in the same
    step), swapped through a third of what it needs: the search's plan runs (its schedule keeps each
    moment's update before the weight's) and three steps give torch's losses."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import copy

    from torch_models import tiny_gpt2, torch_adam_losses

    model, ids, labels, g = tiny_gpt2(torch, transformers)
    want = torch_adam_losses(torch, copy.deepcopy(model), ids, labels, steps=3)
    feeds = {**g.torch_import.feeds(model, (ids,)), "label": labels.numpy()}
    data = {t.name: feeds[t.name] for t in g.tensors if t.role in ("input", "label")}
    plain = tw.compile(g, Plan.one_device(g))
    plain.step(feeds)
    need = plain.stats.peak_memory_per_device[0]
    memory = max(swap_problem(g, "swapadvisor", device_memory=10**12).least_memory, need // 3)
    result = tw.swap_plan(g, "swapadvisor", device_memory=memory, time_limit=2, seed=0)
    exe = tw.compile(g, result)
    got = [float(exe.step(feeds if step == 0 else data)["loss"]) for step in range(3)]
    assert got == pytest.approx(want, rel=1e-5)
    assert exe.stats.swapped_bytes["in"] > 0

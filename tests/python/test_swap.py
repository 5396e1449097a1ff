"""tw.swap: SwapAdvisor's Fig. 4.1 as a test, properties of plans on random graphs (memory never
exceeded, every op's tensors in memory while it runs, swapped tensors back before their use, no swaps
with unlimited memory), the searches' determinism and API, and the validation errors."""

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilewise as tw
from tilewise import swap

MB = 10**6

# ----- Fig. 4.1 -----------------------------------------------------------------------------------

FIG_OPS = [("Data", [], ["A0"], 1), ("Conv1", ["A0", "W1"], ["A1"], 1), ("Conv2", ["A0", "W2"], ["A2"], 1),
           ("Conv3", ["A2", "W3"], ["A3"], 1), ("Conv4", ["A3", "W4"], ["A4"], 1), ("Concat", ["A1", "A4"], ["A5"], 1)]
LEFT_FIRST = ["Data", "Conv1", "Conv2", "Conv3", "Conv4", "Concat"]
RIGHT_FIRST = ["Data", "Conv2", "Conv3", "Conv4", "Conv1", "Concat"]
COARSE = ([1, 1], [5])  # five 2 MB objects
FINE = ([1, 2], [8, 1])  # eight 1 MB objects, one 2 MB


def figure_4_1(capacity=10 * MB):
    """Fig. 4.1(a): 1 MB tensors, A2 and A5 2 MB; one time unit per op and per MB moved, duplex. The
    forward part of a training graph: its activations are kept for the backward pass (live out)."""
    tensors = {f"W{i}": (MB, "parameter") for i in range(1, 5)}
    tensors.update({f"A{i}": (2 * MB if i in (2, 5) else MB, "activation") for i in range(6)})
    return swap.Problem(tensors, FIG_OPS, capacity, host_link=(MB, 2 * MB),
                        live_out=[f"A{i}" for i in range(6)])


@pytest.mark.parametrize("schedule, pool, units", [(RIGHT_FIRST, COARSE, 7), (RIGHT_FIRST, FINE, 6),
                                                   (LEFT_FIRST, FINE, 7)],
                         ids=["right-first coarse (c)", "right-first fine (d)", "left-first fine (e)"])
def test_figure_4_1(schedule, pool, units):
    plan = figure_4_1().plan(schedule, pool, double_pass=False)
    assert plan.makespan == units
    assert plan.peak_memory <= 10 * MB


def test_figure_4_1_d_rows():
    plan = figure_4_1().plan(RIGHT_FIRST, FINE, double_pass=False)
    assert [(r["tensor"], r["start"], r["end"], r["for"]) for r in plan.swap_ins] == [
        ("W2", 0, 1, "Conv2"), ("W3", 1, 2, "Conv3"), ("W4", 2, 3, "Conv4"), ("W1", 3, 4, "Conv1")]
    assert [(r["tensor"], r["start"], r["end"], r["after"]) for r in plan.swap_outs] == [("A2", 3, 5, "Conv3")]
    assert [(r["op"], r["start"]) for r in plan.compute] == list(zip(RIGHT_FIRST, range(6)))
    assert plan.swap_pairs == [{"victim": "A2", "newcomer": "A5", "op": "Concat", "copied": True}]
    tl = plan.timeline()
    assert isinstance(tl, tw.Timeline)
    assert tl.streams == ["compute", "swap-in", "swap-out"]
    assert tl["in:W1"]["start"] == 3 and tl["out:A2"]["end"] == 5 and tl.makespan == 6


def test_figure_4_1_c_waits_for_w1():
    # Fig. 4.1(c): the coarse pool is full at t4; W1 comes in only after Conv4, and the GPU idles in t5.
    plan = figure_4_1().plan(RIGHT_FIRST, COARSE, double_pass=False)
    assert [(p["victim"], p["newcomer"]) for p in plan.swap_pairs] == [
        ("W2", "W4"), ("W3", "A4"), ("W4", "W1"), ("A2", "A1"), ("W1", "A5")]
    assert [r["start"] for r in plan.compute] == [0, 1, 2, 3, 5, 6]


def test_figure_4_1_search_finds_six():
    result = figure_4_1().search(seed=0, population=16, generations=10, double_pass=False, threads=2)
    assert result.makespan <= 6
    assert result.plan.makespan == result.makespan
    assert result.stopped == "generations" and len(result.history) == 11
    assert result.evaluations == 16 * 11


def test_figure_4_1_double_pass_keeps_parameters():
    plan = figure_4_1().plan(RIGHT_FIRST, FINE)
    assert sorted(plan.initial_residents) == ["W1", "W2", "W3", "W4"]
    assert plan.swap_ins == [] and plan.makespan == 6


# ----- properties on random graphs ---------------------------------------------------------------


@st.composite
def problems(draw, max_ops=9):
    """A random DAG: params, one activation per op, reads of earlier tensors, some params updated in
    place at the end; capacity between the least memory and a little more than everything."""
    unit = 1000
    size = st.sampled_from([1, 2, 3, 4, 6, 8])
    tensors = {f"W{i}": (draw(size) * unit, "parameter") for i in range(draw(st.integers(0, 2 + max_ops // 4)))}
    params = list(tensors)
    ops, acts = [], []
    for k in range(draw(st.integers(1, max_ops))):
        pool = acts + params
        reads = draw(st.lists(st.sampled_from(pool), max_size=3, unique=True)) if pool else []
        tensors[f"A{k}"] = (draw(size) * unit, "activation")
        ops.append((f"op{k}", reads, [f"A{k}"], draw(st.floats(0.1, 2.0))))
        if acts and draw(st.integers(0, 3)) == 0:  # a gradient summed in place: acc += A{k}
            acc = draw(st.sampled_from(acts))
            ops.append((f"sum{k}", [acc, f"A{k}"], [acc], draw(st.floats(0.1, 1.0))))
        acts.append(f"A{k}")
    for w in params:
        if acts and draw(st.booleans()):
            ops.append((f"update_{w}", [w, draw(st.sampled_from(acts))], [w], draw(st.floats(0.1, 1.0))))
    live_out = draw(st.lists(st.sampled_from(acts), unique=True, max_size=3))
    one_way = draw(st.sampled_from([500.0, 2000.0, 8000.0]))
    host = (one_way, one_way * draw(st.sampled_from([1.0, 1.5, 2.0])))
    probe = swap.Problem(tensors, ops, 10**12, host, live_out)
    lo, hi = probe.least_memory, int(probe.total_bytes * 1.1)
    capacity = lo + int(draw(st.floats(0, 1)) * (hi - lo))
    return swap.Problem(tensors, ops, capacity, host, live_out)


def random_pool(problem, draw):
    """A random valid pool: random monotone CLS, counts between the least and one per tensor."""
    sizes = problem.sizes
    cls = [1]
    for _ in sizes[1:]:
        cls.append(cls[-1] + draw(st.integers(0, 1)))
    least = problem._core.least_counts(cls)
    cnt = [c + draw(st.integers(0, 3)) for c in least]
    if problem.pool_bytes((cls, cnt)) > problem.capacity:
        cnt = list(least)
    if problem.pool_bytes((cls, cnt)) > problem.capacity:
        return problem.default_pool
    return cls, cnt


EPS = 1e-9


def assert_safe(problem, plan):
    """The plan's memory and timing are sound, from its simulated rows alone."""
    assert plan.peak_memory <= plan.memory_bytes <= problem.capacity
    assert plan.peak_tensor_bytes <= plan.peak_memory
    # An object holds one tensor at a time.
    by_object = {}
    for s in plan.stays:
        assert s["start"] <= s["end"] + EPS
        by_object.setdefault(s["object"], []).append((s["start"], s["end"], s["tensor"]))
    for spans in by_object.values():
        spans.sort()
        for (_, a1, ta), (b0, _, tb) in zip(spans, spans[1:]):
            assert a1 <= b0 + EPS, f"{ta} and {tb} overlap in one object"
    # Every op's inputs and outputs are in memory while it runs (never evicted early, swapped in before).
    reads = {name: set(i) | set(o) for name, i, o, _ in problem.ops}
    for row in plan.compute:
        for t in reads[row["op"]]:
            assert any(s["tensor"] == t and s["start"] <= row["start"] + EPS and row["end"] <= s["end"] + EPS
                       for s in plan.stays), f"{t} not in memory while {row['op']} runs"
    # A tensor comes in before its op starts, and only from a complete copy: an activation only after
    # it went out, anything after its copies out that began before.
    kinds = problem.tensors
    for r in plan.swap_ins:
        assert r["end"] <= next(c["start"] for c in plan.compute if c["op"] == r["for"]) + EPS
        outs = [o for o in plan.swap_outs if o["tensor"] == r["tensor"] and o["start"] <= r["start"]]
        assert all(o["end"] <= r["start"] + EPS for o in outs)
        if kinds[r["tensor"]][1] == "activation":
            assert outs, f"activation {r['tensor']} swapped in without having gone out"
    assert plan.makespan >= problem.ideal_time - EPS
    if plan.double_pass and plan.method == "swapadvisor":
        assert_repeatable(problem, plan)


def assert_repeatable(problem, plan):
    """The double pass: the parameters in memory at the start are there at the end, in the same objects;
    an updated parameter the next iteration does not find in memory was copied out after its update."""
    for t in plan.initial_residents:
        first = min((s for s in plan.stays if s["tensor"] == t), key=lambda s: s["start"])
        assert first["start"] == 0
        assert any(s["tensor"] == t and s["object"] == first["object"] and s["end"] == plan.makespan
                   for s in plan.stays), f"{t} is not back in its object at the end"
    end = {r["op"]: r["end"] for r in plan.compute}
    for name, _, outputs, _ in problem.ops:
        for w in outputs:
            if problem.tensors[w][1] == "parameter" and w not in plan.initial_residents:
                assert any(o["tensor"] == w and o["start"] >= end[name] - EPS for o in plan.swap_outs), \
                    f"updated {w} neither stays in memory nor goes back to the host"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plans_are_safe_on_random_graphs(data):
    problem = data.draw(problems())
    seed = data.draw(st.integers(0, 2**32))
    schedule = problem.random_schedule(seed)
    pool = random_pool(problem, data.draw)
    for double_pass in (False, True):
        assert_safe(problem, problem.plan(schedule, pool, double_pass=double_pass))
    assert_safe(problem, problem.plan(schedule))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_odswap_is_safe_on_random_graphs(data):
    problem = data.draw(problems())
    try:
        plan = problem.odswap(seed=data.draw(st.integers(0, 2**32)))
    except swap.SwapError as e:  # a buddy allocator may not place what the pool planner can
        assert "ODSwap cannot run op" in str(e)
        return
    assert_safe(problem, plan)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_unlimited_memory_means_no_swaps(data):
    small = data.draw(problems())
    problem = swap.Problem(small.tensors, small.ops, 2 * small.total_bytes, small.host_link, small.live_out)
    schedule = problem.random_schedule(data.draw(st.integers(0, 2**32)))
    plan, ideal = problem.plan(schedule), problem.ideal(schedule)
    assert plan.swap_ins == [] and plan.swap_outs == []
    assert plan.makespan == ideal.makespan == pytest.approx(problem.ideal_time)
    assert plan.fraction_of_ideal == pytest.approx(1)


def test_search_is_deterministic_for_a_seed_and_any_threads():
    problem = figure_4_1(capacity=6 * MB)
    runs = [problem.search(seed=5, population=12, generations=5, threads=t) for t in (1, 2, 1)]
    assert runs[0].history[-1]["evaluations"] == runs[1].history[-1]["evaluations"]
    for r in runs[1:]:
        assert r.plan.schedule == runs[0].plan.schedule and r.plan.pool == runs[0].plan.pool
        assert [h["mean"] for h in r.history] == [h["mean"] for h in runs[0].history]


# ----- searches: API ------------------------------------------------------------------------------


def chain_problem(layers=6, capacity_fraction=0.5):
    """A small training-like chain: per layer a weight, a forward and a backward op, and an update."""
    tensors, ops = {"X": (2 * MB, "parameter")}, []
    prev = "X"
    for i in range(layers):
        tensors[f"W{i}"] = (4 * MB, "parameter")
        tensors[f"H{i}"] = (2 * MB, "activation")
        ops.append((f"fwd{i}", [prev, f"W{i}"], [f"H{i}"], 2e-3))
        prev = f"H{i}"
    grad = prev
    for i in reversed(range(layers)):
        tensors[f"G{i}"] = (2 * MB, "activation")
        tensors[f"dW{i}"] = (4 * MB, "activation")
        ops.append((f"bwd{i}", [grad, f"W{i}", f"H{i - 1}" if i else "X"], [f"G{i}", f"dW{i}"], 4e-3))
        ops.append((f"upd{i}", [f"W{i}", f"dW{i}"], [f"W{i}"], 1e-3))
        grad = f"G{i}"
    total = sum(b for b, _ in tensors.values())
    return swap.Problem(tensors, ops, int(total * capacity_fraction), host_link=(2e9, 3e9))


def test_search_result_api_and_progress():
    problem = chain_problem()
    seen = []
    result = problem.search(seed=1, population=8, generations=3, progress=seen.append, threads=1)
    assert [g["generation"] for g in seen] == [0, 1, 2, 3]
    assert set(seen[0]) == {"generation", "evaluations", "seconds", "best", "mean", "worst"}
    assert result.history == seen
    assert result.simulations_per_second > 0
    assert result.history[-1]["best"] == result.makespan  # elitism: the best survives
    d = json.loads(result.to_json())
    assert d["settings"]["population"] == 8 and d["plan"]["makespan"] == result.makespan
    assert "genetic (joint)" in repr(result) and "SwapPlan" in result._repr_html_()
    for kwargs in ({"schedule_only": True}, {"pool_only": True}):
        r = problem.search(seed=1, population=8, generations=2, **kwargs)
        assert r.settings["mode"] == next(iter(kwargs))
    pool_only = problem.search(seed=1, population=8, generations=2, pool_only=True)
    assert pool_only.plan.schedule == problem.plan().schedule
    schedule_only = problem.search(seed=1, population=8, generations=2, schedule_only=True)
    assert schedule_only.plan.pool == tuple(problem.default_pool)


def test_random_search_and_baselines():
    problem = chain_problem()
    r = problem.random_search(evaluations=20, population=8, seed=3)
    assert r.evaluations == 20 and r.stopped == "evaluations" and len(r.history) == 3
    bests = [h["best"] for h in r.history]
    assert bests == sorted(bests, reverse=True)  # best so far
    ideal, od = problem.ideal(), problem.odswap()
    assert ideal.makespan == pytest.approx(problem.ideal_time) and ideal.swap_ins == []
    assert od.method == "odswap" and od.pool is None and od.makespan >= ideal.makespan
    assert problem.odswap(seed=4).schedule == problem.random_schedule(4)


def test_plan_presentation():
    plan = chain_problem().plan()
    d = plan.to_dict()
    assert d["format"] == "tilewise-swap-plan/1" and json.loads(plan.to_json()) == json.loads(json.dumps(d))
    assert set(plan.busy) == {"compute", "swap-in", "swap-out"}
    assert plan.swapped_bytes["in"] == sum(r["bytes"] for r in plan.swap_ins)
    assert 0 < plan.fraction_of_ideal <= 1
    assert "swapadvisor" in repr(plan) and "CLS" in plan._repr_html_()
    trace = plan.timeline().to_trace()
    assert any(e.get("cat") == "swap-in" for e in trace["traceEvents"])


def test_time_limit_stops_the_search():
    r = chain_problem(layers=10).search(time_limit=0.3, patience=None, population=16)
    assert r.stopped == "time_limit" and r.seconds < 3 and math.isfinite(r.makespan)


# ----- errors -------------------------------------------------------------------------------------


def fig_tensors():
    tensors = {f"W{i}": (MB, "parameter") for i in range(1, 5)}
    tensors.update({f"A{i}": (MB, "activation") for i in range(6)})
    return tensors


@pytest.mark.parametrize("tensors, ops, match", [
    ({"A": (1, "activation")}, [("p", [], ["A"], 1), ("q", [], ["A"], 1)],
     "activation 'A' is written by op 'p' and op 'q'"),
    ({"A": (1, "activation"), "B": (1, "activation")}, [("p", ["B"], ["A"], 1), ("q", ["A"], ["B"], 1)],
     "dependency cycle: op '.' -> op '.' -> op '.'"),
    ({"A": (1, "activation")}, [("p", ["Z"], ["A"], 1)], r"op 'p': input 'Z' is not a tensor"),
    ({"act0": (1, "activation")}, [("p", [], ["act1"], 1)], r"output 'act1' is not a tensor .*did you mean 'act0'"),
    ({"A": (1, "weight")}, [], "unknown kind 'weight'; valid: parameter, activation"),
    ({"A": (0, "activation")}, [], "bytes must be an int from 1"),
    ({"A": (1, "activation"), "B": (1, "activation")}, [("p", ["A"], ["B"], 1)], "no op produces it"),
    ({"A": (1, "activation")}, [("p", [], ["A"], -1)], "seconds must be finite and >= 0"),
    ({"A": (1, "activation")}, [("p", [], ["A"], 1), ("p", [], [], 1)], "two ops are named 'p'"),
    ({"A": (1, "activation")}, [("p", ["A"], ["A"], 1)], "reads activation 'A', which it produces itself"),
    ({"A": (1, "activation"), "B": (1, "activation")}, [("q", [], ["B"], 1), ("u", ["A", "B"], ["A"], 1),
                                                         ("p", [], ["A"], 1)], "written by op 'u' and op 'p'.*update it in place"),
])
def test_problem_errors(tensors, ops, match):
    with pytest.raises(swap.SwapError, match=match):
        swap.Problem(tensors, ops, 10, host_link=(1, 2))


def test_type_and_link_errors():
    with pytest.raises(TypeError, match="tensors must be a dict"):
        swap.Problem([("A", 1)], [], 10)
    with pytest.raises(TypeError, match="inputs must be a list of tensor names, not str"):
        swap.Problem({"A": (1, "activation")}, [("p", "A", [], 1)], 10)
    with pytest.raises(TypeError, match="expected \\(bytes, kind\\)"):
        swap.Problem({"A": 1}, [], 10)
    with pytest.raises(swap.SwapError, match="one_way <= both_ways <= 2 \\* one_way"):
        swap.Problem({"A": (1, "activation")}, [("p", [], ["A"], 1)], 10, host_link=(2, 1))
    with pytest.raises(swap.SwapError, match="live_out: 'B' is not a tensor"):
        swap.Problem({"A": (1, "activation")}, [("p", [], ["A"], 1)], 10, live_out=["B"])
    with pytest.raises(swap.SwapError, match="live_out applies to activations"):
        swap.Problem({"W": (1, "parameter")}, [], 10, live_out=["W"])
    assert swap.Problem({"A": (1, "activation")}, [("p", [], ["A"], 1)], 10).host_link == (12e9, 20e9)


@pytest.mark.parametrize("pool, match", [
    (([1], [5]), "CLS has 1 entries, one per unique tensor size is 2"),
    (([2, 2], [5]), "CLS starts at 1"),
    (([1, 3], [5, 1]), r"CLS\[1\] is 3 after 1"),
    (([1, 2], [5]), "CNT has 1 entries, but CLS has 2 size classes"),
    (([1, 2], [8, -1]), "counts are >= 0"),
    (([1, 2], [8, 0]), r"op 'Conv2' holds 1 at once \('A2'\); the least counts for this CLS are \[3, 1\]"),
    (([1, 1], [6]), "more than the capacity of 10000000 bytes"),
])
def test_pool_errors(pool, match):
    with pytest.raises(swap.SwapError, match=match):
        figure_4_1().plan(RIGHT_FIRST, pool)


def test_schedule_errors():
    p = figure_4_1()
    with pytest.raises(swap.SwapError, match=r"op 'Conv3' \(position 2\) runs before op 'Conv2' \(position 3\), "
                                             r"which must run first: it produces 'A2'"):
        p.plan(["Data", "Conv1", "Conv3", "Conv2", "Conv4", "Concat"])
    with pytest.raises(swap.SwapError, match="'Conv9' is not an op of the problem"):
        p.plan(["Conv9"])
    with pytest.raises(swap.SwapError, match="has 2 ops, the problem 6"):
        p.plan(["Data", "Conv1"])
    with pytest.raises(swap.SwapError, match="appears twice"):
        p.plan(["Data"] * 6)
    with pytest.raises(swap.SwapError, match="an order or a seed"):
        p.odswap(order=RIGHT_FIRST, seed=1)
    with pytest.raises(swap.SwapError, match="exclude each other"):
        p.search(schedule_only=True, pool_only=True)
    with pytest.raises(swap.SwapError, match="population must be an int from 4"):
        p.search(population=2)
    with pytest.raises(swap.SwapError, match="needs a stop"):
        p.search(patience=None)


def test_infeasible_gives_least_memory():
    p = figure_4_1(capacity=4 * MB)
    assert p.least_memory == 5 * MB and p.least_pool == ([1, 2], [3, 1])
    with pytest.raises(swap.InfeasibleError, match="least memory that works is 5000000 bytes") as e:
        p.plan()
    assert e.value.least_memory == 5 * MB and isinstance(e.value, swap.SwapError)
    with pytest.raises(swap.InfeasibleError):
        p.search(generations=1, population=4)


# ----- gradient sums in place ---------------------------------------------------------------------


def test_gradient_sums_in_place_hold_one_total():
    """accumulate_in_place: a running sum's adds update their total (MXNet's kAddTo); the op that
    forced the least memory held part + old total + new total, now part + total."""
    from tilewise.graph.autodiff import gradient_accumulation
    from tilewise.plan.swapping import in_place_sums, swap_problem

    with gradient_accumulation("running"):
        graph = tw.models.brnn(layers=1, hidden=256, steps=4, batch=8, in_features=64)
    fresh = swap_problem(graph, "swapadvisor", device_memory=10**12)
    summed = in_place_sums(graph)
    assert summed and all(".sum" in name for name in summed)
    folded = swap_problem(graph, "swapadvisor", device_memory=10**12, accumulate_in_place=True)
    assert len(folded.tensors) == len(fresh.tensors) - len(summed)
    assert folded.ideal_time == fresh.ideal_time and len(folded.ops) == len(fresh.ops)
    w = next(total for name, total in summed.items() if "weight_ih" in name)  # the first part
    w_bytes = folded.tensors[w][0]
    assert folded.least_memory <= fresh.least_memory - w_bytes
    # Each add reads and writes its total; the total's later readers come after the last add.
    adds = [(name, ins, outs) for name, ins, outs, _ in folded.ops if outs == [w]]
    assert len(adds) == 4 and all(ins[0] == w for _, ins, _ in adds[1:])
    tight = swap_problem(graph, "swapadvisor", device_memory=folded.least_memory, accumulate_in_place=True)
    assert_safe(tight, tight.plan())
    exe = tw.compile(graph, tight.plan())  # runs: each sum is computed in its total's buffer
    assert exe._core.memory_bytes <= folded.least_memory
    with pytest.raises(TypeError, match="accumulate_in_place"):
        swap_problem(graph, accumulate_in_place="yes")


def test_a_parameter_read_after_its_update_reads_the_updated_value():
    """Adam: the weight's update reads the moment updated before it in the same step. A parameter's
    readers listed before its update run before it (they read the old value), those listed after run
    after it (they read the new one): a schedule with the weight's update first is refused, and every
    plan the search makes keeps the order."""
    mb = 2**20
    p = swap.Problem({"W": (mb, "parameter"), "M": (mb, "parameter"), "G": (mb, "activation"),
                      "Y": (mb, "activation")},
                     [("forward", ["W"], ["Y"], 1e-3), ("grad", ["Y", "W"], ["G"], 1e-3),
                      ("update_m", ["M", "G"], ["M"], 1e-3), ("update_w", ["W", "M", "G"], ["W"], 1e-3)],
                     capacity=3 * mb)
    assert p.plan(["forward", "grad", "update_m", "update_w"]).makespan > 0
    with pytest.raises(swap.SwapError):
        p.plan(["forward", "grad", "update_w", "update_m"])
    order = p.search(seed=0, time_limit=1).plan.schedule
    assert order.index("update_m") < order.index("update_w") and order.index("grad") < order.index("update_w")

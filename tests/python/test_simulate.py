"""tw.simulate and tw.Timeline: the hand-checked cases of tests/cpp/sim_simulator_test.cpp through the
dict API, a naive re-simulation as the oracle on random DAGs (hypothesis), the bounds any schedule
must satisfy, every validation error, and the exports (trace JSON, Gantt plot, HTML, dict)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilewise as tw
from tilewise.sim import SimulationTypeError


def ends(tl):
    return {t["name"]: t["end"] for t in tl.tasks}


# ----- hand-checked cases ----------------------------------------------------------------------------


def test_chain_sums():
    tl = tw.simulate([{"name": "a", "stream": 0, "seconds": 1}, {"name": "b", "stream": 0, "seconds": 2},
                      {"name": "c", "stream": 0, "seconds": 3}])
    assert [(t["start"], t["end"]) for t in tl.tasks] == [(0, 1), (1, 3), (3, 6)]
    assert tl.makespan == 6 and tl.busy(0) == 6 and tl.idle(0) == 0


def test_independent_streams_overlap_and_stream_order_is_list_order():
    tl = tw.simulate([{"name": "a", "stream": "s", "seconds": 1}, {"name": "b", "stream": "t", "seconds": 5},
                      {"name": "c", "stream": "s", "seconds": 1}])
    assert tl["c"]["start"] == 1 and tl.makespan == 5
    assert tl.streams == ["s", "t"] and tl.busy("s") == 2 and tl.idle("s") == 3


def test_after_across_streams_and_forward_in_the_list():
    tl = tw.simulate([{"name": "a", "stream": 0, "seconds": 2, "after": ["c"]},
                      {"name": "b", "stream": 1, "seconds": 1, "after": ["a"]},
                      {"name": "c", "stream": 2, "seconds": 4}])
    assert ends(tl) == {"a": 6, "b": 7, "c": 4}
    assert tl["b"]["start"] == 6


def test_shared_link_halves_bandwidth_and_the_survivor_speeds_up():
    two = tw.simulate([{"name": "x", "stream": 0, "link": "pcie", "bytes": 100},
                       {"name": "y", "stream": 1, "link": "pcie", "bytes": 100}], links={"pcie": 100})
    assert ends(two) == {"x": 2, "y": 2}  # alone: 1 s each
    # 50 B/s each until x ends at 2 (y: 200 B left), then 100 B/s: y ends at 4.
    tl = tw.simulate([{"name": "x", "stream": 0, "link": "pcie", "bytes": 100},
                      {"name": "y", "stream": 1, "link": "pcie", "bytes": 300}], links={"pcie": 100})
    assert ends(tl) == pytest.approx({"x": 2, "y": 4}, rel=1e-12)


def test_link_latency_is_not_shared_and_unshared_links_do_not_slow_down():
    links = {"pcie": {"bandwidth": 100, "latency": 0.5}}
    # x's bytes start at 0.5, y's at 1 (1 s fixed part with its latency). [0.5, 1): x alone, 50 B;
    # then 50 B/s each: x's last 50 B end at 2; y has 250 B left at 100 B/s: ends at 4.5.
    tl = tw.simulate([{"name": "x", "stream": 0, "link": "pcie", "bytes": 100},
                      {"name": "y", "stream": 1, "link": "pcie", "bytes": 300, "seconds": 0.5}], links=links)
    assert ends(tl) == pytest.approx({"x": 2, "y": 4.5}, rel=1e-12)
    nvlink = {"nv": {"bandwidth": 100, "latency": 0.5, "shared": False}}
    tl = tw.simulate([{"name": "x", "stream": 0, "link": "nv", "bytes": 100},
                      {"name": "y", "stream": 1, "link": "nv", "bytes": 300}], links=nvlink)
    assert ends(tl) == {"x": 1.5, "y": 3.5}


def test_three_tasks_on_two_cores_get_two_thirds_each():
    tasks = [{"name": f"k{s}", "stream": s, "work": 2, "max_rate": 1, "resources": ["cpu"]} for s in range(3)]
    assert ends(tw.simulate(tasks, resources={"cpu": 2})) == pytest.approx({"k0": 3, "k1": 3, "k2": 3}, rel=1e-12)
    assert ends(tw.simulate(tasks[:2], resources={"cpu": 2})) == {"k0": 2, "k1": 2}


def test_max_rate_caps_and_the_stated_approximation():
    # a capped at 2 gets 2; b gets 10/2 = 5 (max-min fairness would give it 8): b ends at 2, a at 5.
    tl = tw.simulate([{"name": "a", "stream": 0, "work": 10, "max_rate": 2, "resources": ["link"]},
                      {"name": "b", "stream": 1, "work": 10, "resources": ["link"]}], resources={"link": 10})
    assert ends(tl) == pytest.approx({"a": 5, "b": 2}, rel=1e-12)


def test_zero_duration_tasks_and_no_tasks():
    tl = tw.simulate([{"name": "a", "stream": 0}, {"name": "b", "stream": 0, "seconds": 2},
                      {"name": "c", "stream": 1, "after": ["b"]}])
    assert ends(tl) == {"a": 0, "b": 2, "c": 2}
    empty = tw.simulate([])
    assert empty.makespan == 0 and empty.tasks == [] and empty.streams == []


def test_peak_memory_counts_frees_before_allocations_at_one_time():
    tl = tw.simulate([{"name": "alloc", "stream": 0, "seconds": 1, "memory": 100, "memory_pool": "gpu0"},
                      {"name": "free", "stream": 0, "memory": -100, "memory_pool": "gpu0"},
                      {"name": "alloc2", "stream": 1, "seconds": 1, "after": ["alloc"], "memory": 50,
                       "memory_pool": "gpu0"},
                      {"name": "other", "stream": 2, "seconds": 1, "memory": 7, "memory_pool": "gpu1"}])
    assert tl.peak_memory == {"gpu0": 100, "gpu1": 7}


def test_extra_fields_pass_through():
    tl = tw.simulate([{"name": "a", "stream": 0, "seconds": 1, "device": 3, "kind": "gemm", "flops": 10}])
    assert tl["a"] == {"name": "a", "stream": 0, "start": 0, "end": 1, "seconds": 1, "device": 3, "kind": "gemm",
                       "flops": 10}


# ----- the oracle: a naive re-simulation, every rate recomputed at every step ------------------------


def naive(tasks, capacities):
    """(start, end) per task of [(stream, seconds, work, max_rate, resources, after)], as simulator.h
    describes the model, by brute force: at each step, start all ready tasks, recompute every rate,
    step to the next event."""
    n = len(tasks)
    prev, last = [None] * n, {}
    for i, (s, *_rest) in enumerate(tasks):
        prev[i], last[s] = last.get(s), i
    start, end = [None] * n, [None] * n
    fixed_end, left = {}, {}
    t = 0.0
    while True:
        changed = True
        while changed:  # zero-time cascades
            changed = False
            for i, (_s, sec, _work, _m, _r, after) in enumerate(tasks):
                preds = list(after) + ([prev[i]] if prev[i] is not None else [])
                if start[i] is None and all(end[p] is not None for p in preds):
                    start[i], fixed_end[i], changed = t, t + sec, True
            for i in list(fixed_end):
                if fixed_end[i] <= t:
                    del fixed_end[i]
                    left[i] = tasks[i][2]
                    changed = True
            for i in list(left):
                if left[i] <= 1e-12 * max(tasks[i][2], 1e-300):
                    del left[i]
                    end[i], changed = t, True
        if all(e is not None for e in end):
            return start, end
        users = {}
        for i in left:
            for r in tasks[i][4]:
                users[r] = users.get(r, 0) + 1
        rate = {i: min([tasks[i][3] or math.inf] + [capacities[r] / users[r] for r in tasks[i][4]]) for i in left}
        t_next = min([fixed_end[i] for i in fixed_end] + [t + left[i] / rate[i] for i in left])
        for i in left:
            left[i] = 0.0 if t + left[i] / rate[i] <= t_next else left[i] - rate[i] * (t_next - t)
        t = t_next


@st.composite
def workloads(draw, max_tasks=12):
    """(tasks as dicts, links, the same tasks in naive()'s form, capacities by resource index)."""
    n = draw(st.integers(0, max_tasks))
    n_streams = draw(st.integers(1, 4))
    links = {"pcie": {"bandwidth": draw(st.sampled_from([50, 100, 300])), "latency": draw(st.sampled_from([0, 0.25]))},
             "nv": {"bandwidth": 200, "shared": False}}
    # Built in a topological order (after: earlier tasks only), then listed in a random order that
    # keeps each stream's order: `after` may then point forward in the list, and stays acyclic.
    topo = []
    for i in range(n):
        stream = draw(st.integers(0, n_streams - 1))
        task = {"name": f"t{i}", "stream": stream, "seconds": draw(st.sampled_from([0, 0.5, 1, 2, 3]))}
        if i:
            task["after"] = [f"t{j}" for j in draw(st.lists(st.integers(0, i - 1), max_size=3, unique=True))]
        link = draw(st.sampled_from([None, "pcie", "pcie", "nv"]))
        if link:
            task["link"], task["bytes"] = link, draw(st.sampled_from([0, 50, 100, 250]))
        topo.append(task)
    order = draw(st.permutations(range(n)))
    listed, per_stream = [], {}
    for i in range(n):
        per_stream.setdefault(topo[i]["stream"], []).append(topo[i])
    cursor = {s: 0 for s in per_stream}
    for i in order:
        s = topo[i]["stream"]
        listed.append(per_stream[s][cursor[s]])
        cursor[s] += 1
    index = {t["name"]: k for k, t in enumerate(listed)}
    pcie = links["pcie"]
    flat = []
    for t in listed:
        link = t.get("link")
        bw = {"pcie": pcie["bandwidth"], "nv": 200}.get(link, 0)
        flat.append((t["stream"], t["seconds"] + (pcie["latency"] if link == "pcie" else 0), t.get("bytes", 0), bw,
                     [0] if link == "pcie" else [], [index[a] for a in t.get("after", [])]))
    return listed, links, flat, [pcie["bandwidth"]]


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_matches_the_naive_simulation(w):
    tasks, links, flat, capacities = w
    tl = tw.simulate(tasks, links=links)
    start, end = naive(flat, capacities)
    assert [t["start"] for t in tl.tasks] == pytest.approx(start, rel=1e-9, abs=1e-9)
    assert [t["end"] for t in tl.tasks] == pytest.approx(end, rel=1e-9, abs=1e-9)


def alone(t):
    """A task's duration alone on its link (its fastest), from naive()'s form."""
    return t[1] + (t[2] / t[3] if t[2] else 0)


@settings(max_examples=150, deadline=None)
@given(workloads())
def test_bounds_and_dependencies(w):
    tasks, links, flat, capacities = w
    tl = tw.simulate(tasks, links=links)
    got = tl.tasks
    starts, ends_ = [t["start"] for t in got], [t["end"] for t in got]
    prev = {}
    for i, (stream, _sec, _work, _rate, _res, after) in enumerate(flat):
        ready = max([ends_[a] for a in after] + ([ends_[prev[stream]]] if stream in prev else []), default=0.0)
        assert starts[i] == ready, f"task {i} starts at {starts[i]}, not when its predecessors end ({ready})"
        prev[stream] = i
    # Lower bound: a stream's tasks one after another, each at its fastest.
    per_stream = {}
    for t in flat:
        per_stream[t[0]] = per_stream.get(t[0], 0) + alone(t)
    assert tl.makespan >= max(per_stream.values(), default=0) * (1 - 1e-12)
    # Upper bound: every task in turn, each slowed by all transfers on its link at once (some task
    # runs at every moment before the makespan, and none runs slower than that).
    on_link = sum(1 for t in flat if t[4])
    worst = sum(t[1] + (t[2] / (t[3] / (on_link if t[4] else 1)) if t[2] else 0) for t in flat)
    assert tl.makespan <= worst * (1 + 1e-12)
    # Without sharing no task is slower, so no task ends later.
    unshared = {name: dict(spec, shared=False) for name, spec in links.items()}
    free = tw.simulate(tasks, links=unshared)
    assert free.makespan <= tl.makespan * (1 + 1e-12)
    assert all(a["end"] <= b["end"] * (1 + 1e-12) for a, b in zip(free.tasks, got))
    huge = tw.simulate([{k: v for k, v in t.items() if k not in ("link", "bytes")}
                        | ({"work": t["bytes"], "max_rate": links[t["link"]]["bandwidth"], "resources": ["r"],
                            "seconds": t["seconds"] + links[t["link"]].get("latency", 0)} if "link" in t else {})
                        for t in tasks], resources={"r": 1e30})
    assert huge.makespan <= tl.makespan * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(workloads(), st.data())
def test_peak_memory_is_the_highest_sum_after_each_instant(w, data):
    tasks, links, _flat, _caps = w
    for t in tasks:
        t["memory"] = data.draw(st.integers(-100, 100))
        t["memory_pool"] = data.draw(st.sampled_from(["gpu0", "gpu1"]))
    tl = tw.simulate(tasks, links=links)
    for pool in {t["memory_pool"] for t in tasks}:
        mine = [(tl[t["name"]]["start"], t["memory"]) for t in tasks if t["memory_pool"] == pool]
        # At each instant every start counts (frees before allocations: only the sum after it matters).
        peak = max([0] + [sum(m for s, m in mine if s <= instant) for instant, _ in mine])
        assert tl.peak_memory[pool] == peak


# ----- validation ------------------------------------------------------------------------------------

OK = {"name": "a", "stream": 0, "seconds": 1}


@pytest.mark.parametrize("tasks, kwargs, error, match", [
    ([{"stream": 0}], {}, tw.SimulationError, r"task 0 has no 'name'"),
    ([{"name": "a"}], {}, tw.SimulationError, r"task 'a' has no 'stream'"),
    ([OK, dict(OK)], {}, tw.SimulationError, r"tasks 0 and 1 are both named 'a'"),
    ([{"name": 3, "stream": 0}], {}, SimulationTypeError, r"task 0: 'name' must be a str"),
    ([{"name": "a", "stream": [0]}], {}, SimulationTypeError, r"'stream' must be hashable"),
    ([dict(OK, after=["b"])], {}, tw.SimulationError, r"task 'a': 'after' names 'b', which is not one of the tasks"),
    ([dict(OK, name="load"), dict(OK, name="b", after=["lod"])], {}, tw.SimulationError, r"did you mean 'load'"),
    ([dict(OK, after="b")], {}, SimulationTypeError, r"'after' must be a list of names, not str"),
    ([dict(OK, seconds=-1)], {}, tw.SimulationError, r"task 'a': 'seconds' must be a non-negative finite number"),
    ([dict(OK, seconds=math.nan)], {}, tw.SimulationError, r"'seconds' must be a non-negative finite"),
    ([dict(OK, seconds=True)], {}, SimulationTypeError, r"task 'a': 'seconds' must be a number, not bool"),
    ([dict(OK, seconds="1")], {}, SimulationTypeError, r"'seconds' must be a number, not str"),
    ([dict(OK, link="pcie", bytes=1)], {}, tw.SimulationError, r"task 'a': unknown link 'pcie'"),
    ([dict(OK, link="pcei", bytes=1)], {"links": {"pcie": 1}}, tw.SimulationError, r"did you mean 'pcie'"),
    ([dict(OK, link="pcie")], {"links": {"pcie": 1}}, tw.SimulationError, r"needs 'bytes'"),
    ([dict(OK, bytes=5)], {}, tw.SimulationError, r"'bytes' needs a 'link'"),
    ([dict(OK, link="pcie", bytes=-5)], {"links": {"pcie": 1}}, tw.SimulationError, r"'bytes' must be a non-neg"),
    ([dict(OK, link="pcie", bytes=5, work=1)], {"links": {"pcie": 1}}, tw.SimulationError, r"takes 'bytes', not 'work'"),
    ([dict(OK, work=5)], {}, tw.SimulationError, r"'work' 5 needs a 'max_rate' > 0 or 'resources'"),
    ([dict(OK, work=5, max_rate=False)], {}, SimulationTypeError, r"'max_rate' must be a number, not bool"),
    ([dict(OK, work=1, resources=["cpu"])], {}, tw.SimulationError, r"'resources' names 'cpu', which is not one"),
    ([dict(OK, work=1, resources="cpu")], {"resources": {"cpu": 1}}, SimulationTypeError, r"'resources' must be a"),
    ([OK], {"resources": {"cpu": 0}}, tw.SimulationError, r"resource 'cpu': capacity must be a positive"),
    ([OK], {"resources": {"cpu": True}}, SimulationTypeError, r"resource 'cpu': capacity must be a number"),
    ([OK], {"links": {"pcie": -1}}, tw.SimulationError, r"link 'pcie': bandwidth must be a positive"),
    ([OK], {"links": {"pcie": {"latency": 1}}}, tw.SimulationError, r"link 'pcie' has no 'bandwidth'"),
    ([OK], {"links": {"pcie": {"bandwidth": 1, "lat": 1}}}, tw.SimulationError, r"unknown fields \['lat'\]"),
    ([OK], {"links": {"pcie": {"bandwidth": 1, "shared": 1}}}, SimulationTypeError, r"'shared' must be True or"),
    ([OK], {"links": {"x": 1}, "resources": {"x": 1}}, tw.SimulationError, r"'x' is both a link and a resource"),
    ([OK], {"links": [1]}, SimulationTypeError, r"links must be a dict"),
    ([dict(OK, memory=5)], {}, tw.SimulationError, r"'memory' needs a 'memory_pool'"),
    ([dict(OK, memory=5.0, memory_pool=0)], {}, SimulationTypeError, r"'memory' must be an int"),
    ([dict(OK, start=1)], {}, tw.SimulationError, r"start and end are what the simulator computes"),
    ([3], {}, SimulationTypeError, r"task 0 must be a dict"),
    ({"name": "a"}, {}, SimulationTypeError, r"tasks must be a list of dicts"),
    ([dict(OK, after=["b"]), dict(OK, name="b", after=["a"], stream=1)], {}, tw.SimulationError,
     r"dependency cycle: task 0 \('a'\) -> task 1 \('b'\) -> task 0 \('a'\)"),
    ([dict(OK, after=["b"]), dict(OK, name="b")], {}, tw.SimulationError,
     r"stream 0 runs task 0 \('a'\) before task 1 \('b'\)"),
])
def test_bad_input_is_named(tasks, kwargs, error, match):
    with pytest.raises(error, match=match):
        tw.simulate(tasks, **kwargs)


def test_errors_are_value_and_type_errors():
    assert issubclass(tw.SimulationError, ValueError)
    assert issubclass(SimulationTypeError, TypeError) and issubclass(SimulationTypeError, tw.SimulationError)


# ----- the Timeline ----------------------------------------------------------------------------------


def small():
    return tw.simulate([{"name": "mm", "stream": "compute", "seconds": 1, "device": 0, "kind": "gemm"},
                        {"name": "send", "stream": "copy", "link": "pcie", "bytes": 100, "after": ["mm"],
                         "device": 0, "kind": "copy"},
                        {"name": "recv", "stream": ("gpu1", "copy"), "seconds": 0.5, "device": 1, "kind": "copy"}],
                       links={"pcie": 100})


def test_timeline_lookup_and_errors():
    tl = small()
    assert tl["send"]["start"] == 1 and tl["send"]["end"] == 2 and tl["send"]["bytes"] == 100
    assert "mm" in tl and len(tl) == 3
    assert tl.streams == ["compute", "copy", ("gpu1", "copy")]
    assert tl.busy(("gpu1", "copy")) == 0.5 and tl.idle("copy") == 1
    with pytest.raises(KeyError, match="did you mean 'send'"):
        tl["sned"]
    with pytest.raises(KeyError, match="no stream 'gpu'"):
        tl.busy("gpu")


def test_timeline_built_by_hand_counts_overlap_once():
    tl = tw.Timeline(["a", "b", "c"], [0, 0, 1], [0.0, 1.0, 0.0], [2.0, 3.0, 1.0],
                     [{"kind": "x"}, {}, {"device": "cpu"}])
    assert tl.makespan == 3 and tl.busy(0) == 3 and tl.idle(1) == 2
    with pytest.raises(ValueError, match="3 names but 2 starts"):
        tw.Timeline(["a", "b", "c"], [0, 0, 0], [0, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="both named 'a'"):
        tw.Timeline(["a", "a"], [0, 0], [0, 1], [1, 2])
    with pytest.raises(ValueError, match="ends at 0.0 before it starts at 1.0"):
        tw.Timeline(["a"], [0], [1], [0])
    with pytest.raises(ValueError, match=r"extra fields \['end'\]"):
        tw.Timeline(["a"], [0], [0], [1], [{"end": 3}])


def test_trace_round_trips_through_json(tmp_path):
    tl = small()
    path = tmp_path / "trace.json"
    trace = tl.to_trace(path)
    assert json.loads(path.read_text()) == trace
    assert json.loads(json.dumps(trace)) == trace
    spans = {e["name"]: e for e in trace["traceEvents"] if e["ph"] == "X"}
    assert spans["send"]["ts"] == 1e6 and spans["send"]["dur"] == 1e6 and spans["send"]["cat"] == "copy"
    assert spans["recv"]["pid"] == 1 and spans["mm"]["pid"] == 0
    assert spans["send"]["tid"] == 1 and spans["send"]["args"]["after"] == ["mm"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {(0, 0): "compute", (0, 1): "copy", (1, 2): "('gpu1', 'copy')"}
    # Devices named by strings are numbered.
    named = tw.Timeline(["a", "b"], [0, 1], [0, 0], [1, 1], [{"device": "cpu"}, {"device": "gpu"}]).to_trace()
    assert sorted(e["pid"] for e in named["traceEvents"] if e["ph"] == "X") == [0, 1]


def test_plot_returns_axes():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = small().plot()
    assert isinstance(ax, matplotlib.axes.Axes)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["compute", "copy", "('gpu1', 'copy')"]
    assert ax.get_legend() is not None
    plt.close(ax.figure)
    fig, given_ax = plt.subplots()
    assert tw.simulate([OK]).plot(ax=given_ax) is given_ax
    plt.close(fig)


def test_presentation_and_dict():
    tl = small()
    assert repr(tl) == "<tw.Timeline of 3 tasks on 3 streams: makespan 2 s>"
    page = tl._repr_html_()
    assert "makespan 2 s" in page and "<td>copy</td>" in page and "50.0%" in page
    d = tl.to_dict()
    assert d["makespan"] == 2 and d["streams"][1] == {"name": "copy", "busy": 1.0, "idle": 1.0}
    assert d["tasks"] == tl.tasks
    assert json.loads(tl.to_json())["streams"][2]["name"] == ["gpu1", "copy"]

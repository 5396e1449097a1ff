"""tw.pareto (issue 16): the frontier engine on plain decision problems against enumeration of every
assignment (chains, branches, joins, cycles), unrolled points re-evaluated exactly, conditioning and
the heuristic (TensorOpt Eq. 7), Algorithm 1 and Lemma 2, bucketing, threads, and the argument
errors."""
import json
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilewise as tw

# ----- a brute-force oracle -----------------------------------------------------------------------


def _arrays(nodes, edges):
    names = list(nodes)
    node_costs = [np.array([c if isinstance(c, tuple) else (c, 0.0) for c in nodes[n]], dtype=float) for n in names]
    edge_costs = []
    for (u, v), table in edges.items():
        rows = [[c if isinstance(c, tuple) else (c, 0.0) for c in row] for row in table]
        edge_costs.append((names.index(u), names.index(v), np.array(rows, dtype=float)))
    return names, node_costs, edge_costs


def enumerate_frontier(nodes, edges):
    """Every assignment's (time, memory) by broadcasting, reduced: the exact Pareto set."""
    names, node_costs, edge_costs = _arrays(nodes, edges)
    n = len(names)
    shape = tuple(len(c) for c in node_costs)
    total = [np.zeros(shape), np.zeros(shape)]
    for k in range(2):
        for v, c in enumerate(node_costs):
            total[k] = total[k] + c[:, k].reshape([-1 if a == v else 1 for a in range(n)])
        for u, v, t in edge_costs:
            table = t[:, :, k] if u < v else t[:, :, k].T
            a, b = min(u, v), max(u, v)
            total[k] = total[k] + table.reshape([shape[x] if x in (a, b) else 1 for x in range(n)])
    times, mems = total[0].ravel(), total[1].ravel()
    order = np.lexsort((times, mems))
    best, out = math.inf, []
    for i in order:
        if times[i] < best:
            out.append((float(times[i]), float(mems[i])))
            best = times[i]
    return out


def evaluate(nodes, edges, choice):
    """One assignment's (time, memory), each a correctly rounded sum (math.fsum)."""
    ts, ms = [], []
    for name, configs in nodes.items():
        c = configs[choice[name]]
        t, m = c if isinstance(c, tuple) else (c, 0.0)
        ts.append(t), ms.append(m)
    for (u, v), table in edges.items():
        c = table[choice[u]][choice[v]]
        t, m = c if isinstance(c, tuple) else (c, 0.0)
        ts.append(t), ms.append(m)
    return math.fsum(ts), math.fsum(ms)


def points(frontier):
    return [(p.time, p.memory) for p in frontier.points]


def check_unrolls(nodes, edges, frontier):
    for p in frontier.points:
        assert set(p.choice) == set(nodes)
        assert evaluate(nodes, edges, p.choice) == (p.time, p.memory)
    for a, b in zip(frontier.points, frontier.points[1:]):
        assert a.memory < b.memory and a.time > b.time


# ----- random problems ----------------------------------------------------------------------------

GRID = st.integers(0, 80).map(lambda i: i / 8)  # sums of eighths are exact in any order


@st.composite
def problems(draw, cost=GRID, shapes=("chain", "tree", "cycle")):
    shape = draw(st.sampled_from(shapes))
    n = draw(st.integers(1, 8))
    sizes = []
    for _ in range(n):
        room = 20000 // math.prod(sizes) if sizes else 20000
        sizes.append(draw(st.integers(2, max(2, min(6, room)))))
    pair = st.one_of(cost, st.tuples(cost, cost))
    nodes = {f"n{v}": [draw(st.tuples(cost, cost)) for _ in range(sizes[v])] for v in range(n)}
    links = []
    for v in range(1, n):
        u = v - 1 if shape == "chain" else draw(st.integers(0, v - 1))
        links.append((u, v))
    if shape == "cycle" and n >= 3:
        for _ in range(draw(st.integers(1, n))):
            a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            if a != b and (a, b) not in links and (b, a) not in links:
                links.append((a, b))
    edges = {}
    for u, v in links:
        if draw(st.booleans()):  # either orientation of the key
            u, v = v, u
        edges[(f"n{u}", f"n{v}")] = [[draw(pair) for _ in range(sizes[v])] for _ in range(sizes[u])]
    return nodes, edges


@settings(max_examples=150, deadline=None)
@given(problems())
def test_frontier_equals_enumeration(problem):
    nodes, edges = problem
    f = tw.pareto.solve(nodes, edges)
    assert points(f) == enumerate_frontier(nodes, edges)
    check_unrolls(nodes, edges, f)
    assert f.stats.heuristic_eliminations == 0 and f.stats.conditioned == ()


@settings(max_examples=100, deadline=None)
@given(problems())
def test_bounds_keep_the_frontier_and_never_grow_the_tables(problem):
    nodes, edges = problem
    plain = tw.pareto.solve(nodes, edges, bound=False)
    bounded = tw.pareto.solve(nodes, edges)
    assert points(bounded) == points(plain)
    check_unrolls(nodes, edges, bounded)
    assert bounded.stats.incumbents >= 1 and plain.stats.incumbents == 0
    made = [sum(e.total_points for e in f.stats.eliminations) for f in (plain, bounded)]
    assert made[1] <= made[0]


def test_a_search_past_its_byte_budget_stops_with_search_too_large():
    # A chain of nodes trading time for memory: frontiers grow along it.
    nodes = {f"n{i}": [(float(3 - k) * (i + 1), float(2 ** (i + k))) for k in range(4)] for i in range(8)}
    edges = {(f"n{i}", f"n{i + 1}"): [[0.0] * 4 for _ in range(4)] for i in range(7)}
    assert len(tw.pareto.solve(nodes, edges).points) > 4
    with pytest.raises(tw.SearchTooLarge, match="tables would take more than"):
        tw.pareto.solve(nodes, edges, max_bytes=2000, bound=False)
    # The error names what the search used and what to change next.
    with pytest.raises(tw.SearchTooLarge, match=r"heuristic=False, max_table=2\*\*18, memory_bucket=None, "
                       r"max_bytes=1.95 KiB; try heuristic=True .*a memory_bucket.*larger max_bytes"):
        tw.pareto.solve(nodes, edges, max_bytes=2000, bound=False)
    with pytest.raises(tw.SearchTooLarge, match=r"heuristic=True, max_table=2\*\*14, .*try a smaller max_table"):
        tw.pareto.solve(nodes, edges, max_bytes=2000, bound=False, heuristic=True, memory_bucket=1.0)


@settings(max_examples=60, deadline=None)
@given(problems(shapes=("cycle", "tree")))
def test_conditioning_is_exact_when_the_table_limit_is_tiny(problem):
    nodes, edges = problem
    f = tw.pareto.solve(nodes, edges, max_table=1)
    assert points(f) == enumerate_frontier(nodes, edges)
    check_unrolls(nodes, edges, f)
    assert f.stats.subproblems == math.prod(len(nodes[n]) for n in f.stats.conditioned)
    assert f.stats.heuristic_eliminations == 0


@settings(max_examples=60, deadline=None)
@given(problems(shapes=("cycle", "tree")))
def test_heuristic_elimination_is_dominated_and_counted(problem):
    nodes, edges = problem
    f = tw.pareto.solve(nodes, edges, max_table=1, heuristic=True)
    check_unrolls(nodes, edges, f)
    exact = enumerate_frontier(nodes, edges)
    for p in f.points:
        assert any(t <= p.time and m <= p.memory for t, m in exact)
    assert f.stats.heuristic_eliminations == len(f.stats.heuristic_fixed)
    assert f.stats.conditioned == () and f.stats.subproblems == 1
    for name, x in f.stats.heuristic_fixed.items():
        assert all(p.choice[name] == x for p in f.points)


@settings(max_examples=60, deadline=None)
@given(problems(shapes=("cycle", "tree")))
def test_bounds_with_the_heuristic_keep_its_frontier_and_its_fixed_values(problem):
    # The incumbents search the heuristic's restricted space (its plan): the same frontier, no point
    # outside the fixed values.
    nodes, edges = problem
    plain = tw.pareto.solve(nodes, edges, max_table=1, heuristic=True, bound=False)
    bounded = tw.pareto.solve(nodes, edges, max_table=1, heuristic=True)
    assert points(bounded) == points(plain)
    check_unrolls(nodes, edges, bounded)
    assert bounded.stats.incumbents >= 1 and plain.stats.incumbents == 0
    assert bounded.stats.heuristic_fixed == plain.stats.heuristic_fixed
    for name, x in bounded.stats.heuristic_fixed.items():
        assert all(p.choice[name] == x for p in bounded.points)


def test_heuristic_is_used_only_past_the_limit_and_loses_points_somewhere():
    rng = random.Random(5)
    used = lost = 0
    for _ in range(30):
        n = 6
        nodes = {f"n{v}": [(rng.randint(0, 50) / 4, rng.randint(0, 50)) for _ in range(4)] for v in range(n)}
        edges = {(f"n{u}", f"n{v}"): [[rng.randint(0, 20) / 4 for _ in range(4)] for _ in range(4)]
                 for u in range(n) for v in range(u + 1, n) if rng.random() < 0.6}
        assert tw.pareto.solve(nodes, edges, heuristic=True).stats.heuristic_eliminations == 0
        f = tw.pareto.solve(nodes, edges, max_table=4, heuristic=True)
        used += f.stats.heuristic_eliminations
        lost += points(f) != enumerate_frontier(nodes, edges)
    assert used > 0 and lost > 0


@settings(max_examples=60, deadline=None)
@given(problems(cost=st.floats(0, 1e3, allow_subnormal=False)))
def test_arbitrary_floats_agree_within_rounding_and_unroll_exactly(problem):
    nodes, edges = problem
    f = tw.pareto.solve(nodes, edges)
    check_unrolls(nodes, edges, f)  # reported costs are fsum-exact for the returned choices
    exact = enumerate_frontier(nodes, edges)
    tol = 1e-9 * (1 + max((max(t, m) for t, m in exact), default=0))
    for t, m in exact:  # every exact point is matched up to the rounding of sums in another order
        assert any(p.time <= t + tol and p.memory <= m + tol for p in f.points)
    for p in f.points:
        assert any(t <= p.time + tol and m <= p.memory + tol for t, m in exact)


@settings(max_examples=40, deadline=None)
@given(problems(), st.sampled_from([0.5, 2.0, 7.0]), st.booleans())
def test_memory_bucket_stays_within_its_bound(problem, bucket, bound):
    nodes, edges = problem
    # Without bounds: their incumbents alone would give the least memory (the heaviest weight on it).
    f = tw.pareto.solve(nodes, edges, memory_bucket=bucket, bound=bound)
    check_unrolls(nodes, edges, f)
    assert f.stats.memory_error_bound == bucket * (len(nodes) + 1)
    exact = enumerate_frontier(nodes, edges)
    assert (f.points[0].time, f.points[0].memory) == exact[0]  # the least-memory end stays exact
    for t, m in exact:
        assert any(p.time <= t and p.memory <= m + f.stats.memory_error_bound for p in f.points)


def test_threads_and_numpy_inputs_do_not_change_the_result():
    rng = np.random.default_rng(3)
    nodes = {f"n{v}": rng.integers(0, 100, size=(5, 2)) / 4 for v in range(12)}
    edges = {(f"n{v}", f"n{v + 1}"): rng.integers(0, 40, size=(5, 5)) / 4 for v in range(11)}
    edges[("n0", "n11")] = rng.integers(0, 40, size=(5, 5, 2)) / 4
    as_lists = ({k: [tuple(r) for r in a.tolist()] for k, a in nodes.items()},
                {k: [[tuple(c) if isinstance(c, list) else c for c in row] for row in a.tolist()]
                 for k, a in edges.items()})
    a = tw.pareto.solve(nodes, edges, threads=1)
    b = tw.pareto.solve(nodes, edges)
    c = tw.pareto.solve(*as_lists, threads=2)
    assert points(a) == points(b) == points(c)
    assert [dict(p.choice) for p in a] == [dict(p.choice) for p in b] == [dict(p.choice) for p in c]


def test_a_chain_is_eliminated_in_order():
    nodes = {f"o{i}": [(i + k, 3 - k) for k in range(3)] for i in range(5)}
    edges = {(f"o{i}", f"o{i + 1}"): [[abs(a - b) for b in range(3)] for a in range(3)] for i in range(4)}
    f = tw.pareto.solve(nodes, edges)
    assert [e.node for e in f.stats.eliminations] == list(nodes)
    assert [e.entries for e in f.stats.eliminations] == [3, 3, 3, 3, 1]
    assert f.stats.largest_table == 9
    assert points(f) == enumerate_frontier(nodes, edges)


def test_no_nodes_is_the_empty_assignment():
    f = tw.pareto.solve({})
    assert points(f) == [(0.0, 0.0)] and dict(f.points[0].choice) == {}


# ----- Algorithm 1 and Lemma 2 --------------------------------------------------------------------


def test_reduce_keeps_strictly_faster_points_in_memory_order():
    assert tw.pareto.reduce([(9, 1), (3, 4), (5, 2), (4, 5), (2, 3)]) == [0, 2, 4]
    assert tw.pareto.reduce([(5, 2), (3, 2), (4, 2)]) == [1]  # equal memory: the fastest
    assert tw.pareto.reduce([(3, 7), (3, 2), (3, 5)]) == [1]  # equal time: the lightest
    assert tw.pareto.reduce([(1, 1), (2, 0), (1, 1), (2, 0)]) == [1, 0]  # duplicates: the first
    assert tw.pareto.reduce([]) == []
    assert tw.pareto.reduce([(5, 11), (1, 19), (0.5, 25), (9, 3)], memory_bucket=10) == [3, 1, 2]
    assert tw.pareto.reduce([(5, 5), (9, 3), (1, 12)], memory_bucket=10) == [1, 0, 2]  # the lightest stays


def test_lemma_2_random_order_sets_have_harmonic_mean_frontier_size():
    rng = np.random.default_rng(16)
    for k in (10, 100, 1000):
        sizes = [len(tw.pareto.reduce(rng.random((k, 2)))) for _ in range(2000)]
        harmonic = sum(1 / i for i in range(1, k + 1))
        # Frontier sizes have variance H_K - H_K^(2) < H_K: the mean of 2000 is within 0.25 (> 5 sigma).
        assert abs(np.mean(sizes) - harmonic) < 0.25, (k, np.mean(sizes), harmonic)


# ----- the result object --------------------------------------------------------------------------


def _small():
    return tw.pareto.solve({"a": [(1.0, 4), (3.0, 1)], "b": [(2.0, 2), (1.0, 5)]},
                           {("a", "b"): [[0.5, 0.0], [(0.1, 1), 2.0]]})


def test_frontier_presents_itself():
    f = _small()
    assert points(f) == [(5.1, 4.0), (3.5, 6.0), (2.0, 9.0)]
    assert [dict(p.choice) for p in f] == [{"a": 1, "b": 0}, {"a": 0, "b": 0}, {"a": 0, "b": 1}]
    assert len(f) == 3 and f[0].time == 5.1
    assert "3 points" in repr(f) and "0 heuristic eliminations" in repr(f)
    assert "<table>" in f._repr_html_()
    d = json.loads(f.to_json())
    assert d["format"] == "tilewise-pareto/1" and d["points"][0] == {"time": 5.1, "memory": 4.0,
                                                                       "choice": {"a": 1, "b": 0}}
    assert d["stats"]["heuristic_eliminations"] == 0 and d["stats"]["eliminations"][0]["node"] in ("a", "b")
    assert f.stats.largest_frontier == 3


def test_frontier_plot_returns_axes():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = _small().plot()
    assert isinstance(ax, matplotlib.axes.Axes)
    plt.close("all")


def test_time_limit_and_progress():
    rng = np.random.default_rng(1)
    nodes = {f"n{v}": rng.random((30, 2)) for v in range(150)}
    edges = {(f"n{v}", f"n{v + 1}"): rng.random((30, 30)) for v in range(149)}
    with pytest.raises(tw.SearchTimeout, match=r"time limit .* with heuristic=False, max_table=2\*\*18, memory_bucket=None; "
                       r"try heuristic=True .*a memory_bucket, or a longer time_limit \(now 0.0001 s\)"):
        tw.pareto.solve(nodes, edges, time_limit=1e-4)
    seen = []
    small = {k: nodes[k] for k in list(nodes)[:5]}
    tw.pareto.solve(small, {k: v for k, v in edges.items() if k[1] in small}, progress=lambda d, t: seen.append((d, t)))
    assert seen and seen[-1] == (5, 5)


# ----- argument errors ----------------------------------------------------------------------------

NODES = {"a": [(1.0, 1.0), (2.0, 0.0)], "b": [(1.0, 1.0)]}


@pytest.mark.parametrize("nodes, edges, error, says", [
    ({"a": []}, {}, ValueError, "node 'a' has no configuration"),
    ({"a": [(1.0, -1.0)]}, {}, ValueError, "node 'a' configuration 0 memory is -1.0; valid: a finite number >= 0"),
    ({"a": [(math.nan, 1.0)]}, {}, ValueError, "configuration 0 time is nan"),
    ({"a": [(math.inf, 1.0)]}, {}, ValueError, "time is inf"),
    ({"a": [(True, 1.0)]}, {}, TypeError, "time must be a number, not bool"),
    ({"a": [True]}, {}, TypeError, "a (time, memory) pair or a bare time, not bool"),
    ({"a": [(1.0, 2.0, 3.0)]}, {}, TypeError, "pair or a bare time"),
    ({"a": ["fast"]}, {}, TypeError, "not str"),
    ({"a": 3}, {}, TypeError, "node 'a' must map to a list of configurations"),
    ({1: [(1.0, 1.0)]}, {}, TypeError, "node names must be str, not int"),
    ({"a": np.array([[1.0, -2.0]])}, {}, ValueError, "node 'a' configuration [0] memory is -2.0"),
    ({"a": np.array([[True, False]])}, {}, TypeError, "must hold numbers"),
    ({"a": np.ones((2, 3))}, {}, ValueError, "shape (K, 2) or (K,)"),
    (NODES, {("a", "c"): [[0.0], [0.0]]}, ValueError, "edge ('a', 'c') names an unknown node 'c'"),
    (NODES, {("a", "bb"): [[0.0], [0.0]]}, ValueError, "did you mean 'b'"),
    (NODES, {("a", "a"): [[0.0, 0.0], [0.0, 0.0]]}, ValueError, "joins 'a' to itself"),
    (NODES, {("a", "b"): [[0.0]]}, ValueError, "table has 1 rows; valid: 2 x 1 (configurations of 'a' x of 'b')"),
    (NODES, {("a", "b"): [[0.0], [0.0, 1.0]]}, ValueError, "row 1 has 2 entries; valid: 2 x 1"),
    (NODES, {("a", "b"): [[0.0], [(1.0, -3.0)]]}, ValueError, "edge ('a', 'b') entry [1][0] memory is -3.0"),
    (NODES, {("a", "b"): [[0.0], [False]]}, TypeError, "edge ('a', 'b') entry [1][0] must be"),
    (NODES, {("a", "b"): np.zeros((1, 2))}, ValueError, "table has shape (1, 2, 2)"),
    (NODES, {("a", "b"): [[0.0], [0.0]], ("b", "a"): [[0.0, 0.0]]}, ValueError,
     "edges ('a', 'b') and ('b', 'a') join the same nodes"),
    (NODES, {"ab": [[0.0], [0.0]]}, TypeError, "edge keys must be (u, v) pairs"),
    (NODES, [(("a", "b"), [[0.0], [0.0]])], TypeError, "edges must be a mapping"),
    ([("a", [(1.0, 1.0)])], {}, TypeError, "nodes must be a mapping"),
])
def test_bad_problems_name_what_is_wrong(nodes, edges, error, says):
    with pytest.raises(error) as e:
        tw.pareto.solve(nodes, edges)
    assert says in str(e.value)


@pytest.mark.parametrize("options, error, says", [
    (dict(max_table=0), ValueError, "max_table must be an int from 1"),
    (dict(max_table=2.5), TypeError, "max_table must be an int"),
    (dict(heuristic=1), TypeError, "heuristic must be True or False"),
    (dict(memory_bucket=0), ValueError, "memory_bucket must be a positive number"),
    (dict(memory_bucket="1"), TypeError, "memory_bucket must be a number"),
    (dict(time_limit=-1), ValueError, "time_limit must be a positive number"),
    (dict(time_limit=True), TypeError, "time_limit must be a number"),
    (dict(threads=0), ValueError, "threads must be an int from 1"),
    (dict(max_bytes=0), ValueError, "max_bytes must be an int from 1"),
])
def test_bad_options_name_what_is_wrong(options, error, says):
    with pytest.raises(error, match=None) as e:
        tw.pareto.solve(NODES, {}, **options)
    assert says in str(e.value)


def _wide_problem(seed, n=14, k=5):
    """A random cycle-rich problem with tables large enough that the search splits them over threads."""
    rng = random.Random(seed)
    nodes = {f"n{v}": [(rng.randint(0, 60) / 8, rng.randint(0, 60)) for _ in range(k)] for v in range(n)}
    edges = {(f"n{u}", f"n{v}"): [[rng.randint(0, 30) / 8 for _ in range(k)] for _ in range(k)]
             for u in range(n) for v in range(u + 1, n) if v == u + 1 or rng.random() < 0.15}
    return nodes, edges


def test_searches_from_several_python_threads_at_once_agree_with_one_at_a_time():
    # The searches share one pool of threads (cpp/partition/work_pool.*): concurrent searches neither
    # hang nor mix their tables.
    import threading

    problems = [_wide_problem(s) for s in range(4)]
    alone = [points(tw.pareto.solve(n, e, threads=2)) for n, e in problems]
    results, errors = [None] * 8, []

    def run(i):
        try:
            n, e = problems[i % 4]
            results[i] = points(tw.pareto.solve(n, e, threads=2))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    assert results == alone + alone


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_searches_without_the_parents_pool():
    # The pool's workers are the parent's: after a fork the child's searches run on its own thread
    # (a child waiting for workers it does not have would hang).
    import os
    import warnings

    nodes, edges = _wide_problem(7)
    want = points(tw.pareto.solve(nodes, edges, threads=2))  # the parent's pool is up
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of exactly this: fork with threads running
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's exit handlers
        os.close(read)
        ok = points(tw.pareto.solve(nodes, edges, threads=2)) == want
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as r:
        got = r.read()
    os.waitpid(pid, 0)
    assert got == b"1"

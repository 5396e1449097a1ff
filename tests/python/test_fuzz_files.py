"""Fuzzing the file loaders: graph JSON (``tw.Graph.from_json``) and plan JSON (``tw.Plan.from_json``).

Seeds are files the project itself writes (``tests/fuzz/``, made by ``tests/fuzz/make_corpus.py``).
Hypothesis mutates them, as text (bytes cut, copied, replaced) and as JSON (a value anywhere
replaced by an edge value, a key or list item deleted, duplicated or swapped, ids nudged), and each
mutant must either load to a graph or plan that survives a round trip (``to_json`` then
``from_json`` gives the same text) and runs a step, or raise the loader's typed error (``tw.GraphError`` /
``tw.PlanError``, both ``ValueError``). Any other exception, a crash or a hang fails the test
(a watchdog dumps the stacks and exits after ``TILEWISE_FUZZ_TIMEOUT`` seconds).

CI runs ``TILEWISE_FUZZ_EXAMPLES`` inputs per harness (default 6,000 graphs and 4,000 plans:
10^4 in all, derandomized); a longer run is one variable away:

    TILEWISE_FUZZ_EXAMPLES=200000 python -m pytest -q tests/python/test_fuzz_files.py

Each harness prints its counts (inputs, loaded, typed errors by first words) and asserts them.
"""

from __future__ import annotations

import collections
import copy
import faulthandler
import json
import math
import os
import pathlib
import random
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilewise as tw

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
_SCALE = os.environ.get("TILEWISE_FUZZ_EXAMPLES")
GRAPH_EXAMPLES = int(_SCALE) if _SCALE else 6000
PLAN_EXAMPLES = int(_SCALE) if _SCALE else 4000
TIMEOUT = float(os.environ.get("TILEWISE_FUZZ_TIMEOUT", "600"))

GRAPHS = {p.stem.removeprefix("graph_"): p.read_text() for p in sorted(CORPUS.glob("graph_*.json"))}
PLANS = {p.stem.removeprefix("plan_"): p.read_text() for p in sorted(CORPUS.glob("plan_*.json"))}


def _plan_graph(stem: str) -> str:
    """plan_<graph>_<algorithm>_<devices>: the graph stem is all but the last two parts."""
    return stem.rsplit("_", 2)[0]


# ----- mutations ----------------------------------------------------------------------------------

#: Values that break loaders: wrong types, edge integers (ids one past the end are added per site).
EDGE_VALUES = [None, True, False, 0, 1, -1, -2, 2, 3, 7, 2**31, 2**40, 2**40 + 1, 2**44, 2**62, 2**63 - 1, 2**63,
               2**64, -(2**63), 10**30, 0.5, -0.0, 1e300, math.inf, -math.inf, math.nan, "", "x", "float32", "int64",
               "parameter", "gradient", "forward", "update", "relu", "add_3", "add_99999999", "sum_axes", "replicate",
               "reduce", "output", "Sum", "Max", [], [0], [-1], [2**62], [1, 2], [0, 1, 2], [[]], {}, {"a": 1}]


def _paths(doc, prefix=()):
    """Every (path, value) of a JSON document, containers included."""
    yield prefix, doc
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


MUTATIONS = ("replace", "nudge", "delete", "duplicate", "swap", "edge_list", "copy")
TEXT_MUTATIONS = ("cut", "repeat", "overwrite", "insert", "truncate")
JUNK = ('"', "]", "}", "{", ",", "-", "9", "99999999999999999999", "\\u0000", "\x00", "[" * 3000, "1e999", "é", " ")


def _mutate_json(rnd, doc):
    """One structural mutation of ``doc`` in place; returns doc (or, rarely, a new root)."""
    paths = list(_paths(doc))
    if rnd.random() < 0.01:
        return copy.deepcopy(rnd.choice(EDGE_VALUES))
    path, value = paths[rnd.randrange(1, len(paths))] if len(paths) > 1 else paths[0]
    if not path:
        return copy.deepcopy(rnd.choice(EDGE_VALUES))
    kind = rnd.choice(MUTATIONS)
    parent, key = _get(doc, path[:-1]), path[-1]
    if kind == "replace":
        parent[key] = copy.deepcopy(rnd.choice(EDGE_VALUES))
    elif kind == "nudge" and isinstance(value, int) and not isinstance(value, bool):
        parent[key] = value + rnd.randint(-3, 3)
    elif kind == "nudge" and isinstance(value, str):
        parent[key] = value + rnd.choice(["_", "_2", "x", ".", "/"])
    elif kind == "delete":
        del parent[key]
    elif kind == "duplicate" and isinstance(parent, list):
        parent.insert(key, copy.deepcopy(value))
    elif kind == "swap" and isinstance(parent, list) and len(parent) > 1:
        j = rnd.randrange(len(parent))
        parent[key], parent[j] = parent[j], parent[key]
    elif kind == "edge_list" and isinstance(value, list):
        if value and rnd.random() < 0.5:
            value.pop(rnd.randrange(len(value)))
        else:
            value.append(copy.deepcopy(rnd.choice(EDGE_VALUES)))
    else:  # copy another site's value here (an id from elsewhere, another tensor's shape)
        parent[key] = copy.deepcopy(rnd.choice(paths)[1])
    return doc


def _mutate_text(rnd, text: str) -> str:
    """One byte-level mutation: cut, repeat, overwrite or insert a short span, or truncate."""
    n = len(text)
    i = rnd.randrange(max(n, 1))
    j = min(n, i + rnd.randint(0, 40))
    kind, junk = rnd.choice(TEXT_MUTATIONS), rnd.choice(JUNK)
    if kind == "cut":
        return text[:i] + text[j:]
    if kind == "repeat":
        return text[:j] + text[i:j] + text[j:]
    if kind == "overwrite":
        return text[:i] + junk + text[i + len(junk):]
    if kind == "insert":
        return text[:i] + junk + text[i:]
    return text[:i]


def _mutant(rnd, seed_text: str) -> str | bytes:
    """1-3 structural mutations; then, one time in ten, a byte-level one; one in fifty not UTF-8."""
    doc = json.loads(seed_text)
    for _ in range(rnd.randint(1, 3)):
        doc = _mutate_json(rnd, doc)
    text = json.dumps(doc, allow_nan=True)
    if rnd.random() < 0.1:
        text = _mutate_text(rnd, text)
    if rnd.random() < 0.02:
        return text.encode()[:-1] + b"\xff"
    return text


#: Hypothesis draws a seed per input and a seeded random.Random makes the choices: hypothesis'
#: own draws (a label per strategy and per value) cost more than loading a small file, and its
#: biased integers (and its artificial Random) favour the first sites and the edges; a seeded
#: stream mutates all of a document uniformly and still replays from the seed.
_SEED = st.integers(0, 2**64 - 1)


def _random(data) -> random.Random:
    return random.Random(data.draw(_SEED, label="seed"))


# ----- harnesses ----------------------------------------------------------------------------------


def _fuzz_settings(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def _report(capsys, name: str, stats: collections.Counter, errors: collections.Counter, seconds: float):
    top = ", ".join(f"{k!r}: {v}" for k, v in errors.most_common(6))
    with capsys.disabled():
        print(f"\n[fuzz] {name}: {stats['inputs']} inputs in {seconds:.1f} s, {stats['loaded']} loaded "
              f"(round trip and a step checked), {stats['typed']} typed errors; most common: {top}")


def _reason(e: Exception) -> str:
    """The field an error names, for the summary: 'tensors[3].shape' -> 'tensors[].shape'."""
    text = str(e).split(":")[0]
    return "".join(c for c in text if not c.isdigit())[:40]


def _step(exe, g: tw.Graph) -> None:
    feeds = {t.name: np.ones(t.shape, np.float32) for t in g.tensors
             if t.producer is None and t.role in ("input", "label", "constant")}
    exe.initialize(0).step(feeds)


@pytest.fixture
def watchdog():
    """A hang becomes a failure with every thread's stack, not a stuck CI job."""
    faulthandler.dump_traceback_later(TIMEOUT, exit=True, file=sys.__stderr__)
    yield
    faulthandler.cancel_dump_traceback_later()


def _fuzz(capsys, name: str, examples: int, error: type[Exception], load, check) -> None:
    """``examples`` inputs: ``load(rnd)`` mutates a seed and loads it; it returns what loaded, which
    ``check`` examines, or raises ``error``, the typed one. Prints and asserts the counts."""
    stats, errors = collections.Counter(), collections.Counter()

    @_fuzz_settings(examples)
    @given(st.data())
    def run(data):
        rnd = _random(data)
        stats["inputs"] += 1
        try:
            loaded = load(rnd)
        except error as e:
            stats["typed"] += 1
            errors[_reason(e)] += 1
            return
        check(loaded)
        stats["loaded"] += 1

    t0 = time.perf_counter()
    run()
    _report(capsys, name, stats, errors, time.perf_counter() - t0)
    assert stats["inputs"] >= examples
    assert stats["typed"] + stats["loaded"] == stats["inputs"]
    assert stats["typed"] > examples // 2 and stats["loaded"] > 0


def test_fuzz_graph_files(capsys, watchdog):
    seeds = sorted(GRAPHS)

    def load(rnd):
        return tw.Graph.from_json(_mutant(rnd, GRAPHS[rnd.choice(seeds)]))

    def check(g):
        saved = g.to_json()
        assert tw.Graph.from_json(saved).to_json() == saved
        g.summary()  # sizes and bytes of what loaded stay in range
        tw.coarsen(g)
        _step(tw.compile(g, tw.Plan.one_device(g)), g)  # what loads also runs (one device)

    _fuzz(capsys, "graph JSON", GRAPH_EXAMPLES, tw.GraphError, load, check)


def test_fuzz_plan_files(capsys, watchdog):
    graphs = {stem: tw.Graph.from_json(text, name=stem) for stem, text in GRAPHS.items()}
    seeds = sorted(PLANS)

    def load(rnd):
        stem = rnd.choice(seeds)
        text = _mutant(rnd, PLANS[stem])
        # Mostly the plan's own graph; sometimes another one (a plan made for another graph).
        graph = graphs[rnd.choice(sorted(graphs)) if rnd.random() < 0.05 else _plan_graph(stem)]
        return tw.Plan.from_json(text, graph), graph

    def check(loaded):
        plan, graph = loaded
        saved = plan.to_json()
        assert tw.Plan.from_json(saved, graph).to_json() == saved
        plan.summary()
        _step(tw.compile(graph, plan), graph)  # a plan that loads runs on its devices

    _fuzz(capsys, "plan JSON", PLAN_EXAMPLES, tw.PlanError, load, check)


@pytest.mark.parametrize("stem", sorted(GRAPHS))
def test_graph_corpus_is_what_the_project_writes(stem):
    """The seeds load and round-trip unchanged (a writer change shows up here: regenerate them)."""
    assert tw.Graph.from_json(GRAPHS[stem], name=stem).to_json() == GRAPHS[stem]


@pytest.mark.parametrize("stem", sorted(PLANS))
def test_plan_corpus_loads(stem):
    graph = tw.Graph.from_json(GRAPHS[_plan_graph(stem)], name=_plan_graph(stem))
    plan = tw.Plan.from_json(PLANS[stem], graph)
    assert plan.comm_bytes == plan.evaluate().comm_bytes

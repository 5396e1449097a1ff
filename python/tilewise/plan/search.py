"""The partition search (Tofu §5.2, SoyBean §4): ``tw.partition(graph, devices, algorithm)``.

The search runs in C++ (``_core.partition``, GIL released) over ``k = k1*k2*...`` devices, one
recursion step per factor; this module checks the arguments, drives an optional progress bar and
wraps the result in a ``Plan`` (plan/plan.py).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

from .. import _core
from .._core import PlanError
from .._util import check_int, did_you_mean
from ..graph.graph import Graph
from .plan import Plan

#: The planners ``partition`` knows (``_core.partition_algorithms()``).
ALGORITHMS: tuple[str, ...] = tuple(_core.partition_algorithms())


def _progress_bar():
    """A (callback, close) pair driving one tqdm.auto bar from the C++ (what, done, total) reports."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        raise ImportError("progress=True needs tqdm: pip install 'tilewise[progress]' (or tqdm)") from None
    bar = tqdm(total=1, desc="partition", leave=False)

    def report(what: str, done: int, total: int) -> None:
        if total != bar.total:
            bar.reset(total=total)
        bar.set_description(what, refresh=False)
        bar.n = done
        bar.refresh()

    return report, bar.close


def partition(graph: Graph, devices: int, algorithm: str = "tofu", *, time_limit: float | None = None,
              progress: bool | Callable[[str, int, int], None] = False, threads: int | None = None,
              duplication_budget: int = 0, replication: bool = False) -> Plan:
    """Find a partition plan of ``graph`` over ``devices`` devices.

    ``algorithm``: tofu, kcuts, spartan, data_parallel, allrow_greedy, equal_chop, icml18 or
    brute_force (``tilewise.plan.search.ALGORITHMS``; "data-parallel" works too).
    ``time_limit``: seconds (None: no limit). Past it the search returns the best complete plan it
    has, with ``plan.timed_out`` set (tofu, kcuts and the baselines once every step is decided), or
    raises ``tw.SearchTimeout`` when it has none. ``progress``: True for a
    tqdm progress bar, or a callable ``(what, done, total)``. ``threads``: None for every core.
    ``duplication_budget``: spartan's extra bytes per device for replicated tensors.
    ``replication``: brute_force also tries replicating tensors (the oracle for kcuts).
    Raises PlanError for bad arguments, SearchTooLarge when an exact search cannot fit.

        plan = tw.partition(tw.models.mlp(), devices=8, algorithm="tofu")
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"partition takes a tw.Graph, not {type(graph).__name__}")
    devices = check_int("devices", devices, minimum=1)
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm must be a str (one of {', '.join(ALGORITHMS)}), not {type(algorithm).__name__}")
    name = algorithm.strip().lower().replace("-", "_")
    if name not in ALGORITHMS:
        raise PlanError(f"unknown partition algorithm {algorithm!r}{did_you_mean(name, ALGORITHMS)}; "
                        f"valid: {', '.join(ALGORITHMS)}")
    if time_limit is None:
        limit = 0.0
    else:
        if isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real):
            raise TypeError(f"time_limit must be a number of seconds or None, not {type(time_limit).__name__}")
        if math.isnan(time_limit) or time_limit <= 0:
            raise PlanError(f"time_limit must be a positive number of seconds (or None for no limit), got {time_limit}")
        limit = 0.0 if math.isinf(time_limit) else float(time_limit)
    threads = 0 if threads is None else check_int("threads", threads, minimum=1, maximum=4096)
    duplication_budget = check_int("duplication_budget", duplication_budget, minimum=0, maximum=2**63 - 1)
    if duplication_budget and name != "spartan":
        raise PlanError(f"duplication_budget applies to spartan only, not {name}")
    if not isinstance(replication, bool):
        raise TypeError(f"replication must be a bool, not {type(replication).__name__}")
    if replication and name != "brute_force":
        raise PlanError(f"replication=True applies to brute_force only (kcuts always may replicate), not {name}")
    close = None
    if progress is True:
        report, close = _progress_bar()
    elif progress is False or progress is None:
        report = None
    elif callable(progress):
        report = progress
    else:
        raise TypeError(f"progress must be a bool or a callable (what, done, total), not {type(progress).__name__}")
    try:
        core = _core.partition(graph._g, devices, name, threads=threads, time_limit=limit,
                               duplication_budget=duplication_budget, brute_force_replication=replication,
                               progress=report)
    finally:
        if close is not None:
            close()
    return Plan(graph, core)

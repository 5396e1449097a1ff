"""Swapping (SwapAdvisor, thesis ch. 4-5): train on one device a model whose tensors do not fit, by
moving tensors between device and host memory while the device computes.

``tw.swap.Problem`` is the low-level entry: tensors, ops, capacity and host link; ``.plan(schedule,
pool)`` runs the swap planner (§4.3.2) and simulates the augmented graph on one compute and two copy
streams; ``.search()`` is the genetic search over schedules and pools (§4.4); ``.ideal()``, ``.odswap()``
and ``.random_search()`` are the baselines (§5.1, §5.4). docs/SWAP.md states the rules.

Modules: ``problem`` (``Problem``), ``plan`` (``SwapPlan``), ``search`` (``SearchResult``).
"""

from .._core import SwapError
from .._core import SwapInfeasibleError as InfeasibleError
from .plan import SwapPlan
from .problem import KINDS, Problem
from .search import SearchResult

__all__ = ["KINDS", "InfeasibleError", "Problem", "SearchResult", "SwapError", "SwapPlan"]

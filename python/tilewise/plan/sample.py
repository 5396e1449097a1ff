"""Random plans: every op a random strategy of its description, every tensor a random tiling.

For measuring how well predictions hold over plans no planner would pick (TensorOpt Table 2
samples strategies at random), and for fuzzing the lowering and the runtime. A sampled plan is a
plan like any other: its bytes are evaluated by the one cost model, it compiles and runs.
"""

from __future__ import annotations

import random

from .. import _core
from .._util import check_int
from ..graph.graph import Graph
from .plan import Plan, valid_strategies


def random_plan(graph: Graph, devices: int = 2, *, seed: int = 0, replicate: float = 0.2) -> Plan:
    """A plan of ``graph`` on ``devices`` devices (one k-way step): each op splits a random variable
    of its strategies (or replicates, with probability ``replicate``), each tensor is cut along a
    random dimension at least ``devices`` long (or replicated, likewise); an update is tiled like
    the tensor it replaces. Deterministic for a seed."""
    if not isinstance(graph, Graph):
        raise TypeError(f"random_plan needs a tw.Graph, not {type(graph).__name__}")
    devices = check_int("devices", devices, minimum=1, maximum=2**20)
    if devices == 1:
        return Plan.one_device(graph)
    if not 0 <= replicate <= 1:
        raise ValueError(f"replicate is a probability in [0, 1], got {replicate!r}")
    rng = random.Random(seed)
    g = graph._g
    tilings: list[list[int]] = []
    for tid in range(g.num_tensors):
        dims = [d for d, n in enumerate(g.tensor(tid).shape) if n >= devices]
        tilings.append([rng.choice(dims) if dims and rng.random() >= replicate else -1])
    for tid in range(g.num_tensors):  # an updated value is stored in place of its tensor
        u = g.tensor(tid).updates
        if u >= 0:
            tilings[tid] = tilings[u]
    splits = []
    for oid in range(g.num_ops):
        valid = sorted(valid_strategies(g.op(oid)).items())
        if valid and rng.random() >= replicate:
            (kind, index), reducer = rng.choice(valid)
            splits.append([(kind, index, reducer)])
        else:
            splits.append([("replicate", -1, "Sum")])
    core = _core.Plan("random", devices, [devices], tilings, splits, [0], 0, 0.0)
    cost = Plan(graph, core).evaluate()
    core = _core.Plan(f"random(seed={seed})", devices, [devices], tilings, splits, list(cost.step_bytes),
                      cost.comm_bytes, 0.0)
    return Plan(graph, core)

"""``tw.swap_plan(graph, ...)``: SwapAdvisor on a model's training graph (thesis ch. 4).

The graph becomes a ``tw.swap.Problem``: every tensor with its bytes (float32), tensors without a
producer (parameters, optimizer state, inputs, labels, constants) as "parameter"s that live on the
host between uses, the rest as "activation"s; an op that updates a tensor in place lists that tensor
as its output; the graph's results (loss, output) are kept to the end. Where the one-device program
assembles a region for an op (an op reading part of a tensor: slices, selects), the region is a
tensor of the problem too, an output of that op ("<tensor>@<op>"), so that swapped execution finds it
a place in the pool like every other buffer (``problem_buffers``). Each op's seconds come from
the time model: one step of the graph on one device of ``cluster``, simulated (``Plan.one_device(
graph).predict(cluster)``), so the search prices ops exactly as every other prediction does.

``accumulate_in_place=True`` sums gradients in place, as MXNet's backward cells do (kAddTo): a
gradient sum ``add(total, part)`` whose ``total`` nothing else reads writes its result into
``total``'s memory (an in-place update of that activation in the problem), so a running sum
(``accumulate="running"``) holds the total and one part, not the old total, the part and a new total.
Swapped execution runs such plans (each sum computed in its total's buffer); the default stays False
(the graphs' own accumulation, as the runtime without swapping runs it).
"""

from __future__ import annotations

from .. import _core
from ..graph.graph import Graph
from ..sim.prediction import resolve_cluster
from ..swap import Problem
from .plan import Plan


def problem_buffers(graph: Graph, in_place=()) -> tuple[dict[str, int], dict[int, list[tuple[str, int]]]]:
    """How a graph's one-device program maps onto a swap problem: (problem tensor name -> buffer id of
    the program, op id -> [(region name, bytes)] for the regions its op assembles). Tile buffers are
    named after the tensors they store; regions "<tensor>@<op>" ("#2"... when an op reads one tensor
    twice in different regions). ``in_place``: (sum, total) tensor ids stored in place (no buffer of
    their own)."""
    keep = [t.id for t in graph.results().values()]
    buffers: dict[str, int] = {}
    regions: dict[int, list[tuple[str, int]]] = {}
    for buffer, name, role, _tensor, op, nbytes in _core.swap_buffers(graph._g, keep, list(in_place)):
        if role == "region":
            unique, k = name, 1
            while unique in buffers:
                k += 1
                unique = f"{name}#{k}"
            name = unique
            regions.setdefault(op, []).append((name, nbytes))
        buffers[name] = buffer
    return buffers, regions


def in_place_sums(graph: Graph) -> dict[str, str]:
    """Gradient sums that may write into their first input: {sum's output: the tensor it is stored as}.
    A backward ``add(total, part)`` of no forward op (a gradient sum) qualifies when ``total`` is
    computed, read by that add alone, not a result, and of the output's shape and dtype; chains of
    running sums fold into their first total."""
    results = {t.id for t in graph.results().values()}
    stored: dict[str, str] = {}
    for op in graph.ops:
        if op.type != "add" or op.phase != "backward" or op.forward_op is not None or len(op.inputs) != 2:
            continue
        total, out = op.inputs[0], op.output
        if (total.producer is None or total.updates is not None or len(total.consumers) != 1
                or total.id in results or total.shape != out.shape or total.dtype != out.dtype):
            continue
        stored[out.name] = stored.get(total.name, total.name)
    return stored


def swap_problem(graph: Graph, cluster="swapadvisor", device_memory: int | None = None,
                 accumulate_in_place: bool = False) -> Problem:
    """The swap problem of one training step of ``graph`` on one device of ``cluster`` (a preset name
    or ``tw.Cluster``; default SwapAdvisor's V100 with its 12/20 GB/s host link) with
    ``device_memory`` bytes (default: the cluster device's memory). ``accumulate_in_place``: gradient
    sums write into their running total (``in_place_sums``; the swapped runtime computes them there)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"swap_problem takes a tw.Graph, not {type(graph).__name__}")
    c = resolve_cluster(cluster, 1)
    if c.host is None:
        raise ValueError(f"cluster '{c.name}' has no host link: swapping needs one (cluster.host = tw.Link(...))")
    seconds = Plan.one_device(graph).predict(c).op_seconds
    tensors: dict[str, tuple[int, str]] = {}
    if not isinstance(accumulate_in_place, bool):
        raise TypeError(f"accumulate_in_place must be a bool, not {type(accumulate_in_place).__name__}")
    summed = in_place_sums(graph) if accumulate_in_place else {}
    stored = {}  # tensor name -> the name it is stored as (an in-place update: the tensor it updates)
    for t in graph.tensors:
        if t.updates is not None or t.name in summed:
            stored[t.name] = t.updates.name if t.updates is not None else summed[t.name]
            continue
        stored[t.name] = t.name
        nbytes = max(1, t.bytes)  # its dtype's bytes (int64 ids: 8 per element)
        tensors[t.name] = (nbytes, "parameter" if t.producer is None else "activation")
    _, regions = problem_buffers(graph)
    ops = []
    for op in graph.ops:
        inputs = list(dict.fromkeys(stored[t.name] for t in op.inputs))
        outputs = [stored[op.output.name]]
        for name, nbytes in regions.get(op.id, []):
            tensors[name] = (nbytes, "activation")
            outputs.append(name)
        ops.append((op.name, inputs, outputs, float(seconds.get(op.name, 0.0))))
    live_out = list(dict.fromkeys(stored[t.name] for t in graph.results().values()
                                  if t.producer is not None and t.updates is None))
    capacity = c.device.memory if device_memory is None else device_memory
    if not capacity:
        raise ValueError(f"cluster '{c.name}' has unlimited device memory: give device_memory=bytes")
    host = c.host
    one_way = host.bandwidth_at(2**30)
    both = host.duplex_bandwidth or (2 * one_way if host.duplex else one_way)
    # The problem has one figure per direction (at 1 GiB); a profile faster for small copies (a cache)
    # may give both directions more than twice that: clamp to what the problem allows.
    both = min(max(both, one_way), 2 * one_way)
    return Problem(tensors, ops, capacity=int(capacity), host_link=(one_way, both), live_out=live_out)


def swap_plan(graph: Graph, cluster="swapadvisor", device_memory: int | None = None, *,
              time_limit: float | None = 60.0, seed: int = 0, progress=False, **search):
    """SwapAdvisor's genetic search for ``graph`` on one device of ``cluster`` with ``device_memory``
    bytes: a ``tw.swap.SearchResult`` (``.plan``: schedule, pool, swaps, ``timeline()``;
    ``.fraction_of_ideal``, ``.history``). ``search``: more options of ``tw.swap.Problem.search``.
    Raises ``tw.swap.InfeasibleError`` (with ``.least_memory``) when nothing fits."""
    problem = swap_problem(graph, cluster, device_memory)
    return problem.search(seed=seed, time_limit=time_limit, progress=progress, **search)

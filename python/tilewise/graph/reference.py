"""Run a graph on NumPy arrays with the C++ reference interpreter: ``tw.run_reference(graph, feeds)``.

The oracle for everything downstream (partitioned and swapped execution must produce the same
numbers): every op runs its TDL description in float64, one op at a time, in id order (ops are
added in dependency order). Slow by design; use small shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from .._core import GraphError, ShapeError, TDLError
from .graph import Graph, GTensor


def run_reference(graph: Graph, feeds: Mapping, outputs: Iterable[str] | None = None,
                  threads: int = 0) -> dict[str, np.ndarray]:
    """Execute ``graph``; returns {tensor name: value (float64)} for every tensor, or only ``outputs``.

    ``feeds`` maps the name (or GTensor) of every tensor without a producer (inputs, labels,
    parameters, optimizer state) to an array of its shape. Updated parameters and optimizer
    state come back under the names of the update ops' outputs; the fed values are unchanged.
    ``outputs`` limits the result, the work and the feeds needed to what those tensors depend on.
    """
    ops = graph.ops
    if outputs is None:
        todo, leaves = list(range(len(ops))), [t for t in graph.tensors if t.producer is None]
    else:
        outputs = [o.name if isinstance(o, GTensor) else o for o in outputs]
        todo, leaves = _needed(graph, _ids(graph, outputs))
    values = _check_feeds(graph, feeds, leaves)
    for oid in todo:
        node = graph._g.op(oid)
        out = graph._g.tensor(node.output)
        try:
            args = [values[graph._g.tensor(t).name] for t in node.inputs]
            values[out.name] = ops[oid].op.evaluate(*args, out=tuple(out.shape), threads=threads, **ops[oid].attrs)
        except (ShapeError, TDLError) as e:
            raise type(e)(f"while running op '{node.name}' ({node.type}): {e}") from e
    if outputs is None:
        return values
    return {n: values[n] for n in outputs}


def _check_feeds(graph: Graph, feeds: Mapping, leaves: list[GTensor]) -> dict[str, np.ndarray]:
    named = {}
    for k, v in feeds.items():
        named[k.name if isinstance(k, GTensor) else k] = v
    unknown = sorted(n for n in named if graph._g.find_tensor(n) < 0)
    if unknown:
        raise GraphError(f"feeds name tensors that are not in the graph: {', '.join(unknown)}")
    computed = sorted(n for n in named if graph.tensor(n).producer is not None)
    if computed:
        raise GraphError(f"feeds name tensors that ops compute: {', '.join(computed)} (feed only tensors without "
                         "a producer: inputs, labels, parameters, optimizer state)")
    missing = [t.name for t in leaves if t.name not in named]
    if missing:
        raise GraphError(f"missing feeds for {', '.join(missing)}: every tensor without a producer (input, label, "
                         "parameter, optimizer state) needs a value")
    values = {}
    for t in leaves:
        a = np.array(named[t.name], dtype=np.float64, order="C")  # a copy: the caller's arrays stay as they are
        if a.shape != t.shape:
            raise ShapeError(f"feed '{t.name}' has shape {a.shape}, but the tensor has shape {t.shape}")
        values[t.name] = a
    return values


def _ids(graph: Graph, names: list[str]) -> list[int]:
    unknown = [n for n in names if graph._g.find_tensor(n) < 0]
    if unknown:
        raise GraphError(f"outputs name tensors that are not in the graph: {', '.join(unknown)}")
    return [graph._g.find_tensor(n) for n in names]


def _needed(graph: Graph, tensor_ids: list[int]) -> tuple[list[int], list[GTensor]]:
    """The ops the given tensors depend on, in id (dependency) order, and the producer-less tensors they read."""
    seen, leaves, stack = set(), set(), list(tensor_ids)
    while stack:
        tid = stack.pop()
        p = graph._g.tensor(tid).producer
        if p < 0:
            leaves.add(tid)
        elif p not in seen:
            seen.add(p)
            stack.extend(graph._g.op(p).inputs)
    return sorted(seen), [GTensor(graph, t) for t in sorted(leaves)]

"""Example inputs for a graph: what a step needs fed, with values its ops accept.

Ids read by an embedding get integers inside the table (an id outside it is an error, not a
clamp); labels read by a cross-entropy get one-hot rows; dropout masks (names ending in "mask")
keep 90 % scaled by 1/0.9; everything else standard normal. Used by
the CLI's ``run``, calibration and benchmarks, so that no caller invents ids that a lookup refuses.
"""

from __future__ import annotations

import numpy as np

from .graph import Graph, GTensor

_FED = ("input", "label", "constant")


def _id_limit(t: GTensor) -> int | None:
    """Rows of the smallest table an embedding reading ``t`` as its ids looks up; None if none does."""
    limits = [op.inputs[0].shape[0] for op in t.consumers
              if op.op.kernel == "embedding" and op.inputs and op.inputs[0].id != t.id]
    return min(limits) if limits else None


def _one_hot_label(t: GTensor) -> bool:
    return t.role == "label" and any(op.op.kernel in ("cross_entropy", "cross_entropy_backward") for op in t.consumers)


def example_feeds(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """An array for every tensor a step of ``graph`` is fed (inputs, labels, constants), in its dtype:
    ids inside their tables (int64 or float32 as the graph declares), 0/1 masks, normal values."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in graph.tensors:
        if t.producer is not None or t.role not in _FED:
            continue
        shape = tuple(t.shape)
        limit = _id_limit(t)
        if limit is not None:
            ids = rng.integers(0, max(limit, 1), shape)
            out[t.name] = ids.astype(np.float32 if t.dtype.startswith("float") else t.dtype)
        elif _one_hot_label(t) and shape:
            classes = shape[-1]
            out[t.name] = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, shape[:-1])]
        elif t.dtype == "bool":
            out[t.name] = rng.uniform(size=shape) < 0.1  # a mask marks few places (padding, fills)
        elif t.dtype in ("int64", "int32"):
            out[t.name] = rng.integers(0, 2, shape).astype(t.dtype)
        elif t.name.endswith("mask"):
            out[t.name] = ((rng.uniform(size=shape) < 0.9) / 0.9).astype(np.float32)
        else:
            out[t.name] = rng.standard_normal(shape).astype(np.float32)
    return out

"""Tensor reuse (TensorOpt §4.2): keep a forward consumer's re-scheduled copy of a tensor for backward.

A tensor that both its producer's backward (or another reader's) and a consumer's backward read is
kept for the backward pass in one layout. When the consumer computes in another layout it fetches
the tensor in forward and fetches it again in backward (keep-before), or the tensor is kept in the
consumer's layout and the other reader fetches (keep-after: a choice of the tensor's tiling). Keep-
both keeps the two copies: an identity op ``copy`` writes ``x@consumer``, which the consumer and its
backward ops read instead of ``x``. The copy is a tensor of its own, tiled as the consumer wants it.

    pairs = reuse_candidates(g)               # [(tensor id, consumer op id)]
    g2 = with_copies(g, pairs)                # g replayed with a copy before each consumer

``tw.frontier(..., tensor_reuse=True)`` searches with a copy for every candidate and prices a copy
tiled like its source as no copy at all (no time, no memory); a point's plan is on the graph with only
the copies it keeps (``with_copies(g, kept)``, ``derived_from`` the original: ``tw.compile(g, plan)``
runs it).
"""

from __future__ import annotations

import json

from .graph import Graph

COPY_SUFFIX = "keep"


def copy_name(tensor_name: str, consumer_name: str) -> str:
    """The name of the copy of ``tensor_name`` that ``consumer_name`` and its backward ops read."""
    return f"{tensor_name}@{consumer_name}"


def _readers_of(g, tid: int, forward_op: int) -> list[int]:
    """Backward ops of ``forward_op`` that read tensor ``tid``."""
    return [o for o in g.tensor(tid).consumers
            if g.op(o).phase == "backward" and g.op(o).forward_op == forward_op]


def reuse_candidates(graph: Graph) -> list[tuple[int, int]]:
    """(tensor, consumer) pairs where keep-both is a choice of its own: a float32 forward activation,
    input or label read in backward by the backward ops of its forward consumer ``c`` and by another reader
    that stays (the producer's backward, another consumer's backward). Per tensor, when no reader
    outside the consumers' backward ops stays, the first such consumer keeps reading the tensor: the
    tensor stays kept for backward either way, so its memory is counted as before."""
    g = graph._g
    out: list[tuple[int, int]] = []
    for tid in range(g.num_tensors):
        node = g.tensor(tid)
        if node.updates >= 0 or node.dtype != "float32":
            continue  # ops compute float32: integer ids and boolean masks are inputs only
        if node.producer >= 0:
            if g.op(node.producer).phase != "forward":
                continue
        elif node.role not in ("input", "label"):
            continue  # parameters, state and constants: resident in their own layout (not searched here)
        forward = []
        for c in dict.fromkeys(node.consumers):
            if g.op(c).phase == "forward" and _readers_of(g, tid, c):
                forward.append(c)
        if not forward:
            continue
        covered = {o for c in forward for o in _readers_of(g, tid, c)}
        others = [o for o in node.consumers if g.op(o).phase == "backward" and o not in covered]
        resident = node.producer < 0  # inputs and labels stay for the whole step
        chosen = forward if (others or resident) else forward[1:]
        out.extend((tid, c) for c in chosen)
    return out


def with_copies(graph: Graph, pairs) -> Graph:
    """``graph`` replayed with, for each (tensor, consumer) of ``pairs``, an identity op writing the copy
    ``tensor@consumer`` just before the consumer, read by the consumer and its backward ops instead
    of the tensor. Names, roles, phases, gradient and update marks and named outputs carry over; ids
    shift past each copy. The result's ``derived_from`` is ``graph`` (its own ``derived_from`` if it
    has one), ``copies`` the copy op names."""
    from ..tdl.registry import lookup

    g = graph._g
    pairs = [(int(t), int(c)) for t, c in pairs]
    before: dict[int, list[int]] = {}
    for t, c in pairs:
        if not 0 <= t < g.num_tensors or not 0 <= c < g.num_ops:
            raise ValueError(f"reuse pair ({t}, {c}) is not a (tensor id, op id) of graph '{graph.name}'")
        if c not in g.tensor(t).consumers or g.op(c).phase != "forward":
            raise ValueError(f"op '{g.op(c).name}' is not a forward consumer of tensor '{g.tensor(t).name}'")
        if g.tensor(t).dtype != "float32":
            raise ValueError(f"tensor '{g.tensor(t).name}' is {g.tensor(t).dtype}: ops compute float32, so only "
                             "float32 tensors can be copied")
        if t in before.get(c, []):
            raise ValueError(f"reuse pair ('{g.tensor(t).name}', '{g.op(c).name}') given twice")
        before.setdefault(c, []).append(t)
    identity = lookup("identity")
    _, attrs = identity._split({})

    new = Graph(graph.name)
    tmap: dict[int, int] = {}
    omap: dict[int, int] = {}
    redirect: dict[tuple[int, int], int] = {}  # (forward op, tensor) -> the copy its readers use
    copies: list[str] = []
    for tid in range(g.num_tensors):
        node = g.tensor(tid)
        if node.producer < 0:
            tmap[tid] = new._g.add_tensor(node.name, list(node.shape), node.role, node.dtype)
            continue
        oid = node.producer
        op = g.op(oid)
        for x in before.get(oid, []):
            src = g.tensor(x)
            name = copy_name(src.name, op.name)
            # Copies of different time steps share a class (make_problem ties ops by unroll key) only
            # where their sources do: the key names the source's producer's key (or the source).
            origin = g.op(src.producer).unroll_key if src.producer >= 0 else ""
            key = f"{op.unroll_key}/{COPY_SUFFIX}:{op.inputs.index(x)}:{origin or src.name}" if op.unroll_key else ""
            cid = new._g.add_op("identity", name, json.dumps(attrs), [tmap[x]],
                                identity._desc_for([tuple(src.shape)], attrs), name, "activation", list(src.shape),
                                "forward", -1, key, src.dtype)
            new._op_objects[cid] = identity
            redirect[(oid, x)] = new._g.op(cid).output
            copies.append(name)
        owner = oid if op.phase == "forward" else op.forward_op
        inputs = [redirect.get((owner, x), tmap[x]) for x in op.inputs]
        fwd = omap[op.forward_op] if op.forward_op >= 0 else -1
        nid = new._g.add_op(op.type, op.name, op.attrs_json, inputs, op.desc, node.name, node.role,
                            list(node.shape), op.phase, fwd, op.unroll_key, node.dtype)
        omap[oid] = nid
        if oid in graph._op_objects:
            new._op_objects[nid] = graph._op_objects[oid]
        tmap[tid] = new._g.op(nid).output
    for tid in range(g.num_tensors):
        node = g.tensor(tid)
        if node.grad_of >= 0:
            new._g.set_grad_of(tmap[tid], tmap[node.grad_of])
        if node.updates >= 0:
            new._g.set_updates(tmap[tid], tmap[node.updates])
    new.outputs = {k: (None if t is None else new.tensor(t.name)) for k, t in graph.outputs.items()}
    new._counts = dict(graph._counts)
    new.derived_from = graph.derived_from or graph
    new.copies = copies
    return new

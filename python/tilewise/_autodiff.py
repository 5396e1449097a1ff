"""Reverse-mode automatic differentiation of a graph: ``tw.grad(graph, loss)`` appends the backward ops.

Walks the forward ops that lie between the differentiated tensors and the loss in reverse
order and calls each op's gradient rule (``@op.def_grad``, beside the op in tdl_ops). Every
backward op records the forward op it differentiates (``GOp.forward_op``) and is named under
``grad/<forward op>``, so coarsening can group an op with its gradient (Tofu §5.1). Gradients
reaching a tensor along several paths are summed with ``add`` ops as soon as they exist (as
PyTorch accumulates .grad: one running sum alive, not every partial), backward ops of no forward
op named ``grad/<tensor>.sum``. Each rule runs on a scratch graph (see _replay.py) and only the
gradients of inputs that lead to a differentiated tensor are copied into the graph: no data
gradient for the first layer, none for labels.
"""

from __future__ import annotations

import contextlib
from typing import Iterable

from ._core import GraphError, ShapeError, TDLError
from ._graph import GOp, Graph, GTensor
from ._replay import Scratch


def grad(graph: Graph, loss: GTensor, wrt: Iterable[GTensor] | None = None) -> dict[str, GTensor]:
    """Append the backward pass of ``loss`` (a 0-d tensor) to ``graph``; returns {tensor name: gradient}.

    ``wrt``: the tensors to differentiate (default: every parameter the loss depends on). Each
    final gradient is marked with ``graph.mark_gradient(grad, of=tensor)``; so is the gradient of
    every intermediate tensor, unless the same tensor is already the gradient of a later one (an
    ``add`` passes its gradient through unchanged). A differentiated tensor that receives no
    gradient (only piecewise-constant ops lie between it and the loss) gets zeros.

    Raises GraphError for a non-scalar loss, a ``wrt`` tensor the loss does not depend on, and
    an op on the way without a gradient rule.
    """
    import tdl_ops  # the op library imports tilewise: import it on first use

    loss_op = _check_loss(graph, loss)
    forward = [op for op in graph.ops[: loss_op.id + 1] if op.phase == "forward"]
    reaches = _reaching(forward, loss)
    targets = _targets(graph, wrt, reaches, loss)
    origin = _origins(forward, targets)
    active = [op for op in forward if op.output.id in origin and op.output.id in reaches]

    with graph.phase("backward", forward_op=loss_op), graph.scope(f"grad/{loss_op.name}"):
        seed = tdl_ops.fill_like(loss, value=1.0, name="seed")
    total: dict[int, GTensor] = {loss.id: seed}  # running sums: each partial is added as soon as it exists

    for op in reversed(active):
        g = total.get(op.output.id)  # final: every consumer of the output came later
        if g is None:
            continue  # every path from here to the loss has a zero gradient (argmax, sign, ...)
        if g.grad_of is None:
            graph.mark_gradient(g, of=op.output)
        needed = [t.id in origin for t in op.inputs]
        if not any(needed):
            continue  # op makes a differentiated tensor from tensors that are not
        for k, (t, gt) in enumerate(zip(op.inputs, _call_rule(graph, op, g, needed, origin))):
            if gt is not None:
                with _unrolled(graph, op, f"/sum{k}"):
                    total[t.id] = _add(graph, t, total[t.id], gt) if t.id in total else gt

    result: dict[str, GTensor] = {}
    owned: set[int] = set()
    for t in targets:
        if t.id in total:
            g = _own(graph, t, total[t.id], owned)
        else:
            with graph.phase("backward"), graph.scope(f"grad/{t.name}"):
                g = tdl_ops.fill_like(t, value=0.0, name="zeros")
        graph.mark_gradient(g, of=t)
        owned.add(g.id)
        result[t.name] = g
    return result


# ----- what to differentiate -------------------------------------------------------------


def _check_loss(graph: Graph, loss) -> GOp:
    if not isinstance(loss, GTensor) or loss.graph is not graph:
        raise GraphError(f"the loss must be a tensor of this graph, got {loss!r}")
    if loss.shape != ():
        raise GraphError(f"the loss must be a 0-d tensor (a scalar); '{loss.name}' has shape {loss.shape}")
    op = loss.producer
    if op is None or op.phase != "forward":
        raise GraphError(f"the loss '{loss.name}' must be computed by a forward op")
    return op


def _reaching(forward: list[GOp], loss: GTensor) -> set[int]:
    """Ids of the tensors the loss depends on (itself included)."""
    reach = {loss.id}
    for op in reversed(forward):
        if op.output.id in reach:
            reach.update(t.id for t in op.inputs)
    return reach


def _targets(graph: Graph, wrt, reaches: set[int], loss: GTensor) -> list[GTensor]:
    if wrt is None:
        targets = [t for t in graph.tensors_with_role("parameter")
                   if t.producer is None and t.updates is None and t.id in reaches]
        if not targets:
            raise GraphError(f"the loss '{loss.name}' depends on no parameter: nothing to differentiate")
        return targets
    targets = list(wrt)
    for t in targets:
        if not isinstance(t, GTensor) or t.graph is not graph:
            raise GraphError(f"wrt must hold tensors of this graph, got {t!r}")
        if t.id not in reaches:
            raise GraphError(f"the loss '{loss.name}' does not depend on '{t.name}'")
    return targets


def _origins(forward: list[GOp], targets: list[GTensor]) -> dict[int, str]:
    """For every tensor that depends on a target: the name of one such target (for error messages)."""
    origin = {t.id: t.name for t in targets}
    for op in forward:
        for t in op.inputs:
            if t.id in origin:
                origin.setdefault(op.output.id, origin[t.id])
                break
    return origin


# ----- building the backward ops ---------------------------------------------------------


def _call_rule(graph: Graph, op: GOp, g: GTensor, needed: list[bool], origin: dict[int, str]) -> list:
    """The gradients of op's inputs (None where not needed or zero), added to the graph."""
    applied = op.op
    rule = applied.grad_fn
    inputs = op.inputs
    if rule is None:
        wanted = next(origin[t.id] for t, n in zip(inputs, needed) if n)
        raise GraphError(
            f"op '{op.name}' of type '{op.type}' has no gradient rule, and the gradient of '{wanted}' flows "
            f"through it: declare one with @{op.type}.def_grad (see tw.Op.def_grad)"
        )
    s = Scratch(graph)
    try:
        res = rule(s.mirror(g), *[s.mirror(t) for t in inputs], out=s.mirror(op.output), **op.attrs)
    except (GraphError, ShapeError, TDLError) as e:
        raise type(e)(f"in the gradient rule of op '{op.name}' ({op.type}): {e}") from e
    res = _check_rule_result(op, applied.inputs, s, res)
    with graph.phase("backward", forward_op=op), graph.scope(f"grad/{op.name}"), _unrolled(graph, op):
        return s.copy([r if n else None for r, n in zip(res, needed)])


def _check_rule_result(op: GOp, names: tuple, s: Scratch, res) -> list:
    inputs = op.inputs
    if isinstance(res, GTensor) and len(inputs) == 1:
        res = (res,)
    if not isinstance(res, (tuple, list)) or len(res) != len(inputs):
        raise GraphError(f"the gradient rule of '{op.type}' must return a tuple of {len(inputs)} gradients "
                         f"(one per input: {', '.join(names)}; None for none), got {res!r}")
    for name, t, r in zip(names, inputs, res):
        if r is None:
            continue
        if not s.owns(r):
            raise GraphError(f"the gradient rule of '{op.type}' returned {r!r} for input '{name}'; "
                             "gradients are built by calling ops on the tensors the rule receives")
        if r.shape != t.shape:
            raise GraphError(f"the gradient rule of '{op.type}' returned a gradient of shape {r.shape} for input "
                             f"'{name}' of shape {t.shape} (op '{op.name}')")
    return list(res)


@contextlib.contextmanager
def _unrolled(graph: Graph, op: GOp, suffix: str = ""):
    """Backward ops of the k-th op of every time step share unroll keys, as the forward ops do
    (``grad/<forward key>/<i>``; the sums of its input gradients ``grad/<forward key>/sum<k>/0``)."""
    if not op.unroll_key:
        yield
        return
    with graph.unroll(f"grad/{op.unroll_key}{suffix}") as u, u.step(0):
        yield


def _add(graph: Graph, t: GTensor, total: GTensor, part: GTensor) -> GTensor:
    """total + part, a partial sum of the gradient of ``t`` (a backward op of no forward op)."""
    import tdl_ops

    with graph.phase("backward"), graph.scope(f"grad/{t.name}"):
        s = tdl_ops.add(total, part, name="sum")
    graph.mark_gradient(s, of=t)
    return s


def _own(graph: Graph, t: GTensor, g: GTensor, owned: set[int]) -> GTensor:
    """``g``, or a copy when it cannot be marked as t's gradient: it already is another target's
    (add(w1, w2) passes one tensor to both) or it is not a backward tensor at all."""
    producer = g.producer
    if g.id not in owned and producer is not None and producer.phase == "backward":
        return g
    import tdl_ops

    with graph.phase("backward"), graph.scope(f"grad/{t.name}"):
        return tdl_ops.identity(g, name="copy")

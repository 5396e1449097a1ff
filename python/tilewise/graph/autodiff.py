"""Reverse-mode automatic differentiation of a graph: ``tw.grad(graph, loss)`` appends the backward ops.

Walks the forward ops that lie between the differentiated tensors and the loss in reverse
order and calls each op's gradient rule (``@op.def_grad``, beside the op in tdl_ops). Every
backward op records the forward op it differentiates (``GOp.forward_op``) and is named under
``grad/<forward op>``, so coarsening can group an op with its gradient (Tofu §5.1). Each rule runs
on a scratch graph (see _replay.py) and only the gradients of inputs that lead to a differentiated
tensor are copied into the graph: no data gradient for the first layer, none for labels.

A tensor's gradient is the sum of the parts its consumers' rules return. The sweep knows how many
consumers each tensor has, so once the last has run, k >= 2 parts are summed by one ``add_<k>``
op (``grad/<tensor>.sum``: backward, of no forward op), not a chain of k - 1 ``add``: one op for a
planner to place and a runtime to run, and a sum that is not serialised. The price is that all
parts are alive until the sum runs (a running sum keeps one); a runtime may still accumulate an
``add_<k>`` into its output as the parts arrive. ``accumulate="running"`` builds that instead: each
part is added to a running total as soon as it exists (k - 1 ``add``s, ``grad/<tensor>.sum<i>``),
so one part is alive at a time: PyTorch's autograd and MXNet beyond 8 parts do this, and swapping
needs it (an RNN's weight gradient summed over 20 steps at once holds 20 copies of the weight).
The default, "batched", is "sum" but for parts that are all weight-gradient products or all slices of
one axis: they become one batched op (batched_parts.py), an RNN's weight gradient one GEMM over every
time step. The model zoo keeps "sum": its graphs are the papers' (MXNet sums the steps' parts).

A gradient tensor records the one tensor it is the gradient of (``grad_of``). A rule may return
one tensor for several inputs (``add`` returns its output's gradient for both): one input keeps
it, each other one whose whole gradient it is gets an ``identity`` copy (a backward op of that
forward op, ``grad/<op>.copy_<input>``). The one that keeps it is the input coarsening merges an
element-wise op with (its main input: produced last), so every other one's gradient lies in that
input's own group and backward dataflow between groups mirrors forward edges.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator

from .._core import GraphError, ShapeError, TDLError
from ..tdl.registry import nary, ops
from .batched_parts import Deferred, batch, defer
from .graph import GOp, Graph, GTensor
from .replay import Scratch

#: How gradient parts are summed: "batched" (the default: parts of a kind with a batched form as one
#: op, batched_parts.py; the others as "sum"), "sum" (one ``add_<k>`` once every part exists) or
#: "running" (each part added as it arrives).
ACCUMULATE_MODES = ("batched", "sum", "running")
_accumulate: contextvars.ContextVar[str | None] = contextvars.ContextVar("tilewise_accumulate", default=None)


def accumulation_mode() -> str | None:
    """The mode of the enclosing ``gradient_accumulation`` block; None outside any."""
    return _accumulate.get()


@contextlib.contextmanager
def gradient_accumulation(mode: str) -> Iterator[None]:
    """Within the block, ``grad`` (and so ``tw.trace`` and the zoo) sums gradient parts as ``mode``
    says unless told otherwise: ``with tw.graph.gradient_accumulation("running"): g = tw.models.get(...)``."""
    token = _accumulate.set(_check_mode(mode))
    try:
        yield
    finally:
        _accumulate.reset(token)


def _check_mode(mode) -> str:
    if mode not in ACCUMULATE_MODES:
        raise GraphError(f"accumulate must be one of {', '.join(map(repr, ACCUMULATE_MODES))}, got {mode!r}")
    return mode


def grad(graph: Graph, loss: GTensor, wrt: Iterable[GTensor] | None = None, *,
         accumulate: str | None = None) -> dict[str, GTensor]:
    """Append the backward pass of ``loss`` (a 0-d tensor) to ``graph``; returns {tensor name: gradient}.

    ``wrt``: the tensors to differentiate (default: every parameter the loss depends on). Each
    final gradient is marked with ``graph.mark_gradient(grad, of=tensor)``; so is the gradient of
    every intermediate tensor, unless the same tensor is already the gradient of a later one (an
    ``add`` passes its gradient through unchanged to its main input; the other input gets a copy).
    A differentiated tensor that receives no gradient (only piecewise-constant ops lie between it
    and the loss) gets zeros.

    ``accumulate``: "batched" (as "sum", but parts that batch are one op: batched_parts.py), "sum"
    (one ``add_<k>`` per tensor with k parts) or "running" (each part added as it arrives); None: the
    mode of the enclosing ``gradient_accumulation`` block, else "batched".

    Raises GraphError for a non-scalar loss, a ``wrt`` tensor the loss does not depend on, and
    an op on the way without a gradient rule.
    """
    mode = (_accumulate.get() or "batched") if accumulate is None else _check_mode(accumulate)
    loss_op = _check_loss(graph, loss)
    forward = [op for op in graph.ops[: loss_op.id + 1] if op.phase == "forward"]
    reaches = _reaching(forward, loss)
    targets = _targets(graph, wrt, reaches, loss)
    origin = _origins(forward, targets)
    active = [op for op in forward if op.output.id in origin and op.output.id in reaches]

    with graph.phase("backward", forward_op=loss_op), graph.scope(f"grad/{loss_op.name}"):
        seed = ops.fill_like(loss, value=1.0, name="seed")
    graph.mark_gradient(seed, of=loss)
    total: dict[int, GTensor] = {loss.id: seed}  # tensor id -> its whole gradient, once every part exists
    acc = _Parts(graph, active, origin, mode)

    for op in reversed(active):
        g = total.get(op.output.id)  # final: every consumer of the output came later
        needed = [t.id in origin for t in op.inputs]
        grads = [None] * len(needed)
        if g is not None and any(needed):  # g None: every path to the loss has a zero gradient (argmax, sign)
            grads = _call_rule(graph, op, g, needed, origin, [acc.batchable(t) for t in op.inputs])
        total.update(acc.add(op, needed, grads))

    result: dict[str, GTensor] = {}
    owned: set[int] = set()
    for t in targets:
        if t.id in total:
            g = _own(graph, t, total[t.id], owned)
        else:
            with graph.phase("backward"), graph.scope(f"grad/{t.name}"):
                g = ops.fill_like(t, value=0.0, name="zeros")
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


def _call_rule(graph: Graph, op: GOp, g: GTensor, needed: list[bool], origin: dict[int, str],
               batchable: list[bool]) -> list:
    """The gradients of op's inputs (None where not needed or zero), added to the graph; where
    ``batchable`` (the input's gradient has several parts), a result of a kind with a batched sum is
    left out of the graph as a ``Deferred`` (batched_parts.py)."""
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
    wanted = [r if n else None for r, n in zip(res, needed)]
    deferred = [defer(s, wanted, k, op) if batchable[k] else None for k in range(len(wanted))]
    with graph.phase("backward", forward_op=op), graph.scope(f"grad/{op.name}"), _unrolled(graph, op):
        copied = s.copy([None if d is not None else r for r, d in zip(wanted, deferred)])
    return [c if d is None else d for c, d in zip(copied, deferred)]


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


def _materialize(graph: Graph, d: Deferred) -> GTensor:
    """A deferred result as the one op the rule built, named and keyed as its copy would have been."""
    op = d.op
    with graph.phase("backward", forward_op=op), graph.scope(f"grad/{op.name}"), _unrolled(graph, op):
        return d.scratch.copy([d.t])[0]


class _Parts:
    """The gradient parts of each tensor, summed into its gradient once its last consumer has run."""

    def __init__(self, graph: Graph, active: list[GOp], origin: dict[int, str], mode: str = "batched"):
        self.graph = graph
        self.running = mode == "running"
        self.batched = mode == "batched"
        self.sums: dict[int, int] = {}  # tensor id -> running adds so far
        self.pending: dict[int, int] = {}  # tensor id -> input slots of active ops not yet run
        for op in active:
            for t in op.inputs:
                if t.id in origin:
                    self.pending[t.id] = self.pending.get(t.id, 0) + 1
        self.slots = dict(self.pending)  # tensor id -> input slots of active ops reading it
        self.parts: dict[int, list[tuple[GTensor, GOp, int]]] = {}  # tensor id -> (part, op, input slot)
        self.kept: set[tuple[int, int]] = set()  # (part id, op id): an input of op has the part as its gradient

    def batchable(self, t: GTensor) -> bool:
        """Whether t's gradient parts may be batched (several parts, summed at once)."""
        return self.batched and self.slots.get(t.id, 0) > 1

    def add(self, op: GOp, needed: list[bool], grads: list) -> dict[int, GTensor]:
        """Record the parts op's rule returned; returns {tensor id: gradient} for the inputs it completes."""
        inputs = op.inputs
        for k, (t, part) in enumerate(zip(inputs, grads)):
            if needed[k]:
                self.pending[t.id] -= 1
                if part is not None:
                    self.parts.setdefault(t.id, []).append((part, op, k))
                    if self.running and len(self.parts[t.id]) == 2:
                        self.parts[t.id] = [self._running_sum(t, op, k)]
        complete = [k for k, t in enumerate(inputs) if needed[k] and not self.pending[t.id] and t.id in self.parts]
        if len(complete) > 1:  # the first to take a part shared by several keeps it
            complete.sort(key=_main_first(inputs).index)
        done = {}
        for k in complete:
            t = inputs[k]
            if t.id in self.parts:  # not yet done (an input read twice)
                done[t.id] = self._total(t, self.parts.pop(t.id))
        return done

    def _running_sum(self, t: GTensor, op: GOp, k: int) -> tuple[GTensor, None, int]:
        """The running total of t's gradient plus the part op's rule just gave (a fresh tensor: no op
        shares it, so it needs no copy)."""
        graph = self.graph
        (total, _, _), (part, _, _) = self.parts[t.id]
        i = self.sums.get(t.id, 0) + 1
        self.sums[t.id] = i
        with graph.phase("backward"), graph.scope(f"grad/{t.name}"), _unrolled(graph, op, f"/sum{k}"):
            s = ops.add(total, part, name=f"sum{i}")
        return (s, None, k)

    def _total(self, t: GTensor, parts: list) -> GTensor:
        graph = self.graph
        part, op, k = parts[-1]
        deferred = [p for p, _, _ in parts if isinstance(p, Deferred)]
        batched = None
        if len(parts) > 1 and len(deferred) == len(parts):
            with graph.phase("backward"), graph.scope(f"grad/{t.name}"), _unrolled(graph, op, f"/sum{k}"):
                batched = batch(deferred)
        if batched is not None:
            graph.mark_gradient(batched, of=t)
            return batched
        parts = [(_materialize(graph, p) if isinstance(p, Deferred) else p, o, j) for p, o, j in parts]
        part = parts[-1][0]
        if len(parts) > 1:
            with graph.phase("backward"), graph.scope(f"grad/{t.name}"), _unrolled(graph, op, f"/sum{k}"):
                s = nary("add", len(parts))(*[p for p, _, _ in parts], name="sum")
            graph.mark_gradient(s, of=t)
            return s
        if op is None:  # a running sum
            graph.mark_gradient(part, of=t)
            return part
        if (part.id, op.id) in self.kept:  # the rule gave it to another input of op, which keeps it
            with graph.phase("backward", forward_op=op), graph.scope(f"grad/{op.name}"), \
                    _unrolled(graph, op, f"/copy{k}"):
                part = ops.identity(part, name=f"copy_{op.op.inputs[k]}")
        else:
            self.kept.add((part.id, op.id))
        if part.grad_of is None:  # else the gradient of op's output, passed through (add, bias_add)
            graph.mark_gradient(part, of=t)
        return part


def _main_first(inputs: list[GTensor]) -> list[int]:
    """Input slots, the one coarsening takes as an element-wise op's main input first: produced by the
    latest op, else a non-parameter leaf, else the first (docs/ARCHITECTURE.md, Coalescing)."""
    def rank(k):
        p = inputs[k].producer
        return (0, -p.id) if p is not None else (1 if inputs[k].role != "parameter" else 2, 0)
    return sorted(range(len(inputs)), key=lambda k: (rank(k), k))


def _own(graph: Graph, t: GTensor, g: GTensor, owned: set[int]) -> GTensor:
    """``g``, or a copy when it cannot be marked as t's gradient: it already is another target's
    (wrt=[y, a] with y = a + b: add passes y's gradient to a) or it is not a backward tensor at all."""
    producer = g.producer
    if g.id not in owned and producer is not None and producer.phase == "backward":
        return g
    with graph.phase("backward"), graph.scope(f"grad/{t.name}"):
        return ops.identity(g, name="copy")

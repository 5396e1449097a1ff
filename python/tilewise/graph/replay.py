"""Build a piece of graph on a scratch graph, then copy into the real graph only the ops needed.

A gradient rule returns a gradient for every input of an op, but autodiff wants only those of
inputs that lead to a parameter: the data gradient of a first layer is wasted work that a
planner would then partition and a runtime would run. Running the rule on a scratch graph that
mirrors the tensors it reads, and copying back only the ops the wanted results depend on, keeps
rules simple and the training graph free of dead ops. ``tw.trace`` uses the same mechanism to
give the loss its name.

    s = Scratch(graph)
    dx, dw = rule(s.mirror(g), s.mirror(x), s.mirror(w))
    [dw] = s.copy([dw])                  # adds only dw's ops to graph, in the caller's phase/scope
"""

from __future__ import annotations

from collections.abc import Sequence

from .._core import GraphError
from .graph import GOp, Graph, GTensor


class _ScratchGraph(Graph):
    """A Graph that remembers, per op, the Op object applied and the name asked for; tensors of the
    real graph used directly (a loss closing over a weight) stand for themselves through mirrors."""

    def __init__(self, owner: Scratch):
        super().__init__("scratch")
        self.owner = owner
        self.base_names: dict[str, str] = {}
        self.op_objects: dict[int, object] = {}

    def _fresh(self, base: str) -> str:
        name = super()._fresh(base)
        self.base_names[name] = base  # replayed under the base name: the real graph makes it unique
        return name

    def apply(self, op, inputs, attrs, name=None, out=None, role=None, dtype="float32"):
        real = self.owner.graph
        inputs = [self.owner.mirror(t) if isinstance(t, GTensor) and t.graph is real else t for t in inputs]
        t = super().apply(op, inputs, attrs, name=name, out=out, role=role, dtype=dtype)
        self.op_objects[t.producer.id] = op  # ops made by with_attrs are not in the registry
        return t


class Scratch:
    """A scratch graph whose producer-less tensors stand for tensors of a real graph."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.scratch = _ScratchGraph(self)
        self._real: dict[int, GTensor] = {}  # scratch tensor id -> real tensor
        self._mirror: dict[int, GTensor] = {}  # real tensor id -> scratch tensor

    def mirror(self, t: GTensor) -> GTensor:
        """The scratch tensor standing for the real tensor ``t`` (same name, shape, role, dtype)."""
        m = self._mirror.get(t.id)
        if m is None:
            m = self.scratch._tensor(t.name, t.shape, t.role, t.dtype)
            self._mirror[t.id] = m
            self._real[m.id] = t
        return m

    def owns(self, t) -> bool:
        return isinstance(t, GTensor) and t.graph is self.scratch

    def direct_operands(self, t: GTensor) -> list[GTensor] | None:
        """The real tensors the op producing scratch tensor ``t`` reads, when it reads only mirrors
        (so copying ``t`` needs that one op); None otherwise."""
        p = t.producer
        if p is None:
            return None
        real = [self._real.get(i.id) for i in p.inputs]
        return None if any(r is None for r in real) else real

    def computes(self, wanted: Sequence[GTensor | None], t: GTensor) -> bool:
        """Whether copying ``wanted`` would copy the op producing scratch tensor ``t``."""
        return t.producer is not None and t.producer.id in self._needed_ops(wanted)

    def copy(self, wanted: Sequence[GTensor | None], names: Sequence[str | None] | None = None) -> list:
        """Add to the real graph the ops the ``wanted`` scratch tensors depend on, in order.

        Returns the real tensor for each wanted one (None stays None; a mirror maps back to its
        real tensor). ``names[k]`` names the op producing ``wanted[k]``. Ops are added in the real
        graph's current phase, scope and unroll step; producer-less scratch tensors that mirror
        nothing (a parameter made by a loss function) are created in the real graph too.
        """
        names = list(names) if names is not None else [None] * len(wanted)
        final_name = {}
        for t, n in zip(wanted, names):
            if t is not None and n is not None and t.producer is not None:
                final_name[t.producer.id] = n
        real = dict(self._real)
        for oid in self._needed_ops(wanted):
            op = self.scratch.op_objects[oid]
            node = self.scratch._g.op(oid)
            out = self.scratch._g.tensor(node.output)
            inputs = [self._real_input(tid, real) for tid in node.inputs]
            base = final_name.get(oid, self.scratch.base_names.get(node.name, node.name))
            if self.graph._unroll:
                # Number ops as the scratch graph did, so that a pruned op does not shift the unroll
                # keys of the ops after it (time steps must agree op by op).
                self.graph._unroll[-1][2] = oid
            real[node.output] = self.graph.apply(op, inputs, GOp(self.scratch, oid).attrs, name=base,
                                                 out=tuple(out.shape), dtype=out.dtype)
        return [None if t is None else real[t.id] for t in wanted]

    def _needed_ops(self, wanted) -> list[int]:
        seen, stack = set(), []
        for t in wanted:
            if t is None:
                continue
            if not self.owns(t):
                raise GraphError(f"expected a tensor built from the given tensors, got {t!r}")
            stack.append(t.id)
        while stack:
            tid = stack.pop()
            p = self.scratch._g.tensor(tid).producer
            if p >= 0 and p not in seen:
                seen.add(p)
                stack.extend(self.scratch._g.op(p).inputs)
        return sorted(seen)  # scratch ids are in dependency order

    def _real_input(self, tid: int, real: dict) -> GTensor:
        t = real.get(tid)
        if t is None:  # a producer-less tensor made on the scratch graph
            node = self.scratch._g.tensor(tid)
            t = self.graph._tensor(node.name, node.shape, node.role, node.dtype)
            real[tid] = t
        return t


"""Graphs of TDL ops: build them by calling ops on graph tensors, inspect, save and load.

    g = tw.Graph()
    x = g.input("x", (64, 1024))
    w = g.parameter("fc.weight", (512, 1024))
    y = tdl_ops.matmul_nt(x, w)          # calling an op on graph tensors adds it to the graph

The C++ core (``_core.Graph``) holds tensors and ops, infers shapes from the TDL descriptions
and writes summaries, DOT and JSON; this module adds naming scopes, phases (forward, backward,
update), time-step tags for unrolled RNNs, and loading JSON back (re-tracing each op, found by
name in the op registry, ``tilewise.tdl.registry``).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
from collections.abc import Iterator, Sequence

from .. import _core
from .._core import GraphError, ShapeError
from ..tdl.registry import lookup

ROLES = ("input", "label", "parameter", "constant", "activation", "gradient", "optimizer_state")
PHASES = ("forward", "backward", "update")

_DEFAULT_ROLE = {"forward": "activation", "backward": "gradient", "update": "parameter"}


class GTensor:
    """A tensor of a graph. Call ops on it to add ops: ``tdl_ops.relu(x)``."""

    __slots__ = ("graph", "id")

    def __hash__(self):  # equal views of one tensor are one dict key
        return hash((id(self.graph), self.id))

    def __init__(self, graph: Graph, tid: int):
        self.graph = graph
        self.id = tid

    @property
    def _node(self):
        return self.graph._g.tensor(self.id)

    @property
    def name(self) -> str:
        return self._node.name

    @property
    def shape(self) -> tuple:
        return self._node.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> str:
        return self._node.dtype

    @property
    def role(self) -> str:
        return self._node.role

    @property
    def producer(self) -> GOp | None:
        p = self._node.producer
        return None if p < 0 else GOp(self.graph, p)

    @property
    def consumers(self) -> list[GOp]:
        return [GOp(self.graph, o) for o in self._node.consumers]

    @property
    def grad_of(self) -> GTensor | None:
        t = self._node.grad_of
        return None if t < 0 else GTensor(self.graph, t)

    @property
    def updates(self) -> GTensor | None:
        t = self._node.updates
        return None if t < 0 else GTensor(self.graph, t)

    @property
    def elements(self) -> int:
        return self._node.elements

    @property
    def bytes(self) -> int:
        return self._node.bytes

    def __eq__(self, other):
        return isinstance(other, GTensor) and other.graph is self.graph and other.id == self.id

    def __repr__(self):
        return f"GTensor({self.name!r}, shape={self.shape}, role={self.role})"

    # PyTorch-style arithmetic on same-shape tensors; broadcasting lives in tw.nn.functional.
    def _binary(self, other, op_name: str):
        if not isinstance(other, GTensor):
            raise GraphError(f"{op_name}: both operands must be graph tensors, got {type(other).__name__}")
        if other.shape != self.shape:
            raise ShapeError(
                f"{op_name} of '{self.name}' {self.shape} and '{other.name}' {other.shape}: shapes differ; "
                "use tw.nn.functional for broadcasting"
            )
        return lookup(op_name)(self, other)

    def __add__(self, other):
        return self._binary(other, "add")

    def __sub__(self, other):
        return self._binary(other, "sub")

    def __mul__(self, other):
        return self._binary(other, "mul")

    def __truediv__(self, other):
        return self._binary(other, "div")

    def __neg__(self):
        return lookup("neg")(self)

    def __matmul__(self, other):
        if not isinstance(other, GTensor):
            raise GraphError(f"@: both operands must be graph tensors, got {type(other).__name__}")
        return lookup("matmul" if self.ndim == 2 else "batch_matmul")(self, other)


class GOp:
    """An op of a graph."""

    __slots__ = ("graph", "id")

    def __hash__(self):
        return hash((id(self.graph), self.id))

    def __init__(self, graph: Graph, oid: int):
        self.graph = graph
        self.id = oid

    @property
    def _node(self):
        return self.graph._g.op(self.id)

    @property
    def type(self) -> str:
        return self._node.type

    @property
    def name(self) -> str:
        return self._node.name

    @property
    def attrs(self) -> dict:
        return _attrs_from_json(self._node.attrs_json)

    @property
    def inputs(self) -> list[GTensor]:
        return [GTensor(self.graph, t) for t in self._node.inputs]

    @property
    def output(self) -> GTensor:
        return GTensor(self.graph, self._node.output)

    @property
    def phase(self) -> str:
        return self._node.phase

    @property
    def forward_op(self) -> GOp | None:
        f = self._node.forward_op
        return None if f < 0 else GOp(self.graph, f)

    @property
    def unroll_key(self) -> str:
        return self._node.unroll_key

    @property
    def desc(self):
        return self._node.desc

    @property
    def op(self):
        """The tw.Op this node applies (the very object called, even if another op has its name)."""
        return self.graph._op_objects.get(self.id) or lookup(self.type)

    def __eq__(self, other):
        return isinstance(other, GOp) and other.graph is self.graph and other.id == self.id

    def __repr__(self):
        return f"GOp({self.name!r}, type={self.type}, phase={self.phase})"


def _attrs_to_json(attrs: dict) -> str:
    try:
        return json.dumps(attrs, sort_keys=True)
    except TypeError as e:
        raise GraphError(f"op attributes must be JSON-serialisable numbers, strings or tuples: {e}") from None


def _tuples(v):
    if isinstance(v, list):
        return tuple(_tuples(x) for x in v)
    return v


def _attrs_from_json(text: str) -> dict:
    return {k: _tuples(v) for k, v in json.loads(text).items()}


class Graph:
    """A dataflow graph of TDL ops: forward, backward and optimizer-update ops alike."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self._g = _core.Graph()
        self._scopes: list[str] = []
        self._phase = "forward"
        self._forward_op = -1
        self._unroll: list = []  # stack of [key, step, ordinal]
        self._counts: dict[str, int] = {}
        self._op_objects: dict[int, object] = {}  # op id -> the tw.Op applied (with its bound attributes)
        #: Named results ("output", "loss", ...): set by tw.trace and from_torch, saved in JSON.
        self.outputs: dict[str, GTensor] = {}

    # ----- building --------------------------------------------------------------------

    def _tensor(self, name: str, shape, role: str, dtype: str) -> GTensor:
        if role not in ROLES:
            raise GraphError(f"unknown role '{role}' (valid: {', '.join(ROLES)})")
        try:
            shape = tuple(int(d) for d in shape)
        except TypeError:
            raise ShapeError(f"tensor '{name}': shape must be a tuple of ints, got {shape!r}") from None
        return GTensor(self, self._g.add_tensor(self.scoped(name), list(shape), role, dtype))

    def input(self, name: str, shape, dtype: str = "float32") -> GTensor:
        """A graph input (data fed each step)."""
        return self._tensor(name, shape, "input", dtype)

    def label(self, name: str, shape, dtype: str = "float32") -> GTensor:
        """A label input (targets of the loss)."""
        return self._tensor(name, shape, "label", dtype)

    def parameter(self, name: str, shape, dtype: str = "float32") -> GTensor:
        """A trained parameter."""
        return self._tensor(name, shape, "parameter", dtype)

    def constant(self, name: str, shape, dtype: str = "float32") -> GTensor:
        """Fixed data read every step (frozen buffers, running statistics): no gradient, no update."""
        return self._tensor(name, shape, "constant", dtype)

    def state(self, name: str, shape, dtype: str = "float32") -> GTensor:
        """Optimizer state (momentum, Adam moments)."""
        return self._tensor(name, shape, "optimizer_state", dtype)

    def scoped(self, name: str) -> str:
        return ".".join(self._scopes + [name]) if self._scopes else name

    def _fresh(self, base: str) -> str:
        name = base
        n = self._counts.get(base, 0)
        while self._g.find_op(name) >= 0 or self._g.find_tensor(name) >= 0:
            n += 1
            name = f"{base}_{n}"
        self._counts[base] = n
        return name

    def apply(self, op, inputs: Sequence[GTensor], attrs: dict, name: str | None = None, out=None,
              role: str | None = None, dtype: str = "float32") -> GTensor:
        """Add ``op`` applied to ``inputs``; returns its output tensor. Ops' ``__call__`` lands here."""
        for t in inputs:
            if not isinstance(t, GTensor):
                raise GraphError(f"op '{op.name}' applied to {type(t).__name__} {t!r}; graph ops take graph tensors")
            if t.graph is not self:
                raise GraphError(f"op '{op.name}': tensor '{t.name}' belongs to another graph")
        given, merged = op._split(attrs)
        if given:
            raise GraphError(f"op '{op.name}': pass inputs positionally when building a graph")
        shapes = [t.shape for t in inputs]
        if len(shapes) != len(op.inputs):
            names = ", ".join(op.inputs)
            raise GraphError(f"op '{op.name}' takes {len(op.inputs)} inputs ({names}), got {len(shapes)}")
        desc = op._desc_for(shapes, merged)
        if out is None and op.out_shape_fn is not None:
            out = op._declared_shape(shapes, merged)
        op_name = self._fresh(self.scoped(name or op.name))
        key = ""
        if self._unroll:
            frame = self._unroll[-1]
            key = f"{frame[0]}/{frame[2]}"
            frame[2] += 1
        oid = self._g.add_op(op.name, op_name, _attrs_to_json(merged), [t.id for t in inputs], desc, op_name,
                             role or _DEFAULT_ROLE[self._phase], None if out is None else list(out), self._phase,
                             self._forward_op, key, dtype)
        self._op_objects[oid] = op
        return GTensor(self, self._g.op(oid).output)

    def mark_gradient(self, grad: GTensor, of: GTensor) -> None:
        """Record that ``grad`` is (a part of) the gradient of ``of``."""
        self._g.set_grad_of(grad.id, of.id)

    def mark_update(self, new: GTensor, of: GTensor) -> None:
        """Record that ``new`` replaces ``of`` after the step (an in-place optimizer update)."""
        self._g.set_updates(new.id, of.id)

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Prefix names of tensors and ops made inside: ``layer1.conv``."""
        self._scopes.append(name)
        try:
            yield
        finally:
            self._scopes.pop()

    @property
    def scope_parts(self) -> tuple[str, ...]:
        """The current name scope, outermost first."""
        return tuple(self._scopes)

    @contextlib.contextmanager
    def scope_path(self, parts: Sequence[str]) -> Iterator[None]:
        """Replace the whole name scope inside (modules name ops by their absolute path)."""
        saved = self._scopes
        self._scopes = [p for p in parts if p]
        try:
            yield
        finally:
            self._scopes = saved

    @contextlib.contextmanager
    def phase(self, phase: str, forward_op: GOp | None = None) -> Iterator[None]:
        """Ops made inside belong to ``phase``; backward ops name the forward op they differentiate."""
        if phase not in PHASES:
            raise GraphError(f"unknown phase '{phase}' (valid: {', '.join(PHASES)})")
        saved = self._phase, self._forward_op
        self._phase, self._forward_op = phase, (forward_op.id if forward_op is not None else -1)
        try:
            yield
        finally:
            self._phase, self._forward_op = saved

    @contextlib.contextmanager
    def unroll(self, key: str) -> Iterator[_Unroll]:
        """Tag the time steps of an unrolled loop: the k-th op of every step shares an unroll key,
        so coarsening can merge time steps (Tofu §5.1)."""
        u = _Unroll(self, key)
        yield u

    # ----- views -----------------------------------------------------------------------

    @property
    def tensors(self) -> list[GTensor]:
        return [GTensor(self, i) for i in range(self._g.num_tensors)]

    @property
    def ops(self) -> list[GOp]:
        return [GOp(self, i) for i in range(self._g.num_ops)]

    def tensor(self, name: str) -> GTensor:
        i = self._g.find_tensor(name)
        if i < 0:
            raise KeyError(f"no tensor named {name!r} in the graph")
        return GTensor(self, i)

    def op(self, name: str) -> GOp:
        i = self._g.find_op(name)
        if i < 0:
            raise KeyError(f"no op named {name!r} in the graph")
        return GOp(self, i)

    def tensors_with_role(self, role: str) -> list[GTensor]:
        if role not in ROLES:
            raise GraphError(f"unknown role '{role}' (valid: {', '.join(ROLES)})")
        return [t for t in self.tensors if t.role == role]

    @property
    def num_parameters(self) -> int:
        """Elements of all parameter tensors (updated copies excluded)."""
        return self._g.num_parameters

    def bytes_by_role(self) -> dict[str, int]:
        return {r: self._g.bytes(r) for r in ROLES}

    def summary(self) -> str:
        return self._g.summary()

    def __repr__(self):
        return f"<tw.Graph {self.name!r}: {self._g.num_ops} ops, {self._g.num_tensors} tensors, " \
               f"{self.num_parameters} parameters>"

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(self.summary())}</pre>"

    def to_dot(self) -> str:
        """Graphviz DOT source."""
        return self._g.to_dot()

    def to_json(self) -> str:
        """The graph as JSON (format ``tilewise.graph/1``): tensors and ops by id, attributes, phases,
        gradient/update marks and the named outputs. ``from_json`` reads it back; one line per tensor
        and per op, so saved graphs diff well."""
        tensors = [json.dumps({"name": t.name, "shape": list(t.shape), "dtype": t.dtype, "role": t.role,
                               "producer": n.producer, "grad_of": n.grad_of, "updates": n.updates})
                   for t, n in ((t, t._node) for t in self.tensors)]
        ops = [json.dumps({"type": n.type, "name": n.name, "attrs": json.loads(n.attrs_json), "inputs": list(n.inputs),
                           "output": n.output, "phase": o.phase, "forward_op": n.forward_op,
                           "unroll_key": n.unroll_key})
               for o, n in ((o, o._node) for o in self.ops)]
        outputs = {k: (t.id if t is not None else -1) for k, t in self.outputs.items()}

        def rows(items):
            return ",\n".join(f"    {x}" for x in items)

        return (f'{{\n  "format": "tilewise.graph/1",\n  "tensors": [\n{rows(tensors)}\n  ],\n'
                f'  "ops": [\n{rows(ops)}\n  ],\n  "outputs": {json.dumps(outputs)}\n}}\n')

    def save(self, path) -> None:
        pathlib.Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path) -> Graph:
        return cls.from_json(pathlib.Path(path).read_text())

    @classmethod
    def from_json(cls, text: str, name: str = "graph") -> Graph:
        """Rebuild a graph saved with ``to_json``; each op's description is re-traced by name."""
        data = json.loads(text)
        if data.get("format") != "tilewise.graph/1":
            raise GraphError(f"not a tilewise graph (format {data.get('format')!r}, expected 'tilewise.graph/1')")
        g = cls(name)
        tensors, ops = data["tensors"], data["ops"]
        for i, t in enumerate(tensors):
            p = t["producer"]
            if p < 0:
                g._g.add_tensor(t["name"], t["shape"], t["role"], t["dtype"])
                continue
            o = ops[p]
            op = lookup(o["type"])
            attrs = _attrs_from_json(json.dumps(o["attrs"]))
            shapes = [tuple(tensors[k]["shape"]) for k in o["inputs"]]
            desc = op._desc_for(shapes, {**op.attrs, **attrs})
            g._g.add_op(o["type"], o["name"], json.dumps(o["attrs"], sort_keys=True), o["inputs"], desc, t["name"],
                        t["role"], t["shape"], o["phase"], o["forward_op"], o["unroll_key"], t["dtype"])
            if g._g.op(p).output != i:
                raise GraphError(f"graph JSON is not in producer order at tensor '{t['name']}'")
            g._op_objects[p] = op
        for i, t in enumerate(tensors):
            if t["grad_of"] >= 0:
                g._g.set_grad_of(i, t["grad_of"])
            if t["updates"] >= 0:
                g._g.set_updates(i, t["updates"])
        for key, tid in data.get("outputs", {}).items():
            if not -1 <= tid < len(tensors):
                raise GraphError(f"graph JSON output '{key}' names tensor {tid}, which is not in the graph")
            g.outputs[key] = GTensor(g, tid) if tid >= 0 else None
        return g


class _Unroll:
    """``with g.unroll("lstm0") as u: for t in range(T): with u.step(t): ...``"""

    def __init__(self, graph: Graph, key: str):
        self.graph = graph
        self.key = key

    @contextlib.contextmanager
    def step(self, t: int) -> Iterator[None]:
        self.graph._unroll.append([self.key, t, 0])
        try:
            yield
        finally:
            self.graph._unroll.pop()



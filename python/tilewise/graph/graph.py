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
from .._util import json_kind, parse_json, short_repr
from ..tdl.registry import lookup
from ..tdl.registry import names as registry_names

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
        #: The graph this one replays with tensor reuse's copies (graph/reuse.py), and their op names.
        self.derived_from: Graph | None = None
        self.copies: list[str] = []

    def results(self) -> dict[str, GTensor]:
        """What a step hands back (and so keeps after it): the named outputs (loss, output), else the
        tensors no op reads that update nothing."""
        named = {k: t for k, t in self.outputs.items() if t is not None}
        if named:
            return named
        return {t.name: t for t in self.tensors if t.producer is not None and not t.consumers and t.updates is None}

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
        """The graph saved at ``path`` (validated as ``from_json`` does; bytes, so that a file that is
        not UTF-8 is a GraphError too)."""
        return cls.from_json(pathlib.Path(path).read_bytes())

    @classmethod
    def from_json(cls, text: str, name: str = "graph") -> Graph:
        """Rebuild a graph saved with ``to_json``; each op's description is re-traced by name.

        The file is validated, not trusted: every field's type, every id, names, producer order,
        each op's output shape against the op's own shape rule, gradient and update marks. What
        does not fit is a GraphError naming the field (``tensors[3].shape``) and what would be valid.
        """
        data = parse_json(text, GraphError, "graph", "Graph.from_json")
        return _GraphLoader(data).build(cls(name))

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




# ----- loading: a graph file is validated, not trusted --------------------------------------------

_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "bool")
_UPDATABLE = ("parameter", "optimizer_state")  # what an optimizer update may replace
_LEAF_ROLES = ("input", "label", "parameter", "constant", "optimizer_state")  # what Graph makes without an op
_INT64_MAX = 2**63 - 1
_MAX_ATTR_INT = 2**40  # larger integer attributes overflow the index arithmetic (cpp/tdl/limits.h)


class _GraphLoader:
    """Checks a parsed ``tilewise.graph/1`` document field by field, then builds the graph through
    the C++ core, re-deriving every op's output shape from its description. Every complaint is a
    GraphError that starts with the field's path."""

    def __init__(self, data):
        self.data = data

    @staticmethod
    def fail(path: str, message: str):
        raise GraphError(f"graph JSON {path}: {message}")

    def field(self, obj: dict, path: str, key: str, kind, valid: str):
        if key not in obj:
            self.fail(f"{path}.{key}", f"missing; expected {valid}")
        v = obj[key]
        ok = isinstance(v, kind) and not (kind is int and isinstance(v, bool))
        if not ok:
            self.fail(f"{path}.{key}", f"is {json_kind(v)} ({short_repr(v)}); expected {valid}")
        return v

    def int_field(self, obj: dict, path: str, key: str, lo: int, hi: int, what: str) -> int:
        v = self.field(obj, path, key, int, what)
        if not lo <= v <= hi:
            self.fail(f"{path}.{key}", f"is {v}; expected {what} in [{lo}, {hi}]" if hi >= lo
                      else f"is {v}; no valid value ({what}): the list it refers to is empty")
        return v

    def choice(self, obj: dict, path: str, key: str, valid: Sequence[str]) -> str:
        v = self.field(obj, path, key, str, "one of " + ", ".join(valid))
        if v not in valid:
            self.fail(f"{path}.{key}", f"is {v!r}; expected one of {', '.join(valid)}")
        return v

    # ----- structure -----

    def check_structure(self):
        data = self.data
        if not isinstance(data, dict):
            raise GraphError(f"not a tilewise graph: the JSON is {json_kind(data)}, expected an object with "
                             "format 'tilewise.graph/1'")
        if data.get("format") != "tilewise.graph/1":
            got = short_repr(data.get("format"))
            raise GraphError(f"not a tilewise graph (format {got}, expected 'tilewise.graph/1')")
        tensors = self.field(data, "", "tensors", list, "a list of tensors")
        ops = self.field(data, "", "ops", list, "a list of ops")
        outputs = data.get("outputs", {})
        if not isinstance(outputs, dict):
            self.fail(".outputs", f"is {json_kind(outputs)}; expected an object of name: tensor id")
        nt, no = len(tensors), len(ops)
        for i, t in enumerate(tensors):
            path = f"tensors[{i}]"
            if not isinstance(t, dict):
                self.fail(path, f"is {json_kind(t)}; expected an object")
            name = self.field(t, path, "name", str, "a non-empty string")
            if not name:
                self.fail(f"{path}.name", "is empty; expected a non-empty string")
            shape = self.field(t, path, "shape", list, "a list of non-negative integers")
            for d, x in enumerate(shape):
                if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x <= _INT64_MAX:
                    self.fail(f"{path}.shape[{d}]", f"is {short_repr(x)}; expected a non-negative integer")
            self.choice(t, path, "dtype", _DTYPES)
            self.choice(t, path, "role", ROLES)
            self.int_field(t, path, "producer", -1, no - 1, "-1 (no producer) or an op id")
            self.int_field(t, path, "grad_of", -1, nt - 1, "-1 or a tensor id")
            self.int_field(t, path, "updates", -1, nt - 1, "-1 or a tensor id")
        for p, o in enumerate(ops):
            path = f"ops[{p}]"
            if not isinstance(o, dict):
                self.fail(path, f"is {json_kind(o)}; expected an object")
            self.field(o, path, "type", str, "an op name")
            if not self.field(o, path, "name", str, "a non-empty string"):
                self.fail(f"{path}.name", "is empty; expected a non-empty string")
            attrs = self.field(o, path, "attrs", dict, "an object of attributes")
            for k, v in attrs.items():
                self.check_attr(f"{path}.attrs.{k}", v)
            inputs = self.field(o, path, "inputs", list, "a list of tensor ids")
            for j, x in enumerate(inputs):
                if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x < nt:
                    self.fail(f"{path}.inputs[{j}]", f"is {short_repr(x)}; expected a tensor id in [0, {nt - 1}]")
            self.int_field(o, path, "output", 0, nt - 1, "a tensor id")
            self.choice(o, path, "phase", PHASES)
            self.int_field(o, path, "forward_op", -1, p - 1, "-1 or the id of an earlier op")
            self.field(o, path, "unroll_key", str, "a string")
        for key, tid in outputs.items():
            if not isinstance(tid, int) or isinstance(tid, bool) or not -1 <= tid < nt:
                self.fail(f".outputs.{key}", f"is {short_repr(tid)}; expected -1 or a tensor id in [0, {nt - 1}]")

    def check_attr(self, path: str, v, depth: int = 0):
        if depth > 4:
            self.fail(path, "nests too deeply; attributes are numbers, strings, booleans or lists of them")
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return
        if isinstance(v, int):
            if abs(v) > _MAX_ATTR_INT:
                self.fail(path, f"is {v}; integer attributes may be at most 2^40 in magnitude")
        elif isinstance(v, float):
            if v != v:  # +-Infinity is a bound (a one-sided clip); NaN no attribute means
                self.fail(path, "is NaN; expected a number (Infinity and -Infinity allowed)")
        elif isinstance(v, list):
            for j, x in enumerate(v):
                self.check_attr(f"{path}[{j}]", x, depth + 1)
        else:
            self.fail(path, f"is {json_kind(v)}; attributes are numbers, strings, booleans or lists of them")

    def check_links(self):
        """Producers, names, order, gradient and update marks; everything the ids alone decide."""
        tensors, ops = self.data["tensors"], self.data["ops"]
        seen: dict[str, int] = {}
        for i, t in enumerate(tensors):
            if t["producer"] < 0 and t["role"] not in _LEAF_ROLES:
                self.fail(f"tensors[{i}].producer", f"is -1, but role {t['role']!r} is computed by an op; a tensor "
                          f"no op computes is one of {', '.join(_LEAF_ROLES)} (a dangling tensor?)")
            if t["name"] in seen:
                self.fail(f"tensors[{i}].name", f"{t['name']!r} is already the name of tensors[{seen[t['name']]}]")
            seen[t["name"]] = i
        seen = {}
        for p, o in enumerate(ops):
            if o["name"] in seen:
                self.fail(f"ops[{p}].name", f"{o['name']!r} is already the name of ops[{seen[o['name']]}]")
            seen[o["name"]] = p
        last = -1
        for p, o in enumerate(ops):
            out = o["output"]
            if tensors[out]["producer"] != p:
                self.fail(f"ops[{p}].output", f"names tensors[{out}], whose producer is {tensors[out]['producer']}, "
                          f"not {p}: each op's output must name it as producer (a tensor deleted or produced twice?)")
            if out <= last:
                self.fail(f"ops[{p}].output", f"is {out}, not after the previous op's output {last}: ops must be "
                          "listed in the order of their outputs (producer order)")
            last = out
            for j, x in enumerate(o["inputs"]):
                if x >= out:
                    self.fail(f"ops[{p}].inputs[{j}]", f"is tensor {x}, not before the op's output {out}: an op reads "
                              "only tensors listed before its output (the graph must be acyclic)")
        for i, t in enumerate(tensors):
            p = t["producer"]
            if p >= 0 and ops[p]["output"] != i:
                self.fail(f"tensors[{i}].producer", f"is op {p}, whose output is tensors[{ops[p]['output']}]: "
                          "a tensor is produced by exactly one op, the one whose output it is")
        updated: dict[int, int] = {}
        acyclic: set[int] = set()  # tensors whose chain of marks is known to end
        for i, t in enumerate(tensors):
            path = f"tensors[{i}]"
            g = t["grad_of"]
            if g == i:
                self.fail(f"{path}.grad_of", "names the tensor itself; a gradient is of another tensor")
            if g >= 0:
                if tensors[g]["shape"] != t["shape"]:
                    self.fail(f"{path}.grad_of", f"names tensors[{g}] of shape {tuple(tensors[g]['shape'])}, but this "
                              f"gradient has shape {tuple(t['shape'])}; a gradient has its tensor's shape")
            u = t["updates"]
            if u == i:
                self.fail(f"{path}.updates", "names the tensor itself; an update replaces another tensor")
            if g >= 0 and u >= 0:
                self.fail(path, f"has grad_of {g} and updates {u}; a tensor is a gradient or an updated value, "
                          "not both")
            # Coarsening follows grad_of, else updates, to the tensor a mark leads to: no cycles.
            chain, k = {i}, g if g >= 0 else u
            while k >= 0 and k not in acyclic:
                if k in chain:
                    self.fail(f"{path}.{'grad_of' if g >= 0 else 'updates'}", "forms a cycle of grad_of/updates "
                              "marks")
                chain.add(k)
                k = tensors[k]["grad_of"] if tensors[k]["grad_of"] >= 0 else tensors[k]["updates"]
            acyclic |= chain
            if u < 0:
                continue
            target = tensors[u]
            if t["producer"] < 0:
                self.fail(f"{path}.updates", "is set on a tensor no op computes; an updated value is an op's output")
            if target["producer"] >= 0 or target["role"] not in _UPDATABLE:
                self.fail(f"{path}.updates", f"names tensors[{u}] ({target['role']}"
                          f"{', computed by an op' if target['producer'] >= 0 else ''}); an update replaces a "
                          "parameter or optimizer_state tensor that no op computes")
            if target["shape"] != t["shape"] or target["dtype"] != t["dtype"]:
                self.fail(f"{path}.updates", f"names tensors[{u}] {tuple(target['shape'])} {target['dtype']}, but "
                          f"this value is {tuple(t['shape'])} {t['dtype']}; an update keeps shape and dtype")
            if u in updated:
                self.fail(f"{path}.updates", f"names tensors[{u}], which tensors[{updated[u]}] already updates; "
                          "a tensor has at most one update per step")
            updated[u] = i

    # ----- building -----

    def build(self, g: Graph) -> Graph:
        self.check_structure()
        self.check_links()
        tensors, ops = self.data["tensors"], self.data["ops"]
        registered = None
        for i, t in enumerate(tensors):
            p = t["producer"]
            if p < 0:
                try:
                    g._g.add_tensor(t["name"], t["shape"], t["role"], t["dtype"])
                except ValueError as e:
                    self.fail(f"tensors[{i}].shape", str(e))
                continue
            o = ops[p]
            path = f"ops[{p}]"
            arity = o["type"].rpartition("_")[2]
            if arity.isascii() and arity.isdigit() and int(arity) != len(o["inputs"]):
                # "add_99999999" would make an n-ary family member of that arity before anything
                # could tell it is wrong: a family member takes as many inputs as its name says.
                registered = set(registry_names()) if registered is None else registered
                if o["type"] not in registered:
                    self.fail(f"{path}.type", f"{o['type']!r} names an op of {arity} inputs, but the op lists "
                              f"{len(o['inputs'])}")
            try:
                op = lookup(o["type"])
            except GraphError as e:
                self.fail(f"{path}.type", str(e))
            if len(o["inputs"]) != len(op.inputs):
                self.fail(f"{path}.inputs", f"lists {len(o['inputs'])} tensors; op {op.name!r} takes "
                          f"{len(op.inputs)} ({', '.join(op.inputs)})")
            attrs = _tuples_dict(o["attrs"])
            for k, v in attrs.items():
                if k not in op.attr_values:
                    valid = ", ".join(op.attr_values) or "none"
                    self.fail(f"{path}.attrs.{k}", f"op {op.name!r} has no attribute {k!r} (attributes: {valid})")
                self.check_attr_type(f"{path}.attrs.{k}", v, op.attr_values[k])
            merged = {**op.attrs, **attrs}
            shapes = [tuple(tensors[k]["shape"]) for k in o["inputs"]]
            declared = tuple(t["shape"])
            # The description is Python code run on this file's shapes and attribute values, so any
            # exception it raises is the file's fault: reported as the op's, not as an internal error.
            try:
                desc = op._desc_for(shapes, merged)
                if op.out_shape_fn is not None:
                    expected = op._declared_shape(shapes, merged)
                else:
                    try:
                        expected = tuple(desc.infer_output_shape(shapes))
                    except ShapeError:
                        expected = None  # the accesses do not determine it: the builder gave out=
            except RecursionError:
                self.fail(path, f"op {op.name!r} could not be traced: its description recursed too deeply")
            except Exception as e:  # noqa: BLE001 - see above
                self.fail(path, f"op {op.name!r} does not apply to input shapes {shapes} with attributes "
                          f"{attrs}: {type(e).__name__}: {e}")
            if expected is not None and expected != declared:
                self.fail(f"tensors[{i}].shape", f"is {declared}, but op {o['name']!r} ({op.name}) computes "
                          f"shape {expected} from its inputs {shapes}")
            try:
                g._g.add_op(o["type"], o["name"], json.dumps(o["attrs"], sort_keys=True), o["inputs"], desc, t["name"],
                            t["role"], list(declared), o["phase"], o["forward_op"], o["unroll_key"], t["dtype"])
            except ValueError as e:
                self.fail(path, str(e))
            g._op_objects[p] = op
        for i, t in enumerate(tensors):
            if t["grad_of"] >= 0:
                g._g.set_grad_of(i, t["grad_of"])
            if t["updates"] >= 0:
                g._g.set_updates(i, t["updates"])
        for key, tid in self.data.get("outputs", {}).items():
            g.outputs[key] = GTensor(g, tid) if tid >= 0 else None
        return g

    def check_attr_type(self, path: str, v, default):
        """A string where the op's default is a number, a list or a boolean (or the reverse) is
        reported here, by name; whether a number or a list fits is the description's to say."""
        if default is None or isinstance(v, str) == isinstance(default, str):
            return
        want = "a string" if isinstance(default, str) else "a number, a boolean or a list"
        self.fail(path, f"is {json_kind(v)} ({short_repr(v)}); expected {want} (the default is {default!r})")


def _tuples_dict(attrs: dict) -> dict:
    return {k: _tuples(v) for k, v in attrs.items()}

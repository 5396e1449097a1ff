"""Converting an ONNX graph into a tilewise Graph, node by node, through the rule table.

Each ONNX value's entry in the environment is one of
* a ``GTensor`` of the graph being built;
* a ``Known``: a value known at import time (an initializer, a ``Constant``, a ``Shape``, and
  everything computed from them alone, folded here by onnx's reference evaluator). Rules read
  shapes, axes and scalar operands from it; it becomes a graph tensor only where a rule needs a
  tensor: a float initializer as a parameter (or a constant, for BatchNorm's statistics), anything
  else as a constant, with its value in ``OnnxImport.values``;
* ``MISSING``: the output of a node that could not be converted (its consumers are not
  converted either, only checked for a rule).

A node with no rule, or one whose rule cannot honour its attributes, is recorded and replaced by a
stand-in of the shape ONNX infers, so that conversion goes on and one error lists every problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..._core import GraphError
from ...graph.graph import Graph, GTensor
from ._load import FLOAT, INPUT_TYPES, onnx_module

MISSING = object()  # the value of an output whose node failed

# Ops whose result depends on more than their inputs' values: never folded.
_RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
# Ops that read only their input's shape: folded even when the input is a parameter.
_SHAPE_ONLY = {"Shape", "Size"}


class Unsupported(Exception):
    """Raised by a rule that cannot express this node; the message says why."""


class NeedsValue(Unsupported):
    """A rule needs the value of a graph input at import (``err.needs_values`` lists them: a caller
    that knows them, like the ONNX backend, can pass them as initializers)."""

    def __init__(self, message, input_name):
        super().__init__(message)
        self.input_name = input_name


@dataclass(eq=False)
class Known:
    """A value known when importing: an initializer, a constant, or one folded from them."""

    value: np.ndarray
    name: str  # the ONNX value name
    initializer: bool = False  # a float initializer: a parameter when a rule needs it as a tensor
    tensor: GTensor | None = None  # the graph tensor it became
    derived: dict = field(default_factory=dict)  # tensors made from it (its 0/1 mask), by what

    @property
    def shape(self) -> tuple:
        return tuple(int(d) for d in self.value.shape)


class Node:
    """One ONNX node as a rule sees it: input values, attributes, the opset, inferred output shapes."""

    def __init__(self, proto, inputs, opset, out_shapes):
        onnx = onnx_module()
        self.proto = proto
        self.op_type = proto.op_type
        self.name = proto.name or f"{proto.op_type}:{proto.output[0] if proto.output else ''}"
        self.inputs = inputs  # values, None for an omitted optional input
        self.outputs = list(proto.output)
        self.opset = opset
        self.out_shapes = out_shapes  # per output: the shape ONNX infers, or None
        self.attrs = {a.name: onnx.helper.get_attribute_value(a) for a in proto.attribute}

    def attr(self, name, default=None):
        v = self.attrs.get(name, default)
        if isinstance(v, bytes):
            return v.decode()
        if isinstance(v, list):
            return [x.decode() if isinstance(x, bytes) else x for x in v]
        return v

    def input(self, i):
        return self.inputs[i] if i < len(self.inputs) else None

    def wants(self, i) -> bool:
        """Whether output i is used (named) at all."""
        return i < len(self.outputs) and self.outputs[i] != ""


class Converter:
    """Builds graph ops for the model's nodes; rules call its helpers."""

    def __init__(self, model, graph: Graph, rules, opset: int, inferred: dict, info):
        self.model = model
        self.g = graph
        self.rules = rules
        self.opset = opset
        self.inferred = inferred
        self.info = info
        self.env: dict = {}
        self.node: Node | None = None
        self.problems: list = []  # (op type, node name, reason), in graph order
        self.needs_values: set = set()  # graph inputs that rules needed the values of

    # ----- values ------------------------------------------------------------------------

    def shape(self, v) -> tuple:
        if isinstance(v, GTensor):
            return tuple(v.shape)
        if isinstance(v, Known):
            return v.shape
        raise Unsupported(f"expected a tensor, got {type(v).__name__}")

    def known(self, v, what: str) -> np.ndarray:
        """v's value, which this rule needs at import time (shapes, axes, indices)."""
        if isinstance(v, Known):
            return v.value
        if isinstance(v, GTensor) and v.role == "input":
            raise NeedsValue(f"{what} is the graph input '{v.name}'; it must be known when importing "
                             "(an initializer or a constant)", v.name)
        raise Unsupported(f"{what} is computed by the graph; it must be known when importing "
                          "(an initializer or a constant)")

    def ints(self, v, what: str) -> list:
        return [int(x) for x in np.asarray(self.known(v, what)).reshape(-1)]

    def scalar(self, v):
        """v as a Python float if it is a known one-element value, else None."""
        if isinstance(v, Known) and v.value.size == 1 and v.value.dtype.kind in "fiub":
            return float(v.value.reshape(-1)[0])
        return None

    def tensor(self, v, role: str = "parameter") -> GTensor:
        """A graph tensor for a value: a known value becomes a leaf of the graph (float initializers
        a ``role`` tensor, other known values constants), with its value kept for feeding."""
        if isinstance(v, GTensor):
            return v
        if isinstance(v, Known):
            if v.tensor is None:
                if v.value.dtype.kind not in "fiub":
                    raise Unsupported(f"'{v.name}' holds {v.value.dtype} values")
                if v.value.dtype.kind != "f":
                    raise Unsupported(f"the integer value '{v.name}' is used as data (tensors are float32; "
                                      "integers only as shapes, axes and indices)")
                kind = role if v.initializer else "constant"
                make = self.g.parameter if kind == "parameter" else self.g.constant
                v.tensor = make(self._free(v.name), v.shape, "float32")
                self.info.values[v.tensor.name] = np.array(v.value, dtype=np.float32)
                self.info.tensors.setdefault(v.name, v.tensor.name)
            return v.tensor
        raise Unsupported(f"expected a tensor, got {type(v).__name__}")

    def mask(self, v) -> GTensor:
        """A condition (bool, or any numbers: non-zero is true) as a float32 0/1 tensor."""
        if isinstance(v, Known):
            if "mask" not in v.derived:
                v.derived["mask"] = self.tensor(Known((np.asarray(v.value) != 0).astype(np.float32), f"{v.name}.mask"))
            return v.derived["mask"]
        return self.tensor(v)

    def _free(self, name: str) -> str:
        base, k = name, 1
        while self.g._g.find_tensor(name) >= 0 or self.g._g.find_op(name) >= 0:
            k += 1
            name = f"{base}_{k}"
        return name

    def emit(self, op, *inputs, **attrs) -> GTensor:
        """Apply a TDL op to values (known values become graph leaves first), named after the node."""
        tensors = [self.tensor(x) for x in inputs]
        return op(*tensors, name=f"{self.node.name}.{op.name}", **attrs)

    def view(self, v, shape):
        """v reshaped to shape (row-major): a reshape op (a known value: reshaped at import)."""
        import tdl_ops as T

        shape = tuple(int(d) for d in shape)
        if isinstance(v, Known):
            return Known(v.value.reshape(shape), v.name) if not v.initializer else self._view_tensor(v, shape, T)
        return self._view_tensor(v, shape, T)

    def _view_tensor(self, v, shape, T):
        src = self.shape(v)
        if src == shape:
            return v
        # One reshape op for every view (flatten, squeeze, unsqueeze too): it has a native kernel.
        return self.emit(T.reshape, v, shape=shape, in_shape=src)

    # ----- conversion --------------------------------------------------------------------

    def run(self, input_shapes: dict) -> dict:
        """Convert every node; returns ONNX output name -> graph tensor (None where it failed)."""
        onnx = onnx_module()
        graph = self.model.graph
        for init in graph.initializer:
            value = onnx.numpy_helper.to_array(init)
            self.env[init.name] = Known(value, init.name, initializer=value.dtype.kind == "f")
        for vi in graph.input:
            if vi.name in input_shapes:
                t = self.g.input(vi.name, input_shapes[vi.name], INPUT_TYPES[vi.type.tensor_type.elem_type])
                self.env[vi.name] = t
                self.info.inputs.append(t.name)
                if t.dtype != "float32":
                    self.info.integer_inputs[t.name] = t.dtype
                self.info.tensors[vi.name] = t.name
        for proto in graph.node:
            self._convert(proto)
        return self._outputs()

    def _convert(self, proto):
        inputs = [None if name == "" else self.env.get(name, MISSING) for name in proto.input]
        shapes = [self.inferred.get(o) for o in proto.output]
        node = self.node = Node(proto, inputs, self.opset, shapes)
        rule = self.rules.lookup(proto.op_type) if proto.domain in ("", "ai.onnx") else None
        if any(v is MISSING for v in inputs):
            if rule is None:
                self._record(node, self._no_rule(proto))
            self._bind(node, None)
            return
        try:
            if self._foldable(node):
                value = self._fold(node)
            elif rule is None:
                raise Unsupported(self._no_rule(proto))
            else:
                value = rule(self, node)
            values = list(value) if isinstance(value, tuple) else [value]
            self._check(node, values)
        except Unsupported as e:
            self._record(node, str(e))
            if isinstance(e, NeedsValue):
                self.needs_values.add(e.input_name)
            values = None
        except GraphError as e:  # a TDL op refusing its inputs (shapes): one more entry, not a traceback
            self._record(node, f"the tilewise op refused it ({_first_line(e)})")
            values = None
        except Exception as e:  # a rule that breaks is one more entry of the error, not a traceback
            self._record(node, f"its conversion rule failed ({type(e).__name__}: {_first_line(e)})")
            values = None
        self._bind(node, values)

    def _no_rule(self, proto) -> str:
        if proto.domain not in ("", "ai.onnx"):
            return f"no conversion rule (operator domain '{proto.domain}'; only the default ai.onnx domain)"
        return "no conversion rule (tilewise has no op with its semantics)"

    def _foldable(self, node) -> bool:
        if node.op_type in _RANDOM or node.op_type in ("If", "Loop", "Scan"):
            return False
        values = [v for v in node.inputs if v is not None]
        if not all(isinstance(v, Known) for v in values):
            return False
        if node.op_type in _SHAPE_ONLY:
            return True
        # A parameter stays a parameter: an op on it is a graph op, not a folded constant (a
        # one-element initializer is a number: an operand that rules fold into attributes anyway).
        return not any(v.initializer and v.value.size > 1 for v in values)

    def _fold(self, node):
        onnx = onnx_module()
        from onnx.reference import ReferenceEvaluator

        h = onnx.helper
        names = [n for n in node.proto.input if n]
        g = h.make_graph([node.proto], "fold", [h.make_empty_tensor_value_info(n) for n in dict.fromkeys(names)],
                         [h.make_empty_tensor_value_info(o) for o in node.outputs if o])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", self.opset)])
        feeds = {n: self.env[n].value for n in names}
        if node.op_type in _SHAPE_ONLY:  # the values do not matter, only the shape
            feeds = {n: np.zeros(v.shape, np.float32) for n, v in feeds.items()}
        try:
            results = ReferenceEvaluator(m).run(None, feeds)
        except Exception as e:
            raise Unsupported(f"folding it on known values failed ({type(e).__name__}: {_first_line(e)})") from None
        outs = [o for o in node.outputs if o]
        values = [Known(np.asarray(r), name) for r, name in zip(results, outs, strict=True)]
        return tuple(values) if len(values) > 1 else values[0]

    def _check(self, node, values):
        """Every rule must produce the shape ONNX infers: a mismatch is a bug in the rule."""
        for value, want in zip(values, node.out_shapes, strict=False):
            if want is None or value is None or value is MISSING:
                continue
            got = self.shape(value)
            if got != want:
                raise Unsupported(f"its conversion rule produced shape {got} where ONNX infers {want} "
                                  "(a bug in the rule)")

    def _bind(self, node, values):
        for k, name in enumerate(node.outputs):
            if not name:
                continue
            if values is None:  # the node failed: a stand-in of the inferred shape lets conversion go on
                want = node.out_shapes[k]
                self.env[name] = MISSING if want is None else self._stand_in(name, want)
            elif k < len(values) and values[k] is not None:
                self.env[name] = values[k]
                if isinstance(values[k], GTensor):
                    self.info.tensors[name] = values[k].name
            else:
                self.env[name] = MISSING

    def _stand_in(self, name, shape):
        """A graph input in place of a failed node's output, so that conversion can go on."""
        return self.g.input(self._free(f"__unconverted__.{name}"), shape, "float32")

    def _record(self, node, reason):
        self.problems.append((node.op_type, node.name, reason))

    def _outputs(self) -> dict:
        import tdl_ops as T

        outs = {}
        for vi in self.model.graph.output:
            v = self.env.get(vi.name, MISSING)
            if v is MISSING:
                outs[vi.name] = None
                continue
            self.node = _OutputScope(vi.name)
            try:
                t = self.tensor(v, role="constant")
                if t.producer is None:
                    # An output that is an input or an initializer: a copy, so that every output is computed.
                    t = T.identity(t, name=self._free(f"{vi.name}.identity"))
            except Unsupported as e:
                self.problems.append(("(graph output)", vi.name, str(e)))
                outs[vi.name] = None
                continue
            if vi.type.tensor_type.elem_type not in (0, FLOAT):
                self.problems.append(("(graph output)", vi.name, "not float32"))
            outs[vi.name] = t
        return outs

    def error(self, model_name: str) -> GraphError | None:
        if not self.problems:
            return None
        items = self.problems
        kinds = sorted({op for op, _, _ in items})
        lines = [f"from_onnx: {len(items)} node(s) of '{model_name}' cannot be converted "
                 f"({', '.join(kinds)}):"]
        for op, name, reason in items:
            lines.append(f"  {op} '{name}': {reason}")
        lines.append("Rewrite these parts of the model, or add a rule to tilewise/frontends/onnx/_rules*.py "
                     "(docs/FROM_ONNX.md lists what is supported).")
        err = GraphError("\n".join(lines))
        err.unsupported = list(items)
        err.needs_values = sorted(self.needs_values)
        return err


@dataclass
class _OutputScope:
    """Stands in for a node while the graph outputs are made (ops are named after it)."""

    name: str


def _first_line(e) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__

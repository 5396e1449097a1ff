"""Converting a captured torch program into a tilewise Graph, node by node, through the rule table.

Each fx node's value in the environment is one of
* a ``GTensor`` of the graph being built;
* a ``View``: a reshape not yet emitted (chains of views collapse into one op, a view back to
  the base's shape costs nothing);
* a ``Const``: a tensor known at import time (buffers, lifted constants, and everything computed
  from them alone, folded here by running the torch op): it becomes a graph input only where a
  rule needs it as a tensor, with its value in ``TorchImport.constants``;
* a plain Python value (ints, floats, lists, None) or a tuple of values (multi-output ops).

A node with no rule, or one whose rule cannot express its arguments, is recorded and replaced by
a stand-in of the right shape, so that conversion goes on and one error lists every problem.
"""

from __future__ import annotations

import math
import operator
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from types import SimpleNamespace

from ..._core import GraphError
from ...graph.graph import Graph, GTensor

_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "float16",
           "int64": "int64", "int32": "int32", "int16": "int32", "int8": "int32", "uint8": "int32",
           "bool": "bool"}


def dtype_name(dtype) -> str:
    """The graph dtype for a torch dtype (small ints are stored as int32; bool as bool, one byte)."""
    return _DTYPES.get(str(dtype).replace("torch.", ""), "float32")


class Unsupported(Exception):
    """Raised by a rule that cannot express this use of its op; the message says why."""


@dataclass(eq=False)
class Const:
    """A tensor whose value is known when importing (None: known shape only, e.g. a meta tensor)."""

    value: object  # torch.Tensor or None
    shape: tuple
    dtype: object
    name: str | None = None  # a buffer's qualified name, or the node that computed it
    tensor: GTensor | None = None  # the graph input it became, once a rule needed it
    derived: dict = field(default_factory=dict)  # constants rules computed from it, by what (shared by users)

    @classmethod
    def of(cls, t, name=None):
        known = t if not getattr(t, "is_meta", False) and not _is_fake(t) else None
        return cls(known, tuple(int(d) for d in t.shape), t.dtype, name)


def _extent_or_one(d) -> int:
    try:
        return int(d)
    except Exception:  # noqa: BLE001 - torch raises its own guard errors for data-dependent sizes
        return 1


def static_shape(shape) -> tuple | None:
    """The extents as ints, or None when one depends on the data (an unbacked symbol of torch.export:
    int() raises GuardOnDataDependentSymNode)."""
    try:
        return tuple(int(d) for d in shape)
    except Exception:  # noqa: BLE001
        return None


def _is_fake(t) -> bool:
    return type(t).__name__ == "FakeTensor"


@dataclass(eq=False)
class View:
    """``base`` reshaped to ``shape``, emitted only when a rule needs the tensor."""

    base: GTensor
    shape: tuple
    scope: str
    tensor: GTensor | None = None


@dataclass
class Unmapped:
    """One kind of problem: an op with no rule, or a rule refusing these arguments."""

    target: str
    reason: str
    nodes: list = field(default_factory=list)  # (node name, where) pairs


class Args(SimpleNamespace):
    """A node's arguments by schema name (``a.input``, ``a.stride``), defaults filled in."""

    def __getitem__(self, i):
        return self._positional[i]


def bind(target, args, kwargs) -> Args:
    schema = getattr(target, "_schema", None)
    if schema is None:
        a = Args(**kwargs)
        a._positional = list(args)
        return a
    named = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            named[arg.name] = args[i]
        elif arg.name in kwargs:
            named[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            named[arg.name] = arg.default_value
        else:
            named[arg.name] = None
    a = Args(**named)
    a._positional = list(args)
    return a


def target_name(target) -> str:
    if isinstance(target, str):
        return target
    name = str(target)
    if name.startswith("<built-in function "):
        return "operator." + name[len("<built-in function "):-1]
    return getattr(target, "__qualname__", None) if not name or name.startswith("<") else name


def _where(node) -> str:
    """The module (qualified name and class) and user source line a node comes from."""
    stack = node.meta.get("nn_module_stack") or {}
    path, kind = "", ""
    if stack:
        path, kind = list(stack.values())[-1]
        kind = kind.rsplit(".", 1)[-1]
    where = f"in {path} ({kind})" if path else (f"in the top-level {kind}" if kind else "")
    line = _user_line(node.meta.get("stack_trace") or "")
    return f"{where}, {line}" if line and where else where or line


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def _user_line(trace: str) -> str:
    frames = _FRAME.findall(trace)
    # The innermost frame outside torch itself is the line the user (or the model library) wrote.
    for file, line, _, code in reversed(frames):
        if "/torch/" not in file.replace("\\", "/"):
            return f"{file.rsplit('/', 1)[-1]}:{line} `{code.strip()}`"
    return ""


def module_path(node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


class Converter:
    """Builds graph ops for the captured nodes; rules call its helpers."""

    def __init__(self, captured, graph: Graph, rules, inputs=None, info=None):
        self.cap = captured
        self.g = graph
        self.rules = rules
        self.env: dict = {}
        self.node = None
        self.scope = ""
        self.unmapped: OrderedDict = OrderedDict()
        self.info = info
        self.given_inputs = inputs

    # ----- values ------------------------------------------------------------------------

    def shape(self, v) -> tuple:
        if isinstance(v, GTensor):
            return tuple(v.shape)
        if isinstance(v, (View, Const)):
            return tuple(v.shape)
        raise Unsupported(f"expected a tensor, got {type(v).__name__}")

    @property
    def out_shape(self) -> tuple:
        shape = static_shape(self.node.meta["val"].shape)
        if shape is None:
            raise Unsupported("its output's shape depends on the data (after a boolean mask's selection or "
                              "nonzero): tilewise graphs have static shapes")
        return shape

    @property
    def out_dtype(self):
        return self.node.meta["val"].dtype

    def is_tensor(self, v) -> bool:
        return isinstance(v, (GTensor, View, Const))

    def scalar(self, v):
        """v as a Python number if it is one (or a known one-element constant), else None."""
        if isinstance(v, bool):
            return float(v)
        if isinstance(v, (int, float)):
            return v
        if isinstance(v, Const) and v.value is not None and v.value.numel() == 1 and len(v.shape) == 0:
            return v.value.item()
        return None

    def tensor(self, v) -> GTensor:
        """A graph tensor for a value: emits pending views, turns constants into inputs."""
        if isinstance(v, GTensor):
            return v
        if isinstance(v, View):
            if v.tensor is None:
                v.tensor = self._emit_reshape(v.base, v.shape, v.scope)
            return v.tensor
        if isinstance(v, Const):
            if v.tensor is None:
                name = base = v.name or self.scoped(self.node.name)
                k = 1
                while self._exists(self.g.scoped(name)):
                    k += 1
                    name = f"{base}_{k}"
                v.tensor = self.g.constant(name, v.shape, dtype_name(v.dtype))
                if self.info is not None:
                    self.info.constants[v.tensor.name] = (None if v.value is None
                                                          else v.value.detach().cpu().numpy().copy())
            return v.tensor
        raise Unsupported(f"expected a tensor, got {type(v).__name__} {v!r}")

    def _exists(self, name: str) -> bool:
        try:
            self.g.tensor(name)
        except KeyError:
            return False
        return True

    def scoped(self, name: str, scope: str | None = None) -> str:
        scope = self.scope if scope is None else scope
        return f"{scope}.{name}" if scope else name

    def emit(self, op, *inputs, name: str | None = None, scope: str | None = None, **attrs) -> GTensor:
        """Apply a TDL op to tensors (any values: views and constants are made tensors first)."""
        tensors = [self.tensor(x) for x in inputs]
        return op(*tensors, name=self.scoped(name or op.name, scope), **attrs)

    def input(self, name: str, shape, dtype="float32") -> GTensor:
        return self.g.input(self.scoped(name), tuple(shape), dtype)

    def view(self, v, shape):
        """v reshaped to shape, lazily (row-major, like torch.view / reshape)."""
        shape = tuple(int(d) for d in shape)
        if isinstance(v, Const):
            return Const(None if v.value is None else v.value.reshape(shape), shape, v.dtype)
        base = v.base if isinstance(v, View) else v
        if not isinstance(base, GTensor):
            raise Unsupported(f"expected a tensor, got {type(v).__name__}")
        if tuple(base.shape) == shape:
            return base
        return View(base, shape, self.scope)

    def _emit_reshape(self, base: GTensor, shape: tuple, scope: str) -> GTensor:
        import tdl_ops

        src = tuple(base.shape)
        if len(src) == 4 and len(shape) == 2 and shape == (src[0], src[1] * src[2] * src[3]):
            return self.emit(tdl_ops.flatten, base, c=src[1], h=src[2], w=src[3], scope=scope)
        if len(shape) == len(src) + 1:
            for ax in range(len(shape)):
                if shape[ax] == 1 and shape[:ax] + shape[ax + 1:] == src:
                    return self.emit(tdl_ops.unsqueeze, base, axis=ax, scope=scope)
        if len(shape) == len(src) - 1:
            for ax in range(len(src)):
                if src[ax] == 1 and src[:ax] + src[ax + 1:] == shape:
                    return self.emit(tdl_ops.squeeze, base, axis=ax, scope=scope)
        return self.emit(tdl_ops.reshape, base, shape=shape, in_shape=src, scope=scope)

    # ----- conversion --------------------------------------------------------------------

    def _map(self, a):
        import torch

        if isinstance(a, torch.fx.Node):
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self._map(x) for x in a)
        if isinstance(a, dict):
            return {k: self._map(x) for k, x in a.items()}
        return a

    def run(self):
        cap = self.cap
        self.order = {n: k for k, n in enumerate(cap.nodes)}
        self._placeholders()
        for node in cap.nodes:
            if node.op != "call_function" or node not in cap.live:
                continue
            self.node = node
            self.scope = module_path(node)
            args, kwargs = self._map(node.args), self._map(node.kwargs)
            try:
                value = self._convert(node, args, kwargs)
                self._check(node, value)
            except Unsupported as e:
                self._record(node, str(e))
                value = self._stand_in(node.meta.get("val"))
            except Exception as e:  # a rule that breaks is one more entry of the error, not a traceback
                self._record(node, f"its conversion rule failed ({type(e).__name__}: {_first_line(e)})")
                value = self._stand_in(node.meta.get("val"))
            for c in _flat(value):
                if isinstance(c, Const) and c.name is None:
                    c.name = self.scoped(node.name)
            self.env[node] = value
            self._rebind_mutated(node, value)
        outputs = []
        self.node = cap.nodes[-1]
        self.scope = ""
        for o in cap.outputs:
            v = self._map(o)
            outputs.append(self.tensor(v) if self.is_tensor(v) else None)
        return outputs

    def _placeholders(self):
        cap, g = self.cap, self.g
        by_name = {n.name: n for n in cap.nodes if n.op == "placeholder"}
        for pname, (fqn, t) in cap.parameters.items():
            if self._exists(fqn):  # tied weights, or a graph that already has it (tw.trace replays)
                self.env[by_name[pname]] = g.tensor(fqn)
            else:
                self.env[by_name[pname]] = g.parameter(fqn, tuple(t.shape), dtype_name(t.dtype))
        for pname, (fqn, t) in cap.constants.items():
            self.env[by_name[pname]] = Const.of(t, fqn)
        given = iter(self.given_inputs or ())
        for pname in cap.user_inputs:
            node = by_name[pname]
            val = node.meta.get("val")
            if not hasattr(val, "shape"):
                self.env[node] = val  # a non-tensor input, specialised by export
                continue
            if self.given_inputs is not None:
                self.env[node] = next(given)
            else:
                self.env[node] = g.input(pname, tuple(int(d) for d in val.shape), dtype_name(val.dtype))
            if self.info is not None:
                self.info.inputs.append(self.env[node].name)

    def _convert(self, node, args, kwargs):
        target = node.target
        if target is operator.getitem:
            seq, i = args
            if hasattr(seq, "get_item"):
                return seq.get_item(self, i)
            return seq[i]
        if _foldable(target, args, kwargs):
            return _fold(target, args, kwargs, node)
        if _updates_aliased(node, self.order):
            raise Unsupported("an in-place update of a tensor that shares memory with another one still in use "
                              "(a view or the base of a view)")
        rule = self.rules.lookup(target)
        if rule is None:
            raise Unsupported("no conversion rule")
        return rule(self, bind(target, args, kwargs))

    def _rebind_mutated(self, node, value):
        """An in-place op (``relu_``, ``add_``) replaces the value of the tensor it mutates."""
        schema = getattr(node.target, "_schema", None)
        if schema is None or not schema.is_mutable or not node.args:
            return
        import torch

        first = node.args[0]
        if isinstance(first, torch.fx.Node) and self.is_tensor(value):
            self.env[first] = value

    def _check(self, node, value):
        """Every rule must produce the shape torch computed: a mismatch is a bug in the rule."""
        val = node.meta.get("val")
        if hasattr(val, "shape") and self.is_tensor(value):
            want = static_shape(val.shape)
            if want is None:  # after an unmapped node of data-dependent shape: that node says why
                return
            got = self.shape(value)
            if got != want:
                raise Unsupported(f"its conversion rule produced shape {got} where torch computes {want} "
                                  "(a bug in the rule)")

    def _stand_in(self, val, suffix=""):
        """A graph input in place of an unmapped node's value, so that conversion can go on."""
        if hasattr(val, "shape"):
            # A data-dependent extent (a boolean mask's selection, nonzero) stands in as 1: the import
            # fails anyway, and the list of unmapped nodes names the one that made it.
            shape = static_shape(val.shape) or tuple(_extent_or_one(d) for d in val.shape)
            return self.g.input(f"__unmapped__.{self.node.name}{suffix}", shape, dtype_name(val.dtype))
        if isinstance(val, (list, tuple)):
            return tuple(self._stand_in(v, f"{suffix}.{k}") for k, v in enumerate(val))
        return val

    def _record(self, node, reason):
        key = (target_name(node.target), reason)
        entry = self.unmapped.setdefault(key, Unmapped(key[0], reason))
        entry.nodes.append((node.name, _where(node)))

    def error(self) -> GraphError | None:
        if not self.unmapped:
            return None
        entries = list(self.unmapped.values())
        count = sum(len(e.nodes) for e in entries)
        lines = [(f"from_torch: {len(entries)} kind(s) of torch op ({count} node(s)) in {self.cap.name} "
                  "cannot be expressed in TDL:")]
        for e in entries:
            name, where = e.nodes[0]
            n = len(e.nodes)
            lines.append(f"  {e.target} ({n} node{'s' if n > 1 else ''}): {e.reason}; e.g. node '{name}'"
                         + (f" {where}" if where else ""))
            others = list(dict.fromkeys(w for _, w in e.nodes[1:] if w and w != where))
            if others:
                more = f" (and {len(others) - 2} more)" if len(others) > 2 else ""
                lines.append("      also " + "; ".join(others[:2]) + more)
        lines.append("Rewrite these parts of the model, or add a rule to tilewise/frontends/torch/_rules*.py "
                     "(and a TDL op to tdl_ops/torch_ops.py if none fits).")
        err = GraphError("\n".join(lines))
        err.unmapped = [(e.target, e.reason, len(e.nodes), e.nodes[0][0]) for e in entries]
        return err


def _first_line(e) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _is_view(node) -> bool:
    schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
    return bool(schema and schema.returns and schema.returns[0].alias_info is not None and not schema.is_mutable)


def _updates_aliased(node, order) -> bool:
    """An in-place op whose target shares memory with a tensor read later: the fx graph does not show
    that the other tensor changes too (export's training IR is not functionalized)."""
    import torch

    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.is_mutable or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return False
    src = node.args[0]
    aliases = {u for u in src.users if u is not node and _is_view(u)}
    if _is_view(src) and isinstance(src.args[0], torch.fx.Node):
        aliases.add(src.args[0])
    later = order[node]
    return any(order.get(u, -1) > later for a in aliases for u in a.users)


# ----- constant folding ------------------------------------------------------------------

_RANDOM = re.compile(r"^aten\.(rand|randn|randint|randperm|bernoulli|normal|uniform|native_dropout|dropout|"
                     r"multinomial|rrelu)")


def _flat(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _flat(y)
    else:
        yield x


def _foldable(target, args, kwargs) -> bool:
    """All tensor arguments are constants (or there are none) and the op is a deterministic ATen op."""
    if not hasattr(target, "_schema"):
        return False
    values = list(_flat(args)) + list(_flat(kwargs))
    if any(isinstance(v, (GTensor, View)) for v in values):
        return False
    name = target_name(target)
    if _RANDOM.match(name):
        if name.startswith("aten.dropout") and not any(v is True for v in values):
            return True  # dropout in eval mode is the identity
        raise Unsupported("a random op on constants (its value changes every step)")
    return True


def _fold(target, args, kwargs, node):
    import torch

    known = all(v.value is not None for v in _flat((args, kwargs)) if isinstance(v, Const))
    mutable = target._schema.is_mutable

    def unwrap(x):
        if isinstance(x, Const):
            if not known:
                return torch.empty(x.shape, dtype=x.dtype, device="meta")
            return x.value.clone() if mutable else x.value
        if isinstance(x, (list, tuple)):
            return type(x)(unwrap(y) for y in x)
        return x

    with torch.no_grad():
        out = target(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()})

    def wrap(x):
        if isinstance(x, torch.Tensor):
            return Const.of(x)
        if isinstance(x, (list, tuple)):
            return tuple(wrap(y) for y in x)
        return x
    return wrap(out)


def prod(shape) -> int:
    return int(math.prod(shape))

"""``@tw.op``: operator descriptions, their analysis and their reference execution."""

from __future__ import annotations

import html
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import _core
from .._core import ShapeError, TDLError
from .._util import did_you_mean
from . import registry
from .trace import Compute, Tensor, Tracer, Tracing, as_value, lambda_arity

Region = tuple  # tuple of inclusive (lo, hi) pairs, one per dimension; None when nothing is read


@dataclass(frozen=True)
class Strategy:
    """A basic partition strategy of an op for ``parts`` workers (Tofu §4.2).

    ``kind`` is "output" (split an output variable: outputs concatenate), "reduce" (split a
    reduction variable: partial outputs combine with ``reducer``) or "replicate" (every
    worker computes everything). ``input_regions[name][w]`` is the region of input ``name``
    worker ``w`` reads; ``output_regions[w]`` the part of the output it produces.
    Regions are tuples of inclusive ``(lo, hi)`` pairs (None: nothing), or strings for
    symbolic strategies.
    """

    kind: str
    dim: str | None
    reducer: str | None
    input_regions: dict[str, list[Region]]
    output_regions: list[Region]
    input_shapes: dict[str, tuple] | None = None  # None for symbolic strategies
    output_shape: tuple | None = None

    @property
    def parts(self) -> int:
        return len(self.output_regions)

    def __repr__(self):
        what = self.kind if self.dim is None else f"{self.kind}:{self.dim}"
        return f"Strategy({what}, parts={self.parts})"

    def to_dict(self) -> dict:
        """Plain data (JSON-ready): regions as lists of [lo, hi] pairs, or strings if symbolic."""

        def plain(region):
            if region is None:
                return None
            return [r if isinstance(r, str) else list(r) for r in region]

        return {
            "kind": self.kind,
            "dim": self.dim,
            "reducer": self.reducer,
            "input_regions": {n: [plain(r) for r in rs] for n, rs in self.input_regions.items()},
            "output_regions": [plain(r) for r in self.output_regions],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def _repr_html_(self) -> str:
        names = list(self.input_regions)
        head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
        rows = []
        for w in range(self.parts):
            cells = "".join(f"<td>{html.escape(_fmt_region(self.input_regions[n][w]))}</td>" for n in names)
            rows.append(f"<tr><td>{w}</td><td>{html.escape(_fmt_region(self.output_regions[w]))}</td>{cells}</tr>")
        title = html.escape(repr(self))
        return (f"<table><caption>{title}</caption><tr><th>worker</th><th>output</th>{head}</tr>"
                + "".join(rows) + "</table>")

    def draw(self, ax=None):
        """Plot what each worker reads and writes (matplotlib); returns the Axes."""
        from .plot import draw_strategy

        return draw_strategy(self, ax)

    def describe(self) -> str:
        """Multi-line table of the regions each worker reads and writes."""
        lines = [repr(self)]
        for w in range(self.parts):
            reads = ", ".join(f"{n}{_fmt_region(r[w])}" for n, r in self.input_regions.items())
            lines.append(f"  worker {w}: out{_fmt_region(self.output_regions[w])} <- {reads}")
        return "\n".join(lines)


def _fmt_region(region) -> str:
    if region is None:
        return "[]"
    parts = [r if isinstance(r, str) else f"{r[0]}..{r[1]}" for r in region]
    return "[" + ", ".join(parts) + "]"


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, np.ndarray):
        raise TDLError("attributes must be Python numbers or tuples, not arrays")
    return v


# Keyword arguments of Op's own methods; an attribute with one of these names could not be passed.
_RESERVED = frozenset({"parts", "out", "threads", "name"})


@dataclass(eq=False)  # ops compare and hash by identity: they key graphs and caches
class Op:
    """An operator described in TDL. Create with ``@tw.op``."""

    fn: Callable
    name: str
    reference_fn: Callable | None = None
    out_shape_fn: Callable | None = None
    attr_values: dict = field(default_factory=dict)
    grad_fn: Callable | None = None
    kernel: str | None = None
    kernel_vars: tuple | None = None
    _cache: dict = field(default_factory=dict, repr=False)
    _polymorphic: set = field(default_factory=set, repr=False)

    def __post_init__(self):
        sig = inspect.signature(self.fn)
        self.inputs: tuple[str, ...] = ()
        defaults = {}
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TDLError(f"op '{self.name}': *args/**kwargs parameters are not supported in a description")
            if p.default is inspect.Parameter.empty:
                if defaults:
                    raise TDLError(
                        f"op '{self.name}': tensor parameter '{p.name}' follows attributes; put inputs first"
                    )
                self.inputs += (p.name,)
            else:
                if p.name in _RESERVED:
                    raise TDLError(
                        f"op '{self.name}': attribute name '{p.name}' is reserved by the op methods "
                        f"({', '.join(sorted(_RESERVED))}); choose another"
                    )
                defaults[p.name] = p.default
        defaults.update(self.attr_values)
        self.attr_values = defaults
        self._check_kernel()
        self.__doc__ = self.fn.__doc__
        self.__name__ = self.name

    # ----- arguments -------------------------------------------------------------------

    @property
    def attrs(self) -> dict:
        """The attribute values (defaults, or those bound by with_attrs)."""
        return dict(self.attr_values)

    def with_attrs(self, **attrs) -> Op:
        """The same op with attribute values bound, e.g. ``conv.with_attrs(stride=2)``."""
        self._check_attrs(attrs)
        return Op(self.fn, self.name, self.reference_fn, self.out_shape_fn, {**self.attr_values, **attrs}, self.grad_fn,
                  self.kernel, self.kernel_vars)

    # ----- native kernel ---------------------------------------------------------------

    def _check_kernel(self):
        """The declared kernel exists (the roles are checked against the variables when tracing)."""
        if self.kernel is None:
            if self.kernel_vars is not None:
                raise TDLError(f"op '{self.name}': kernel_vars given without a kernel")
            return
        known = native_kernel_roles()
        if self.kernel not in known:
            raise TDLError(f"op '{self.name}': no native kernel named '{self.kernel}'"
                           f"{did_you_mean(self.kernel, known)} (kernels: {', '.join(sorted(known))})")
        if self.kernel_vars is not None:
            if isinstance(self.kernel_vars, str) or not all(isinstance(v, str) for v in self.kernel_vars):
                raise TDLError(f"op '{self.name}': kernel_vars must be a sequence of variable names, "
                               f"got {self.kernel_vars!r}")
            self.kernel_vars = tuple(self.kernel_vars)

    def _kernel_order(self, var_names: list[str]) -> list[int]:
        """Variable ids in the declared kernel's role order, checked against the kernel's roles."""
        roles = native_kernel_roles()[self.kernel]
        order = list(range(len(var_names)))
        if self.kernel_vars is not None:
            unknown = [v for v in self.kernel_vars if v not in var_names]
            if unknown or len(set(self.kernel_vars)) != len(self.kernel_vars):
                raise TDLError(f"op '{self.name}': kernel_vars {list(self.kernel_vars)} must name each of the "
                               f"description's variables {var_names} once")
            order = [var_names.index(v) for v in self.kernel_vars]
        variadic = any(r.endswith("*") for r in roles)
        if len(order) != len(var_names) or not (len(order) + 1 >= len(roles) if variadic else len(order) == len(roles)):
            raise TDLError(f"op '{self.name}': kernel '{self.kernel}' takes variables in the roles ({', '.join(roles)})"
                           f"{' (* = zero or more)' if variadic else ''}, the description has {var_names}; "
                           "list them in role order with kernel_vars=(...)")
        return [] if order == list(range(len(var_names))) else order

    def _check_attrs(self, attrs):
        for k in attrs:
            if k not in self.attr_values:
                valid = ", ".join(self.attr_values) or "none"
                raise TDLError(f"op '{self.name}' has no attribute '{k}' (attributes: {valid})")

    def _split(self, kwargs: dict) -> tuple[dict, dict]:
        """Separates input entries from attributes, rejecting unknown names."""
        inputs, attrs = {}, {}
        for k, v in kwargs.items():
            if k in self.inputs:
                inputs[k] = v
            elif k in self.attr_values:
                attrs[k] = v
            else:
                raise TDLError(
                    f"op '{self.name}' has no input or attribute '{k}' (inputs: {', '.join(self.inputs) or 'none'}; "
                    f"attributes: {', '.join(self.attr_values) or 'none'})"
                )
        return inputs, {**self.attr_values, **attrs}

    def _shapes(self, given: dict) -> list[tuple]:
        missing = [n for n in self.inputs if n not in given]
        if missing:
            raise ShapeError(f"op '{self.name}': missing shape for input(s) {', '.join(missing)}")
        shapes = []
        for n in self.inputs:
            s = given[n]
            if isinstance(s, (int, np.integer)):
                s = (int(s),)
            try:
                s = tuple(int(d) for d in s)
            except TypeError:
                raise ShapeError(
                    f"op '{self.name}': shape of '{n}' must be a tuple of ints, got {given[n]!r}"
                ) from None
            if any(d < 0 for d in s):
                raise ShapeError(f"op '{self.name}': shape of '{n}' has a negative extent: {s}")
            shapes.append(s)
        return shapes

    # ----- tracing ---------------------------------------------------------------------

    def trace(self, ranks: tuple | None = None, attrs: dict | None = None) -> _core.OpDesc:
        """The C++ description for the given input ranks (None: unknown) and attributes."""
        return self._traced(ranks, attrs)[0]

    def _opaques(self, ranks, attrs) -> list:
        """The opaque functions of the trace for these ranks and attributes, by id."""
        return self._traced(ranks, attrs)[1]

    def _traced(self, ranks, attrs) -> tuple:
        """(description, opaque functions), traced once per (ranks, attributes)."""
        attrs = {**self.attr_values, **(attrs or {})}
        ranks = tuple(ranks) if ranks is not None else (None,) * len(self.inputs)
        key = (ranks, _attrs_key(attrs))
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._trace(ranks, attrs)
        return entry

    def _trace(self, ranks, attrs):
        tracer = Tracer(self.name)
        with Tracing(tracer):
            tensors = []
            for i, (n, r) in enumerate(zip(self.inputs, ranks)):
                t = Tensor(tracer, n, i, r)
                tracer.tensors.append(t)
                tensors.append(t)
            out = self.fn(*tensors, **attrs)
            if isinstance(out, Compute):
                names, fn = [f"i{k}" for k in range(out.ndim)], out.fn
            elif callable(out) and not isinstance(out, Tensor):
                names, _ = lambda_arity(out, f"the lambda returned by '{self.name}'", None)
                fn = out
            else:
                raise TDLError(
                    f"op '{self.name}': the description must return a lambda over the output indices "
                    f"(or tw.compute(ndim, fn)), got {type(out).__name__}"
                )
            first = len(tracer.vars)
            out_vars = []
            for n in names:
                out_vars.append(tracer.new_var(n, True))
                tracer.in_scope.append(n)
            out_ids = list(range(first, first + len(out_vars)))
            body = as_value(fn(*out_vars))
        inputs = [(t.name, -1 if t._ndim is None else t._ndim) for t in tensors]
        kernel_vars = [] if self.kernel is None else self._kernel_order([v[0] for v in tracer.vars])
        desc = _core.OpDesc(
            self.name,
            inputs,
            tracer.vars,
            out_ids,
            [f.name for f in tracer.opaques],
            body._node,
            self.kernel or "",
            kernel_vars,
        )
        return desc, list(tracer.opaques)

    def __str__(self):
        try:
            return f"{self.name}: {self.trace()}"
        except TDLError:
            return f"{self.name}({', '.join(self.inputs)})"

    def __repr__(self):
        attrs = "".join(f", {k}={v!r}" for k, v in self.attr_values.items())
        return f"<tw.op {self.name}({', '.join(self.inputs)}{attrs})>"

    # ----- shapes ----------------------------------------------------------------------

    def _desc_for(self, shapes, attrs) -> _core.OpDesc:
        """The description traced for these shapes' ranks, with a ShapeError for a wrong rank."""
        key = _attrs_key(attrs)
        generic = None
        if key not in self._polymorphic:
            try:
                generic = self.trace(None, attrs)
            except TDLError:
                self._polymorphic.add(key)  # rank-polymorphic: needs the ranks to trace; remember
        if generic is not None:
            for name, rank, shape in zip(self.inputs, generic.input_ranks, shapes):
                if rank >= 0 and rank != len(shape):
                    raise ShapeError(
                        f"op '{self.name}': input '{name}' must have {rank} dimensions, got shape {tuple(shape)}"
                    )
        return self.trace(tuple(len(s) for s in shapes), attrs)

    def _resolve(self, kwargs, out=None):
        given, attrs = self._split(kwargs)
        shapes = self._shapes(given)
        desc = self._desc_for(shapes, attrs)
        if out is None and self.out_shape_fn is not None:
            out = self._declared_shape(shapes, attrs)
        if out is not None:
            out = tuple(int(d) for d in (out if isinstance(out, (tuple, list)) else (out,)))
        return desc, shapes, attrs, out

    def _declared_shape(self, shapes, attrs) -> tuple:
        out = self.out_shape_fn(*shapes, **attrs)
        try:
            return tuple(int(d) for d in out)
        except TypeError:
            raise ShapeError(f"op '{self.name}': out_shape returned {out!r}, not a tuple of ints") from None

    def infer_shape(self, **shapes_and_attrs) -> tuple:
        """Output shape for the given input shapes, e.g. ``matmul.infer_shape(a=(4, 8), b=(8, 2))``."""
        desc, shapes, attrs, out = self._resolve(shapes_and_attrs)
        if out is not None:
            return out
        return tuple(desc.infer_output_shape(shapes))

    # ----- analysis --------------------------------------------------------------------

    def strategies(self, parts: int = 2, out=None, **shapes_and_attrs) -> list[Strategy]:
        """Every basic strategy with the concrete regions each of ``parts`` workers reads."""
        if not isinstance(parts, (int, np.integer)) or parts < 1:
            raise ValueError(f"parts must be a positive integer, got {parts!r}")
        desc, shapes, _, out = self._resolve(shapes_and_attrs, out)
        out_shape = out if out is not None else tuple(desc.infer_output_shape(shapes))
        named = {n: tuple(s) for n, s in zip(self.inputs, shapes)}
        return [_strategy(d, named, tuple(out_shape)) for d in desc.strategies(int(parts), shapes, out)]

    def symbolic_strategies(self, parts: int = 2, **ranks_and_attrs) -> list[Strategy]:
        """The strategies with symbolic regions over the extents X_v (Tofu §4.2).

        Pass input ranks (or shapes) for rank-polymorphic ops: ``relu.symbolic_strategies(x=2)``.
        """
        if not isinstance(parts, (int, np.integer)) or parts < 1:
            raise ValueError(f"parts must be a positive integer, got {parts!r}")
        given, attrs = self._split(ranks_and_attrs)
        ranks = tuple(_rank_of(given.get(n)) for n in self.inputs)
        return [_strategy(d) for d in self.trace(ranks, attrs).symbolic_strategies(int(parts))]

    @property
    def is_elementwise(self) -> bool:
        """Every input is read at exactly the output index, with no reduction.

        Rank-polymorphic ops need ranks: use ``is_elementwise_for(x=2)``.
        """
        return self.trace().is_elementwise

    def is_elementwise_for(self, **ranks_and_attrs) -> bool:
        """``is_elementwise`` for given input ranks (or shapes) and attributes."""
        given, attrs = self._split(ranks_and_attrs)
        return self.trace(tuple(_rank_of(given.get(n)) for n in self.inputs), attrs).is_elementwise

    def cost(self, out=None, **shapes_and_attrs) -> dict:
        """FLOPs and element reads for the given shapes, from the description.

        Each arithmetic operation, comparison and math function counts as one FLOP; opaque
        functions count zero. ``bytes`` assumes float32 (4 bytes per element read and written).
        """
        desc, shapes, _, out = self._resolve(shapes_and_attrs, out)
        w = desc.work(shapes, out)
        out_shape = out if out is not None else tuple(desc.infer_output_shape(shapes))
        n = int(np.prod(out_shape)) if out_shape else 1
        return {
            "output_elements": n,
            "flops_per_element": w["flops_per_element"],
            "reads_per_element": w["reads_per_element"],
            "flops": w["flops_per_element"] * n,
            "bytes": 4 * (w["reads_per_element"] + 1) * n,
        }

    # ----- execution -------------------------------------------------------------------

    def evaluate(self, *arrays, out=None, threads: int = 0, **kwargs) -> np.ndarray:
        """Run the description with the C++ reference interpreter (float64).

        Inputs by position or by name; attributes by name; ``out`` fixes the output shape.
        """
        named, attrs = self._split(kwargs)
        if len(arrays) > len(self.inputs):
            raise TDLError(f"op '{self.name}' takes {len(self.inputs)} inputs, got {len(arrays)}")
        for n, a in zip(self.inputs, arrays):
            if n in named:
                raise TDLError(f"op '{self.name}': input '{n}' given twice")
            named[n] = a
        missing = [n for n in self.inputs if n not in named]
        if missing:
            raise TDLError(f"op '{self.name}': missing input(s) {', '.join(missing)}")
        arrs = [np.require(named[n], np.float64, 'C') for n in self.inputs]  # keeps 0-d arrays 0-d
        shapes = [a.shape for a in arrs]
        desc = self._desc_for(shapes, attrs)
        if out is None and self.out_shape_fn is not None:
            out = self._declared_shape(shapes, attrs)
        opaques = self._opaques(tuple(len(s) for s in shapes), attrs)

        def call(fid, args):
            f = opaques[fid]
            if f.fn is None:
                raise TDLError(f"op '{self.name}': opaque function '{f.name}' has no implementation; pass fn=")
            return np.asarray(f.fn(*args), dtype=np.float64)

        return desc.evaluate(arrs, out, call if opaques else None, threads)

    def def_grad(self, fn: Callable) -> Callable:
        """Declare the gradient rule beside the op (usable as a decorator):

            @matmul.def_grad
            def _(g, a, b, out):
                return tdl_ops.matmul_nt(g, b), tdl_ops.matmul_tn(a, g)

        ``fn(g, *inputs, out=..., **attrs)`` receives graph tensors (the output's gradient, the
        inputs, the output) and the attributes, and returns one gradient per input (None for an
        input with no gradient), built by calling ops.
        """
        self.grad_fn = fn
        return fn

    def __call__(self, *tensors, name: str | None = None, out=None, **attrs):
        """Apply the op to graph tensors: adds a node to their graph and returns its output."""
        # The graph layer sits above this one: a graph tensor (tw.GTensor) is recognised by the graph
        # it carries, which applies ops, rather than by importing its class.
        graph = getattr(tensors[0], "graph", None) if tensors else None
        if not callable(getattr(graph, "apply", None)):
            raise TDLError(
                f"op '{self.name}' is applied to graph tensors (tw.Graph); to compute on arrays use "
                f"{self.name}.evaluate(...)"
            )
        return graph.apply(self, tensors, attrs, name=name, out=out)

    def reference(self, *arrays, **attrs) -> np.ndarray:
        """The NumPy reference implementation given with ``@tw.op(reference=...)``."""
        if self.reference_fn is None:
            raise TDLError(f"op '{self.name}' has no NumPy reference; give one with @tw.op(reference=...)")
        self._check_attrs(attrs)
        return self.reference_fn(*arrays, **{**self.attr_values, **attrs})


def _attrs_key(attrs: dict) -> tuple:
    """Attributes as a hashable cache key."""
    return tuple(sorted((k, _hashable(v)) for k, v in attrs.items()))


def _rank_of(v):
    if v is None:
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    return len(tuple(v))


def _strategy(d: dict, input_shapes=None, output_shape=None) -> Strategy:
    return Strategy(d["kind"], d["dim"], d["reducer"], dict(d["input_regions"]), list(d["output_regions"]),
                    input_shapes, output_shape)


def native_kernel_roles() -> dict[str, tuple[str, ...]]:
    """The native kernels of this build and the roles of their variables (``*``: zero or more)."""
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = {name: tuple(roles) for name, roles in _core.native_kernels()}
    return _KERNELS


_KERNELS = None


def op(fn: Callable | None = None, *, name: str | None = None, reference: Callable | None = None,
       out_shape: Callable | None = None, grad: Callable | None = None, kernel: str | None = None,
       kernel_vars=None) -> Any:
    """Declare a TDL operator: ``@tw.op`` or ``@tw.op(reference=np_fn, out_shape=fn)``.

    The decorated function takes input tensors (parameters without defaults) and attributes
    (parameters with defaults) and returns a lambda over the output indices. ``grad`` is the
    gradient rule used by autodiff: ``grad(g, *inputs, out=..., **attrs)`` gets graph tensors
    (the output's gradient, the inputs, the output) and returns one gradient per input (or None),
    built by calling ops. ``kernel`` names the native kernel that computes a device's share of the op
    (``tilewise.tdl.native_kernel_roles()`` lists them with the roles of their variables); the
    description's variables take the kernel's roles in order, or in the order ``kernel_vars`` names
    them. Without a kernel the runtime interprets the op.
    """

    def wrap(f):
        if not callable(f):
            raise TDLError("@tw.op decorates a function")
        new = Op(f, name or f.__name__, reference, out_shape, grad_fn=grad, kernel=kernel, kernel_vars=kernel_vars)
        registry.register(new)
        return new

    return wrap(fn) if fn is not None else wrap

"""Tracing TDL descriptions: symbolic index variables, values, tensors, reducers.

Calling an op's lambda with these objects records an expression tree of C++ nodes
(``tilewise._core``); nothing is parsed from strings. Each object keeps a readable text so
errors can quote the offending sub-expression.
"""

from __future__ import annotations

import inspect
import numbers
import threading

from .. import _core
from .._core import ShapeError, TDLError

_state = threading.local()


class Tracer:
    """Collects the variables, tensors and opaque functions of one op being traced."""

    def __init__(self, op_name: str):
        self.op_name = op_name
        self.vars: list[tuple[str, bool, object]] = []  # (name, is_output, extent node or None)
        self.tensors: list[Tensor] = []
        self.opaques: list[OpaqueFunction] = []
        self.in_scope: list[str] = []  # names bound by the lambdas enclosing the point being traced

    def error(self, message: str) -> TDLError:
        return TDLError(f"op '{self.op_name}': {message}")

    def new_var(self, name: str, output: bool, extent=None) -> Index:
        """A new index variable; the caller puts it in scope while its lambda is traced."""
        if name in self.in_scope:
            raise self.error(
                f"index variable name `{name}` is used twice (a lambda rebinds it inside another); "
                "give each lambda argument its own name"
            )
        for t in self.tensors:
            if t.name == name:
                raise self.error(f"index variable `{name}` has the name of input tensor '{name}'")
        # Sibling reductions may reuse a name (Sum(lambda k: ..) / Max(lambda k: ..)); the core
        # needs unique names, so later ones get primes.
        unique = name
        while any(existing == unique for existing, _, _ in self.vars):
            unique += "'"
        self.vars.append((unique, output, extent))
        return Index(_core.index_var(len(self.vars) - 1), name)

    def opaque_id(self, fn: OpaqueFunction) -> int:
        for i, f in enumerate(self.opaques):
            if f is fn:
                return i
        self.opaques.append(fn)
        return len(self.opaques) - 1


def _tracer() -> Tracer:
    t = getattr(_state, "tracer", None)
    if t is None:
        raise TDLError("TDL expressions can only be built while an @tw.op description is traced")
    return t


def _error(message: str) -> TDLError:
    t = getattr(_state, "tracer", None)
    return t.error(message) if t is not None else TDLError(message)


class Tracing:
    """Context manager installing a tracer for the current thread."""

    def __init__(self, tracer: Tracer):
        self.tracer = tracer

    def __enter__(self):
        self.previous = getattr(_state, "tracer", None)
        _state.tracer = self.tracer
        return self.tracer

    def __exit__(self, *exc):
        _state.tracer = self.previous


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _text(x) -> str:
    return x._text if isinstance(x, (Index, Value)) else repr(x)


class _Traced:
    """A C++ expression node with the readable text of the Python expression that built it."""

    __slots__ = ("_node", "_text")
    __hash__ = object.__hash__  # operators build expressions, so == cannot mean identity

    def __init__(self, node, text: str):
        self._node = node
        self._text = text

    def __repr__(self):
        return f"{type(self).__name__}({self._text})"


class Index(_Traced):
    """An affine index expression over index variables and tensor extents."""

    __slots__ = ()
    __hash__ = _Traced.__hash__  # defining __eq__ below would otherwise unset it

    @staticmethod
    def _coerce(x):
        if isinstance(x, Index):
            return x
        if _is_int(x):
            return Index(_core.index_const(int(x)), str(int(x)))
        return None

    def _arith(self, other, op: str, reflected: bool = False):
        if _is_int(other) and other == 0 and not (reflected and op == "-"):
            return self  # keeps texts readable: `x + 0` is `x`
        o = Index._coerce(other)
        if o is None:
            if isinstance(other, Value) or _is_number(other):
                a, b = (other, self) if reflected else (self, other)
                return Value._binary(op, a, b)
            raise _error(f"cannot combine index `{self._text}` with {type(other).__name__} {other!r} using {op}")
        a, b = (o, self) if reflected else (self, o)
        node = _core.index_add(a._node, b._node) if op == "+" else _core.index_sub(a._node, b._node)
        return Index(node, f"{a._text} {op} {b._text}")

    def __add__(self, other):
        return self._arith(other, "+")

    def __radd__(self, other):
        return self._arith(other, "+", reflected=True)

    def __sub__(self, other):
        return self._arith(other, "-")

    def __rsub__(self, other):
        return self._arith(other, "-", reflected=True)

    def __neg__(self):
        return Index(_core.index_scale(self._node, -1), f"-({self._text})")

    def __pos__(self):
        return self

    def _scale(self, other, reflected):
        if _is_int(other) and other == 1:
            return self
        if _is_int(other):
            text = f"{other}*{self._paren()}" if reflected else f"{self._paren()}*{other}"
            return Index(_core.index_scale(self._node, int(other)), text)
        if isinstance(other, Index):
            if not self._node.variables and not other._node.variables and not (
                self._node.is_constant or other._node.is_constant
            ):
                # A product of tensor extents (a.shape[0] * a.shape[1]) is a value, e.g. for a mean.
                return Value._binary("*", self, other)
            if self._node.is_constant or other._node.is_constant:
                k, idx = (self, other) if self._node.is_constant else (other, self)
                return Index(_core.index_scale(idx._node, k._node.constant), f"{self._paren()}*{other._paren()}")
            a, b = (other, self) if reflected else (self, other)
            raise _error(f"index product of two variables is not affine: `{a._paren()} * {b._paren()}`")
        if isinstance(other, Value) or _is_number(other):
            a, b = (other, self) if reflected else (self, other)
            return Value._binary("*", a, b)
        raise _error(f"cannot multiply index `{self._text}` by {type(other).__name__} {other!r}")

    def __mul__(self, other):
        return self._scale(other, False)

    def __rmul__(self, other):
        return self._scale(other, True)

    def _paren(self):
        return self._text if " " not in self._text else f"({self._text})"

    def _divisor(self, other, op):
        if isinstance(other, Index) and other._node.is_constant:
            other = other._node.constant
        if not _is_int(other) or other <= 0:
            raise _error(
                f"index `{self._paren()} {op} {_text(other)}` is not affine: {op} needs a positive integer constant"
            )
        return int(other)

    def __floordiv__(self, other):
        k = self._divisor(other, "//")
        return Index(_core.index_floordiv(self._node, k), f"{self._paren()} // {k}")

    def __mod__(self, other):
        k = self._divisor(other, "%")
        return Index(_core.index_mod(self._node, k), f"{self._paren()} % {k}")

    def __truediv__(self, other):
        if isinstance(other, Value) or _is_number(other) and (not _is_int(other) or not self._node.variables):
            return Value._binary("/", self, other)
        raise _error(
            f"index `{self._paren()} / {_text(other)}` is not affine: use // for integer division of an index, "
            "or tw.index_value(...) to divide it as a value"
        )

    def __rtruediv__(self, other):
        return Value._binary("/", other, self)

    def __pow__(self, other):
        raise _error(f"index `{self._paren()} ** {_text(other)}` is not affine")

    def _compare(self, other, op):
        if isinstance(other, Value) or (_is_number(other) and not _is_int(other)):
            return Value._binary(op, self, other)
        raise _error(
            f"comparison of indices `{self._text} {op} {_text(other)}` is not affine; to use it as a value "
            f"(a mask), write tw.index_value({self._text}) {op} ..."
        )

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    def __eq__(self, other):
        return self._compare(other, "==")

    def __ne__(self, other):
        return self._compare(other, "!=")

    def __bool__(self):
        raise _error(
            f"index `{self._text}` was used as a Python bool (an `if` or `and`); TDL has no branches, "
            "use tw.where(...) on values"
        )

    def __index__(self):
        raise _error(
            f"index `{self._text}` was used as a Python integer; index expressions are symbolic "
            "(is the indexed object an input tensor of the op?)"
        )


def as_value(x) -> Value:
    if isinstance(x, Value):
        return x
    if isinstance(x, Index):
        return Value(_core.expr_index_value(x._node), x._text)
    if _is_number(x):
        return Value(_core.expr_const(float(x)), repr(x))
    if isinstance(x, Slice):
        raise _error(f"slice `{x._text}` used as a value; index it (`{x._text}[i]`) or reduce it (tw.Sum)")
    raise _error(f"{type(x).__name__} {x!r} is not a TDL value")


def index_value(x) -> Value:
    """Use an index expression as a value (for masks and iota): ``tw.index_value(i) <= tw.index_value(j)``."""
    if not isinstance(x, Index) and not _is_int(x):
        raise _error(f"tw.index_value expects an index expression, got {type(x).__name__}")
    return as_value(Index._coerce(x))


class Value(_Traced):
    """A scalar TDL value expression."""

    __slots__ = ()
    __hash__ = _Traced.__hash__

    @staticmethod
    def _binary(op, a, b):
        va, vb = as_value(a), as_value(b)
        node = _core.expr_binary(op, va._node, vb._node)
        text = f"{op}({va._text}, {vb._text})" if op in ("max", "min") else f"({va._text} {op} {vb._text})"
        return Value(node, text)

    def __add__(self, o):
        return Value._binary("+", self, o)

    def __radd__(self, o):
        return Value._binary("+", o, self)

    def __sub__(self, o):
        return Value._binary("-", self, o)

    def __rsub__(self, o):
        return Value._binary("-", o, self)

    def __mul__(self, o):
        return Value._binary("*", self, o)

    def __rmul__(self, o):
        return Value._binary("*", o, self)

    def __truediv__(self, o):
        return Value._binary("/", self, o)

    def __rtruediv__(self, o):
        return Value._binary("/", o, self)

    def __neg__(self):
        return _unary("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _unary("abs", self)

    def __pow__(self, p):
        if not _is_number(p):
            raise _error(f"`{self._text} ** {_text(p)}`: the exponent must be a constant number")
        return Value(_core.expr_unary("pow", self._node, float(p)), f"({self._text})**{p}")

    def __lt__(self, o):
        return Value._binary("<", self, o)

    def __le__(self, o):
        return Value._binary("<=", self, o)

    def __gt__(self, o):
        return Value._binary(">", self, o)

    def __ge__(self, o):
        return Value._binary(">=", self, o)

    def __eq__(self, o):
        return Value._binary("==", self, o)

    def __ne__(self, o):
        return Value._binary("!=", self, o)

    def __bool__(self):
        raise _error(f"value `{self._text}` was used as a Python bool; TDL has no branches, use tw.where(...)")

    def __getitem__(self, key):
        raise _error(f"value `{self._text}` is a scalar and cannot be indexed; only tensors and slices can")


def _unary(name, x, exponent=0.0):
    v = as_value(x)
    return Value(_core.expr_unary(name, v._node, exponent), f"{name}({v._text})")


def exp(x):
    """e**x."""
    return _unary("exp", x)


def log(x):
    """Natural logarithm."""
    return _unary("log", x)


def tanh(x):
    """Hyperbolic tangent."""
    return _unary("tanh", x)


def sigmoid(x):
    """1 / (1 + exp(-x))."""
    return _unary("sigmoid", x)


def sqrt(x):
    """Square root."""
    return _unary("sqrt", x)


def abs(x):  # noqa: A001 - TDL's math function, used as tw.abs
    """Absolute value."""
    return _unary("abs", x)


def erf(x):
    """Gauss error function."""
    return _unary("erf", x)


def max(a, b):  # noqa: A001 - TDL's binary max, used as tw.max
    """Element-wise maximum of two values (the reducer is tw.Max)."""
    return Value._binary("max", a, b)


def min(a, b):  # noqa: A001 - TDL's binary min, used as tw.min
    """Element-wise minimum of two values (the reducer is tw.Min)."""
    return Value._binary("min", a, b)


def where(cond, a, b):
    """``a`` where ``cond`` is non-zero, else ``b``."""
    c, va, vb = as_value(cond), as_value(a), as_value(b)
    return Value(_core.expr_select(c._node, va._node, vb._node), f"where({c._text}, {va._text}, {vb._text})")


class _ShapeProxy:
    """``t.shape``: ``t.shape[d]`` is the symbolic extent of dimension d."""

    def __init__(self, tensor: Tensor):
        self._tensor = tensor

    def __getitem__(self, d):
        t = self._tensor
        if not _is_int(d):
            raise _error(f"{t.name}.shape[{d!r}]: the dimension must be an integer")
        ndim = t._ndim
        if ndim is None:
            raise _error(f"{t.name}.shape[{d}] needs the rank of '{t.name}': pass its shape or rank")
        if d < 0:
            d += ndim
        if not 0 <= d < ndim:
            raise _error(f"{t.name}.shape[{d}] is out of range for a tensor of {ndim} dimensions")
        return Index(_core.index_extent(t.id, d), f"{t.name}.shape[{d}]")

    def __len__(self):
        return self._tensor.ndim


class Tensor:
    """An input tensor inside a description: index it, slice it, or ask its shape."""

    def __init__(self, tracer: Tracer, name: str, tid: int, ndim: int | None):
        self._tracer = tracer
        self.name = name
        self.id = tid
        self._ndim = ndim
        self._rank_given = ndim is not None  # the caller's shape fixed it

    @property
    def ndim(self) -> int:
        """The rank; known when the caller gave shapes or ranks, or after the first access."""
        if self._ndim is None:
            raise _error(f"the rank of '{self.name}' is not known here: pass its shape (or rank) to the op")
        return self._ndim

    @property
    def shape(self) -> _ShapeProxy:
        return _ShapeProxy(self)

    def __repr__(self):
        return f"Tensor({self.name})"

    def _indices(self, key) -> list:
        if getattr(_state, "tracer", None) is not self._tracer:
            raise _error(f"unknown tensor '{self.name}': it is an input of op '{self._tracer.op_name}', not of this op")
        if not isinstance(key, tuple):
            key = (key,)
        flat = []
        for k in key:
            flat.extend(k if isinstance(k, (tuple, list)) else [k])
        out = []
        for k in flat:
            if isinstance(k, slice):
                if k != slice(None):
                    raise _error(
                        f"{self.name}[...]: only whole-dimension slices `:` are supported, got {k}; "
                        "describe sub-ranges with shifted indices"
                    )
                out.append(None)
            elif isinstance(k, Index):
                out.append(k)
            elif _is_int(k):
                out.append(Index._coerce(k))
            elif isinstance(k, Value):
                raise _error(
                    f"{self.name}[{k._text}]: data-dependent indexing (a value used as an index) is not "
                    "affine; describe it with tw.opaque(...)"
                )
            else:
                raise _error(f"{self.name}[...]: index {k!r} of type {type(k).__name__} is not an index expression")
        if self._ndim is None:
            self._ndim = len(out)
        elif len(out) != self._ndim:
            text = ", ".join(":" if i is None else i._text for i in out)
            if self._rank_given:
                raise ShapeError(
                    f"op '{self._tracer.op_name}': input '{self.name}' was given a shape of rank {self._ndim} but "
                    f"the description indexes it with {len(out)} indices: `{self.name}[{text}]`"
                )
            raise _error(
                f"wrong number of indices: tensor '{self.name}' has {self._ndim} dimensions but "
                f"`{self.name}[{text}]` uses {len(out)}"
            )
        return out

    def __getitem__(self, key):
        idx = self._indices(key)
        text = f"{self.name}[{', '.join(':' if i is None else i._text for i in idx)}]"
        if any(i is None for i in idx):
            return Slice(self, idx, text)
        return _Access(_core.expr_access(self.id, [i._node for i in idx]), text, self, idx)

    def __bool__(self):
        raise _error(f"tensor '{self.name}' was used as a Python bool")


class Slice:
    """``t[b, :, :]``: a tensor-valued lambda over its ``:`` dimensions (Tofu §4.1 sugar)."""

    def __init__(self, tensor: Tensor, dims: list, text: str):
        self.tensor = tensor
        self.dims = dims
        self._text = text

    def _as_value_error(self, *_):
        raise _error(f"slice `{self._text}` used as a value; index it (`{self._text}[i]`) or reduce it (tw.Sum)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _as_value_error
    __truediv__ = __rtruediv__ = __neg__ = __pow__ = __bool__ = _as_value_error

    @property
    def free_dims(self) -> int:
        return sum(d is None for d in self.dims)

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != self.free_dims:
            raise _error(f"slice `{self._text}` has {self.free_dims} free dimensions but is indexed with {len(key)}")
        it = iter(key)
        filled = [next(it) if d is None else d for d in self.dims]
        return self.tensor[tuple(filled)]


def lambda_arity(fn, what: str, ndim):
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        raise _error(f"{what} must be a lambda") from None
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        if ndim is None:
            raise _error(f"{what} takes *args: pass ndim= to say how many index variables it has")
        return None, ndim
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if ndim is not None and ndim != len(names):
        raise _error(f"{what} has {len(names)} arguments but ndim={ndim}")
    return names, len(names)


def _fresh(prefix: str) -> str:
    tracer = _tracer()
    taken = {n for n, _, _ in tracer.vars}
    i = 0
    while f"{prefix}{i}" in taken:
        i += 1
    return f"{prefix}{i}"


class _Reducer:
    """A built-in reducer (Tofu §4.1): Sum, Max, Min, Prod."""

    def __init__(self, name: str):
        self.name = name
        self.__name__ = name
        self.__doc__ = f"{name} over one or more new reduction variables: tw.{name}(lambda k: ...) or tw.{name}(slice)."

    def __repr__(self):
        return f"tw.{self.name}"

    def __call__(self, fn, extents=None, ndim=None):
        tracer = _tracer()
        if isinstance(fn, Slice):
            n = fn.free_dims
            names = [_fresh("r") for _ in range(n)]
            body_fn = fn.__getitem__
            call = lambda *vs: body_fn(tuple(vs))  # noqa: E731
        elif callable(fn):
            names, n = lambda_arity(fn, f"{self.name}(...)'s argument", ndim)
            call = fn
        else:
            raise _error(f"tw.{self.name} expects a lambda or a slice, got {type(fn).__name__}")
        if n == 0:
            raise _error(f"tw.{self.name} needs at least one reduction variable")
        if extents is not None:
            extents = tuple(extents) if isinstance(extents, (tuple, list)) else (extents,)
            if len(extents) != n:
                raise _error(f"tw.{self.name}: extents has {len(extents)} entries for {n} reduction variables")
        variables, ids = [], []
        for k in range(n):
            name = names[k] if names is not None else _fresh("r")
            ext = None
            if extents is not None:
                e = extents[k]
                e = Index._coerce(e) if not isinstance(e, Index) else e
                if e is None:
                    raise _error(f"tw.{self.name}: extent {extents[k]!r} must be an int or t.shape[d]")
                ext = e._node
            ids.append(len(tracer.vars))
            variables.append(tracer.new_var(name, False, ext))
        names_bound = [v._text for v in variables]
        tracer.in_scope.extend(names_bound)
        try:
            body = as_value(call(*variables))
        finally:
            del tracer.in_scope[len(tracer.in_scope) - len(names_bound):]
        text = f"{self.name}({', '.join(v._text for v in variables)}: {body._text})"
        return Value(_core.expr_reduce(self.name, ids, body._node), text)


Sum = _Reducer("Sum")
Max = _Reducer("Max")
Min = _Reducer("Min")
Prod = _Reducer("Prod")


class OpaqueFunction:
    """A function TDL does not look inside (Tofu §4.1): ``F = tw.opaque("Cholesky", fn=np.linalg.cholesky)``.

    ``F(batch_mat[b, :, :])[i, j]`` reads the whole slice; ``fn`` computes it on NumPy arrays.
    The result has the shape of the first slice's ``:`` dimensions unless ``shape`` says
    otherwise: ``shape(*arg_shapes)`` gets each argument's ``:`` extents (symbolic) and returns
    the result's, e.g. ``shape=lambda table, ids: (table[1],)`` for an embedding row.
    """

    def __init__(self, name: str, fn=None, shape=None):
        if not isinstance(name, str) or not name:
            raise TDLError("tw.opaque needs a non-empty name")
        if fn is not None and not callable(fn):
            raise TDLError(f"tw.opaque('{name}'): fn must be callable")
        if shape is not None and not callable(shape):
            raise TDLError(f"tw.opaque('{name}'): shape must be callable")
        self.name = name
        self.fn = fn
        self.shape = shape

    def __repr__(self):
        return f"tw.opaque({self.name!r})"

    def __call__(self, *args):
        tracer = _tracer()
        slices, texts, arg_shapes = [], [], []
        for a in args:
            if isinstance(a, Slice):
                slices.append((a.tensor.id, [None if d is None else d._node for d in a.dims]))
                texts.append(a._text)
                arg_shapes.append(tuple(a.tensor.shape[k] for k, d in enumerate(a.dims) if d is None))
            elif isinstance(a, _Access):
                slices.append((a.tensor.id, [d._node for d in a.dims]))
                texts.append(a._text)
                arg_shapes.append(())
            else:
                raise _error(
                    f"opaque function '{self.name}' takes tensor slices (t[b, :, :]) or elements (t[i]), "
                    f"got {_text(a)}"
                )
        if self.shape is not None:
            extents = tuple(self.shape(*arg_shapes))
        elif arg_shapes and isinstance(args[0], Slice):
            extents = arg_shapes[0]
        else:
            raise _error(f"opaque function '{self.name}': give shape= (its first argument is not a slice)")
        ext = []
        for e in extents:
            i = Index._coerce(e)
            if i is None:
                raise _error(f"opaque function '{self.name}': shape entries must be ints or t.shape[d], got {e!r}")
            ext.append(i)
        text = f"{self.name}({', '.join(texts)})"
        return _OpaqueCall(self, tracer.opaque_id(self), slices, text, ext)


class _Access(Value):
    """A tensor element access; remembers its tensor so it can be an opaque argument."""

    __slots__ = ("tensor", "dims")

    def __init__(self, node, text, tensor, dims):
        super().__init__(node, text)
        self.tensor = tensor
        self.dims = dims


class _OpaqueCall:
    def __init__(self, fn, fid, slices, text, extents):
        self.fn, self.fid, self.slices, self._text, self.extents = fn, fid, slices, text, extents

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) != len(self.extents):
            raise _error(f"`{self._text}` has {len(self.extents)} result dimensions but is indexed with {len(key)}")
        idx = []
        for k in key:
            i = Index._coerce(k)
            if i is None:
                raise _error(f"`{self._text}[...]`: index {_text(k)} is not an index expression")
            idx.append(i)
        text = f"{self._text}[{', '.join(i._text for i in idx)}]"
        node = _core.expr_opaque(self.fid, self.slices, [i._node for i in idx], [e._node for e in self.extents])
        return Value(node, text)


def opaque(name: str, fn=None, shape=None) -> OpaqueFunction:
    """Declare an opaque function over whole slices (e.g. Cholesky); ``fn`` maps NumPy arrays to an array."""
    return OpaqueFunction(name, fn, shape)


class Compute:
    """``tw.compute(ndim, lambda *idx: ...)``: an output lambda with ndim variables."""

    def __init__(self, ndim: int, fn):
        if not _is_int(ndim) or ndim < 0:
            raise TDLError(f"tw.compute: ndim must be a non-negative int, got {ndim!r}")
        if not callable(fn):
            raise TDLError("tw.compute: fn must be callable")
        self.ndim = int(ndim)
        self.fn = fn


def compute(ndim: int, fn) -> Compute:
    """An output lambda of ``ndim`` index variables, for rank-polymorphic ops."""
    return Compute(ndim, fn)

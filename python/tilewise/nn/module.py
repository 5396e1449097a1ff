"""PyTorch-style modules whose forward adds ops to the graph of its input tensors.

    >>> import tilewise as tw
    >>> class Net(tw.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = tw.nn.Linear(16, 4)
    ...     def forward(self, x):
    ...         return tw.nn.functional.relu(self.fc(x))
    >>> net = Net()
    >>> [n for n, _ in net.named_parameters()]
    ['fc.weight', 'fc.bias']
    >>> g = tw.Graph()
    >>> y = net(g.input("x", (8, 16)))
    >>> y.shape, g.tensor("fc.weight").role
    ((8, 4), 'parameter')

A module's parameters are declarations (shape, dtype). The first time a module runs on tensors
of a graph, each parameter it touches becomes ``graph.parameter(<dotted path>)``; later calls in
that graph reuse the same tensor, so a module called twice shares its weights. Ops made by a
module's forward are named under its dotted path (``layer1.0.conv1.conv2d``).
"""

from __future__ import annotations

import contextlib
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from .._core import GraphError
from ..graph.graph import Graph, GTensor


class Parameter:
    """A trained tensor of a module: its shape and dtype; in a graph it is a parameter tensor.

        >>> tw.nn.Parameter((3, 4)).numel
        12
    """

    def __init__(self, shape, dtype: str = "float32"):
        try:
            self.shape = tuple(int(d) for d in shape)
        except TypeError:
            raise GraphError(f"Parameter shape must be a tuple of ints, got {shape!r}") from None
        if any(d <= 0 for d in self.shape):
            raise GraphError(f"Parameter shape must have positive extents, got {self.shape}")
        self.dtype = dtype
        # graph -> tensor id; weak keys and int values so that a module does not keep graphs alive.
        self._ids: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def tensor(self, graph: Graph, name: str) -> GTensor:
        """This parameter's tensor in ``graph``, made as ``graph.parameter(name)`` on first use."""
        tid = self._ids.get(graph)
        if tid is None:
            # Two root modules in one graph both own a "weight": the later one gets "weight_1".
            base, k = name, 0
            while _taken(graph, name):
                k += 1
                name = f"{base}_{k}"
            t = graph.parameter(name, self.shape, self.dtype)
            self._ids[graph] = t.id
            return t
        return GTensor(graph, tid)

    def __repr__(self):
        return f"Parameter(shape={self.shape}, dtype={self.dtype})"


def _taken(graph: Graph, name: str) -> bool:
    try:
        graph.tensor(graph.scoped(name))
    except KeyError:
        return False
    return True


class Buffer:
    """Non-trained state of a module (batch-norm running statistics): not part of a training graph."""

    def __init__(self, shape, dtype: str = "float32"):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype

    def __repr__(self):
        return f"Buffer(shape={self.shape}, dtype={self.dtype})"


class _Call:
    """One outermost module call on a graph: where the module tree's names are rooted."""

    def __init__(self, graph: Graph, root: Module):
        self.graph = graph
        # Names are rooted at the graph's scope when the outermost module was called.
        self.base = list(graph.scope_parts)
        self.paths: dict[int, str] = {}
        self.param_names: dict[int, str] = {}
        self.add_tree(root, "")

    def add_tree(self, module: Module, prefix: str) -> None:
        for path, m in module.named_modules(prefix=prefix):
            self.paths.setdefault(id(m), path)
        for name, p in module.named_parameters(prefix=prefix):
            self.param_names.setdefault(id(p), name)

    @contextlib.contextmanager
    def at(self, path: str) -> Iterator[None]:
        """Ops and tensors made inside are named under ``path`` (absolute within this call)."""
        with self.graph.scope_path(self.base + ([path] if path else [])):
            yield


# Active module calls, innermost last: (call, module, path).
_STACK: list[tuple[_Call, Module, str]] = []


def _find_graph(value) -> Graph | None:
    if isinstance(value, GTensor):
        return value.graph
    if isinstance(value, (list, tuple)):
        for v in value:
            g = _find_graph(v)
            if g is not None:
                return g
    if isinstance(value, dict):
        return _find_graph(list(value.values()))
    return None


def current_path() -> str | None:
    """Dotted path of the innermost module being called (None outside module calls)."""
    return _STACK[-1][2] if _STACK else None


def current_graph() -> Graph | None:
    """Graph of the innermost module call (None outside module calls)."""
    return _STACK[-1][0].graph if _STACK else None


class Module:
    """Base class of layers and models, as ``torch.nn.Module``: subclasses define ``forward``.

    Attributes that are Modules or Parameters register themselves (``named_parameters`` gives
    PyTorch's dotted names). ``module(*tensors)`` runs ``forward`` on graph tensors; parameters
    read inside forward (``self.weight``) are graph tensors of the input's graph.
    """

    training: bool

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "training", True)

    # ----- registration ----------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if "_parameters" not in self.__dict__:
            raise GraphError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        for d in (self._parameters, self._modules, self._buffers):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif isinstance(value, Buffer):
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: parameters, submodules and buffers live in dicts.
        d = self.__dict__
        if "_parameters" in d and name in d["_parameters"]:
            p = d["_parameters"][name]
            if _STACK:
                return self._bind(p, name)
            return p
        for key in ("_modules", "_buffers"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for d in (self._parameters, self._modules, self._buffers):
            if name in d:
                del d[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is None:
            self._parameters.pop(name, None)
            object.__setattr__(self, name, None)
        else:
            setattr(self, name, param)

    def register_module(self, name: str, module: Module | None) -> None:
        if module is None:
            object.__setattr__(self, name, None)
        else:
            setattr(self, name, module)

    add_module = register_module

    def param(self, name: str) -> Parameter:
        """The Parameter declaration ``name`` (``self.weight`` inside forward is the graph tensor)."""
        return self._parameters[name]

    # ----- traversal (same order and names as PyTorch) -----------------------------------

    def named_children(self) -> Iterator[tuple[str, Module]]:
        yield from self._modules.items()

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo: set | None = None, prefix: str = "") -> Iterator[tuple[str, Module]]:
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter), each shared parameter once under its first name."""
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for path, m in mods:
            for name, p in m._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{path}.{name}" if path else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Buffer]]:
        for path, m in self.named_modules(prefix=prefix):
            for name, b in m._buffers.items():
                yield (f"{path}.{name}" if path else name), b

    def num_parameters(self) -> int:
        """Elements of all parameters (each shared one once)."""
        return sum(p.numel for p in self.parameters())

    def train(self, mode: bool = True) -> Module:
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self) -> Module:
        return self.train(False)

    # ----- calling -----------------------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        graph = _find_graph(args) or _find_graph(kwargs)
        if graph is None:
            graph = current_graph()
        if graph is None:
            raise GraphError(f"{type(self).__name__} was called on {_describe(args)}; modules are called on graph "
                             f"tensors (g = tw.Graph(); x = g.input('x', shape); module(x))")
        call = None
        if _STACK and _STACK[-1][0].graph is graph:
            call = _STACK[-1][0]
        if call is None:
            call = _Call(graph, self)
        path = call.paths.get(id(self))
        if path is None:
            # A module outside the called tree (made inside a forward): name it under its caller.
            parent = _STACK[-1][2] if _STACK else ""
            base = f"{parent}.{type(self).__name__.lower()}" if parent else type(self).__name__.lower()
            path = base
            taken = set(call.paths.values())
            k = 1
            while path in taken:
                path = f"{base}_{k}"
                k += 1
            call.add_tree(self, path)
        _STACK.append((call, self, path))
        try:
            with call.at(path):
                return self.forward(*args, **kwargs)
        finally:
            _STACK.pop()

    def _bind(self, p: Parameter, attr: str) -> GTensor:
        call, _, _ = _STACK[-1]
        tid = p._ids.get(call.graph)
        if tid is not None:
            return GTensor(call.graph, tid)
        name = call.param_names.get(id(p))
        if name is None:
            own = call.paths.get(id(self), "")
            name = f"{own}.{attr}" if own else attr
        with call.at(""):
            return p.tensor(call.graph, name)

    # ----- presentation ------------------------------------------------------------------

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}" + (")" if not self._modules else "")]
        if self._modules:
            for name, m in self._modules.items():
                sub = repr(m).replace("\n", "\n  ")
                lines.append(f"  ({name}): {sub}")
            lines.append(")")
        return "\n".join(lines)


def _describe(args) -> str:
    if not args:
        return "no arguments"
    return ", ".join(type(a).__name__ for a in args)


class Sequential(Module):
    """Modules applied in order: ``Sequential(Linear(4, 8), ReLU())``; children named 0, 1, ...

        >>> len(tw.nn.Sequential(tw.nn.Linear(4, 8), tw.nn.ReLU()))
        2
    """

    def __init__(self, *modules: Module):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], (dict, OrderedDict)):
            for name, m in modules[0].items():
                self.add_module(name, _check_module(m, name))
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), _check_module(m, str(i)))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, idx):
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[idx][1]

    def append(self, module: Module) -> Sequential:
        self.add_module(str(len(self)), _check_module(module, str(len(self))))
        return self

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(Module):
    """A list of modules, registered as children 0, 1, ... (no forward of its own)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(items[idx])
        return items[idx]

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), _check_module(module, str(len(self))))
        return self

    def extend(self, modules) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def forward(self, *args, **kwargs):
        raise GraphError("ModuleList has no forward: iterate over it and call its modules")


def _check_module(m, name: str) -> Module:
    if not isinstance(m, Module):
        raise GraphError(f"child {name!r} is a {type(m).__name__}, not a tw.nn.Module")
    return m

"""The op registry: every ``@op`` by name, so that layers below the op library reach its ops.

``@tw.op`` registers each op it makes. The graph layer looks library ops up here by name (the
``add_<k>`` that sums gradient parts, optimizer update ops, the op a saved graph names when
loading it, ``GTensor`` arithmetic) instead of importing ``tdl_ops``, which sits above it:

    registry.lookup("identity")        # the op; GraphError when no op has that name
    registry.ops.sum_axes(g, axes=(0,))  # the same through attribute access
    registry.nary("add", 3)            # a member of an n-ary family: the op "add_3"

Plugin hook: on a lookup miss the registry imports the op library by module name
(``LIBRARY``, ``importlib.import_module``) once; importing it registers its ops and its n-ary
families (``register_family``). The library's ops keep their names: a user op named like one (a
test's own ``matmul``) does not replace it. Among other ops the first keeps the name.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from .._core import GraphError

#: The module that fills the registry with the operator library; imported on the first lookup miss.
LIBRARY = "tdl_ops"

_OPS: dict = {}
_FAMILIES: dict[str, Callable] = {}  # name prefix -> maker of the member of arity n ("<prefix>_<n>")


def register(op) -> None:
    """Make ``op`` findable by its name (``@tw.op`` does this for every op it makes)."""
    current = _OPS.get(op.name)
    if current is None or (_is_library(op) and not _is_library(current)):
        _OPS[op.name] = op


def _is_library(op) -> bool:
    return getattr(op.fn, "__module__", "").partition(".")[0] == LIBRARY


def register_family(prefix: str, make: Callable) -> None:
    """Register an n-ary family: ``make(n)`` returns (and, being an ``@op``, registers) the op
    ``<prefix>_<n>`` of arity n. A family exists because an op has a fixed number of inputs."""
    _FAMILIES[prefix] = make


def family_member(name: str):
    """The member of an n-ary family called ``name`` ("add_7" is ``add_n(7)``), made if new; None when
    ``name`` names no member of a registered family."""
    prefix, _, n = name.rpartition("_")
    make = _FAMILIES.get(prefix)
    if make is None or not (n.isascii() and n.isdigit()) or n[0] == "0":  # no "add_0", "add_07"
        return None
    return make(int(n))


def load_library() -> None:
    """Import the op library (idempotent): the plugin hook that fills the registry."""
    importlib.import_module(LIBRARY)


def lookup(name: str):
    """The op registered under ``name``, loading the library and making a member of its n-ary
    families (``add_12``, ``concat_70``) on demand: a saved graph may use any arity."""
    if name not in _OPS:
        load_library()
        family_member(name)  # registers the op if name is "<family>_<n>"
    try:
        return _OPS[name]
    except KeyError:
        raise GraphError(f"no TDL op named '{name}' is registered (define it with @tw.op before loading)") from None


def nary(prefix: str, n: int):
    """The member of arity ``n`` of the n-ary family ``prefix``: ``nary("add", 3)`` is the op ``add_3``
    (made by the family itself, whatever other op may have taken the name)."""
    if prefix not in _FAMILIES:
        load_library()
    try:
        make = _FAMILIES[prefix]
    except KeyError:
        raise GraphError(f"no n-ary op family '{prefix}' is registered") from None
    return make(n)


def names() -> list[str]:
    """Names of the ops registered so far, sorted."""
    return sorted(_OPS)


class _Ops:
    """Attribute access to the registry: ``ops.sum_axes`` is ``lookup("sum_axes")``."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return lookup(name)
        except GraphError as e:  # an attribute that is not there: hasattr() and getattr(..., default) work
            raise AttributeError(str(e)) from None

    def __repr__(self):
        return f"<tilewise op registry: {len(_OPS)} ops>"


#: The registered ops as attributes, for code below the library (gradient rules of the library itself too).
ops = _Ops()

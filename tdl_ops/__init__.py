"""TDL operator library: TDL descriptions of the operators a training framework needs, by family.

ALL maps op name -> op object (each with a NumPy reference); CASES lists the test cases
(tdl_ops._cases.Case) used by tests/python/test_tdl_ops.py; ELEMENTWISE names the ops that read
every input exactly at the output index. NARY holds the n-ary families, one op per arity
(``add_n(3)`` is the op ``add_3``), made on first use; ``nary_op(name)`` makes one from its name.

Importing this package fills the op registry (``tilewise.tdl.registry``): every op registers itself
when ``@tw.op`` makes it, and the n-ary families are registered below. The registry imports this
package by name on a lookup miss, which is how the layers below it (graph, optim, exec) reach its
ops. It imports ``tilewise.tdl`` (the language), never the ``tilewise`` façade.
"""

from __future__ import annotations

from tilewise.tdl import registry

from . import (
    activations,
    conv,
    elementwise,
    embedding,
    linalg,
    losses,
    models,
    normalization,
    opaque,
    optimizers,
    pooling,
    reductions,
    rnn,
    shape,
    torch_extra,
    torch_ops,
)
from ._cases import Case, make_input, make_inputs

FAMILIES = (elementwise, activations, linalg, conv, pooling, normalization, reductions, shape,
            embedding, rnn, losses, optimizers, opaque, models, torch_extra, torch_ops)


def _is_op(obj) -> bool:
    return callable(getattr(obj, "evaluate", None)) and callable(getattr(obj, "infer_shape", None))


def _collect():
    ops, cases, elementwise = {}, [], set()
    for mod in FAMILIES:
        for name, obj in vars(mod).items():
            if not name.startswith("_") and _is_op(obj):
                if name in ops and ops[name] is not obj:
                    raise RuntimeError(f"duplicate TDL op name {name!r} in {mod.__name__}")
                ops[name] = obj
        cases.extend(mod.CASES)
        elementwise.update(getattr(mod, "ELEMENTWISE", ()))
    return ops, cases, frozenset(elementwise)


ALL, CASES, ELEMENTWISE = _collect()

# n-ary families: name prefix -> maker of the member of arity n (the op "<prefix>_<n>").
NARY = {"add": elementwise.add_n, "concat": models.concat_op, "stack": models.stack_op}
for _prefix, _make in NARY.items():
    registry.register_family(_prefix, _make)


def nary_op(name: str):
    """The member of an n-ary family called ``name`` ("add_7" is ``add_n(7)``), made (and so
    registered for tw.Graph.from_json) if new; None when ``name`` names no member."""
    return registry.family_member(name)


__all__ = ["ALL", "CASES", "ELEMENTWISE", "FAMILIES", "NARY", "Case", "make_input", "make_inputs", "nary_op"]

# Every op is also reachable as an attribute: tdl_ops.matmul, tw.ops.conv2d.
globals().update(ALL)

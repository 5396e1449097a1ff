"""Gradient parts summed as one batched op rather than computed one by one and added.

An unrolled recurrent layer reads its weights and its input sequence once per time step, so their
gradients arrive as T parts: T weight-gradient products ``matmul_tn(a_t, b_t)`` (one small GEMM
with K = batch per step, then a sum that reads T weight-sized tensors) and T ``unselect`` of the
step gradients (each as large as the whole sequence: O(T²) memory traffic for the sum). Batched,
they are what PyTorch computes:

* Σ_t a_tᵀ b_t = stack(a_t)ᵀ stack(b_t), contracted over rows and steps (``linear_grad_weight``):
  one GEMM with K = T · batch (when the operands are smaller than the parts: few rows against a
  weight);
* Σ_t unselect(g_t, index=t) over every index of the axis = stack(g_t): O(T).

Autodiff defers a rule's result of either kind (``defer``) when its input's gradient has several
parts, and once they all exist asks ``batch`` for the one op; parts of mixed kinds, or that do not
line up, are copied into the graph as the rule built them and summed as before.
"""

from __future__ import annotations

from ..tdl.registry import nary, ops
from .graph import GOp, GTensor
from .replay import Scratch

#: The result kinds autodiff defers: ops whose sum over parts has a batched form.
KINDS = ("matmul_tn", "unselect")


class Deferred:
    """A rule's result left out of the graph: scratch tensor ``t`` of ``scratch``, computed by one op
    of kind ``kind`` from the graph's tensors ``operands``, for an input of ``op``."""

    def __init__(self, scratch: Scratch, t: GTensor, operands: list[GTensor], op: GOp):
        self.scratch, self.t, self.operands, self.op = scratch, t, operands, op
        self.kind = t.producer.type
        self.attrs = t.producer.attrs


def defer(s: Scratch, wanted: list, k: int, op: GOp) -> Deferred | None:
    """wanted[k] as a Deferred when one op of a batchable kind computes it from the graph's tensors
    and no other wanted result needs it; else None."""
    t = wanted[k]
    if t is None or t.producer is None or t.producer.type not in KINDS:
        return None
    operands = s.direct_operands(t)
    others = [r for j, r in enumerate(wanted) if j != k]
    if operands is None or s.computes(others, t):
        return None
    return Deferred(s, t, operands, op)


def batch(parts: list[Deferred]) -> GTensor | None:
    """The sum of ``parts`` as one batched op in the caller's phase and scope, or None when they do
    not batch (mixed kinds, operands of other shapes, slices that do not cover their axis once)."""
    kinds = {p.kind for p in parts}
    if len(parts) < 2 or len(kinds) != 1:
        return None
    return _products(parts) if kinds == {"matmul_tn"} else _slices(parts)


def _products(parts: list[Deferred]) -> GTensor | None:
    a, b = [p.operands[0] for p in parts], [p.operands[1] for p in parts]
    if len({x.shape for x in a}) > 1 or len({x.shape for x in b}) > 1:
        return None
    # The stacks copy the operands where the sum reads the parts: batch only when that moves less (an
    # RNN step's few rows against its weight), not for a weight shared by two large layers.
    if sum(x.elements for x in a + b) > sum(p.t.elements for p in parts):
        return None
    # Stacked on a new axis 1, not concatenated along axis 0: a step's rows split over devices (by
    # batch) stay where they are, and the contracted axes are (rows, steps).
    stack = nary("stack", len(parts))
    lhs = stack(*a, axis=1, inner=a[0].shape[-1], name="lhs")
    rhs = stack(*b, axis=1, inner=b[0].shape[-1], name="rhs")
    return ops.linear_grad_weight(lhs, rhs, name="sum")


def _slices(parts: list[Deferred]) -> GTensor | None:
    first = parts[0].attrs
    size = first["size"]
    same = all(p.attrs["axis"] == first["axis"] and p.attrs["size"] == size for p in parts)
    by_index = {p.attrs["index"]: p.operands[0] for p in parts}
    if not same or len(parts) != size or sorted(by_index) != list(range(size)):
        return None
    if len({g.shape for g in by_index.values()}) > 1:
        return None
    gs = [by_index[i] for i in range(size)]
    return nary("stack", size)(*gs, axis=first["axis"], inner=first["inner"], name="sum")

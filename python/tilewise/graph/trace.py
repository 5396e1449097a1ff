"""Tracing a model into a training graph: ``tw.trace(model, tw.placeholder((64, 1024)), loss=...)``.

The model is any callable taking graph tensors and returning one (a tw.nn Module, a function
calling tdl_ops ops). With a loss, the graph gets a label, the loss (a tensor named "loss"), the
backward pass with respect to every parameter, and the optimizer's updates when one is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._core import GraphError
from ..tdl.registry import ops
from .autodiff import grad
from .graph import Graph, GTensor
from .replay import Scratch


@dataclass(frozen=True)
class Placeholder:
    """The shape (and optional name, dtype) of a graph input, before a graph exists."""

    shape: tuple
    name: str | None = None
    dtype: str = "float32"


def placeholder(shape, name: str | None = None, dtype: str = "float32") -> Placeholder:
    """A model input for ``tw.trace``: ``tw.placeholder((64, 3, 224, 224))``."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise GraphError(f"placeholder shape must be a tuple of ints, got {shape!r}") from None
    return Placeholder(shape, name, dtype)


def trace(model, *placeholders, loss=None, label=None, optimizer=None, name: str = "graph",
          accumulate: str | None = None) -> Graph:
    """Build the graph of ``model(*inputs)``; with ``loss``, the whole training step.

    ``placeholders``: tw.placeholder(...) or shape tuples, becoming inputs named "input",
    "input_1", ... (or the placeholder's name). ``loss(output, label)`` must return a 0-d tensor;
    ``label`` (a placeholder or shape; default: the output's shape) becomes a tensor of role
    "label". ``optimizer`` (tw.optim) appends the updates. ``graph.outputs`` holds "output" and,
    with a loss, "loss". ``accumulate``: how gradient parts are summed (``tw.grad``'s option).
    """
    if loss is None and (label is not None or optimizer is not None):
        raise GraphError("label= and optimizer= need loss=")
    loss = _translate("loss", loss)
    optimizer = _translate("optimizer", optimizer)
    if optimizer is not None and not callable(getattr(optimizer, "apply", None)):
        raise GraphError(f"optimizer= must be a tilewise optimizer (tw.optim.SGD, Momentum, Adam, AdamW), "
                         f"got {type(optimizer).__module__}.{type(optimizer).__qualname__}")
    g = Graph(name)
    inputs = [g.input(p.name or _default_name("input", k), p.shape, p.dtype)
              for k, p in enumerate(_placeholder(p) for p in placeholders)]
    out = model(*inputs)
    if not isinstance(out, GTensor) or out.graph is not g:
        raise GraphError(f"the model must return a tensor of the traced graph, got {out!r}")
    g.outputs = {"output": out}
    if loss is None:
        return g
    lab = _placeholder(label) if label is not None else Placeholder(out.shape)
    target = g.label(lab.name or "label", lab.shape, lab.dtype)
    value = _named_loss(g, loss, out, target)
    g.outputs["loss"] = value
    grads = grad(g, value, accumulate=accumulate)
    if optimizer is not None:
        optimizer.apply(g, grads)
    return g


# Translators of other frameworks' losses and optimizers: fn(kind, obj) -> the tilewise equivalent,
# or None when obj is not theirs. Frontends register theirs (frontends/torch: torch's loss functions
# and torch.optim optimizers), so that this layer knows no framework.
_TRANSLATORS: list = []


def register_translator(fn) -> None:
    """Add ``fn(kind, obj)`` (kind "loss" or "optimizer") to the translators tw.trace consults."""
    if fn not in _TRANSLATORS:
        _TRANSLATORS.append(fn)


def _translate(kind: str, obj):
    if obj is None:
        return None
    for fn in _TRANSLATORS:
        new = fn(kind, obj)
        if new is not None:
            return new
    return obj


def _placeholder(p) -> Placeholder:
    return p if isinstance(p, Placeholder) else placeholder(p)


def _default_name(base: str, k: int) -> str:
    return base if k == 0 else f"{base}_{k}"


def _named_loss(g: Graph, loss, out: GTensor, target: GTensor) -> GTensor:
    """``loss(out, target)``, built on a scratch graph and copied so that its last op is named "loss"."""
    s = Scratch(g)
    try:
        value = loss(s.mirror(out), s.mirror(target))
    except AttributeError as e:  # a framework's function called on graph tensors: 'GTensor' has no 'size'
        if "GTensor" not in str(e):
            raise
        raise GraphError(f"loss(output, label) is called with tilewise graph tensors, which have no {e.name!r}: "
                         "write it with tilewise ops (tw.ops.mse_loss, cross_entropy, l1_loss, ...), or pass "
                         "torch's loss itself (loss=torch.nn.functional.mse_loss, torch.nn.CrossEntropyLoss())"
                         ) from None
    if not s.owns(value):
        raise GraphError(f"loss(output, label) must return a graph tensor, got {value!r}")
    if value.shape != ():
        raise GraphError(f"loss(output, label) must return a 0-d tensor (a scalar), got shape {value.shape}")
    if value.producer is None:  # the loss returned one of its arguments: copy it to name it
        value = ops.identity(value)
    return s.copy([value], names=["loss"])[0]

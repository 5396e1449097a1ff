"""From a zoo module to a graph: the training graph through ``tw.trace``, or the forward graph.

Every zoo function ends in :func:`build`. ``train=False`` gives the forward graph (inputs,
parameters, activations). ``train=True`` gives forward, loss, backward and optimizer updates
through ``tw.trace``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .. import optim
from .._core import GraphError
from ..graph.autodiff import accumulation_mode
from ..graph.graph import Graph
from ..graph.trace import placeholder, trace
from ..nn import functional as F


def has_autodiff() -> bool:
    """True: zoo functions return training graphs with ``train=True`` (kept for callers that ask)."""
    return True


LOSSES = {"cross_entropy": F.cross_entropy, "mse": F.mse_loss}


def make_optimizer(optimizer):
    """None or a name ("sgd", "momentum", "adam") -> a tw.optim object (lr 0.01, Adam 1e-3); objects pass through."""
    if optimizer is None:
        optimizer = "sgd"
    if isinstance(optimizer, str):
        makers = {"sgd": lambda o: o.SGD(lr=0.01), "momentum": lambda o: o.Momentum(lr=0.01),
                  "adam": lambda o: o.Adam()}
        if optimizer.lower() not in makers:
            raise GraphError(f"unknown optimizer {optimizer!r} (valid: {', '.join(makers)}, or a tw.optim object)")
        return makers[optimizer.lower()](optim)
    if not callable(getattr(optimizer, "apply", None)):
        raise GraphError(f"optimizer must be a name or a tw.optim object, got {optimizer!r}")
    return optimizer


def build(model: Callable, inputs: Sequence[tuple], *, label: tuple | None, loss: str | Callable, train: bool,
          optimizer=None, name: str = "model") -> Graph:
    """Graph of ``model`` applied to ``inputs`` = [(name, shape), ...] or [(name, shape, dtype), ...].

    ``label`` is the label shape for the loss (role "label"); ``loss`` a key of LOSSES or
    ``fn(output, label) -> 0-d tensor``.
    """
    loss_fn = LOSSES[loss] if isinstance(loss, str) else loss
    if train and has_autodiff():
        return _trace(model, inputs, label, loss_fn, optimizer, name)
    g = Graph(name)
    xs = [g.input(*spec) for spec in inputs]
    out = model(*xs)
    if train:
        loss_fn(out, g.label("label", label))
    return g


def _trace(model, inputs, label, loss_fn, optimizer, name) -> Graph:
    phs = [placeholder(spec[1], name=spec[0], dtype=spec[2] if len(spec) > 2 else "float32") for spec in inputs]
    # The papers' graphs sum each gradient's parts (MXNet's unrolled RNN adds its steps' weight
    # gradients), not tw.grad's batched default: their plans and figures stay comparable.
    return trace(model, *phs, loss=loss_fn, label=placeholder(label, name="label"),
                 optimizer=make_optimizer(optimizer), name=name, accumulate=accumulation_mode() or "sum")

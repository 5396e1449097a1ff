"""torch's losses and optimizers in ``tw.trace`` / ``tw.from_torch``: mapped to tilewise's.

    g = tw.trace(model, tw.placeholder((8, 16)), loss=torch.nn.functional.mse_loss,
                 optimizer=torch.Adam(torch_model.parameters(), lr=1e-3))

Losses (functions of ``torch.nn.functional`` and ``torch.nn`` loss modules) become functions of
graph tensors built from tdl_ops losses, with the same reduction; optimizers become ``tw.optim``
optimizers with the same hyper-parameters (read from the one parameter group). What has no
tilewise equivalent is refused with a ``tw.GraphError`` that names the nearest one. ``translate``
is registered with ``tw.trace`` (``graph.trace.register_translator``) when this package is
imported; it imports torch only for objects that come from torch.
"""

from __future__ import annotations

import inspect
import sys

from ..._core import GraphError
from ...optim import SGD, Adam, AdamW, Momentum

_LOSSES = "tw.ops.mse_loss, l1_loss, smooth_l1_loss, cross_entropy, nll_loss, bce_with_logits"


def translate(kind: str, obj):
    """The tilewise equivalent of a torch loss ("loss") or optimizer ("optimizer"); None if obj is not torch's."""
    torch = sys.modules.get("torch")
    if torch is None:  # nothing can come from torch before it is imported
        return None
    module = getattr(obj, "__module__", None) or ""
    theirs = (module == "torch" or module.startswith("torch.")
              or isinstance(obj, (torch.nn.Module, torch.optim.Optimizer)))
    if not theirs:
        return None
    return _loss(obj) if kind == "loss" else _optimizer(obj)


# ---------------------------------------------------------------- losses


def _loss(obj):
    import torch
    import torch.nn.functional as F

    if isinstance(obj, torch.nn.Module):
        name = type(obj).__name__
        kind = _LOSS_MODULES.get(name)
        if kind is None or not isinstance(obj, torch.nn.modules.loss._Loss):
            raise GraphError(f"loss=torch.nn.{name}() has no tilewise equivalent; tilewise losses: {_LOSSES}")
        opts = {"reduction": obj.reduction}
        if getattr(obj, "weight", None) is not None:
            raise GraphError(f"loss=torch.nn.{name}(weight=...): class weights are not supported")
        if getattr(obj, "pos_weight", None) is not None:
            raise GraphError(f"loss=torch.nn.{name}(pos_weight=...) is not supported")
        if name == "CrossEntropyLoss":
            opts["label_smoothing"] = obj.label_smoothing
        if name == "SmoothL1Loss":
            opts["beta"] = obj.beta
        if name == "HuberLoss":
            opts["delta"] = obj.delta
        return _make(kind, f"torch.nn.{name}()", **opts)
    functions = {F.mse_loss: "mse", F.l1_loss: "l1", F.smooth_l1_loss: "smooth_l1", F.huber_loss: "huber",
                 F.cross_entropy: "cross_entropy", F.nll_loss: "nll",
                 F.binary_cross_entropy_with_logits: "bce_with_logits"}
    kind = functions.get(obj)
    if kind is None:
        name = getattr(obj, "__qualname__", type(obj).__name__)
        raise GraphError(f"loss={getattr(obj, '__module__', 'torch')}.{name} has no tilewise equivalent; "
                         f"tilewise losses: {_LOSSES}")
    return _make(kind, f"torch.nn.functional.{obj.__name__}")


_LOSS_MODULES = {"MSELoss": "mse", "L1Loss": "l1", "SmoothL1Loss": "smooth_l1", "HuberLoss": "huber",
                 "CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll", "BCEWithLogitsLoss": "bce_with_logits"}


def _make(kind, what, reduction="mean", label_smoothing=0.0, beta=1.0, delta=1.0):
    """loss(output, label) of graph tensors for one torch loss."""
    import tdl_ops as T

    if reduction not in ("mean", "sum"):
        raise GraphError(f"loss={what} with reduction={reduction!r}: the loss must be a scalar ('mean' or 'sum')")

    def dense(out, label):
        """Class targets as rows of probabilities: class indices become one-hot rows."""
        if len(out.shape) != 2:
            raise GraphError(f"loss={what} of an output of shape {out.shape}: only (batch, classes)")
        if label.shape == out.shape[:1]:
            label = T.one_hot(label, depth=out.shape[1])
        elif label.shape != out.shape:
            raise GraphError(f"loss={what}: label shape {label.shape} is neither class indices {out.shape[:1]} "
                             f"nor probabilities {out.shape}")
        if label_smoothing:
            label = T.scale(label, alpha=1.0 - label_smoothing, beta=label_smoothing / out.shape[1])
        return label

    def loss(out, label):
        if kind == "mse":
            value, n = T.mse_loss(out, label), _numel(out)
        elif kind == "l1":
            value, n = T.l1_loss(out, label), _numel(out)
        elif kind == "smooth_l1":
            value, n = T.smooth_l1_loss(out, label, beta=float(beta)), _numel(out)
        elif kind == "huber":  # delta * smooth_l1 with beta = delta
            value, n = T.scale(T.smooth_l1_loss(out, label, beta=float(delta)), alpha=float(delta)), _numel(out)
        elif kind == "bce_with_logits":
            value, n = T.bce_with_logits(out, label), _numel(out)
        elif kind == "cross_entropy":
            value, n = T.cross_entropy(out, dense(out, label)), out.shape[0]
        else:
            value, n = T.nll_loss(out, dense(out, label)), out.shape[0]
        # tilewise's losses are means (over the elements, or over the batch for class losses).
        return T.scale(value, alpha=float(n)) if reduction == "sum" else value
    loss.__name__ = f"torch_{kind}_loss"
    loss.__doc__ = f"{what} as tilewise ops"
    return loss


def _numel(t) -> int:
    n = 1
    for d in t.shape:
        n *= int(d)
    return n


# ---------------------------------------------------------------- optimizers


def _optimizer(obj):
    import torch

    if not isinstance(obj, torch.optim.Optimizer):
        return None
    name = type(obj).__name__
    groups = obj.param_groups
    h = dict(groups[0])
    h.pop("params", None)
    for g in groups[1:]:
        other = {k: v for k, v in g.items() if k != "params"}
        if other != h:
            raise GraphError(f"optimizer=torch.optim.{name} with parameter groups of different hyper-parameters: "
                             "tilewise applies one optimizer to every parameter")
    h = {k: (float(v) if isinstance(v, torch.Tensor) else v) for k, v in h.items()}
    if h.get("maximize"):
        raise GraphError(f"optimizer=torch.optim.{name}(maximize=True) has no tilewise equivalent")
    if name == "SGD":
        return _sgd(h)
    if name in ("Adam", "AdamW"):
        return _adam(name, h)
    raise GraphError(f"optimizer=torch.optim.{name} has no tilewise equivalent; use tw.optim.SGD, Momentum, Adam "
                     "or AdamW")


def _accepts(cls, *names) -> bool:
    params = inspect.signature(cls.__init__).parameters
    return all(n in params for n in names)


def _sgd(h):
    lr, momentum, wd = h["lr"], h.get("momentum", 0.0), h.get("weight_decay", 0.0)
    dampening, nesterov = h.get("dampening", 0.0), bool(h.get("nesterov", False))
    if not momentum:
        return SGD(lr=lr, weight_decay=wd)
    extra = {}
    for key, value, default in (("weight_decay", wd, 0.0), ("nesterov", nesterov, False)):
        if value != default:
            if not _accepts(Momentum, key):
                raise GraphError(f"optimizer=torch.SGD(momentum={momentum}, {key}={value}): tw.optim.Momentum "
                                 f"has no {key}; use tw.Momentum(lr, momentum) without it")
            extra[key] = value
    return Momentum(lr=lr, momentum=momentum, dampening=dampening, **extra)


def _adam(name, h):
    if h.get("amsgrad"):
        raise GraphError(f"optimizer=torch.optim.{name}(amsgrad=True) has no tilewise equivalent; "
                         f"use tw.optim.{name} without it")
    args = {"lr": h["lr"], "betas": tuple(h["betas"]), "eps": h["eps"]}
    wd = h.get("weight_decay", 0.0)
    if name == "AdamW":
        return AdamW(weight_decay=wd, **args)
    if wd:
        if not _accepts(Adam, "weight_decay"):
            raise GraphError(f"optimizer=torch.Adam(weight_decay={wd}) adds the decay to the gradient (L2), "
                             "which tw.optim.Adam does not; tw.optim.AdamW decays the weights directly "
                             "(torch.optim.AdamW)")
        args["weight_decay"] = wd
    return Adam(**args)

"""Optimizers: append one training step's parameter updates to a graph (the "update" phase).

    grads = tw.grad(g, loss)
    new = tw.optim.Adam(lr=1e-3).apply(g, grads)       # {parameter name: updated parameter}

Each update is a graph op from tdl_ops/optimizers.py, found by name in the op registry, whose
output is marked as replacing the parameter (``graph.mark_update``); momentum and Adam moments are
optimizer-state tensors (``graph.state``) with their own update ops. State starts at zero: feed
zeros for the first step. Adam counts its steps in a state tensor of its own (``optimizer.step``,
shape (1,)), so one graph runs every step with the bias corrections torch.optim.Adam applies then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ._core import GraphError
from .graph.graph import Graph, GTensor
from .tdl.registry import ops


class Optimizer:
    """Base class: ``apply(graph, grads)`` appends the updates of every (parameter, gradient) pair."""

    def apply(self, graph: Graph, grads) -> dict[str, GTensor]:
        """Append the update ops; ``grads`` is ``tw.grad``'s {name: gradient}, a {parameter: gradient}
        mapping or (parameter, gradient) pairs. Returns {parameter name: updated parameter}."""
        new = {}
        pairs = _pairs(graph, grads)
        with graph.phase("update"):
            shared = self._shared_state(graph)
            for p, g in pairs:
                # State is named after its parameter ("fc.weight.velocity"), update ops after the update.
                state = [graph.state(f"{p.name}.{what}", p.shape, p.dtype) for what in self.state_names]
                with graph.scope(f"update/{p.name}"):
                    w = self._update(graph, p, g, *state, *shared)
                graph.mark_update(w, of=p)
                new[p.name] = w
        return new

    __call__ = apply

    state_names: tuple[str, ...] = ()
    """The optimizer-state tensors of each parameter (zero at the first step)."""

    def _update(self, graph: Graph, p: GTensor, g: GTensor, *state: GTensor) -> GTensor:
        raise NotImplementedError

    def _shared_state(self, graph: Graph) -> tuple[GTensor, ...]:
        """State shared by every parameter's update (Adam's step counter), updated once per step."""
        return ()

    @staticmethod
    def _new_state(graph: Graph, op, inputs, attrs, state: GTensor) -> GTensor:
        """Apply a state-update op; its output replaces ``state``."""
        new = graph.apply(op, inputs, attrs, role="optimizer_state", dtype=state.dtype)
        graph.mark_update(new, of=state)
        return new

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"tw.optim.{type(self).__name__}({args})"


class SGD(Optimizer):
    """w - lr * (g + weight_decay * w)."""

    def __init__(self, lr: float, weight_decay: float = 0.0):
        self.lr = _number("lr", lr)
        self.weight_decay = _number("weight_decay", weight_decay)

    def _update(self, graph, p, g):
        return graph.apply(ops.sgd, [p, g], {"lr": self.lr, "weight_decay": self.weight_decay}, dtype=p.dtype)


class Momentum(Optimizer):
    """Heavy-ball momentum as PyTorch's SGD(momentum=...): v = momentum v + (1 - dampening) g; w - lr v.

    The velocity starts at zero, so the first step uses (1 - dampening) g where PyTorch uses g
    (the two agree for the default dampening 0).
    """

    def __init__(self, lr: float, momentum: float = 0.9, dampening: float = 0.0):
        self.lr = _number("lr", lr)
        self.momentum = _number("momentum", momentum)
        self.dampening = _number("dampening", dampening)

    state_names = ("velocity",)

    def _update(self, graph, p, g, v):
        v_new = self._new_state(graph, ops.momentum_velocity, [v, g],
                                {"momentum": self.momentum, "dampening": self.dampening}, v)
        return graph.apply(ops.momentum_weight, [p, v_new], {"lr": self.lr}, dtype=p.dtype)


class Adam(Optimizer):
    """Adam (Kingma & Ba) as torch.optim.Adam without weight decay.

    The step number t of the bias corrections 1 / (1 - beta**t) is an optimizer-state tensor,
    ``optimizer.step`` (shape (1,), zero before the first step), that the update adds one to
    before every use: the same graph runs step after step as torch.optim.Adam does. float32
    counts steps exactly up to 2**24.
    """

    weight_decay = 0.0
    step_state = "optimizer.step"

    def __init__(self, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8):
        self.lr = _number("lr", lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise GraphError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        self.betas = (_number("betas[0]", betas[0]), _number("betas[1]", betas[1]))
        for name, beta in zip(("betas[0]", "betas[1]"), self.betas):
            if not 0.0 <= beta < 1.0:
                raise GraphError(f"{name} must lie in [0, 1), got {beta!r}")
        self.eps = _number("eps", eps)

    state_names = ("adam_m", "adam_v")

    def _shared_state(self, graph):
        if any(t.name == self.step_state for t in graph.tensors):
            raise GraphError(f"the graph already has '{self.step_state}': apply one Adam optimizer per graph")
        count = graph.state(self.step_state, (1,), "float32")
        with graph.scope("update"):
            return (self._new_state(graph, ops.step_count, [count], {}, count),)

    def _update(self, graph, p, g, m, v, t):
        b1, b2 = self.betas
        m_new = self._new_state(graph, ops.adam_m, [m, g], {"beta1": b1}, m)
        v_new = self._new_state(graph, ops.adam_v, [v, g], {"beta2": b2}, v)
        attrs = {"lr": self.lr, "beta1": b1, "beta2": b2, "eps": self.eps, "weight_decay": self.weight_decay}
        return graph.apply(ops.adam_weight, [p, m_new, v_new, t], attrs, dtype=p.dtype)


class AdamW(Adam):
    """Adam with decoupled weight decay (torch.optim.AdamW): w - lr (m_hat / (sqrt(v_hat) + eps) + wd w)."""

    def __init__(self, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01):
        super().__init__(lr, betas, eps)
        self.weight_decay = _number("weight_decay", weight_decay)


def _number(name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise GraphError(f"{name} must be a number, got {v!r}")
    return float(v)


def _pairs(graph: Graph, grads) -> list[tuple[GTensor, GTensor]]:
    items: Iterable = grads.items() if isinstance(grads, Mapping) else grads
    pairs = []
    for p, g in items:
        if isinstance(p, str):
            p = graph.tensor(p)
        for what, t in (("parameter", p), ("gradient", g)):
            if not isinstance(t, GTensor) or t.graph is not graph:
                raise GraphError(f"optimizer: the {what} must be a tensor of this graph, got {t!r}")
        if p.role != "parameter" or p.producer is not None:
            raise GraphError(f"optimizer: '{p.name}' is not a parameter (role {p.role})")
        if g.shape != p.shape:
            raise GraphError(f"optimizer: gradient '{g.name}' has shape {g.shape}, parameter '{p.name}' {p.shape}")
        pairs.append((p, g))
    return pairs

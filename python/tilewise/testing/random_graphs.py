"""Random training graphs for differential testing: a ``Case`` is a model, a loss, an optimizer, a
planner and a device count; ``build_graph`` makes its training graph with ``tw.nn``, ``build_torch``
the same model as a ``torch.nn.Module`` with the same parameter names and layouts.

Cases come from a *chooser* (``integer(lo, hi)``, ``choice(options)``): ``RandomChooser`` (a seeded
``random.Random``: the long mode) or one backed by hypothesis's ``draw`` (the tests: hypothesis then
shrinks a failing case). Every option list starts with its simplest member and sizes start small, so
that shrinking toward the first option and the lowest integer gives a small reproducer.

Four families, each a stem, 1-4 layers drawn from its kinds, and a linear head to ``classes``:

========  =====================  =============================================================
family    input                  layer kinds
========  =====================  =============================================================
dense     (B, F) float           linear, act, layer_norm, residual, concat, softmax, transpose,
                                 gram (a batched matmul of a reshaped tensor with its transpose)
conv      (B, C, H, W) float     conv (kernel 1 or 3, stride 1-2, padding 0-1), batch_norm, act,
                                 max_pool, avg_pool, conv_residual, concat (of two 1x1 convs)
seq       (B, S) int64 ids       embedding stem; attention (multi-head, residual), layer_norm,
                                 linear, act, residual, softmax; mean over the sequence
rnn       (B, T, I) float        lstm, gru (cells unrolled), linear, act; the last step
========  =====================  =============================================================

Extents are drawn from small sets holding primes (3, 5, 7, 11, 13) and numbers that 2-8 devices do
not divide, so every planner meets tensors it cannot cut evenly.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import tdl_ops

from .. import nn
from ..graph.graph import Graph
from ..graph.trace import placeholder, trace
from ..nn import functional as F
from ..optim import SGD, Adam, Momentum
from ..plan.search import ALGORITHMS

FAMILIES = ("dense", "conv", "seq", "rnn")
ACTIVATIONS = ("relu", "tanh", "gelu", "sigmoid")
LOSSES = ("mse", "cross_entropy")
OPTIMIZERS = ("sgd", "momentum", "adam")
#: Planners a case may use: "random" is ``tilewise.plan.sample.random_plan`` (a random valid plan).
#: brute_force is left out: its search is exponential in the graph.
PLANNERS = ("random",) + tuple(a for a in ALGORITHMS if a != "brute_force")
# Small extents, primes and numbers 2-8 devices do not divide among them; the simplest first.
SIZES = (2, 3, 4, 5, 6, 7, 8, 11, 13)
BATCHES = (2, 3, 4, 5, 6, 7, 8, 9, 11)
MAX_LAYERS = 4

# Optimizer settings shared by the graph and torch. Adam's eps is 1e-3, not 1e-8: a gradient that is
# zero in float64 (the bias of a layer followed by a batch norm) comes out ~1e-8 in float32, and Adam
# divides it by its own square root: with a small eps that rounding becomes a step of about lr.
SGD_LR, MOMENTUM_LR, MOMENTUM, ADAM_LR, ADAM_BETAS, ADAM_EPS = 0.1, 0.05, 0.9, 0.01, (0.9, 0.99), 1e-3

# Ties in a max pool's window are drawn on purpose: overlapping max pools repeat a maximum, and a padded
# 1x1 convolution's border is its bias. ``max_pool2d_grad`` routes each window's gradient to the input
# torch's indices name (the first maximum), so the three agree there too (docs/RELIABILITY.md, "Found by
# differential testing").


@dataclass(frozen=True)
class Case:
    """One differential test: ``repr(case)`` is Python that rebuilds it (``from tilewise.testing import
    Case``). ``shape`` is the input's shape without the batch (family dense: (F,); conv: (C, H, W);
    seq: (S, vocab, E); rnn: (T, I)); ``layers`` are tuples (kind, *arguments)."""

    family: str
    batch: int
    shape: tuple
    layers: tuple
    classes: int
    loss: str
    optimizer: str
    devices: int
    planner: str
    seed: int = 0

    def describe(self) -> str:
        """One line: family, layer kinds, loss, optimizer, planner and devices."""
        kinds = ",".join(layer[0] for layer in self.layers)
        return (f"{self.family}[{kinds}] B={self.batch} {self.shape} -> {self.classes} {self.loss} "
                f"{self.optimizer} {self.planner}x{self.devices} seed={self.seed}")


class RandomChooser:
    """The chooser of the long mode: a seeded ``random.Random``."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, options: Sequence):
        return options[self.rng.randrange(len(options))]


def random_case(seed: int) -> Case:
    """The case of ``seed`` (deterministic)."""
    return generate_case(RandomChooser(seed), seed=seed)


def generate_case(choose, seed: int | None = None) -> Case:
    """A case from ``choose`` (``integer(lo, hi)``, ``choice(options)``); ``seed`` seeds the
    parameters, feeds and random plan (drawn when not given)."""
    family = choose.choice(FAMILIES)
    batch = choose.choice(BATCHES)
    n = choose.integer(1, MAX_LAYERS)
    if family == "dense":
        shape, layers = _dense(choose, n)
    elif family == "conv":
        shape, layers = _conv(choose, n, batch)
    elif family == "seq":
        shape, layers = _seq(choose, n)
    else:
        shape, layers = _rnn(choose, n)
    classes = choose.choice(SIZES)
    loss = choose.choice(LOSSES)
    optimizer = choose.choice(OPTIMIZERS)
    devices = choose.integer(1, 8)
    planner = choose.choice(PLANNERS)
    if seed is None:
        seed = choose.integer(0, 2**31 - 1)
    return Case(family, batch, shape, tuple(layers), classes, loss, optimizer, devices, planner, seed)


# _NORM_WIDTH: a layer norm over 2 values outputs +-d / sqrt(d**2 + eps), nearly +-1 whatever its input,
# so the gradient through it is nearly zero and what float32 computes there is rounding (case seed
# 1136376422 of --seed 1: 1.6 times the tolerance on one device). Norms are drawn over 3 values or more.


def _divisors(n: int) -> list[int]:
    return [a for a in range(2, n) if n % a == 0]


def _dense(choose, n: int):
    width = choose.choice(SIZES)
    shape, layers = (width,), []
    for _ in range(n):
        kind = choose.choice(("linear", "act", "layer_norm", "residual", "concat", "softmax", "transpose", "gram"))
        if kind in ("transpose", "gram") and not _divisors(width):
            kind = "linear"  # a prime width has no (a, width / a) view
        if kind == "layer_norm" and width < 3:
            kind = "softmax"  # _NORM_WIDTH
        if kind == "linear":
            width = choose.choice(SIZES)
            layers.append(("linear", width))
        elif kind in ("act", "residual"):
            layers.append((kind, choose.choice(ACTIVATIONS)))
        elif kind == "concat":
            a, b = choose.choice(SIZES), choose.choice(SIZES)
            layers.append(("concat", a, b))
            width = a + b
        elif kind == "transpose":
            layers.append(("transpose", choose.choice(_divisors(width))))
        elif kind == "gram":
            a = choose.choice(_divisors(width))
            layers.append(("gram", a))
            width = a * a
        else:
            layers.append((kind,))
    return shape, layers


def _conv(choose, n: int, batch: int):
    channels = choose.choice((1, 2, 3))
    size = choose.choice((3, 4, 5, 6, 7, 8))
    shape = (channels, size, size)
    h = size  # the spatial extent (square maps); channels need no bound
    layers = []
    for _ in range(n):
        kind = choose.choice(("conv", "batch_norm", "act", "max_pool", "avg_pool", "conv_residual", "concat"))
        if kind in ("max_pool", "avg_pool"):
            k, s = choose.choice((2, 3)), choose.choice((1, 2))
            if h < k:
                kind = "act"
            else:
                layers.append((kind, k, s))
                h = (h - k) // s + 1
                continue
        if kind == "batch_norm" and (batch * h * h < 8 or (layers and layers[-1][0] == "batch_norm")):
            # Statistics of a few values amplify float32 rounding beyond any tolerance, and so does a
            # batch norm of a batch norm (its input already normalised: three in a row over 18 values
            # put a gamma gradient 1.06x past 1e-4 on one device, case seed 0 of the pool branch).
            kind = "act"
        if kind == "conv":
            out, k, s = choose.choice((1, 2, 3, 4, 5)), choose.choice((1, 3)), choose.choice((1, 2))
            pad = choose.choice((0, 1))  # a padded 1x1 conv's border is its bias: a max pool's windows tie
            if h + 2 * pad < k:
                pad = 1
            layers.append(("conv", out, k, s, pad))
            h = (h + 2 * pad - k) // s + 1
        elif kind == "concat":
            a, b = choose.choice((1, 2, 3)), choose.choice((1, 2, 3))
            layers.append(("concat", a, b))
        elif kind == "act":
            layers.append(("act", choose.choice(ACTIVATIONS)))
        else:
            layers.append((kind,))
    return shape, layers


def _seq(choose, n: int):
    seq, vocab = choose.choice(SIZES), choose.choice(SIZES)
    heads = choose.choice((1, 2, 3))
    width = heads * choose.choice((2, 3, 4, 5))
    shape, layers = (seq, vocab, width), []
    for _ in range(n):
        kind = choose.choice(("attention", "layer_norm", "linear", "act", "residual", "softmax"))
        if kind == "layer_norm" and width < 3:
            kind = "softmax"  # _NORM_WIDTH
        if kind == "attention":
            layers.append(("attention", choose.choice([h for h in (1, 2, 3, 4) if width % h == 0])))
        elif kind == "linear":
            width = choose.choice(SIZES)
            layers.append(("linear", width))
        elif kind in ("act", "residual"):
            layers.append((kind, choose.choice(ACTIVATIONS)))
        else:
            layers.append((kind,))
    return shape, layers


def _rnn(choose, n: int):
    steps, features = choose.choice((2, 3, 4, 5)), choose.choice(SIZES)
    shape, layers = (steps, features), []
    for _ in range(n):
        kind = choose.choice(("lstm", "gru", "linear", "act"))
        if kind in ("lstm", "gru", "linear"):
            layers.append((kind, choose.choice(SIZES)))
        else:
            layers.append(("act", choose.choice(ACTIVATIONS)))
    return shape, layers


# ----- the model, written once for tw.nn and torch.nn ------------------------------------------------


class _TilewiseOps:
    """What the model needs beyond modules, for tilewise graph tensors."""

    nn = nn

    @staticmethod
    def act(name, x):
        return getattr(F, name)(x)

    @staticmethod
    def softmax(x):
        return F.softmax(x, dim=-1)

    @staticmethod
    def cat(xs, dim):
        return F.cat(xs, dim=dim)

    @staticmethod
    def reshape(x, shape):
        return tdl_ops.reshape(x, shape=tuple(shape), in_shape=tuple(x.shape))

    @staticmethod
    def swap_last(x):
        return tdl_ops.permute(x, perm=(0, 2, 1))

    @staticmethod
    def mean(x, dim):
        return tdl_ops.reduce_mean(x, axis=dim)

    @staticmethod
    def last_step(x):
        return F.select(x, 1, x.shape[1] - 1)

    @staticmethod
    def flatten(x):
        return F.flatten(x, 1)

    @staticmethod
    def lstm_out(result):
        return result[0]


class _TorchOps:
    """The same for torch tensors."""

    def __init__(self):
        import torch

        self.torch = torch
        self.nn = torch.nn

    def act(self, name, x):
        return getattr(self.torch.nn.functional, name)(x)

    def softmax(self, x):
        return self.torch.softmax(x, dim=-1)

    def cat(self, xs, dim):
        return self.torch.cat(xs, dim=dim)

    def reshape(self, x, shape):
        return x.reshape(tuple(shape))

    def swap_last(self, x):
        return x.transpose(1, 2)

    def mean(self, x, dim):
        return x.mean(dim=dim)

    def last_step(self, x):
        return x[:, -1]

    def flatten(self, x):
        return x.flatten(1)

    def lstm_out(self, result):
        return result[0]


class _TilewiseGRU(nn.Module):
    """A GRU over (B, T, I), batch first, with torch.nn.GRUCell's parameters; zero initial state."""

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter((3 * hidden_size, input_size))
        self.weight_hh = nn.Parameter((3 * hidden_size, hidden_size))
        self.bias_ih = nn.Parameter((3 * hidden_size,))
        self.bias_hh = nn.Parameter((3 * hidden_size,))

    def forward(self, x):
        h = x.graph.input("h0", (x.shape[0], self.hidden_size))
        outs = []
        for t in range(x.shape[1]):
            gi = F.linear(F.select(x, 1, t), self.weight_ih, self.bias_ih)
            gh = F.linear(h, self.weight_hh, self.bias_hh)
            h = tdl_ops.gru_cell(gi, gh, h)
            outs.append(h)
        return F.stack(outs, dim=1)


def _torch_gru(torch):
    class GRU(torch.nn.GRUCell):
        """torch.nn.GRUCell unrolled over (B, T, I), batch first, from a zero state."""

        def forward(self, x):
            h = x.new_zeros((x.shape[0], self.hidden_size))
            outs = []
            for t in range(x.shape[1]):
                h = super().forward(x[:, t], h)
                outs.append(h)
            return torch.stack(outs, dim=1)

    return GRU


def _model_class(ops, gru):
    """The model class for one framework (``ops``: _TilewiseOps or _TorchOps; ``gru``: its GRU)."""
    lib = ops.nn

    class Block(lib.Module):
        """One layer of a case; its modules named as torch's would be."""

        def __init__(self, layer: tuple, family: str, width: int):
            super().__init__()
            self.kind, self.args = layer[0], layer[1:]
            kind, args = self.kind, self.args
            if kind == "linear":
                self.fc = lib.Linear(width, args[0])
            elif kind == "residual":
                self.fc = lib.Linear(width, width)
            elif kind == "layer_norm":
                self.norm = lib.LayerNorm(width)
            elif kind == "concat" and family == "dense":
                self.a, self.b = lib.Linear(width, args[0]), lib.Linear(width, args[1])
            elif kind == "concat":
                self.a, self.b = lib.Conv2d(width, args[0], 1), lib.Conv2d(width, args[1], 1)
            elif kind == "conv":
                out, k, s, pad = args
                self.conv = lib.Conv2d(width, out, k, stride=s, padding=pad)
            elif kind == "conv_residual":
                self.conv = lib.Conv2d(width, width, 3, padding=1)
            elif kind == "batch_norm":
                self.norm = lib.BatchNorm2d(width)
            elif kind == "attention":
                self.attn = lib.MultiheadAttention(width, args[0], batch_first=True)
            elif kind == "lstm":
                self.rnn = lib.LSTM(width, args[0], batch_first=True)
            elif kind == "gru":
                self.rnn = gru(width, args[0])

        def forward(self, x):
            kind, args = self.kind, self.args
            if kind == "linear":
                return self.fc(x)
            if kind == "act":
                return ops.act(args[0], x)
            if kind == "residual":
                return x + ops.act(args[0], self.fc(x))
            if kind in ("layer_norm", "batch_norm"):
                return self.norm(x)
            if kind == "softmax":
                return ops.softmax(x)
            if kind == "concat":
                return ops.cat([self.a(x), self.b(x)], 1)
            if kind == "transpose":
                b, w = x.shape
                y = ops.swap_last(ops.reshape(x, (b, args[0], w // args[0])))
                return ops.reshape(y, (b, w))
            if kind == "gram":
                b, w = x.shape
                y = ops.reshape(x, (b, args[0], w // args[0]))
                return ops.reshape(y @ ops.swap_last(y), (b, args[0] * args[0]))
            if kind == "conv":
                return self.conv(x)
            if kind == "conv_residual":
                return x + self.conv(x)
            if kind in ("max_pool", "avg_pool"):
                pool = lib.MaxPool2d if kind == "max_pool" else lib.AvgPool2d
                return pool(args[0], stride=args[1])(x)
            if kind == "attention":
                return x + self.attn(x, x, x, need_weights=False)[0]
            if kind == "lstm":
                return ops.lstm_out(self.rnn(x))
            if kind == "gru":
                return self.rnn(x)
            raise ValueError(f"unknown layer kind {kind!r}")

    class Model(lib.Module):
        """stem -> blocks -> head."""

        def __init__(self, case: Case):
            super().__init__()
            self.family = case.family
            if case.family == "seq":
                _, vocab, width = case.shape
                self.embed = lib.Embedding(vocab, width)
            else:
                width = case.shape[0] if case.family != "rnn" else case.shape[1]
            blocks = []
            h = case.shape[1] if case.family == "conv" else None
            for layer in case.layers:
                blocks.append(Block(layer, case.family, width))
                width, h = _width_after(layer, case.family, width, h)
            self.blocks = lib.ModuleList(blocks)
            features = width * h * h if case.family == "conv" else width
            self.head = lib.Linear(features, case.classes)

        def forward(self, x):
            if self.family == "seq":
                x = self.embed(x)
            for block in self.blocks:
                x = block(x)
            if self.family == "seq":
                x = ops.mean(x, 1)
            elif self.family == "rnn":
                x = ops.last_step(x)
            elif self.family == "conv":
                x = ops.flatten(x)
            return self.head(x)

    return Model


def _width_after(layer: tuple, family: str, width: int, h: int | None):
    """(width or channels, spatial extent) after ``layer``."""
    kind, args = layer[0], layer[1:]
    if kind in ("linear", "lstm", "gru"):
        return args[0], h
    if kind == "concat":
        return args[0] + args[1], h
    if kind == "gram":
        return args[0] * args[0], h
    if kind == "conv":
        out, k, s, pad = args
        return out, (h + 2 * pad - k) // s + 1
    if kind in ("max_pool", "avg_pool"):
        return width, (h - args[0]) // args[1] + 1
    return width, h


_MODELS: dict = {}


def _tilewise_model(case: Case):
    if "tw" not in _MODELS:
        _MODELS["tw"] = _model_class(_TilewiseOps, _TilewiseGRU)
    return _MODELS["tw"](case)


def input_placeholder(case: Case):
    """The model input of ``case`` (ids are int64)."""
    if case.family == "seq":
        return placeholder((case.batch, case.shape[0]), "input", "int64")
    return placeholder((case.batch,) + tuple(case.shape), "input")


def optimizer(case: Case):
    """The tilewise optimizer of ``case``."""
    if case.optimizer == "sgd":
        return SGD(SGD_LR)
    if case.optimizer == "momentum":
        return Momentum(MOMENTUM_LR, momentum=MOMENTUM)
    return Adam(ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)


def build_graph(case: Case) -> Graph:
    """The training graph of ``case``: forward, loss, backward, the optimizer's updates."""
    loss = F.cross_entropy if case.loss == "cross_entropy" else F.mse_loss
    return trace(_tilewise_model(case), input_placeholder(case), loss=loss, optimizer=optimizer(case),
                 name=f"case{case.seed}")


def build_torch(case: Case):
    """``(model, loss_fn, make_optimizer)`` in torch for ``case``; the model's ``state_dict`` keys are
    the graph's parameter names. Needs torch."""
    ops = _TorchOps()
    torch = ops.torch
    if "torch" not in _MODELS:
        _MODELS["torch"] = _model_class(ops, _torch_gru(torch))
    model = _MODELS["torch"](case)
    loss = torch.nn.functional.cross_entropy if case.loss == "cross_entropy" else torch.nn.functional.mse_loss

    def make_optimizer(params):
        if case.optimizer == "sgd":
            return torch.optim.SGD(params, lr=SGD_LR)
        if case.optimizer == "momentum":
            return torch.optim.SGD(params, lr=MOMENTUM_LR, momentum=MOMENTUM)
        return torch.optim.Adam(params, lr=ADAM_LR, betas=ADAM_BETAS, eps=ADAM_EPS)

    return model, loss, make_optimizer

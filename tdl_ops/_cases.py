"""Test cases for the TDL operator library: which op, input shapes, attributes, input kinds."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# Input kinds understood by make_inputs:
#   "normal"    standard normal (default)
#   "wide"      5 * standard normal
#   "negative"  uniform in (-2.0, -0.5]
#   "positive"  uniform in [0.5, 2.0) (log, sqrt, variances)
#   "unit"      uniform in (0.05, 0.95) (probabilities, sigmoid outputs)
#   "spd"       batch of symmetric positive definite matrices (..., n, n)
#   "ids:V"     integer-valued float64 in [0, V)
#   "onehot"    one-hot rows along the last axis
#   "prob"      rows of a probability distribution along the last axis
#   "mask"      0/1 values
#   "distinct"  a random permutation of distinct values (no ties for max/argmax)


@dataclass(frozen=True)
class Case:
    """One test case: op name, input shapes, attributes and input kinds (default "normal")."""

    op: str
    shapes: tuple
    attrs: dict = field(default_factory=dict)
    kinds: tuple = ()
    name: str = ""
    prepare: Callable | None = None  # (inputs, attrs) -> inputs, for inputs derived from others

    @property
    def id(self) -> str:
        return self.name or self.op

    def kind(self, i: int) -> str:
        return self.kinds[i] if i < len(self.kinds) and self.kinds[i] else "normal"


def make_input(kind: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """Make one float64 input array of the given kind and shape."""
    shape = tuple(shape)
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "wide":
        return 5.0 * rng.standard_normal(shape)
    if kind == "negative":
        return -rng.uniform(0.5, 2.0, shape)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape)
    if kind == "unit":
        return rng.uniform(0.05, 0.95, shape)
    if kind == "spd":
        a = rng.standard_normal(shape)
        n = shape[-1]
        return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    if kind.startswith("ids:"):
        return rng.integers(0, int(kind[4:]), shape).astype(np.float64)
    if kind == "onehot":
        ids = rng.integers(0, shape[-1], shape[:-1])
        return np.eye(shape[-1])[ids]
    if kind == "prob":
        p = rng.uniform(0.1, 1.0, shape)
        return p / p.sum(axis=-1, keepdims=True)
    if kind == "mask":
        return (rng.uniform(size=shape) < 0.7).astype(np.float64)
    if kind == "distinct":
        n = int(np.prod(shape))
        return (rng.permutation(n).astype(np.float64) - n / 2).reshape(shape) / 7.0 + 0.01
    raise ValueError(f"unknown input kind {kind!r}")


def make_inputs(case: Case, rng: np.random.Generator) -> list:
    """Make all inputs of a case."""
    inputs = [make_input(case.kind(i), s, rng) for i, s in enumerate(case.shapes)]
    return case.prepare(inputs, dict(case.attrs)) if case.prepare else inputs

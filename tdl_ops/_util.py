"""Small helpers shared by the TDL op families (index tuples, NumPy helpers)."""

from __future__ import annotations

import inspect
import math

import numpy as np


def norm_axis(axis: int, ndim: int) -> int:
    """Normalise a possibly negative axis."""
    return axis % ndim


def insert(idx: tuple, axis: int, v) -> tuple:
    """idx with v inserted at position axis (an index tuple of rank len(idx) + 1)."""
    return tuple(idx[:axis]) + (v,) + tuple(idx[axis:])


def replace(idx: tuple, axis: int, v) -> tuple:
    """idx with position axis replaced by v."""
    return tuple(idx[:axis]) + (v,) + tuple(idx[axis + 1:])


_erf = np.frompyfunc(math.erf, 1, 1)


def np_erf(x: np.ndarray) -> np.ndarray:
    """Element-wise erf in NumPy (math.erf per element)."""
    return _erf(np.asarray(x, dtype=np.float64)).astype(np.float64)


def np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax."""
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable log-softmax."""
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    """Logistic sigmoid."""
    return 1.0 / (1.0 + np.exp(-x))


def scalar(t):
    """The single element of a 0-d (or one-element) tensor handle, e.g. the gradient of a loss.

    Indexing with one 0 per dimension keeps descriptions valid for both ranks (Op.evaluate hands
    0-d arrays over as shape (1,)).
    """
    return t[(0,) * t.ndim]


def leading(ndim: int) -> tuple:
    """The axes before the last one: what a bias or a row-wise parameter is broadcast over."""
    return tuple(range(ndim - 1))


def nary(n: int, body, name: str, attrs: dict):
    """A function of n tensor parameters x0..x{n-1} plus keyword attributes, calling ``body(*xs, **attrs)``:
    what ``@tw.op`` needs for one member of an n-ary family (``concat_3``, ``add_7``)."""
    params = [inspect.Parameter(f"x{k}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for k in range(n)]
    params += [inspect.Parameter(a, inspect.Parameter.KEYWORD_ONLY, default=v) for a, v in attrs.items()]

    def fn(*xs, **kw):
        return body(*xs, **kw)
    fn.__signature__ = inspect.Signature(params)
    fn.__name__ = name
    return fn

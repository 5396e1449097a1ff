"""The package's one private utility module: small helpers several stages share.

Only ``_core`` lies below it; every layer may import it (docs/ARCHITECTURE.md, layer order).
"""

from __future__ import annotations

import difflib
import operator

from ._core import PlanError

#: The largest int the C++ core takes where it expects a C ``int``.
INT_MAX = 2**31 - 1


def fmt_bytes(b: float) -> str:
    """Decimal units (1 GB = 1e9 bytes), as network bandwidths are quoted."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{int(b)} B"


def check_int(name: str, value, *, minimum: int, maximum: int = INT_MAX, error: type[Exception] = PlanError) -> int:
    """``value`` as an int in [minimum, maximum]: TypeError for non-ints (bool included), ``error``
    (tw.PlanError unless given) when out of range."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, not {type(value).__name__} ({value!r})") from None
    if not minimum <= v <= maximum:
        raise error(f"{name} must be an int from {minimum} to {maximum}, got {v}")
    return v


def did_you_mean(name: str, names) -> str:
    """" (did you mean 'a' or 'b'?)" for the close matches of ``name`` among ``names``, else ""."""
    near = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(n) for n in near)}?)" if near else ""

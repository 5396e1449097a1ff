"""The package's one private utility module: small helpers several stages share.

Only ``_core`` lies below it; every layer may import it (docs/ARCHITECTURE.md, layer order).
"""

from __future__ import annotations

import difflib
import json
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


# ----- reading files the user gives (graph and plan JSON) -----------------------------------------


def parse_json(text, error: type[Exception], what: str, reader: str):
    """The parsed JSON document ``text`` (str or UTF-8 bytes); ``error`` ("not a tilewise <what>: ...")
    for anything else: text that is not UTF-8, invalid JSON, 5,000-digit numbers, deep nesting."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = text.decode()
        except UnicodeDecodeError as e:
            raise error(f"not a tilewise {what}: not UTF-8 text ({e})") from None
    if not isinstance(text, str):
        raise error(f"{reader} takes the JSON text (str), not {type(text).__name__}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, int digit limit, nesting depth
        raise error(f"not a tilewise {what}: invalid JSON ({e})") from None


def json_kind(v) -> str:
    """What a JSON value is, for messages: "an integer", "a list", "null"..."""
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object", type(None): "null"}.get(type(v), type(v).__name__)


def short_repr(v, limit: int = 60) -> str:
    """``repr(v)``, cut to ``limit`` characters."""
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def json_text(data, path=None, indent: int = 1) -> str:
    """``data`` as JSON text, also written to ``path`` (UTF-8) when given: every result object's
    ``to_json(path=None)``."""
    text = json.dumps(data, indent=indent)
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return text

"""Validation of cluster fields, shared by the Python constructors and the JSON loader.

One set of rules, two ways of naming what is wrong: ``tw.Link('NVLink') bandwidth[1024]`` from
Python (wrong types are TypeError) and ``cluster JSON links.intra.bandwidth["1024"]`` from a file
(everything is ValueError, as a file has no types to get wrong, only contents).
"""

from __future__ import annotations

import json
import math
import numbers
import operator
import re
from collections.abc import Mapping

from .. import _core
from .._util import did_you_mean, json_kind, short_repr

#: Kernel kinds a device profile prices (cpp/sim/cluster.h), in table order.
KERNEL_KINDS: tuple[str, ...] = tuple(_core.kernel_kinds())
#: Kinds a profile may add (calibration does): copies from a source in the last-level cache.
CACHED_KINDS: tuple[str, ...] = tuple(_core.cached_kernel_kinds())
#: Kinds whose work is FLOPs; the others' work is bytes read and written.
FLOP_KINDS = ("gemm", "conv", "interpreter")
#: Device counts a cluster may have (the planners' limit, tilewise.plan).
MAX_DEVICES = 2**20
#: Profile sizes are ints a double holds exactly: the C++ core interpolates in doubles.
MAX_SIZE = 2**53
_INT64_MAX = 2**63 - 1
_DECIMAL = re.compile(r"[1-9][0-9]*")


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Checker:
    """Raises for values out of range, naming ``where`` and the field's path; ``type_error`` is the
    exception for values of the wrong type, ``json_keys`` whether profile sizes arrive as strings."""

    def __init__(self, where: str, type_error: type[Exception], json_keys: bool):
        self.where = where
        self.type_error = type_error
        self.json_keys = json_keys

    def fail(self, path: str, message: str, error: type[Exception] = ValueError):
        raise error(f"{self.where} {path}: {message}" if path else f"{self.where}: {message}")

    def kind_of(self, v) -> str:
        """What ``v`` is, in the words of its source: JSON's kinds for files, Python's types otherwise."""
        return json_kind(v) if self.json_keys else f"of type {type(v).__name__}"

    def wrong_type(self, path: str, v, expected: str):
        self.fail(path, f"is {self.kind_of(v)} ({short_repr(v)}); expected {expected}", self.type_error)

    def text(self, path: str, v, *, empty_ok: bool = False) -> str:
        if not isinstance(v, str):
            self.wrong_type(path, v, "a string")
        if not v and not empty_ok:
            self.fail(path, "is empty; expected a name")
        try:
            v.encode()  # the C++ core holds UTF-8: a lone surrogate would fail there, less clearly
        except UnicodeEncodeError:
            self.fail(path, f"is {short_repr(v)}, not valid Unicode text (a lone surrogate); expected a string")
        return v

    def flag(self, path: str, v) -> bool:
        if not isinstance(v, bool):
            self.wrong_type(path, v, "true or false")
        return v

    def integer(self, path: str, v, lo: int, hi: int, expected: str) -> int:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            self.wrong_type(path, v, expected)
        v = operator.index(v)
        if not lo <= v <= hi:
            self.fail(path, f"is {v}; expected {expected} (from {lo} to {hi})")
        return v

    def number(self, path: str, v, expected: str, *, zero_ok: bool = False) -> float:
        """A finite float, positive (or >= 0 with ``zero_ok``); bool is not a number here."""
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            self.wrong_type(path, v, expected)
        try:
            f = float(v)
        except OverflowError:  # an int past 1.8e308
            f = math.inf
        if not math.isfinite(f) or f < 0 or (f == 0 and not zero_ok):
            self.fail(path, f"is {short_repr(v)}; expected {expected}")
        return f

    def obj(self, path: str, v, fields: tuple[str, ...], what: str) -> dict:
        """A JSON object with exactly ``fields`` (every field required, none other allowed)."""
        if not isinstance(v, dict):
            self.wrong_type(path, v, f"an object ({what}) with fields {', '.join(fields)}")
        for k in v:
            if k not in fields:
                self.fail(join(path, str(k)), f"is not a field of {what}{did_you_mean(str(k), fields)}; "
                          f"expected only {', '.join(fields)}")
        for k in fields:
            if k not in v:
                self.fail(join(path, k), f"missing; {what} needs every field: {', '.join(fields)}")
        return v

    # ----- profiles: a number (every size) or {size: value} measured at sizes -----

    def size(self, path: str, k) -> int:
        if self.json_keys:
            if not isinstance(k, str) or not _DECIMAL.fullmatch(k) or int(k) > MAX_SIZE:
                self.fail(path, f"{json.dumps(k)} is not a size; expected a positive integer in decimal "
                          f"(bytes or FLOPs, at most 2^53) as the key")
            return int(k)
        if isinstance(k, bool) or not isinstance(k, numbers.Integral):
            self.fail(path, f"the size {short_repr(k)} is {self.kind_of(k)}; expected an int (bytes or FLOPs)",
                      self.type_error)
        k = operator.index(k)
        if not 1 <= k <= MAX_SIZE:
            self.fail(path, f"the size {k} is out of range; expected an int from 1 to 2^53")
        return k

    def profile(self, path: str, v, expected: str) -> float | dict[int, float]:
        """``v`` as a float (the same at every size) or a dict {size: value} sorted by size."""
        if not isinstance(v, Mapping):
            return self.number(path, v, f"{expected}, or {{size: {expected}}} measured at sizes")
        if not v:
            self.fail(path, f"is an empty profile; expected at least one {{size: {expected}}} point")
        points = {}
        for k, x in v.items():
            at = f"{path}[{json.dumps(k) if self.json_keys else short_repr(k)}]"
            points[self.size(at, k)] = self.number(at, x, expected)
        return dict(sorted(points.items()))

    # ----- kernel kinds -----

    def kind(self, path: str, kind) -> str:
        if not isinstance(kind, str):
            self.fail(path, f"the kernel kind {short_repr(kind)} is {self.kind_of(kind)}; expected one of "
                      f"{', '.join(KERNEL_KINDS)}", self.type_error)
        if kind not in KERNEL_KINDS + CACHED_KINDS:
            self.fail(path, f"{kind!r} is not a kernel kind{did_you_mean(kind, KERNEL_KINDS + CACHED_KINDS)}; "
                      f"expected one of {', '.join(KERNEL_KINDS + CACHED_KINDS)}")
        return kind


def kernel_unit(kind: str) -> str:
    return "FLOP" if kind in FLOP_KINDS else "B"


def link_fields(c: Checker, path: str, name, bandwidth, latency, duplex, duplex_bandwidth, shared) -> dict:
    """The fields of one link, validated (see tw.Link)."""
    f = {
        "name": c.text(join(path, "name"), name),
        "bandwidth": c.profile(join(path, "bandwidth"), bandwidth, "a positive finite number of bytes per second"),
        "latency": c.number(join(path, "latency"), latency, "seconds per transfer, >= 0 and finite", zero_ok=True),
        "duplex": c.flag(join(path, "duplex"), duplex),
        "duplex_bandwidth": c.number(join(path, "duplex_bandwidth"), duplex_bandwidth,
                                     "0 (twice the bandwidth) or bytes per second, finite", zero_ok=True),
        "shared": c.flag(join(path, "shared"), shared),
    }
    if f["duplex_bandwidth"] and not f["duplex"]:
        c.fail(join(path, "duplex_bandwidth"), f"is {f['duplex_bandwidth']:g}, but the link is not duplex (one "
               "direction at a time); expected 0, or duplex=True")
    fastest = max(f["bandwidth"].values()) if isinstance(f["bandwidth"], dict) else f["bandwidth"]
    if f["duplex_bandwidth"] and f["duplex_bandwidth"] < fastest:
        c.fail(join(path, "duplex_bandwidth"), f"is {f['duplex_bandwidth']:g} bytes/s, below the {fastest:g} one "
               "direction carries alone; expected 0 (twice the bandwidth) or at least the bandwidth")
    return f


def kernel_rate(c: Checker, path: str, spec, *, from_json: bool) -> tuple[float | dict[int, float], float]:
    """(rate, overhead) of one kernel kind. From Python: a rate, {size: rate} or (rate, overhead);
    from JSON: {"rate": ..., "overhead": ...}."""
    expected = "a positive finite rate (work per second)"
    if from_json:
        spec = c.obj(path, spec, ("rate", "overhead"), "a kernel rate")
        rate, overhead = spec["rate"], spec["overhead"]
    elif isinstance(spec, (tuple, list)):
        if len(spec) != 2:
            c.fail(path, f"is a sequence of {len(spec)}; expected (rate, overhead_seconds)", c.type_error)
        rate, overhead = spec
    else:
        rate, overhead = spec, 0.0
    return (c.profile(join(path, "rate") if from_json else path, rate, expected),
            c.number(join(path, "overhead"), overhead, "seconds per call, >= 0 and finite", zero_ok=True))


def device_fields(c: Checker, path: str, name, memory, kernels, concurrent_streams, *, from_json: bool) -> dict:
    """The fields of one device profile, validated (see tw.DeviceProfile); kernels in table order."""
    name = c.text(join(path, "name"), name)
    memory = c.integer(join(path, "memory"), memory, 0, _INT64_MAX, "an int number of bytes (0: unlimited)")
    if not isinstance(kernels, Mapping):
        c.wrong_type(join(path, "kernels"), kernels, "an object {kind: rate}" if from_json else "a dict {kind: rate}")
    rates = {}
    for kind, spec in kernels.items():
        at = f"{join(path, 'kernels')}.{kind}" if isinstance(kind, str) else join(path, "kernels")
        rates[c.kind(at, kind)] = kernel_rate(c, at, spec, from_json=from_json)
    return {"name": name, "memory": memory, "kernels": {k: rates[k] for k in KERNEL_KINDS + CACHED_KINDS if k in rates},
            "concurrent_streams": c.flag(join(path, "concurrent_streams"), concurrent_streams)}


def machine_shape(c: Checker, devices, devices_per_machine, intra, inter, paths: Mapping[str, str]) -> tuple[int, int]:
    """(devices, devices_per_machine), checked against the links the shape needs."""
    devices = c.integer(paths["devices"], devices, 1, MAX_DEVICES, "a device count")
    per = c.integer(paths["devices_per_machine"], devices_per_machine, 1, MAX_DEVICES, "devices per machine")
    machines = -(-devices // per)
    if machines > 1 and inter is None:
        c.fail(paths["inter"], f"is missing (None), but {devices} devices at {per} per machine span {machines} "
               "machines; expected a link between machines")
    if min(devices, per) > 1 and intra is None:
        c.fail(paths["intra"], f"is missing (None), but machines hold {min(devices, per)} devices; expected a link "
               "inside a machine")
    return devices, per

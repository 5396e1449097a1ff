"""Clusters (TensorOpt §2.1, §3.2, §5; SwapAdvisor §4.2, §5.1; Tofu §7): the devices a plan runs on,
what each computes how fast, and the links between them.

    import tilewise as tw

    c = tw.Cluster.preset("tensoropt")                 # 2 machines x 8 V100, NVLink, EDR InfiniBand
    print(c)                                            # the table: devices, links, kernel rates
    c.transfer_seconds(0, 8, 2**20)                    # 1 MiB across machines
    c.inter = c.inter.replace(bandwidth=2 * c.inter.bandwidth)
    c.with_devices(32).to_json("my-cluster.json")

Links and device profiles are immutable values (edit with ``replace``); a Cluster's fields are
assignable, each assignment validated at once. ``cluster._core`` is the C++ ``sim::Cluster`` the
simulator prices programs against, rebuilt on every change.

Rates and bandwidths are a number (the same at every size) or a profile ``{size: value}`` measured at
sizes 2^i, interpolated linearly in log2(size) between neighbours and held at the end points outside
them (TensorOpt §3.2). docs/CLUSTERS.md describes the JSON format and the presets.
"""

from __future__ import annotations

import html
import json
import os
import textwrap
from collections.abc import Callable, Mapping

from .. import _core
from .._util import did_you_mean, parse_json, short_repr
from ._checks import (
    FLOP_KINDS,
    KERNEL_KINDS,
    MAX_DEVICES,
    Checker,
    device_fields,
    kernel_unit,
    link_fields,
    machine_shape,
)

FORMAT = "tilewise-cluster"
VERSION = 2  # 2: cache_bytes (version 1 files, without it, still load: not modelled)
#: Cluster files are a few KB; the limit keeps a wrong path (a dataset, a log) from being read whole.
MAX_FILE_BYTES = 4 * 2**20
LEVELS = ("intra", "inter", "host")
THIS_MACHINE = "this-machine"
#: Measured clusters: threads of this process, MPI ranks on this machine, this machine's GPUs.
MEASURED = (THIS_MACHINE, "this-machine-mpi", "this-gpu")

Rate = float | dict[int, float]


def _core_profile(p: Rate) -> _core.Profile:
    if isinstance(p, dict):
        return _core.Profile([float(s) for s in p], list(p.values()))
    return _core.Profile([1.0], [p])


def _profile_json(p: Rate):
    return {str(s): v for s, v in p.items()} if isinstance(p, dict) else p


def _copy(p: Rate) -> Rate:
    return dict(p) if isinstance(p, dict) else p


def _number_arg(what: str, v) -> float:
    """A non-negative finite amount of work or bytes (what a caller asks the time of)."""
    return Checker(what, TypeError, json_keys=False).number("", v, "a non-negative finite number", zero_ok=True)


# ----- links --------------------------------------------------------------------------------------


class Link:
    """One link level of a cluster (TensorOpt §2.1's device-graph edges, SwapAdvisor's host link).

    ``bandwidth``: bytes per second of one transfer alone on the link, a number or ``{bytes: B/s}``
    measured at 2^i bytes. ``latency``: seconds per transfer whatever its size. ``duplex``: both
    directions run at full bandwidth at once, the two together capped by ``duplex_bandwidth``
    (0: twice the bandwidth). ``shared``: concurrent transfers through one machine's link split it
    (a PCIe switch, a NIC); not shared: every pair of devices has its own (an NVLink mesh).
    """

    __slots__ = ("_f", "_core_link")

    def __init__(self, name: str, bandwidth, latency: float = 0.0, duplex: bool = True,
                 duplex_bandwidth: float = 0.0, shared: bool = False):
        where = f"tw.Link {name!r}" if isinstance(name, str) else "tw.Link"
        c = Checker(where, TypeError, json_keys=False)
        self._f = link_fields(c, "", name, bandwidth, latency, duplex, duplex_bandwidth, shared)
        self._core_link = None

    name = property(lambda self: self._f["name"], doc="What the link is (e.g. 'NVLink 2.0').")
    bandwidth = property(lambda self: _copy(self._f["bandwidth"]), doc="Bytes/s: a number or {bytes: B/s}.")
    latency = property(lambda self: self._f["latency"], doc="Seconds per transfer.")
    duplex = property(lambda self: self._f["duplex"], doc="Both directions at once.")
    duplex_bandwidth = property(lambda self: self._f["duplex_bandwidth"],
                                doc="Bytes/s of both directions together (0: twice the bandwidth).")
    shared = property(lambda self: self._f["shared"], doc="Concurrent transfers split one machine's link.")

    def replace(self, **changes) -> Link:
        """A copy with some fields changed: ``link.replace(latency=2e-6)``."""
        unknown = set(changes) - set(self._f)
        if unknown:
            name = sorted(unknown)[0]
            raise TypeError(f"tw.Link has no field {name!r}{did_you_mean(name, self._f)}; fields: {', '.join(self._f)}")
        return Link(**{**self._f, **changes})

    def bandwidth_at(self, nbytes: float) -> float:
        """Bytes per second of one transfer of ``nbytes`` alone (the profile, interpolated)."""
        return self._core.bandwidth.at(_number_arg("Link.bandwidth_at nbytes", nbytes))

    def transfer_seconds(self, nbytes: float) -> float:
        """latency + nbytes / bandwidth(nbytes): one transfer alone on the link (0 for 0 bytes)."""
        return self._core.transfer_seconds(_number_arg("Link.transfer_seconds nbytes", nbytes))

    @property
    def _core(self) -> _core.Link:
        if self._core_link is None:
            link = _core.Link()
            link.name = self.name
            link.bandwidth = _core_profile(self._f["bandwidth"])
            for k in ("latency", "duplex", "duplex_bandwidth", "shared"):
                setattr(link, k, self._f[k])
            self._core_link = link
        return self._core_link

    def to_dict(self) -> dict:
        return {**self._f, "bandwidth": _profile_json(self._f["bandwidth"])}

    def __eq__(self, other):
        return isinstance(other, Link) and self._f == other._f

    __hash__ = None  # equal values, but a profile is a dict

    def __repr__(self):
        extra = "" if not self.duplex_bandwidth else f" ({_rate(self.duplex_bandwidth, 'B')} both ways)"
        return (f"tw.Link({self.name!r}, {_profile_str(self._f['bandwidth'], 'B')}, latency {_seconds(self.latency)}, "
                f"{'duplex' + extra if self.duplex else 'half duplex'}, {'shared' if self.shared else 'not shared'})")


# ----- devices ------------------------------------------------------------------------------------

#: Fractions of peak that DeviceProfile.roofline assumes per kernel kind, when not given. Rough
#: figures for GPUs running DL kernels, not measurements: large GEMMs reach 70-90 % of peak FLOP/s,
#: convolutions over the layer shapes of CNNs less; memory-bound kernels stream at 50-80 % of the
#: memory bandwidth, gathers (embedding) at a fraction of it.
DEFAULT_EFFICIENCY = {
    "gemm": 0.7, "conv": 0.5,  # of peak FLOP/s
    "elementwise": 0.7, "reduction": 0.6, "norm": 0.5, "layout": 0.5, "embedding": 0.3, "copy": 0.8, "send": 0.8,
    "combine": 0.7,  # of the memory bandwidth
    "interpreter": 0.01,  # of peak FLOP/s: a generic loop with no native kernel
}


class DeviceProfile:
    """One device: its memory and how fast each kind of kernel runs on it.

    ``memory``: bytes (0: unlimited). ``kernels``: {kind: rate}, where the rate is work per second
    (FLOPs for gemm, conv and interpreter; bytes read and written for the others), a number or
    ``{work: rate}`` measured at sizes, or ``(rate, overhead_seconds)`` with a per-call overhead.
    Kinds: ``tw.DeviceProfile.KINDS``; a profile may leave some out (the simulator then refuses
    programs that need them). ``concurrent_streams``: compute and copies overlap (a GPU), or one
    worker runs the device's program in order (a CPU device of the thread and MPI executors).
    """

    __slots__ = ("_f", "_core_device")
    KINDS = KERNEL_KINDS

    def __init__(self, name: str, memory: int, kernels: Mapping, concurrent_streams: bool = False):
        where = f"tw.DeviceProfile {name!r}" if isinstance(name, str) else "tw.DeviceProfile"
        c = Checker(where, TypeError, json_keys=False)
        self._f = device_fields(c, "", name, memory, kernels, concurrent_streams, from_json=False)
        self._core_device = None

    @classmethod
    def roofline(cls, name: str, memory: int, peak_flops: float, memory_bandwidth: float, *,
                 efficiency: Mapping[str, float] | None = None, overhead: float = 0.0,
                 concurrent_streams: bool = False) -> DeviceProfile:
        """Every kernel kind priced from two peaks: gemm, conv and interpreter per FLOP at
        ``peak_flops * efficiency[kind]``, the others per byte at ``memory_bandwidth *
        efficiency[kind]``; ``efficiency`` overrides DEFAULT_EFFICIENCY kind by kind, ``overhead``
        (seconds) is paid once per call of every kind (launch and dispatch)."""
        c = Checker(f"tw.DeviceProfile.roofline {name!r}", TypeError, json_keys=False)
        peak_flops = c.number("peak_flops", peak_flops, "FLOP/s, positive and finite")
        memory_bandwidth = c.number("memory_bandwidth", memory_bandwidth, "bytes/s, positive and finite")
        given = efficiency if efficiency is not None else {}
        if not isinstance(given, Mapping):
            c.wrong_type("efficiency", given, "a dict {kind: fraction of peak}")
        eff = dict(DEFAULT_EFFICIENCY)
        for kind, e in given.items():
            e = c.number(f"efficiency[{kind!r}]", e, "a fraction of peak in (0, 1]")
            if e > 1:
                c.fail(f"efficiency[{kind!r}]", f"is {e:g}; expected a fraction of peak in (0, 1]")
            eff[c.kind(f"efficiency[{kind!r}]", kind)] = e
        kernels = {k: (eff[k] * (peak_flops if k in FLOP_KINDS else memory_bandwidth), overhead) for k in KERNEL_KINDS}
        return cls(name, memory, kernels, concurrent_streams)

    name = property(lambda self: self._f["name"])
    memory = property(lambda self: self._f["memory"], doc="Bytes (0: unlimited).")
    kernels = property(lambda self: {k: (_copy(r), o) for k, (r, o) in self._f["kernels"].items()},
                       doc="{kind: (rate, overhead_seconds)}, rate a number or {work: rate}.")
    concurrent_streams = property(lambda self: self._f["concurrent_streams"])

    def replace(self, **changes) -> DeviceProfile:
        """A copy with some fields changed: ``device.replace(memory=32 * 2**30)``."""
        unknown = set(changes) - set(self._f)
        if unknown:
            name = sorted(unknown)[0]
            raise TypeError(f"tw.DeviceProfile has no field {name!r}{did_you_mean(name, self._f)}; "
                            f"fields: {', '.join(self._f)}")
        return DeviceProfile(**{**self._f, **changes})

    def _kind(self, kind) -> str:
        c = Checker(f"device profile {self.name!r}", TypeError, json_keys=False)
        kind = c.kind("kind", kind)
        if kind not in self._f["kernels"]:
            c.fail("kind", f"has no rate for {kind!r}; it has {', '.join(self._f['kernels']) or 'none'}")
        return kind

    def rate_at(self, kind: str, work: float) -> float:
        """Work per second of one call of ``kind`` doing ``work`` (the profile, interpolated)."""
        kind = self._kind(kind)
        return self._core.kernels[kind].rate.at(_number_arg("DeviceProfile.rate_at work", work))

    def kernel_seconds(self, kind: str, work: float) -> float:
        """overhead + work / rate(work): one call of a ``kind`` kernel doing ``work`` FLOPs or bytes."""
        kind = self._kind(kind)
        return self._core.kernel_seconds(kind, _number_arg("DeviceProfile.kernel_seconds work", work))

    @property
    def _core(self) -> _core.DeviceProfile:
        if self._core_device is None:
            d = _core.DeviceProfile()
            d.name, d.memory, d.concurrent_streams = self.name, self.memory, self.concurrent_streams
            d.kernels = {k: _core.KernelRate(_core_profile(r), o) for k, (r, o) in self._f["kernels"].items()}
            self._core_device = d
        return self._core_device

    def to_dict(self) -> dict:
        kernels = {k: {"rate": _profile_json(r), "overhead": o} for k, (r, o) in self._f["kernels"].items()}
        return {"name": self.name, "memory": self.memory, "concurrent_streams": self.concurrent_streams,
                "kernels": kernels}

    def __eq__(self, other):
        return isinstance(other, DeviceProfile) and self._f == other._f

    __hash__ = None

    def __repr__(self):
        return (f"tw.DeviceProfile({self.name!r}, memory {_memory(self.memory)}, "
                f"{len(self._f['kernels'])} kernel kinds{', concurrent streams' if self.concurrent_streams else ''})")


# ----- presets: registered by name; "this-machine" by the runtime's calibration -------------------

_PRESETS: dict[str, Callable[[], Cluster]] = {}
_measured: dict[str, Callable[[int | None], Cluster]] = {}


def register_preset(name: str):
    """Decorator: ``fn() -> Cluster`` is the preset ``name`` (tilewise/sim/presets.py)."""
    if not isinstance(name, str) or not name or name in MEASURED or name in _PRESETS:
        raise ValueError(f"preset name {name!r} is taken or not a name")

    def register(fn):
        _PRESETS[name] = fn
        return fn

    return register


def register_this_machine(fn: Callable[[int | None], Cluster] | None, name: str = THIS_MACHINE) -> None:
    """Makes ``Cluster.preset(name, devices)`` call ``fn(devices)`` (``devices`` None: the
    calibration's own count), for ``name`` in ``MEASURED`` ("this-machine": threads of one process,
    "this-machine-mpi": MPI ranks). The calibration registers its functions here, so that this
    package needs nothing above it; ``None`` unregisters."""
    if name not in MEASURED:
        raise ValueError(f"register_this_machine registers one of {', '.join(MEASURED)}, not {name!r}")
    if fn is not None and not callable(fn):
        raise TypeError(f"register_this_machine takes a function fn(devices) -> tw.Cluster, not {type(fn).__name__}")
    if fn is None:
        _measured.pop(name, None)
    else:
        _measured[name] = fn


# ----- the cluster --------------------------------------------------------------------------------


def _field(name: str, doc: str) -> property:
    def get(self):
        return self._state[name]

    def set_(self, value):
        self._update(**{name: value})

    return property(get, set_, doc=doc)


class Cluster:
    """Devices grouped into machines, their profile and the links at each level (TensorOpt §2.1).

    ``Cluster(name, devices, devices_per_machine=None, *, device, intra=None, inter=None, host=None,
    concurrent_devices=0, memory_concurrency=0, cache_bytes=0, source="")``: ``devices_per_machine`` defaults to
    ``devices`` (one machine);
    device ids are machine-major (device d sits on machine d // devices_per_machine), and the
    planners' first cut separates machines: factors of the device count map onto the hierarchy
    slowest link first. ``intra`` may be None when no machine holds two devices, ``inter`` when
    there is one machine, ``host`` when nothing swaps. ``concurrent_devices``: how many devices
    compute at once (the cores a thread executor's workers share; 0: all). ``memory_concurrency``:
    how many devices of one machine stream memory at full speed at once (CPU cores share one memory
    bus: the machine's bandwidth over one core's; 0: every device has its own memory, as GPUs).
    ``cache_bytes``: the last-level cache one machine's devices share (0: not modelled); a
    memory-bound call whose device touched its data within its share of it reads the cache and
    does not share the memory bus. ``source``: where the numbers come from.
    """

    def __init__(self, name: str, devices: int, devices_per_machine: int | None = None, *,
                 device: DeviceProfile, intra: Link | None = None, inter: Link | None = None,
                 host: Link | None = None, concurrent_devices: int = 0, memory_concurrency: float = 0.0,
                 cache_bytes: float = 0.0, source: str = ""):
        self._state: dict = {}
        self._core_cluster = None
        self._update(name=name, devices=devices,
                     devices_per_machine=devices if devices_per_machine is None else devices_per_machine,
                     device=device, intra=intra, inter=inter, host=host, concurrent_devices=concurrent_devices,
                     memory_concurrency=memory_concurrency, cache_bytes=cache_bytes, source=source)

    name = _field("name", "The cluster's name.")
    devices = _field("devices", "How many devices.")
    devices_per_machine = _field("devices_per_machine", "Devices per machine (ids are machine-major).")
    concurrent_devices = _field("concurrent_devices", "Devices that compute at once (0: all).")
    memory_concurrency = _field("memory_concurrency", "Devices of a machine streaming memory at full speed at once "
                                "(0: each has its own memory).")
    cache_bytes = _field("cache_bytes", "Last-level cache bytes a machine's devices share (0: not modelled).")
    device = _field("device", "The tw.DeviceProfile of every device.")
    intra = _field("intra", "The tw.Link inside a machine (None: machines hold one device).")
    inter = _field("inter", "The tw.Link between machines (None: one machine).")
    host = _field("host", "The tw.Link between a device and its host's memory (None: not given).")
    source = _field("source", "Where the numbers come from (papers, measurements).")

    def _update(self, **changes) -> None:
        """Validates the fields after ``changes`` and rebuilds the C++ cluster; on an error nothing changes."""
        s = {**self._state, **changes}
        name = s["name"]
        c = Checker(f"tw.Cluster {name!r}" if isinstance(name, str) else "tw.Cluster", TypeError, json_keys=False)
        c.text("name", name)
        if not isinstance(s["device"], DeviceProfile):
            c.wrong_type("device", s["device"], "a tw.DeviceProfile")
        for level in LEVELS:
            if s[level] is not None and not isinstance(s[level], Link):
                c.wrong_type(level, s[level], "a tw.Link or None")
        s["devices"], s["devices_per_machine"] = machine_shape(
            c, s["devices"], s["devices_per_machine"], s["intra"], s["inter"], {k: k for k in _SHAPE_FIELDS})
        s["concurrent_devices"] = c.integer("concurrent_devices", s["concurrent_devices"], 0, MAX_DEVICES,
                                            "a device count (0: all)")
        s["memory_concurrency"] = c.number("memory_concurrency", s["memory_concurrency"],
                                           "a device count >= 0 (0: own memory per device)", zero_ok=True)
        s["cache_bytes"] = c.number("cache_bytes", s["cache_bytes"], "bytes >= 0 (0: not modelled)", zero_ok=True)
        c.text("source", s["source"], empty_ok=True)
        core = _core.Cluster()
        core.name, core.devices, core.devices_per_machine = name, s["devices"], s["devices_per_machine"]
        core.concurrent_devices, core.device = s["concurrent_devices"], s["device"]._core
        core.memory_concurrency, core.cache_bytes = s["memory_concurrency"], s["cache_bytes"]
        for level in LEVELS:
            if s[level] is not None:
                setattr(core, level, s[level]._core)
            # cluster.h names C++ links by level (what the simulator counts bytes by); the Python
            # name ("NVLink 2.0") stays on the tw.Link.
            getattr(core, level).name = level
        core.validate()  # the C++ rules; the checks above already hold them, with better messages
        self._state, self._core_cluster = s, core

    @property
    def _core(self) -> _core.Cluster:
        """The C++ ``sim::Cluster`` (read it, do not edit it: assign the Python fields instead)."""
        return self._core_cluster

    # ----- shape -----

    @property
    def machines(self) -> int:
        return self._core_cluster.machines()

    def _device_id(self, what: str, d) -> int:
        c = Checker(f"tw.Cluster {self.name!r}", TypeError, json_keys=False)
        return c.integer(what, d, 0, self.devices - 1, "a device id")

    def machine_of(self, device: int) -> int:
        """The machine device ``device`` sits on (ids are machine-major)."""
        return self._core_cluster.machine_of(self._device_id("device", device))

    def link(self, a: int, b: int) -> Link:
        """The link between two distinct devices: intra on one machine, else inter."""
        a, b = self._device_id("a", a), self._device_id("b", b)
        if a == b:
            raise ValueError(f"tw.Cluster {self.name!r}: a and b are both device {a}; a device needs no link to "
                             "itself (a copy inside one device is a 'copy' kernel: kernel_seconds('copy', bytes))")
        return self.intra if self.machine_of(a) == self.machine_of(b) else self.inter

    def transfer_seconds(self, a: int, b: int, nbytes: float) -> float:
        """Seconds to move ``nbytes`` from device a to device b, alone on their link."""
        return self.link(a, b).transfer_seconds(nbytes)

    def kernel_seconds(self, kind: str, work: float) -> float:
        """Seconds of one ``kind`` kernel doing ``work`` FLOPs or bytes on one device."""
        return self.device.kernel_seconds(kind, work)

    def with_devices(self, devices: int) -> Cluster:
        """A copy with ``devices`` devices on machines of the same shape (machines added as needed)."""
        return self.replace(devices=devices)

    def replace(self, **changes) -> Cluster:
        """A copy with some fields changed: ``cluster.replace(inter=None, devices=8)``."""
        unknown = set(changes) - set(self._state)
        if unknown:
            name = sorted(unknown)[0]
            raise TypeError(f"tw.Cluster has no field {name!r}{did_you_mean(name, self._state)}; "
                            f"fields: {', '.join(self._state)}")
        return Cluster(**{**self._state, **changes})

    # ----- presets -----

    @staticmethod
    def presets() -> list[str]:
        """The names Cluster.preset takes."""
        return sorted(_PRESETS) + list(MEASURED)

    @classmethod
    def preset(cls, name: str, devices: int | None = None) -> Cluster:
        """A cluster described in a paper (docs/CLUSTERS.md cites each) or measured on this machine
        (``"this-machine"``); ``devices``: that many devices on machines of the preset's shape."""
        if not isinstance(name, str):
            raise TypeError(f"Cluster.preset takes a preset name (str), not {type(name).__name__}")
        if name in MEASURED:
            fn = _measured.get(name)
            if fn is None:
                raise RuntimeError(f"the {name!r} preset needs the calibration, which registers itself when "
                                   "tilewise.calibration is imported (import tilewise does); or register one with "
                                   "tilewise.sim.cluster.register_this_machine(fn, name)")
            if devices is not None:
                Checker("Cluster.preset", TypeError, json_keys=False).integer("devices", devices, 1, MAX_DEVICES,
                                                                              "a device count")
            made = fn(devices)
            if not isinstance(made, Cluster):
                raise TypeError(f"the {name!r} calibration {getattr(fn, '__name__', fn)} returned "
                                f"{type(made).__name__}, not a tw.Cluster")
            return made
        if name not in _PRESETS:
            raise ValueError(f"no cluster preset {name!r}{did_you_mean(name, cls.presets())}; presets: "
                             f"{', '.join(cls.presets())}")
        made = _PRESETS[name]()
        return made if devices is None else made.with_devices(devices)

    # ----- JSON -----

    def to_dict(self) -> dict:
        """The cluster as JSON data (docs/CLUSTERS.md); ``from_dict`` reads it back, equal."""
        s = self._state
        return {"format": FORMAT, "version": VERSION, "name": s["name"], "source": s["source"],
                "devices": s["devices"], "devices_per_machine": s["devices_per_machine"],
                "concurrent_devices": s["concurrent_devices"], "memory_concurrency": s["memory_concurrency"],
                "cache_bytes": s["cache_bytes"], "device": s["device"].to_dict(),
                "links": {level: None if s[level] is None else s[level].to_dict() for level in LEVELS}}

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The JSON text; also written to ``path`` when given."""
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    @classmethod
    def from_dict(cls, data) -> Cluster:
        """The cluster described by JSON data, validated field by field: a ValueError names the JSON
        path of what is wrong (``links.intra.bandwidth["1024"]``) and what would be valid."""
        return _load(data)

    @classmethod
    def from_json(cls, source: str | bytes | os.PathLike) -> Cluster:
        """The cluster in a JSON file (a path) or JSON text (a str starting with "{", or bytes); files
        past MAX_FILE_BYTES are refused unread."""
        if isinstance(source, (bytes, bytearray)) or (isinstance(source, str) and source.lstrip().startswith("{")):
            text = source
            if len(text) > MAX_FILE_BYTES:
                raise ValueError(f"not a tilewise cluster: {len(text)} bytes of JSON, more than {MAX_FILE_BYTES}")
        elif isinstance(source, (str, os.PathLike)):
            with open(source, "rb") as f:
                text = f.read(MAX_FILE_BYTES + 1)
            if len(text) > MAX_FILE_BYTES:
                raise ValueError(f"cluster file {os.fspath(source)!r} is larger than {MAX_FILE_BYTES} bytes; a cluster "
                                 "description is a few KB: is it the right file?")
        else:
            raise TypeError(f"Cluster.from_json takes a path or JSON text, not {type(source).__name__}")
        return _load(parse_json(text, ValueError, "cluster", "Cluster.from_json"))

    # ----- comparison and display -----

    def __eq__(self, other):
        return isinstance(other, Cluster) and self._state == other._state

    __hash__ = None  # assignable fields

    def __repr__(self):
        s = self._state
        return (f"<tw.Cluster {s['name']!r}: {s['devices']} x {s['device'].name} on {self.machines} machine"
                f"{'s' if self.machines > 1 else ''} of {s['devices_per_machine']}>")

    def table(self) -> str:
        """The cluster as text tables: devices and machines, each link level, each kernel kind."""
        lines = [_headline(self)]
        for title, header, rows in _sections(self):
            widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
            lines.append("")
            lines.append(title)
            for r in [header, *rows]:
                lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
        if self.source:
            lines += ["", *textwrap.wrap(f"source: {self.source}", 110, subsequent_indent="  ")]
        return "\n".join(lines) + "\n"

    __str__ = table

    def _repr_html_(self) -> str:
        parts = [f"<p><b>{html.escape(_headline(self))}</b></p>"]
        for title, header, rows in _sections(self):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
            body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
            parts.append(f"<p>{html.escape(title)}</p><table><tr>{head}</tr>{body}</table>")
        if self.source:
            parts.append(f"<p><small>source: {html.escape(self.source)}</small></p>")
        return "".join(parts)


_SHAPE_FIELDS = ("devices", "devices_per_machine", "intra", "inter")


# ----- loading: a cluster file is validated, not trusted -------------------------------------------

_TOP = ("format", "version", "name", "source", "devices", "devices_per_machine", "concurrent_devices",
        "memory_concurrency", "device", "links")  # version 2 adds cache_bytes
_DEVICE = ("name", "memory", "concurrent_streams", "kernels")
_LINK = ("name", "bandwidth", "latency", "duplex", "duplex_bandwidth", "shared")


def _load(data) -> Cluster:
    c = Checker("cluster JSON", ValueError, json_keys=True)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        got = data.get("format") if isinstance(data, dict) else data
        raise ValueError(f"not a tilewise cluster (format {short_repr(got)}, expected {FORMAT!r})")
    version = VERSION
    if "version" in data:
        version = c.integer("version", data["version"], 1, 2**31, "a format version")
        if version not in (1, VERSION):
            c.fail("version", f"is {version}; this tilewise reads versions 1 and {VERSION}")
    c.obj("", data, _TOP if version == 1 else _TOP + ("cache_bytes",), "a cluster")
    d = c.obj("device", data["device"], _DEVICE, "a device profile")
    device = device_fields(c, "device", d["name"], d["memory"], d["kernels"], d["concurrent_streams"], from_json=True)
    links_data = c.obj("links", data["links"], LEVELS, "the links")
    links = {}
    for level in LEVELS:
        path, v = f"links.{level}", links_data[level]
        if v is None:
            links[level] = None
            continue
        v = c.obj(path, v, _LINK, "a link")
        links[level] = Link(**link_fields(c, path, *(v[k] for k in _LINK)))
    name = c.text("name", data["name"])
    machine_shape(c, data["devices"], data["devices_per_machine"], links["intra"], links["inter"],
                  {"devices": "devices", "devices_per_machine": "devices_per_machine", "intra": "links.intra",
                   "inter": "links.inter"})
    c.integer("concurrent_devices", data["concurrent_devices"], 0, MAX_DEVICES, "a device count (0: all)")
    c.number("memory_concurrency", data["memory_concurrency"], "a device count >= 0 (0: own memory per device)",
             zero_ok=True)
    cache_bytes = c.number("cache_bytes", data.get("cache_bytes", 0.0), "bytes >= 0 (0: not modelled)", zero_ok=True)
    c.text("source", data["source"], empty_ok=True)
    return Cluster(name, data["devices"], data["devices_per_machine"], device=DeviceProfile(**device), **links,
                   concurrent_devices=data["concurrent_devices"], memory_concurrency=data["memory_concurrency"],
                   cache_bytes=cache_bytes, source=data["source"])


# ----- display ------------------------------------------------------------------------------------

#: Sizes the tables show profiles at (bytes for links, work for kernels).
SHOW_SIZES = (2**10, 2**20, 2**30)


def _si(v: float) -> str:
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}"
    return f"{v:.3g} "


def _rate(v: float, unit: str) -> str:
    return f"{_si(v)}{unit}/s"


def _seconds(s: float) -> str:
    if s == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def _memory(m: int) -> str:
    if m == 0:
        return "unlimited"
    if m % 2**30 == 0:
        return f"{m // 2**30} GiB"
    return f"{_si(m)}B"


def _profile_str(p: Rate, unit: str) -> str:
    if not isinstance(p, dict):
        return _rate(p, unit)
    sizes = list(p)
    return f"{_rate(min(p.values()), unit)}..{_rate(max(p.values()), unit)} over {len(p)} sizes " \
           f"{sizes[0]}..{sizes[-1]} {unit}"


def _headline(c: Cluster) -> str:
    machines = f"{c.machines} machine{'s' if c.machines > 1 else ''} x {c.devices_per_machine}"
    at_once = f", {c.concurrent_devices} computing at once" if c.concurrent_devices else ""
    if c.memory_concurrency:
        at_once += f", memory bus for {c.memory_concurrency:.2g} at once"
    if c.cache_bytes:
        at_once += f", {c.cache_bytes / 2**20:.0f} MiB cache"
    return f"Cluster {c.name!r}: {c.devices} device{'s' if c.devices > 1 else ''} on {machines}{at_once}"


def _sections(c: Cluster) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per table: the device, the link levels, the kernel kinds."""
    d = c.device
    device = ("device", ["name", "memory", "concurrent streams"],
              [[d.name, _memory(d.memory), "yes" if d.concurrent_streams else "no"]])
    at = [f"at 2^{s.bit_length() - 1}" for s in SHOW_SIZES]
    link_rows = []
    for level in LEVELS:
        link = getattr(c, level)
        if link is None:
            continue
        duplex = "no" if not link.duplex else \
            f"yes ({_rate(link.duplex_bandwidth, 'B')} both)" if link.duplex_bandwidth else "yes"
        link_rows.append([level, link.name, *(_rate(link.bandwidth_at(s), "B") for s in SHOW_SIZES),
                          _seconds(link.latency), duplex, "yes" if link.shared else "no"])
    links = ("links (bandwidth of one transfer alone, at sizes in bytes)",
             ["level", "name", *at, "latency", "duplex", "shared"], link_rows)
    kernel_rows = [[kind, kernel_unit(kind), *(_rate(d.rate_at(kind, s), kernel_unit(kind)) for s in SHOW_SIZES),
                    _seconds(overhead)] for kind, (_, overhead) in d.kernels.items()]
    kernels = ("kernels (work per second, at work per call)", ["kind", "work", *at, "overhead"], kernel_rows)
    return [device, links, kernels]

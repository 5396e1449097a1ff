"""Checkpoints: an executable's parameters, optimizer state (Adam's step count included) and
constants in the safetensors format (the field's: a JSON header and raw little-endian bytes, no
code run on load), with metadata in the header: the graph's hash, the plan, the steps run, and a
SHA-256 of the data so that a corrupted file is an error, not silently different weights.

Written atomically: a temporary file in the same folder, fsync, rename, fsync of the folder; a
process killed while saving leaves the previous checkpoint as it was. Read strictly: every field of
the header is checked before any byte of data is used, and ``exe.load`` checks every tensor
against the graph before setting any. Tensors are saved whole, so a checkpoint saved on k devices
loads on k'.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import struct
from dataclasses import dataclass

import numpy as np

from .._core import ExecError

FORMAT = "tilewise-checkpoint/1"
# safetensors dtype names of the dtypes the runtime holds
_DTYPES = {"float32": ("F32", np.float32), "int64": ("I64", np.int64), "int32": ("I32", np.int32),
           "bool": ("BOOL", np.bool_)}
_BY_CODE = {code: (name, np.dtype(t).newbyteorder("<")) for name, (code, t) in _DTYPES.items()}
_MAX_HEADER = 100 << 20  # bytes: far more than any real header; a corrupt length is refused early


class CheckpointError(ExecError):
    """A checkpoint that cannot be read (corrupt, truncated, not a checkpoint) or that does not fit
    the executable it is loaded into (another graph, other tensors)."""


@dataclass
class Checkpoint:
    """A checkpoint read by ``load_checkpoint``: its metadata and its tensors by name."""

    metadata: dict
    tensors: dict


def graph_hash(graph) -> str:
    """SHA-256 of the graph's JSON (tensors, shapes, dtypes, roles, ops and attributes)."""
    return hashlib.sha256(graph.to_json().encode()).hexdigest()


def save(exe, path) -> pathlib.Path:
    """Writes ``exe``'s parameters, optimizer state and constants to ``path`` atomically."""
    path = pathlib.Path(path)
    graph = exe.graph
    names = [t.name for t in graph.tensors
             if t.producer is None and t.role in ("parameter", "optimizer_state", "constant")]
    arrays = {n: np.ascontiguousarray(exe.get(n)) for n in names}
    header, offset, digest = {}, 0, hashlib.sha256()
    for name, a in arrays.items():
        code = _DTYPES[str(a.dtype)][0]
        header[name] = {"dtype": code, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        digest.update(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    header["__metadata__"] = {"format": FORMAT, "graph": graph.name, "graph_hash": graph_hash(graph),
                              "plan": f"{exe.plan.algorithm} on {exe.plan.devices} devices",
                              "steps": str(exe._core.stats.steps), "sha256": digest.hexdigest()}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            for a in arrays.values():
                f.write(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    try:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself survives a crash
        finally:
            os.close(fd)
    except OSError:  # pragma: no cover - folders that cannot be opened (some filesystems)
        pass
    return path


def load_checkpoint(path) -> Checkpoint:
    """Reads and checks a checkpoint file; ``CheckpointError`` naming what is wrong."""
    path = pathlib.Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint '{path}': {e.strerror or e}") from None
    where = f"checkpoint '{path}'"
    if len(data) < 8:
        raise CheckpointError(f"{where} is {len(data)} bytes: not a checkpoint (truncated?)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(_MAX_HEADER, len(data) - 8):
        raise CheckpointError(f"{where}: header length {n} exceeds the file (truncated or not a checkpoint)")
    try:
        header = json.loads(data[8:8 + n].decode())
    except (ValueError, RecursionError) as e:  # not UTF-8, not JSON, a 5,000-digit number, deep nesting
        raise CheckpointError(f"{where}: the header is not JSON ({e})") from None
    if not isinstance(header, dict) or not isinstance(header.get("__metadata__"), dict):
        raise CheckpointError(f"{where}: no __metadata__ in the header (not a tilewise checkpoint)")
    meta = header.pop("__metadata__")
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{where}: format {meta.get('format')!r}, expected {FORMAT!r}")
    body = data[8 + n:]
    tensors, ends, digest = {}, [], hashlib.sha256()
    for name, entry in header.items():
        what = f"{where}: tensor '{name}'"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise CheckpointError(f"{what} needs exactly dtype, shape and data_offsets")
        if entry["dtype"] not in _BY_CODE:
            raise CheckpointError(f"{what}: dtype {entry['dtype']!r} (valid: {', '.join(_BY_CODE)})")
        shape, offsets = entry["shape"], entry["data_offsets"]
        if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                for d in shape)):
            raise CheckpointError(f"{what}: shape {shape!r} is not a list of non-negative ints")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise CheckpointError(f"{what}: data_offsets {offsets!r} is not [begin, end]")
        dtype = _BY_CODE[entry["dtype"]][1]
        begin, end = offsets
        if not 0 <= begin <= end <= len(body) or end - begin != int(np.prod(shape)) * dtype.itemsize:
            raise CheckpointError(f"{what}: data_offsets {offsets} do not hold {shape} {entry['dtype']} "
                                  f"inside the {len(body)} bytes of data (truncated?)")
        ends.append((begin, end))
        count = int(np.prod(shape))
        flat = np.frombuffer(body, dtype=dtype, count=count, offset=begin) if count else np.zeros(0, dtype)
        tensors[name] = flat.reshape(shape).astype(dtype.newbyteorder("="))
    ends.sort()
    if any(a[1] > b[0] for a, b in zip(ends, ends[1:])):
        raise CheckpointError(f"{where}: tensors overlap in the data")
    for begin, end in ends:
        digest.update(body[begin:end])
    if meta.get("sha256") != digest.hexdigest():
        raise CheckpointError(f"{where}: the data does not match its SHA-256 (the file is corrupted)")
    return Checkpoint(meta, tensors)


def load(exe, path) -> dict:
    """Sets ``exe``'s parameters, optimizer state and constants from a checkpoint of the same graph
    (any plan, any device count); everything is checked before anything is set. Returns the
    checkpoint's metadata."""
    ck = load_checkpoint(path)
    graph = exe.graph
    if ck.metadata.get("graph_hash") != graph_hash(graph):
        raise CheckpointError(f"checkpoint '{path}' is of graph '{ck.metadata.get('graph')}' "
                              f"(hash {str(ck.metadata.get('graph_hash'))[:12]}), not of '{graph.name}' "
                              f"(hash {graph_hash(graph)[:12]})")
    wanted = {t.name: t for t in graph.tensors
              if t.producer is None and t.role in ("parameter", "optimizer_state", "constant")}
    if set(ck.tensors) != set(wanted):
        missing, extra = sorted(set(wanted) - set(ck.tensors)), sorted(set(ck.tensors) - set(wanted))
        raise CheckpointError(f"checkpoint '{path}' holds other tensors: missing {missing[:5]}, unknown {extra[:5]}")
    arrays = {}
    for name, t in wanted.items():
        a = ck.tensors[name]
        if a.shape != tuple(t.shape) or _DTYPES[t.dtype][1] != a.dtype.type:
            raise CheckpointError(f"checkpoint '{path}': '{name}' is {a.dtype}{list(a.shape)}, the graph's "
                                  f"{t.dtype}{list(t.shape)}")
        arrays[name] = exe._checked(t, a)
    for name, a in arrays.items():
        exe._core.set_tensor(wanted[name].id, a)
        exe._fed.add(name)
    return ck.metadata

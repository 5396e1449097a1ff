"""Checkpoints (issue 15): exe.save / exe.load in safetensors with metadata, written atomically.

Resumed training is bitwise the uninterrupted one; a checkpoint saved on 2 devices loads on 3; a
checkpoint of another graph, a truncated, bit-flipped or foreign file is a tw.CheckpointError and
sets nothing; a process killed while saving leaves the previous checkpoint readable; the safetensors
package reads our files.
"""
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tilewise as tw
from tilewise.graph.feeds import example_feeds


def _graph():
    return tw.models.transformer(layers=1, hidden=32, heads=2, seq=8, batch=2, vocab=50,
                                 optimizer=tw.optim.Adam(lr=1e-2))


def _compile(g, devices, algorithm="tofu"):
    return tw.compile(g, tw.partition(g, devices=devices, algorithm=algorithm)).initialize(seed=1)


def test_resumed_training_is_bitwise_the_uninterrupted_one(tmp_path):
    g = _graph()
    feeds = [example_feeds(g, seed=s) for s in range(6)]
    a = _compile(g, 2)
    for f in feeds[:3]:
        a.step(f)
    meta_path = a.save(tmp_path / "ck.safetensors")
    rest = [float(a.step(f)["loss"]) for f in feeds[3:]]
    b = _compile(g, 2)  # a fresh process's executable: other initial weights, Adam at step 0
    meta = b.load(meta_path)
    assert meta["steps"] == "3" and meta["plan"] == "tofu on 2 devices" and meta["graph"] == g.name
    assert [float(b.step(f)["loss"]) for f in feeds[3:]] == rest
    assert all(np.array_equal(v, b.parameters()[k]) for k, v in a.parameters().items())


def test_a_checkpoint_saved_on_two_devices_loads_on_three(tmp_path):
    g = _graph()
    a = _compile(g, 2)
    f = example_feeds(g)
    a.step(f)
    a.save(tmp_path / "ck")
    b = _compile(g, 3, algorithm="kcuts")
    b.load(tmp_path / "ck")
    assert all(np.array_equal(v, b.get(k)) for k, v in a.state_dict().items())
    la, lb = float(a.step(f)["loss"]), float(b.step(f)["loss"])
    assert lb == pytest.approx(la, rel=1e-5)


def test_bad_checkpoints_are_typed_errors_and_set_nothing(tmp_path):
    g = _graph()
    exe = _compile(g, 2)
    exe.step(example_feeds(g))
    good = exe.save(tmp_path / "good")
    other = tw.models.mlp(layers=2, hidden=8, batch=4)
    _compile(other, 1).save(tmp_path / "other")
    data = good.read_bytes()
    cases = {
        "other": (None, "is of graph 'mlp"),
        "truncated": (data[: len(data) // 2], "truncated"),
        "flipped": (data[:-5] + bytes([data[-5] ^ 1]) + data[-4:], "does not match its SHA-256"),
        "empty": (b"", "not a checkpoint"),
        "json": (b"\x10" + b"\x00" * 7 + b'{"a": 1, "b": 2}', "no __metadata__"),
        "huge": (b"\xff" * 8 + b"{}", "header length"),
        "garbage": (b"\x04\x00\x00\x00\x00\x00\x00\x00\xff\xfe\x00\x01", "not JSON"),
        # nested past the JSON parser's depth, and a number past Python's digit limit: typed too
        "deep": (len(b"[" * 5000).to_bytes(8, "little") + b"[" * 5000, "not JSON"),
        "digits": ((5002).to_bytes(8, "little") + b"[" + b"9" * 5000 + b"]", "not JSON"),
    }
    before = exe.state_dict()
    for name, (content, message) in cases.items():
        path = tmp_path / name
        if content is not None:
            path.write_bytes(content)
        with pytest.raises(tw.CheckpointError, match=message):
            exe.load(path)
        assert all(np.array_equal(v, exe.get(k)) for k, v in before.items()), name
    with pytest.raises(tw.CheckpointError, match="cannot read checkpoint"):
        exe.load(tmp_path / "missing")
    assert issubclass(tw.CheckpointError, tw.ExecError)


def test_the_safetensors_package_reads_our_files(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    g = _graph()
    exe = _compile(g, 1)
    exe.step(example_feeds(g))
    path = exe.save(tmp_path / "ck.safetensors")
    theirs = st.load_file(str(path))
    ours = tw.load_checkpoint(path)
    state = {t.name for t in g.tensors if t.role == "optimizer_state" and t.producer is None}
    assert set(theirs) == set(ours.tensors) == set(exe.state_dict()) | state
    for k, v in theirs.items():
        np.testing.assert_array_equal(v, ours.tensors[k])


_SAVER = """
import sys, tilewise as tw
g = tw.models.mlp(layers=4, hidden=1024, batch=8)
exe = tw.compile(g, tw.partition(g, devices=1)).initialize(seed=int(sys.argv[2]))
print("ready", flush=True)
while True:
    exe.save(sys.argv[1])
"""


def test_a_process_killed_while_saving_leaves_the_previous_checkpoint(tmp_path):
    g = tw.models.mlp(layers=4, hidden=1024, batch=8)
    path = tmp_path / "ck"
    _compile(g, 1).save(path)  # the previous checkpoint (seed 1)
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _SAVER, str(path), "7"], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.05 + 0.1 * attempt)  # mid-write: each save writes ~12 MB
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        ck = tw.load_checkpoint(path)  # the old one or a complete new one, never a torn file
        assert set(ck.tensors) and ck.metadata["format"] == "tilewise-checkpoint/1"
    leftovers = [p for p in pathlib.Path(tmp_path).iterdir() if p.name.startswith(".ck.tmp")]
    for p in leftovers:  # a killed writer's temporary file: never read, safe to delete
        p.unlink()

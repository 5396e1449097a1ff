"""NCCL across MPI ranks (tilewise/exec/cuda.py ``compile_rank``, cpp/exec/cuda/executor.h ``RankSetup``):
each rank drives its own device and issues its part of every wave of the step schedule. Checked without
a GPU: the calls the ranks issue pair up as NCCL pairs point-to-point calls (in order per pair of ranks,
equal bytes, the same wave) and carry the plan's predicted bytes; under mpirun on a machine without a
GPU every rank fails with tw.CudaError together, none waits for another; the gather of the ranks' tiles
on rank 0 (``get``, ``gather``, ``parameters``) over MPI with a stand-in for the devices."""
import importlib.util
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilewise as tw
from tilewise import _core
from tilewise.exec import cuda, mpi

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tilewise._cuda") is None,
                                reason="tilewise._cuda was not built (needs nvcc and the nvidia wheels)")

ZOO = {
    "mlp": lambda: tw.models.mlp(layers=2, hidden=64, batch=8),
    "transformer": lambda: tw.models.transformer(layers=1, hidden=32, heads=2, batch=2, seq=8, vocab=64),
    "lstm": lambda: tw.models.rnn(layers=1, hidden=32, batch=4, steps=3, in_features=16),
    "wrn": lambda: tw.models.wresnet(depth=50, width=1, batch=2, image=32, classes=10),
}


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("model", sorted(ZOO))
def test_ranks_calls_pair_up_in_order_and_carry_the_planned_bytes(model, devices):
    g = ZOO[model]()
    plan = tw.partition(g, devices=devices, algorithm="tofu")
    calls = cuda.load().rank_calls(g._g, plan._core)
    assert len(calls) == devices
    sends, recvs = defaultdict(list), defaultdict(list)
    for d, mine in enumerate(calls):
        waves = [w for w, _, _, _ in mine]
        assert waves == sorted(waves)  # a rank issues its calls wave by wave
        for wave, kind, peer, nbytes in mine:
            assert peer != d and 0 <= peer < devices and nbytes > 0
            (sends[d, peer] if kind == "send" else recvs[peer, d]).append((wave, nbytes))
    assert sends.keys() == recvs.keys()
    for pair in sends:  # the k-th send from a to b is the k-th receive on b from a: same wave, same bytes
        assert sends[pair] == recvs[pair], pair
    sent, received = _core.predicted_traffic(g._g, plan._core)
    assert [sum(b for _, k, _, b in mine if k == "send") for mine in calls] == list(sent)
    assert [sum(b for _, k, _, b in mine if k == "recv") for mine in calls] == list(received)


def test_one_process_is_not_a_rank(monkeypatch):
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert cuda.launched_ranks() == 1
    monkeypatch.setenv("PMI_SIZE", "2")  # MPICH's launcher
    assert cuda.launched_ranks() == 2
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "3")  # Open MPI's, read first
    assert cuda.launched_ranks() == 3
    g = ZOO["mlp"]()
    plan = tw.partition(g, devices=2, algorithm="tofu")
    with pytest.raises(tw.ExecError, match="has no device in a plan of 2 devices"):
        cuda.load().Executable.for_rank(g._g, plan._core, 5, 0)


HAVE_MPI = importlib.util.find_spec("tilewise._mpi") is not None and mpi.launcher()


@pytest.mark.skipif(not HAVE_MPI, reason="needs mpirun and tilewise._mpi")
@pytest.mark.parametrize("ranks", [2, 3])
def test_ranks_without_a_gpu_fail_together(ranks, tmp_path):
    count, _ = cuda.load().device_count()
    if count:
        pytest.skip("a GPU is visible: tests/python/test_cuda_gpu.py runs the ranks")
    script = Path(__file__).parent / "mpi_scripts" / "cuda_ranks_mpi.py"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", MPIEXEC_TIMEOUT="100",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [mpi.launcher(), "-np", str(ranks), "--oversubscribe", sys.executable, str(script), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(ranks)]
    assert [r["rank"] for r in results] == list(range(ranks))
    for r in results:
        assert r.get("error") == "CudaError", r
    # Each rank names its own failed device call (or another rank's, when it got past its own).
    assert any("cudaSetDevice" in r["message"] or "cudaGetDeviceCount" in r["message"] or "another rank" in r["message"]
               for r in results)
    for r in results:  # the gather on rank 0 and the broadcast to every rank
        assert r["gather_on_root_only"] and r["get_equal"] and r["bias_equal"], r
        assert "not held after a step on any rank" in r["unheld"], r


# ----- the gather on rank 0: tiles packed into one message per rank, assembled there ----------------

_shapes = st.lists(st.integers(1, 5), min_size=0, max_size=3)


@settings(max_examples=60, deadline=None)
@given(shape=_shapes, data=st.data())
def test_tiles_survive_their_message_and_assemble_the_tensor(shape, data):
    """Random covers of a tensor by boxes (overlaps are replicas: equal values) through pack_tiles ->
    unpack_tiles -> assemble_tiles give the tensor back."""
    full = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) - 7.5
    tiles = []
    for _ in range(data.draw(st.integers(1, 4))):
        ranges = []
        for n in shape:
            lo = data.draw(st.integers(0, n - 1))
            ranges.append((lo, data.draw(st.integers(lo, n - 1))))
        tiles.append((ranges, np.ascontiguousarray(full[tuple(slice(lo, hi + 1) for lo, hi in ranges)]).tobytes()))
    tiles.append(([(0, n - 1) for n in shape], full.tobytes()))  # the cover: one tile is the whole
    split = data.draw(st.integers(0, len(tiles)))
    messages = [cuda.pack_tiles(tiles[:split]), cuda.pack_tiles(tiles[split:])]
    back = [tile for m in messages for tile in cuda.unpack_tiles(m)]
    assert [(list(map(tuple, r)), d) for r, d in back] == [(list(map(tuple, r)), d) for r, d in tiles]
    assert np.array_equal(cuda.assemble_tiles("x", shape, np.float32, back), full)


def test_bad_tile_messages_and_tiles_are_refused():
    good = cuda.pack_tiles([([(0, 1)], np.zeros(2, np.float32).tobytes())])
    for cut in (3, 8, 20, len(good) - 1):
        with pytest.raises(tw.ExecError, match="cut short"):
            cuda.unpack_tiles(good[:cut])
    with pytest.raises(tw.ExecError, match="past its tiles"):
        cuda.unpack_tiles(good + b"\0")
    with pytest.raises(tw.ExecError, match="has rank"):
        cuda.unpack_tiles(np.asarray([1, 99], "<i8").tobytes())
    with pytest.raises(tw.ExecError, match="not held"):
        cuda.assemble_tiles("x", (2,), np.float32, [])
    with pytest.raises(tw.ExecError, match="does not fit"):
        cuda.assemble_tiles("x", (2,), np.float32, [([(0, 2)], np.zeros(3, np.float32).tobytes())])
    with pytest.raises(tw.ExecError, match="bytes, not 8"):
        cuda.assemble_tiles("x", (2,), np.float32, [([(0, 1)], b"\0" * 4)])


@settings(max_examples=300, deadline=None)
@given(message=st.binary(max_size=200), shape=_shapes)
def test_any_bytes_as_a_tile_message_are_tiles_or_a_typed_error(message, shape):
    """What a rank receives is parsed, never trusted: random bytes (and a valid header with random
    contents) give tiles or tw.ExecError, and assembling them gives the tensor or tw.ExecError."""
    for m in (message, np.asarray([1, len(shape)], "<i8").tobytes() + message):
        try:
            tiles = cuda.unpack_tiles(m)
        except tw.ExecError:
            continue
        try:
            out = cuda.assemble_tiles("x", shape, np.float32, tiles)
        except tw.ExecError:
            continue
        assert out.shape == tuple(shape)

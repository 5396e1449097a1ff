"""The GPU profile for the time model (issue 18; ``tilewise calibrate --gpu``, tilewise/calibration_gpu.py)
and timed steps of the CUDA backend, checked without a GPU: the CUDA launch plans run on the host
(``HostProbe``: ``_cuda.HostExecutable`` with the host clock instead of CUDA events) through the same
pipeline that measures a GPU, the profile becomes the cluster "this-gpu", predictions on it run, and
the device probes fail with a typed error where no GPU is visible."""
import importlib.util
import json

import numpy as np
import pytest

import tilewise as tw

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tilewise._cuda") is None,
                                reason="tilewise._cuda was not built (needs nvcc and the nvidia wheels)")


def _gpus() -> int:
    if importlib.util.find_spec("tilewise._cuda") is None:
        return 0
    from tilewise import _cuda
    return _cuda.device_count()[0]


GPUS = _gpus()
TINY = [("mlp", lambda: tw.models.mlp(layers=2, hidden=64, batch=8)),
        ("transformer", lambda: tw.models.transformer(layers=1, hidden=32, heads=2, seq=8, batch=2, vocab=64))]


@pytest.fixture(scope="module")
def host_profile():
    from tilewise import calibration_gpu as cg

    sizes = (cg.COPY_SIZES, cg.LINK_SIZES)
    cg.COPY_SIZES = cg.LINK_SIZES = (2**10, 2**14, 2**18)
    try:
        return cg.measure_gpu(cg.HostProbe(), suite=TINY)
    finally:
        cg.COPY_SIZES, cg.LINK_SIZES = sizes


def _host_core(g, plan):
    from tilewise import _cuda
    return _cuda.HostExecutable(g._g, plan._core, [t.id for t in g.results().values()])


def test_a_timed_step_times_every_launch_and_nothing_else():
    g = tw.models.mlp(layers=2, hidden=64, batch=8)
    plan = tw.partition(g, devices=2, algorithm="tofu")
    core = _host_core(g, plan)
    core.step(timed=True)
    for d, row in enumerate(core.instruction_seconds):
        prog = json.loads(core.program(d).to_json())["instructions"]
        assert len(row) == len(prog)
        for ins, (a, b) in zip(prog, row, strict=True):
            if ins["kind"] in ("alloc", "free", "record", "wait"):
                assert (a, b) == (0.0, 0.0), ins
            else:
                assert 0.0 <= a <= b, ins
        computes = [b - a for ins, (a, b) in zip(prog, row, strict=True) if ins["kind"] == "compute"]
        assert computes and all(s > 0 for s in computes)
    # An untimed step leaves the last timings as they were
    before = core.instruction_seconds
    core.step()
    assert core.instruction_seconds == before


def test_the_gpu_pipeline_makes_a_profile_and_a_cluster(host_profile):
    from tilewise import calibration_gpu as cg

    cg.check_profile(host_profile)
    assert {"gemm", "elementwise", "reduction", "copy", "combine", "send"} <= set(host_profile["kernels"])
    assert set(host_profile["suite_steps"]) == {"mlp", "transformer"}
    c = cg.cluster_from_profile(host_profile)
    assert c.name == "this-gpu" and c.devices == 1 and c.device.concurrent_streams
    assert c.host.duplex and c.host.duplex_bandwidth >= c.host.bandwidth_at(2**18)
    # one direction's bandwidth per size: the measured seconds, the slower direction
    h = host_profile["links"]["host"]
    for n, a, b in zip(h["sizes"], h["host_to_device"], h["device_to_host"], strict=True):
        assert c.host.bandwidth_at(n) == pytest.approx(n / max(a, b))
    g = tw.models.mlp(layers=2, hidden=64, batch=8)
    p = tw.partition(g, devices=1).predict(c)
    assert p.step_seconds > 0


def test_op_times_on_the_gpu_cover_every_op_and_price_this_gpu(host_profile):
    from tilewise import calibration_gpu as cg

    g = tw.models.mlp(layers=2, hidden=64, batch=8)
    times = cg.measure_ops_gpu(g, probe=cg.HostProbe(), steps=3, warmup=1)
    assert times.cluster == "this-gpu"
    assert set(times.ops) == {op.name for op in g.ops}
    assert all(s > 0 for s, _, _ in times.ops.values())
    c = cg.cluster_from_profile(host_profile)
    scaled = tw.partition(g, devices=1).predict(c, op_times=times)
    # one device, ops in a row: the prediction is at least the ops' measured seconds
    assert scaled.step_seconds >= 0.99 * sum(s for s, _, _ in times.ops.values())
    with pytest.raises(ValueError, match="this-gpu"):
        tw.partition(g, devices=1).predict("this-machine", op_times=times)
    with pytest.raises(ValueError, match="whole ops"):
        tw.measure_ops(g, backend="cuda", plans=[tw.partition(g, devices=2)])
    with pytest.raises(ValueError, match="backend"):
        tw.measure_ops(g, backend="tpu")


def test_a_swapped_program_predicts_as_the_cpu_swapped_executable(host_profile):
    """The CUDA executable's swapped program is the CPU one's: the same simulation on the same cluster."""
    from tilewise import _cuda
    from tilewise import calibration_gpu as cg
    from tilewise.exec.cuda import CudaExecutable
    from tilewise.exec.swapped import runnable_swap_plan, swap_index_maps
    from tilewise.plan.swapping import swap_problem

    g = tw.models.mlp(layers=3, hidden=64, batch=16)
    least = swap_problem(g, "swapadvisor", device_memory=10**12).least_memory
    plan = runnable_swap_plan(swap_problem(g, "swapadvisor", device_memory=int(least * 1.2)).plan())
    buffer_of, op_of, in_place = swap_index_maps(g, plan)
    keep = [t.id for t in g.results().values()]
    host = CudaExecutable(g, plan, _cuda.HostExecutable.swapped(g._g, plan._core, buffer_of, op_of, keep, in_place),
                          profile=True, swapped=True)
    cpu = tw.compile(g, plan)
    c = cg.cluster_from_profile(host_profile)
    ours, theirs = host.predict(c), cpu.predict(c)
    assert ours.step_seconds == pytest.approx(theirs.step_seconds, rel=1e-12)
    assert ours.step_seconds > 0
    for name, value in cpu.initialize(0).state_dict().items():
        host.set(name, value)
    from tilewise.graph.feeds import example_feeds
    for name, value in example_feeds(g, 0).items():
        host.set(name, value)
    host.step()
    rows = host.instruction_seconds
    prog = json.loads(host.program(0).to_json())["instructions"]
    swaps = [b - a for ins, (a, b) in zip(prog, rows[0], strict=True) if ins["kind"] in ("swap_in", "swap_out")]
    assert swaps and all(s >= 0 for s in swaps)
    assert host.step_seconds > 0


def test_a_profile_is_checked_before_it_is_used(host_profile):
    from tilewise import calibration_gpu as cg

    def broken(change):
        data = json.loads(json.dumps(host_profile))
        change(data)
        return data

    cases = {
        "format": lambda d: d.update(format="other"),
        "rates": lambda d: d["kernels"]["gemm"].update(rates=[-1.0] * len(d["kernels"]["gemm"]["sizes"])),
        "equal-length": lambda d: d["kernels"]["gemm"]["rates"].append(1.0),
        "unknown kernel kind": lambda d: d["kernels"].update(warp={"sizes": [1.0], "rates": [1.0]}),
        "links.host": lambda d: d["links"].pop("host"),
        "one figure per size": lambda d: d["links"]["host"]["both"].pop(),
        "device.memory": lambda d: d["device"].update(memory=0),
        "links.peer": lambda d: d["links"].update(peer={"sizes": [1.0, 2.0], "seconds": [1.0]}),
    }
    for match, change in cases.items():
        with pytest.raises(ValueError, match=match):
            cg.check_profile(broken(change))
    with pytest.raises(ValueError, match="one GPU visible"):
        cg.cluster_from_profile(host_profile, devices=2)
    two = broken(lambda d: d["links"].update(peer={"sizes": [2.0**20], "seconds": [1e-4]}))
    c = cg.cluster_from_profile(two, devices=2)
    assert c.devices == 2 and c.intra.bandwidth_at(2**20) == pytest.approx(2**20 / 1e-4)


@pytest.mark.skipif(GPUS > 0, reason="checks the machine without a GPU")
def test_the_preset_reads_a_stored_profile_and_says_how_to_make_one(host_profile, tmp_path, monkeypatch, capsys):
    from tilewise import calibration_gpu as cg
    from tilewise.cli import main

    monkeypatch.setenv("TILEWISE_CACHE_DIR", str(tmp_path))
    with pytest.raises(tw.CudaError, match="calibrate --gpu"):
        tw.Cluster.preset("this-gpu")
    assert main(["calibrate", "--gpu"]) == 2
    assert "no GPU is visible" in capsys.readouterr().err
    (tmp_path / "this-gpu.json").write_text("{not json")
    with pytest.raises(tw.CudaError):
        tw.Cluster.preset("this-gpu")
    (tmp_path / "this-gpu.json").write_text(json.dumps(host_profile))  # made on the GPU machine, copied here
    c = tw.Cluster.preset("this-gpu")
    assert c == cg.cluster_from_profile(host_profile)
    assert "this-gpu" in tw.Cluster.presets()
    assert main(["calibrate", "--gpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == cg.FORMAT


@pytest.mark.skipif(GPUS > 0, reason="checks the machine without a GPU")
def test_device_probes_fail_with_a_typed_error_without_a_gpu():
    from tilewise import _cuda

    for call in (lambda: _cuda.host_link_seconds(0, 1 << 20, "both"),
                 lambda: _cuda.device_copy_seconds(0, 1 << 20, True, False),
                 lambda: _cuda.peer_copy_seconds(0, 1, 1 << 20),
                 lambda: _cuda.device_info(0)):
        with pytest.raises(tw.CudaError, match="cudaSetDevice"):
            call()
    from tilewise import calibration_gpu as cg
    with pytest.raises(tw.CudaError, match="no CUDA device"):
        cg.GpuProbe()


def test_device_probes_check_their_arguments_before_any_device_call():
    from tilewise import _cuda

    with pytest.raises(ValueError, match="direction"):
        _cuda.host_link_seconds(0, 1 << 20, "sideways")
    with pytest.raises(tw.ExecError, match="at least 4 bytes"):
        _cuda.host_link_seconds(0, 2, "both")
    with pytest.raises(tw.ExecError, match="run must be"):
        _cuda.device_copy_seconds(0, 1 << 20, True, False, 0)
    with pytest.raises(tw.ExecError, match="not a device index"):
        _cuda.device_copy_seconds(-1, 1 << 20, True, False)


@pytest.mark.skipif(GPUS > 0, reason="checks the machine without a GPU")
def test_a_profiled_cuda_compile_fails_at_the_device_as_before():
    g = tw.models.mlp(layers=2, hidden=64, batch=8)
    with pytest.raises(tw.CudaError, match="cudaSetDevice"):
        tw.compile(g, tw.partition(g, devices=1), backend="cuda", profile=True)


# ----- on a GPU (scripts/gpu_check.sh) -------------------------------------------------------------


@pytest.mark.skipif(GPUS == 0, reason="no CUDA device")
def test_on_the_gpu_a_timed_step_and_the_probes_measure_something_plausible():
    from tilewise import _cuda

    g = tw.models.mlp(layers=3, hidden=512, batch=64)
    exe = tw.compile(g, tw.partition(g, devices=1), backend="cuda", profile=True)
    from tilewise.graph.feeds import example_feeds
    cpu = tw.compile(g, tw.partition(g, devices=1)).initialize(0)
    for name, value in {**cpu.state_dict(), **example_feeds(g, 0)}.items():
        exe.set(name, value)
    exe.step()
    exe.step()
    prog = json.loads(exe.program(0).to_json())["instructions"]
    busy = [b - a for ins, (a, b) in zip(prog, exe.instruction_seconds[0], strict=True) if ins["kind"] == "compute"]
    assert all(s > 0 for s in busy) and sum(busy) <= exe.step_seconds
    for direction in ("host_to_device", "device_to_host"):
        assert (1 << 26) / _cuda.host_link_seconds(0, 1 << 26, direction) > 1e9  # PCIe: GB/s
    assert (1 << 26) / _cuda.device_copy_seconds(0, 1 << 26, False, False) > 1e10  # HBM: tens of GB/s at least
    assert np.isfinite(exe.get(next(iter(g.results().values())).name)).all()


def test_fuzz_gpu_profiles(host_profile, tmp_path, monkeypatch, capsys):
    """A stored GPU profile is a file tilewise reads: mutants of a real one (test_fuzz_files' JSON and
    text mutations) either become a cluster that predicts a step, or raise ValueError naming the field
    (``check_profile``, ``cluster_from_profile``); ``load_profile`` of the mutant as the stored file
    returns the profile or None. Nothing else escapes."""
    import collections
    import random

    from test_fuzz_files import _mutant

    from tilewise import calibration_gpu as cg

    monkeypatch.setenv("TILEWISE_CACHE_DIR", str(tmp_path))
    seed = json.dumps(host_profile)
    g = tw.models.mlp(layers=2, hidden=16, batch=4)
    plan = tw.partition(g, devices=1)
    counts = collections.Counter()
    rnd = random.Random(0)
    for k in range(1500):
        text = _mutant(rnd, seed)
        if k % 10 == 0:  # through the stored file too
            (tmp_path / "this-gpu.json").write_bytes(text if isinstance(text, bytes) else text.encode())
            loaded = cg.load_profile()
            assert loaded is None or isinstance(loaded, dict)
        try:
            doc = cg.parse_profile(text)
            cluster = cg.cluster_from_profile(doc)
        except ValueError:
            counts["refused"] += 1
            continue
        assert plan.predict(cluster).step_seconds > 0
        counts["loaded"] += 1
    with capsys.disabled():
        print(f"\n[fuzz] GPU profile: {counts['loaded']} loaded and predicted, {counts['refused']} refused")
    assert counts["refused"] > 500 and counts["loaded"] > 50

"""The CUDA backend's build and host side (tilewise._cuda, cpp/exec/cuda; docs/CUDA.md), on machines
without a GPU: the module imports, the libraries report their versions, device calls raise
tw.CudaError (not a crash), device arenas are planned by the CPU arena's planner, and ``import
tilewise`` loads none of the CUDA libraries. Tests of the module skip where it was not built (no nvcc
or no nvidia cuBLAS/cuDNN/NCCL wheels at build time); those of the message without it skip where it
was."""
import importlib.util
import random
import subprocess
import sys

import pytest

import tilewise as tw

HAVE_CUDA_MODULE = importlib.util.find_spec("tilewise._cuda") is not None
needs_cuda = pytest.mark.skipif(not HAVE_CUDA_MODULE,
                                reason="tilewise._cuda was not built (needs nvcc and the nvidia-cublas, "
                                       "nvidia-cudnn-cu13, nvidia-nccl-cu13 wheels at build time)")
CUDA_LIBRARIES = ("libcudart", "libcublas", "libcudnn", "libnccl", "_cuda.")


def _small():
    g = tw.models.mlp(layers=2, hidden=16, batch=8)
    return g, tw.partition(g, devices=2, algorithm="kcuts")


def test_import_tilewise_loads_no_cuda_library():
    code = ("import tilewise, sys\n"
            "maps = open('/proc/self/maps').read()\n"
            f"print([n for n in {CUDA_LIBRARIES!r} if n in maps], "
            "sorted(m for m in sys.modules if m.startswith('tilewise._cuda')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] []", proc.stdout + proc.stderr
    assert tw.build_info()["cuda_backend"] == HAVE_CUDA_MODULE


def test_cuda_error_is_an_exec_error():
    assert issubclass(tw.CudaError, tw.ExecError)
    assert "cuda" in tw.exec.executable.BACKENDS


@pytest.mark.skipif(HAVE_CUDA_MODULE, reason="tilewise._cuda is built here")
def test_cuda_backend_without_the_module_says_how_to_build_it():
    g, plan = _small()
    with pytest.raises(tw.CudaError, match=r"tilewise\._cuda was not built.*nvidia-cublas"):
        tw.compile(g, plan, backend="cuda")


@needs_cuda
def test_versions_need_no_device():
    from tilewise import _cuda

    v = _cuda.versions()
    assert set(v) == {"cuda_runtime", "cuda_driver", "cublas", "cudnn", "nccl"}
    for key, major in (("cuda_runtime", "13."), ("cublas", "13."), ("cudnn", "9."), ("nccl", "2.")):
        assert v[key].startswith(major), (key, v[key])
        assert all(part.isdigit() for part in v[key].split(".")), v[key]


@needs_cuda
def test_device_count_without_a_device_is_zero_with_the_error():
    from tilewise import _cuda

    count, error = _cuda.device_count()
    if count:
        assert error == ""
    else:
        assert error.startswith("cudaError"), error


@needs_cuda
def test_device_calls_raise_cuda_error_not_crash():
    from tilewise import _cuda

    if _cuda.device_count()[0]:
        pytest.skip("a CUDA device is visible: the arena allocates for real here")
    with pytest.raises(tw.CudaError, match=r"cudaSetDevice\(0\) failed: cudaError") as info:
        _cuda.DeviceArena(0, [(4096, 0, 1)])
    assert info.value.name.startswith("cudaError")
    assert info.value.call == "cudaSetDevice(0)"
    # Checked before any CUDA call: the capacity (tw.OutOfMemory) and the device index.
    with pytest.raises(tw.OutOfMemory, match="device 0"):
        _cuda.DeviceArena(0, [(4096, 0, 1)], capacity=1024)
    with pytest.raises(tw.ExecError, match="device index"):
        _cuda.DeviceArena(-1, [(16, 0, 1)])


@needs_cuda
def test_compile_for_cuda_translates_then_fails_at_the_first_device_call():
    from tilewise import _cuda

    g = tw.models.mlp(layers=2, hidden=16, batch=8, train=False)  # linear, relu: all translate
    plan = tw.partition(g, devices=1)
    if _cuda.device_count()[0] == 0:
        with pytest.raises(tw.CudaError, match="cudaSetDevice.*cudaError") as e:
            tw.compile(g, plan, backend="cuda")
        assert e.value.name.startswith("cudaError")


@needs_cuda
def test_plans_over_two_gpus_and_swap_plans_translate_then_fail_at_the_first_device_call():
    """Several GPUs (NCCL) and swapped execution on a GPU are written: without a device both translate
    on the host and fail at cudaSetDevice; a pool larger than the memory given fails before it."""
    from tilewise import _cuda
    from tilewise.plan.swapping import swap_problem

    if _cuda.device_count()[0] > 0:
        pytest.skip("a GPU is visible: test_cuda_gpu.py runs these plans")
    g = tw.models.mlp(layers=2, hidden=16, batch=8)
    with pytest.raises(tw.CudaError, match="cudaSetDevice"):
        tw.compile(g, tw.partition(g, devices=2), backend="cuda")
    plan = swap_problem(g, "swapadvisor", device_memory=10**9).plan()
    with pytest.raises(tw.CudaError, match="cudaSetDevice"):
        tw.compile(g, plan, backend="cuda")
    with pytest.raises(tw.OutOfMemory, match="pool"):
        tw.compile(g, plan, backend="cuda", memory_per_device=plan.memory_bytes - 16)


@needs_cuda
def test_compile_for_cuda_names_the_ops_without_a_cuda_kernel():
    # an op without a native kernel (interpreted on the CPU) has no CUDA kernel either
    @tw.op(name="interpreted_square")
    def square(x):
        return lambda i, j: x[i, j] * x[i, j]

    g = tw.Graph()
    g.apply(square, [g.input("x", (4, 4))], {})
    with pytest.raises(tw.CudaError, match="interpreted_square") as e:
        tw.compile(g, tw.partition(g, devices=1), backend="cuda")
    assert e.value.name == "Untranslatable" and "interpreted_square" in e.value.ops


@needs_cuda
def test_device_arena_plan_is_the_static_planner():
    """Offsets 16-aligned, buffers alive together disjoint, the block their envelope; the C++ test
    (tests/cpp/cuda/device_test.cpp) checks equality with a recorded CPU arena step."""
    from tilewise import _cuda

    rng = random.Random(18)
    for _trial in range(50):
        lives = []
        for _ in range(rng.randint(1, 40)):
            born = rng.randint(0, 60)
            lives.append((rng.randint(1, 5000), born, born + rng.randint(1, 20)))
        offsets, block = _cuda.plan_block(lives)
        assert len(offsets) == len(lives)
        assert all(o % 16 == 0 for o in offsets)
        assert block >= max(o + b for o, (b, _, _) in zip(offsets, lives, strict=True))
        for i, (bi, si, di) in enumerate(lives):
            for j in range(i):
                bj, sj, dj = lives[j]
                if si < dj and sj < di:  # alive at the same time
                    oi, oj = offsets[i], offsets[j]
                    assert oi + bi <= oj or oj + bj <= oi, (lives[i], lives[j], oi, oj)


@needs_cuda
def test_info_reports_the_libraries(capsys):
    import tilewise.cli

    assert tilewise.cli.main(["info"]) == 0
    out = capsys.readouterr().out
    for name in ("cuBLAS", "cuDNN", "NCCL", "CUDA devices"):
        assert name in out, out
    assert "tilewise._cuda built" in out

"""build_info(), the BLAS-backed _core.gemm (NumPy as the oracle) and `tilewise info`."""

import json

import numpy as np
import pytest

import tilewise as tw
import tilewise._build_info
import tilewise.cli
from tilewise import _core


def test_build_info_has_every_key_and_a_blas():
    info = tw._build_info.build_info()
    assert set(info) == set(tw._build_info.BUILD_INFO_KEYS)
    assert isinstance(info["blas"], str)
    assert info["blas"] not in ("", "none")
    assert info["blas_threads"] >= 1
    assert isinstance(info["openmp"], bool) and isinstance(info["mpi"], bool)
    assert isinstance(info["cuda"], bool)
    assert info["openmp"] == (info["openmp_max_threads"] > 0)
    assert info["hardware_threads"] >= 0
    assert info["version"]


def test_build_info_returns_a_fresh_dict():
    first = tw._build_info.build_info()
    first["blas"] = "changed"
    assert tw._build_info.build_info()["blas"] != "changed"


def test_preload_blas_is_idempotent():
    tw._build_info.preload_blas()
    tw._build_info.preload_blas()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (3, 5, 7), (64, 33, 17), (128, 128, 128)])
def test_gemm_matches_numpy(dtype, trans_a, trans_b, m, n, k):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(dtype)
    expected = (a.T if trans_a else a) @ (b.T if trans_b else b)
    got = _core.gemm(a, b, trans_a=trans_a, trans_b=trans_b)
    assert got.dtype == dtype
    assert got.shape == (m, n)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * np.sqrt(k))


def test_gemm_accepts_non_contiguous_views():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((20, 30))[::2, 1::3]  # strided view, 10x10
    b = np.asfortranarray(rng.standard_normal((10, 4)))
    np.testing.assert_allclose(_core.gemm(a, b), a @ b, rtol=1e-12)


def test_gemm_empty_inner_dimension_gives_zeros():
    got = _core.gemm(np.ones((3, 0), np.float32), np.ones((0, 2), np.float32))
    np.testing.assert_array_equal(got, np.zeros((3, 2), np.float32))


def test_gemm_rejects_bad_inputs():
    a32 = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match="must both be float32 or both float64"):
        _core.gemm(a32, np.ones((3, 2), np.float64))
    with pytest.raises(TypeError, match="int64"):
        _core.gemm(np.ones((2, 3), np.int64), np.ones((3, 2), np.int64))
    with pytest.raises(ValueError, match="inner dimensions differ"):
        _core.gemm(a32, np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="must be 2-D"):
        _core.gemm(np.ones(3, np.float32), a32)


def test_cli_info_prints_the_blas(capsys):
    assert tilewise.cli.main(["info"]) == 0
    out = capsys.readouterr().out
    info = tw._build_info.build_info()
    assert info["blas"] in out
    for label in ("BLAS", "OpenMP", "MPI", "CUDA", "hardware threads", "Python", "NumPy"):
        assert label in out
    assert np.__version__ in out


def test_cli_info_json(capsys):
    assert tilewise.cli.main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["blas"] == tw._build_info.build_info()["blas"]
    assert info["numpy"] == np.__version__


def test_cli_without_a_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        tilewise.cli.main([])
    assert exc.value.code == 2
    assert "COMMAND" in capsys.readouterr().err

"""Executables exchange state with torch: feeds and state dicts as torch tensors."""

import numpy as np
import pytest

import tilewise as tw

torch = pytest.importorskip("torch")


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def test_load_state_dict_from_torch_and_back():
    m = _model()
    x = torch.randn(5, 4)
    g = tw.from_torch(m, x)
    exe = tw.compile(g, tw.partition(g, devices=2, algorithm="tofu"))
    exe.load_state_dict(m.state_dict())
    out = exe.step({"input": x})["output"]  # a torch tensor fed directly
    np.testing.assert_allclose(out, m(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    back = exe.state_dict()
    assert set(back) == set(m.state_dict())
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(back[k], v.numpy())


def test_a_bad_state_dict_changes_nothing():
    m = _model()
    g = tw.from_torch(m, torch.randn(5, 4))
    exe = tw.compile(g, tw.partition(g, devices=2, algorithm="tofu")).initialize(0)
    before = exe.state_dict()
    state = {k: v.clone() for k, v in m.state_dict().items()}
    state["2.bias"] = torch.zeros(3)  # wrong shape, after good entries
    with pytest.raises(tw.ExecError, match=r"'2.bias' has shape \(2,\) in the graph; got \(3,\)"):
        exe.load_state_dict(state)
    for k, v in exe.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    with pytest.raises(tw.ExecError, match="missing 0.bias"):
        exe.load_state_dict({k: v for k, v in m.state_dict().items() if k != "0.bias"})
    with pytest.raises(tw.ExecError, match="not in graph"):
        exe.load_state_dict({**m.state_dict(), "extra": torch.zeros(1)})
    nan = dict(m.state_dict())
    nan["0.weight"] = torch.full((3, 4), float("nan"))
    with pytest.raises(tw.ExecError, match="NaN"):
        exe.load_state_dict(nan)
    exe.load_state_dict({"0.bias": torch.ones(3)}, strict=False)
    np.testing.assert_array_equal(exe.state_dict()["0.bias"], np.ones(3, np.float32))

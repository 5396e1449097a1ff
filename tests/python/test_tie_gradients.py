"""Gradients of max, min and their relatives where inputs tie, against torch (float64): the reference
interpreter and the runtime on 1 and 2 devices give what torch's matching function gives. Max pools
route a window's gradient to the one input torch's indices name (the first maximum, row-major);
``reduce_max``/``reduce_min`` (torch.amax/amin) split it evenly, ``max_dim``/``min_dim`` (torch.max/min
along a dim) give it to the returned index; ``maximum``/``minimum`` give half to each on an exact tie;
relu, relu6, hardtanh, clip and leaky relu take torch's value at their kinks, and at NaN."""
import numpy as np
import pytest

import tdl_ops
import tilewise as tw

torch = pytest.importorskip("torch")
F = torch.nn.functional

# Integer values with repeats: every window, row and pair below holds ties.
_X4 = np.array([[[[1.0, 1.0, 0.0, 2.0, 2.0], [1.0, 0.0, 2.0, 2.0, -1.0], [0.0, 0.0, 0.0, 0.0, 0.0],
                  [2.0, 1.0, 2.0, 1.0, 2.0]],
                 [[0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 3.0, 3.0, 3.0],
                  [-1.0, -1.0, 5.0, -1.0, 5.0]]]])
_X3 = _X4.reshape(2, 4, 5)  # (n, c, l)
_X2 = _X4.reshape(8, 5)
_KINKS = np.array([[-1.0, 0.0, 0.0, 6.0, 6.0, 3.0], [0.0, 7.0, 6.0, 0.0, -0.0, 1.0]])


def _check(x, build, torch_fn, devices, others=()):
    """d mse(build(x, *others), t) / dx (and d/d others) by the reference and the runtime, against torch."""
    g = tw.Graph()
    params = [g.parameter(f"p{i}", a.shape) for i, a in enumerate((x, *others))]
    y = build(*params)
    rng = np.random.default_rng(0)
    t = rng.integers(-3, 4, size=y.shape).astype(np.float64)  # varied dL/dy, exact in float32
    loss = tdl_ops.mse_loss(y, g.label("t", y.shape))
    grads = tw.grad(g, loss)
    arrays = (x, *others)
    tensors = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    F.mse_loss(torch_fn(*tensors).reshape(t.shape), torch.tensor(t)).backward()
    feeds = {f"p{i}": a for i, a in enumerate(arrays)} | {"t": t}
    ref = tw.run_reference(g, feeds)
    exe = tw.compile(g, tw.partition(g, devices=devices, algorithm="tofu"))
    for p, a in zip(params, arrays):
        exe.set(p, a.astype(np.float32))
    exe.step({"t": t.astype(np.float32)})
    for p, tt in zip(params, tensors):
        want = tt.grad.numpy()
        np.testing.assert_allclose(ref[grads[p.name].name], want, rtol=1e-12, atol=1e-12, err_msg="reference")
        np.testing.assert_allclose(exe.get(grads[p.name]), want, rtol=1e-6, atol=1e-7, err_msg="runtime")


_CASES = {
    "max_pool2d": (_X4, lambda x: tdl_ops.max_pool2d(x, kernel=2, stride=2), lambda x: F.max_pool2d(x, 2, 2)),
    "max_pool2d_overlapping": (_X4, lambda x: tdl_ops.max_pool2d(x, kernel=2, stride=1),
                               lambda x: F.max_pool2d(x, 2, 1)),
    "max_pool2d_padded": (_X4, lambda x: tdl_ops.max_pool2d(x, kernel=3, stride=2, padding=1),
                          lambda x: F.max_pool2d(x, 3, 2, 1)),
    "max_pool1d": (_X3, lambda x: tdl_ops.max_pool1d(x, kernel=2), lambda x: F.max_pool1d(x, 2)),
    "adaptive_max_pool1d": (_X3, lambda x: tdl_ops.max_pool1d(x, kernel=5), lambda x: F.adaptive_max_pool1d(x, 1)),
    "global_max_pool2d": (_X4, tdl_ops.global_max_pool2d, lambda x: F.adaptive_max_pool2d(x, 1)),
    "reduce_max": (_X2, lambda x: tdl_ops.reduce_max(x, axis=1), lambda x: torch.amax(x, dim=1)),
    "reduce_max_axis0": (_X2, lambda x: tdl_ops.reduce_max(x, axis=0), lambda x: torch.amax(x, dim=0)),
    "reduce_min": (_X2, lambda x: tdl_ops.reduce_min(x, axis=1), lambda x: torch.amin(x, dim=1)),
    "relu": (_KINKS, tdl_ops.relu, torch.relu),
    "relu6": (_KINKS, tdl_ops.relu6, F.relu6),
    "leaky_relu": (_KINKS, lambda x: tdl_ops.leaky_relu(x, slope=0.25), lambda x: F.leaky_relu(x, 0.25)),
    "clip": (_KINKS, lambda x: tdl_ops.clip(x, lo=0.0, hi=6.0), lambda x: torch.clamp(x, 0.0, 6.0)),
    "clip_one_sided": (_KINKS, lambda x: tdl_ops.clip(x, lo=0.0, hi=float("inf")), lambda x: torch.clamp(x, min=0.0)),
    "hardtanh": (_KINKS, lambda x: tdl_ops.hardtanh(x, lo=0.0, hi=6.0), lambda x: F.hardtanh(x, 0.0, 6.0)),
    "max_dim": (_X2, lambda x: tdl_ops.max_dim(x, axis=1), lambda x: torch.max(x, dim=1).values),
    "min_dim_axis0": (_X2, lambda x: tdl_ops.min_dim(x, axis=0), lambda x: torch.min(x, dim=0).values),
}


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("name", list(_CASES))
def test_a_tie_takes_torchs_gradient(name, devices):
    x, build, torch_fn = _CASES[name]
    _check(x, build, torch_fn, devices)


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("op, torch_fn", [("maximum", torch.maximum), ("minimum", torch.minimum)])
def test_an_exact_tie_of_maximum_and_minimum_halves_the_gradient(op, torch_fn, devices):
    b = np.where(np.arange(_X2.size).reshape(_X2.shape) % 3 == 0, _X2, _X2[::-1])  # a third tie exactly
    _check(_X2, getattr(tdl_ops, op), torch_fn, devices, others=(b,))


@pytest.mark.parametrize("devices", [1, 2])
def test_a_window_holding_nan_sends_its_gradient_to_the_last_nan(devices):
    x = _X4.copy()
    x[0, 0, 0, 0] = x[0, 0, 1, 1] = np.nan
    g = tw.Graph()
    p = g.parameter("x", x.shape)
    y = tdl_ops.max_pool2d(p, kernel=2, stride=2)
    grads = tw.grad(g, tdl_ops.reduce_sum(tdl_ops.reduce_sum(tdl_ops.reduce_sum(
        tdl_ops.reduce_sum(y, axis=3), axis=2), axis=1), axis=0))
    xt = torch.tensor(x, requires_grad=True)
    F.max_pool2d(xt, 2, 2).sum().backward()
    want = xt.grad.numpy()
    assert want[0, 0, 1, 1] == 1.0 and want[0, 0, 0, 0] == 0.0
    np.testing.assert_array_equal(tw.run_reference(g, {"x": x})[grads["x"].name], want)
    exe = tw.compile(g, tw.partition(g, devices=devices, algorithm="tofu"))
    exe.set(p, x.astype(np.float32))
    exe.step({})
    np.testing.assert_array_equal(exe.get(grads["x"]), want)


_NAN_CASES = {
    "relu": (tdl_ops.relu, torch.relu),
    "relu6": (tdl_ops.relu6, F.relu6),
    "elu": (lambda x: tdl_ops.elu(x, alpha=0.5), lambda x: F.elu(x, 0.5)),
    "leaky_relu": (lambda x: tdl_ops.leaky_relu(x, slope=0.25), lambda x: F.leaky_relu(x, 0.25)),
    "hardtanh": (lambda x: tdl_ops.hardtanh(x, lo=-1.0, hi=2.0), lambda x: F.hardtanh(x, -1.0, 2.0)),
    "clip": (lambda x: tdl_ops.clip(x, lo=-1.0, hi=2.0), lambda x: torch.clamp(x, -1.0, 2.0)),
    "max_dim": (lambda x: tdl_ops.max_dim(x, axis=1), lambda x: torch.max(x, dim=1).values),
    "min_dim": (lambda x: tdl_ops.min_dim(x, axis=1), lambda x: torch.min(x, dim=1).values),
}


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("name", list(_NAN_CASES))
def test_the_gradient_at_nan_is_torchs(name, devices):
    """d sum(f(x)) / dx where x holds NaN (the forward output is NaN there, but dy is 1): the kinks'
    comparisons are false at NaN, and which side that lands on is torch's choice (for elu and hardtanh
    its vectorised kernels', which 40 elements take; its scalar tail differs)."""
    build, torch_fn = _NAN_CASES[name]
    x = _X2.copy()
    x[0, 1] = x[3, 4] = x[5, 0] = np.nan
    g = tw.Graph()
    p = g.parameter("x", x.shape)
    y = build(p)
    total = tdl_ops.reduce_sum(y, axis=0)
    while total.shape:
        total = tdl_ops.reduce_sum(total, axis=0)
    grads = tw.grad(g, total)
    xt = torch.tensor(x, requires_grad=True)
    torch_fn(xt).sum().backward()
    want = xt.grad.numpy()
    np.testing.assert_array_equal(tw.run_reference(g, {"x": x})[grads["x"].name], want)
    exe = tw.compile(g, tw.partition(g, devices=devices, algorithm="tofu"))
    exe.set(p, x.astype(np.float32))
    exe.step({})
    assert exe.stats.interpreted_ops == 0
    np.testing.assert_allclose(exe.get(grads["x"]), want, rtol=1e-6, atol=1e-7)  # NaN where torch's


@pytest.mark.parametrize("op, torch_fn", [("argmax", torch.argmax), ("argmin", torch.argmin)])
def test_argmax_and_argmin_name_torchs_index_with_ties_and_nan(op, torch_fn):
    x = _X2.copy()
    x[2, 3] = x[2, 1] = np.nan
    g = tw.Graph()
    i = g.input("x", x.shape)
    y = getattr(tdl_ops, op)(i, axis=1)
    want = torch_fn(torch.tensor(x), dim=1).numpy()
    np.testing.assert_array_equal(tw.run_reference(g, {"x": x})[y.name], want)
    exe = tw.compile(g, tw.partition(g, devices=2, algorithm="tofu"))
    exe.step({"x": x.astype(np.float32)})
    assert exe.stats.interpreted_ops == 0
    np.testing.assert_array_equal(exe.get(y), want)

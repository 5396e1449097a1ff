"""PyTorch-style training in tw.trace / tw.from_torch: torch's losses and torch.optim optimizers
mapped to tilewise's (same reduction, same hyper-parameters), or refused naming the equivalent."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import tilewise as tw

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

from test_from_torch import assert_rel_close, run

pytestmark = pytest.mark.skipif(torch is None, reason="from_torch needs PyTorch: pip install torch==2.13.0")


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))


def _steps(model, x, label, loss_fn, make_opt, steps):
    """Loss and parameters after each of ``steps`` torch steps (float64), and the same through one tilewise graph."""
    g = tw.from_torch(model, x, loss=loss_fn, optimizer=make_opt(model.parameters()),
                      label=None if label.is_floating_point() else label)
    m = copy.deepcopy(model).double()
    opt = make_opt(m.parameters())
    feeds = g.torch_import.feeds(model, x)
    feeds["label"] = label.double().numpy() if label.is_floating_point() else label.numpy().astype(np.float64)
    for s in g.tensors_with_role("optimizer_state"):
        if s.producer is None:
            feeds[s.name] = np.zeros(s.shape)
    lab = label.double() if label.is_floating_point() else label
    for step in range(steps):
        values = run(g, feeds)
        opt.zero_grad()
        loss = loss_fn(m(x.double()), lab)
        loss.backward()
        assert values["loss"] == pytest.approx(loss.item(), rel=1e-9), f"step {step}"
        opt.step()
        for t in g.tensors:
            if t.updates is not None:
                feeds[t.updates.name] = values[t.name]
        for name, p in m.named_parameters():
            assert_rel_close(feeds[name], p.detach().numpy(), 1e-9, what=f"{name} after step {step}")
    return g


@pytest.mark.parametrize("loss_fn", ["mse_loss", "l1_loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "sum"])
def test_regression_losses_with_sgd(loss_fn):
    fn = {"mse_loss": F.mse_loss, "l1_loss": F.l1_loss, "MSELoss": nn.MSELoss(), "SmoothL1Loss": nn.SmoothL1Loss(beta=0.5),
          "HuberLoss": nn.HuberLoss(delta=0.7), "sum": nn.MSELoss(reduction="sum")}[loss_fn]
    x, y = torch.randn(5, 6), torch.randn(5, 4)
    _steps(_model(), x, y, fn, lambda p: torch.optim.SGD(p, lr=0.1), 1)


def test_cross_entropy_on_probabilities_with_momentum():
    x = torch.randn(5, 6)
    y = torch.softmax(torch.randn(5, 4), dim=-1)
    _steps(_model(), x, y, F.cross_entropy, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 2)


def test_cross_entropy_on_class_indices_with_label_smoothing_and_adam():
    """Class indices (the label is int64 (batch,)) become one-hot rows; Adam over three steps (its step count is state)."""
    model, x = _model(), torch.randn(5, 6)
    labels = torch.tensor([0, 3, 1, 1, 2])
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
    g = tw.trace(lambda t: _forward(model, t), tw.placeholder((5, 6), name="x"), loss=loss_fn,
                 label=tw.placeholder((5,), dtype="int64"), optimizer=torch.optim.Adam(model.parameters(), lr=0.01))
    assert "one_hot" in {op.type for op in g.ops}
    _steps(model, x, labels, loss_fn, lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99)), 3)


def _forward(model, t):
    import tdl_ops

    fc1, fc2 = model[0], model[2]
    g = t.graph
    w1, b1 = g.parameter("w1", tuple(fc1.weight.shape)), g.parameter("b1", tuple(fc1.bias.shape))
    w2, b2 = g.parameter("w2", tuple(fc2.weight.shape)), g.parameter("b2", tuple(fc2.bias.shape))
    return tdl_ops.linear(tdl_ops.tanh(tdl_ops.linear(t, w1, b1)), w2, b2)


def test_adamw_hyper_parameters():
    x, y = torch.randn(5, 6), torch.randn(5, 4)
    g = _steps(_model(), x, y, F.mse_loss,
               lambda p: torch.optim.AdamW(p, lr=0.02, betas=(0.85, 0.98), eps=1e-7, weight_decay=0.05), 2)
    [op] = [op for op in g.ops if op.type == "adam_weight"][:1]
    assert op.attrs["weight_decay"] == 0.05 and op.attrs["beta1"] == 0.85 and op.attrs["eps"] == 1e-7


def test_unsupported_are_refused_naming_the_equivalent():
    model, x = _model(), torch.randn(5, 6)
    p = list(model.parameters())
    cases = [
        (dict(loss=F.kl_div), r"torch.nn.functional.kl_div has no tilewise equivalent; tilewise losses: tw.ops.mse_loss"),
        (dict(loss=nn.MSELoss(reduction="none")), r"reduction='none': the loss must be a scalar"),
        (dict(loss=F.mse_loss, optimizer=torch.optim.RMSprop(p)), r"torch.optim.RMSprop has no tilewise equivalent; "
                                                                    r"use tw.optim.SGD, Momentum, Adam or AdamW"),
        (dict(loss=F.mse_loss, optimizer=torch.optim.Adam(p, amsgrad=True)), r"amsgrad=True"),
        (dict(loss=F.mse_loss, optimizer=object()), r"optimizer= must be a tilewise optimizer .* got builtins.object"),
        (dict(loss=lambda o, t: F.mse_loss(o, t) * 2), r"called with tilewise graph tensors, which have no 'size'"),
    ]
    if "weight_decay" not in tw.optim.Adam.__init__.__code__.co_varnames:
        cases.append((dict(loss=F.mse_loss, optimizer=torch.optim.Adam(p, weight_decay=0.1)), r"tw.optim.AdamW"))
    for kwargs, message in cases:
        with pytest.raises(tw.GraphError, match=message):
            tw.from_torch(model, x, **kwargs)

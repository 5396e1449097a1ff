"""Whole training steps translate to the CUDA backend, checked on the host call by call against the
CPU kernels (tilewise._cuda; docs/CUDA.md): the zoo's models, and models nobody here wrote (Hugging
Face GPT-2, Llama, Mistral, T5, BERT with its int64 padding mask, DistilBERT, ViT; a GRU and a UNet
block through tw.from_torch), on one device and split over two."""
import importlib.util

import pytest

import tilewise as tw

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tilewise._cuda") is None,
                                reason="tilewise._cuda was not built (needs nvcc and the nvidia wheels)")

TOLERANCE = 1e-5

ZOO = {
    "brnn": lambda: tw.models.brnn(layers=1, hidden=16, batch=2, steps=3, in_features=8),
    "inception_v4": lambda: tw.models.inception_v4(width=1, batch=1, image=75, classes=10),
    "nasnet": lambda: tw.models.nasnet(cells=2, filters=8, batch=2, image=32, classes=10),
    "alexnet": lambda: tw.models.alexnet(batch=1, image=224, classes=10),
    "resnet": lambda: tw.models.resnet(depth=50, batch=2, image=32, classes=10),
}


@pytest.fixture(scope="module")
def cuda():
    from tilewise import _cuda
    return _cuda


def _check(cuda, g, devices):
    plan = tw.partition(g, devices=devices, algorithm="tofu")
    refused = {(r["kernel"], r["why_not"]) for r in cuda.coverage(g._g, plan._core) if r["why_not"]}
    assert not refused
    for d in range(devices):
        assert cuda.translate(g._g, plan._core, d)["launches"]
    rows = cuda.host_check(g._g, plan._core, seed=9, max_elements=1 << 14)
    checked = [r for r in rows if r["checked"]]
    assert len(checked) >= len(rows) // 2, "most calls are checked (the largest are over the budget)"
    bad = [(r["op"], r["kernel"], r["max_error"]) for r in checked if not r["max_error"] <= TOLERANCE]
    assert not bad, bad


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_training_steps_translate_whole(cuda, name, devices):
    _check(cuda, ZOO[name](), devices)


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("name", ["gpt2", "llama", "mistral", "t5", "bert", "distilbert", "vit", "gru", "unet"])
def test_models_users_bring_translate_whole(cuda, name, devices):
    torch = pytest.importorskip("torch")
    import test_hf_training as hf
    import torch.nn.functional as F

    torch.manual_seed(0)
    if name in ("gru", "unet"):
        inner, x = (hf.GRUModel(), torch.randn(2, 5, 4)) if name == "gru" else (hf.UNetBlock(), torch.randn(2, 3, 8, 8))

        class Positional(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)

        model, inputs = Positional(inner), {"x": x}
    else:
        model, inputs = hf.LastHidden(hf._hf_model(name)), hf._inputs(name)
    model.eval()
    with torch.no_grad():
        target = torch.randn_like(model(**inputs))
    g = tw.from_torch(model, inputs, loss=F.mse_loss, optimizer=hf._adam(model.parameters()), label=target)
    _check(cuda, g, devices)

"""Models we did not write, imported for tests (pytest puts this folder on sys.path), and torch's own
training of them: the oracle the frontier's plans are compared with."""

import tilewise as tw


def tiny_gpt2(torch, transformers):
    """A one-layer Hugging Face GPT-2 from a config (no weights, no dropout) returning flat logits, a
    batch of token ids and labels, and its training graph with Adam (lr 1e-2): (model, ids, labels, g)."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=32, n_positions=8, resid_pdrop=0,
                                  embd_pdrop=0, attn_pdrop=0, bos_token_id=0, eos_token_id=0)

    class Logits(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(ids).logits.reshape(-1, 32)

    model = Logits(transformers.GPT2LMHeadModel(cfg).train())
    ids, labels = torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (16,))
    g = tw.from_torch(model, (ids,), loss=torch.nn.CrossEntropyLoss(),
                      optimizer=torch.optim.Adam(model.parameters(), lr=1e-2), label=labels)
    return model, ids, labels, g


def torch_adam_losses(torch, model, inputs, labels, steps=3, lr=1e-2) -> list[float]:
    """Cross-entropy losses of ``steps`` Adam steps of ``model`` in torch (it trains the model)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses

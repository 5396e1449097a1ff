"""Run under ``mpirun -np K``: trains small models for 3 steps with tw.compile(..., backend="mpi").

Every rank builds the same graphs and plans and feeds the same full arrays (fixed seeds). Writes
OUT/rank{r}.json (per case: losses, this rank's bytes sent and received, the per-device lists from
exe.stats) and, on rank 0, OUT/{case}.npz with the parameters gathered after the last step.
Usage: python train_mpi.py OUT
"""
import json
import pathlib
import sys

import numpy as np

import tilewise as tw


def masked_mlp():
    """A bool mask input (masked_fill) between two linears, trained with Adam."""
    import tdl_ops

    class Masked(tw.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = tw.nn.Linear(16, 16), tw.nn.Linear(16, 4)

        def forward(self, x, mask):
            return self.fc2(tdl_ops.masked_fill(self.fc1(x), mask, value=-1.0))

    return tw.trace(Masked(), tw.placeholder((8, 16), name="x"), tw.placeholder((8, 16), name="mask", dtype="bool"),
                    loss=tw.ops.mse_loss, optimizer=tw.optim.Adam(lr=0.01), name="masked-mlp")


MODELS = {
    "mlp": lambda: tw.models.mlp(layers=2, hidden=16, batch=8),
    "wresnet": lambda: tw.models.wresnet(50, 1, batch=2, image=32, classes=10),
    # int64 token ids (embedding lookups split across ranks) and a bool padding mask
    "transformer": lambda: tw.models.transformer(2, 32, 4, seq=16, batch=4, vocab=100, padding_mask=True),
    "masked": masked_mlp,
}
ALGORITHMS = ("tofu", "kcuts")
STEPS = 3


def feeds(g, step):
    """The same arrays on every rank, each in its tensor's dtype (ids inside their tables, 0/1 masks)."""
    return tw.graph.feeds.example_feeds(g, seed=100 + step)


def main(out: pathlib.Path) -> None:
    from tilewise.exec import mpi

    ranks = mpi.load().size()
    rank = mpi.load().rank()
    result = dict(rank=rank, ranks=ranks, cases={})
    for model, build in MODELS.items():
        g = build()
        for algorithm in ALGORITHMS:
            plan = tw.partition(g, devices=ranks, algorithm=algorithm)
            exe = tw.compile(g, plan, backend="mpi", timeout=60).initialize(seed=7)
            losses = [float(exe.step(feeds(g, s))["loss"]) for s in range(STEPS)]
            stats = exe.stats
            case = f"{model}-{algorithm}"
            result["cases"][case] = dict(
                losses=losses, bytes_sent=stats.bytes_sent_per_device[rank],
                bytes_received=stats.bytes_received_per_device[rank],
                bytes_sent_per_device=stats.bytes_sent_per_device,
                bytes_received_per_device=stats.bytes_received_per_device,
                predicted_bytes_sent_per_device=stats.predicted_bytes_sent_per_device,
                predicted_bytes_received_per_device=stats.predicted_bytes_received_per_device)
            params = exe.parameters()
            if rank == 0:
                np.savez(out / f"{case}.npz", **params)
            else:
                assert params is None
    (out / f"rank{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))

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

MODELS = {
    "mlp": lambda: tw.models.mlp(layers=2, hidden=16, batch=8),
    "wresnet": lambda: tw.models.wresnet(50, 1, batch=2, image=32, classes=10),
}
ALGORITHMS = ("tofu", "kcuts")
STEPS = 3


def feeds(g, step):
    rng = np.random.default_rng(100 + step)
    return {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in g.tensors
            if t.producer is None and t.role in ("input", "label", "constant")}


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

"""Run under ``mpirun -np K``: one model's steps on K MPI ranks, measured, beside the simulator's
prediction on "this-machine-mpi" (bench_predict.py --mpi starts it). Rank 0 prints one JSON line.

    mpirun -np 2 python benchmarks/predict_mpi.py MODEL PLANNER STEPS [OP_TIMES.json]

OP_TIMES.json: tw.OpTimes measured beforehand (bench_predict.py passes its own); without it rank 0 measures
them here, while rank 1 spins in MPI on the other core (slower op times than a quiet core's)."""

from __future__ import annotations

import json
import pathlib
import statistics
import sys

import tilewise as tw
from tilewise.exec import mpi
from tilewise.graph.feeds import example_feeds

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from bench_predict import MODELS  # noqa: E402


def main() -> None:
    name, algorithm, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    g = MODELS[name][1]()
    plan = tw.partition(g, devices=mpi.load().size(), algorithm=algorithm)
    if len(sys.argv) > 4:
        op_times = tw.OpTimes.from_dict(json.loads(pathlib.Path(sys.argv[4]).read_text()))
    else:
        op_times = tw.measure_ops(g, plans=[plan]) if mpi.load().rank() == 0 else None
    exe = tw.compile(g, plan, backend="mpi").initialize(0)
    times = exe.time_steps(example_feeds(g), steps)
    if exe.rank == 0:
        pred = exe.predict(op_times=op_times)
        print(json.dumps({"model": name, "algorithm": algorithm, "measured": statistics.median(times),
                          "predicted": pred.step_seconds, "memory": list(exe._core.stats.peak_bytes),
                          "predicted_memory": pred.memory_per_device}))


if __name__ == "__main__":
    main()

"""Run under mpirun -np K: tw.compile(..., backend="cuda") with one rank per device (NCCL over MPI ranks,
tilewise/exec/cuda.py compile_rank). Without a GPU every rank must fail with tw.CudaError, together and
without waiting on the others; with GPUs, three SGD steps whose losses the test compares. Each rank
writes OUT/rank<r>.json."""
import json
import pathlib
import sys

import numpy as np

import tilewise as tw
from tilewise.exec import mpi

out = pathlib.Path(sys.argv[1])
mpi_module = mpi.load()
rank, size = mpi_module.rank(), mpi_module.size()
g = tw.models.mlp(layers=2, hidden=32, batch=8)
plan = tw.partition(g, devices=size, algorithm="tofu")
result = {"rank": rank, "size": size}
try:
    exe = tw.compile(g, plan, backend="cuda")
    rng = np.random.default_rng(0)
    for t in g.tensors:
        if t.producer is None and t.role in ("parameter", "input", "label"):
            exe.set(t.name, rng.standard_normal(t.shape).astype(np.float32) if t.dtype == "float32"
                    else rng.integers(0, 2, t.shape))
    for _ in range(3):
        exe.step()
    result["ok"] = True
except (tw.CudaError, tw.ExecError) as e:
    result["error"] = type(e).__name__
    result["message"] = str(e)
(out / f"rank{rank}.json").write_text(json.dumps(result))

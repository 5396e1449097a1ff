"""Run under mpirun -np K: tw.compile(..., backend="cuda") with one rank per device (NCCL over MPI ranks,
tilewise/exec/cuda.py compile_rank). Without a GPU every rank must fail with tw.CudaError, together and
without waiting on the others; with GPUs, three SGD steps whose losses the test compares. Then the
gather on rank 0 (CudaExecutable.get / gather / parameters over _mpi.gather_bytes) with a stand-in for
the device side: each rank gives a band of rows of a known matrix and a replica of a bias. Each rank
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


class Tiles:
    """The device side of a rank's executable, for the gather: rank r holds rows [2r, 2r + 2) of
    '0.weight' and the whole of '0.bias' (a replica)."""
    def __init__(self, rank):
        self.rank = rank

    def local_tiles(self, tensor):
        t = g.tensors[tensor]
        full = np.arange(np.prod(t.shape), dtype=np.float32).reshape(t.shape)
        if t.name == "0.bias":
            return [([(0, n - 1) for n in t.shape], full.tobytes())]
        if t.name != "0.weight" or 2 * self.rank >= t.shape[0]:
            return []
        rows = slice(2 * self.rank, min(2 * self.rank + 2, t.shape[0]))
        box = [(rows.start, rows.stop - 1)] + [(0, n - 1) for n in t.shape[1:]]
        return [(box, np.ascontiguousarray(full[rows]).tobytes())]


from tilewise.exec.cuda import CudaExecutable  # noqa: E402

stand_in = CudaExecutable(g, plan, Tiles(rank))
w, b = g.tensor("0.weight"), g.tensor("0.bias")
gathered = stand_in.gather("0.bias")
result["gather_on_root_only"] = (gathered is not None) == (rank == 0)
band = np.zeros(w.shape, np.float32)
band[: 2 * size] = np.arange(np.prod(w.shape), dtype=np.float32).reshape(w.shape)[: 2 * size]
result["get_equal"] = bool(np.array_equal(stand_in.get("0.weight"), band))
result["bias_equal"] = bool(np.array_equal(stand_in.get("0.bias"), np.arange(np.prod(b.shape), dtype=np.float32)))
try:
    stand_in.get("2.weight")  # held by no rank here
    result["unheld"] = "no error"
except tw.ExecError as e:
    result["unheld"] = str(e)
(out / f"rank{rank}.json").write_text(json.dumps(result))

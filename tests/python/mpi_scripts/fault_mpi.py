"""Run under ``mpirun -np K``: every rank trains a small MLP step after step until a step fails.

The test stops or kills one rank from outside (tests/python/test_mpi_faults.py). Each rank writes
OUT/pid{rank} at start and OUT/ready{rank} after a few steps; a survivor whose step raises
tw.CommunicationError writes OUT/error{rank}.json (when, on the machine's monotonic clock, the
message, the peer it names, and whether its parameter tiles are as before the step: steps are
atomic), waits for the other survivors' files (the launcher ends the job once one rank exits with
an error) and leaves with exit status 3 without finalising MPI (MPI_Finalize may wait for the
stopped rank). Usage: python fault_mpi.py OUT TIMEOUT_SECONDS
"""
import json
import os
import pathlib
import sys
import time

import numpy as np

import tilewise as tw
from tilewise.exec import mpi

out, timeout = pathlib.Path(sys.argv[1]), float(sys.argv[2])
rank, ranks = mpi.load().rank(), mpi.load().size()
(out / f"pid{rank}").write_text(str(os.getpid()))
g = tw.models.mlp(layers=2, hidden=64, batch=16)
exe = tw.compile(g, tw.partition(g, devices=ranks, algorithm="kcuts"), backend="mpi", timeout=timeout, atomic=True)
exe.initialize(seed=1)
rng = np.random.default_rng(0)
feeds = {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in g.tensors
         if t.producer is None and t.role in ("input", "label")}
for step in range(1_000_000):
    before = exe.local_tiles()
    try:
        exe.step(feeds)
    except tw.CommunicationError as e:
        at = time.monotonic()
        # Atomic steps: this rank's parameters are as they were before the failed step.
        after = exe.local_tiles()
        restored = set(after) == set(before) and all(np.array_equal(before[k], v) for k, v in after.items())
        record = {"rank": rank, "step": step, "at": at, "message": str(e), "peer": e.peer, "restored": restored}
        (out / f"error{rank}.json").write_text(json.dumps(record))
        print(f"rank {rank}: {type(e).__name__} at step {step}: {e}", flush=True)
        # The launcher ends the job once a rank exits with an error: wait (a while) for the other
        # survivors to raise too, so the test sees every one of them.
        until = time.monotonic() + timeout + 5
        while len(list(out.glob("error*.json"))) < ranks - 1 and time.monotonic() < until:
            time.sleep(0.05)
        os._exit(3)
    if step == 3:
        (out / f"ready{rank}").write_text("")

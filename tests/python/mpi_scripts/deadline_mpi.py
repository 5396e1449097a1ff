"""Run under ``mpirun -np 2``: rank 1 leaves without stepping; rank 0's step waits on it past the
deadline (2 s) and raises tw.CommunicationError naming the peer and the instruction. Prints one
line per rank; exits 0 when rank 0 raised as expected."""
import sys
import time

import numpy as np

import tilewise as tw

g = tw.models.mlp(layers=2, hidden=16, batch=8)
plan = tw.partition(g, devices=2, algorithm="kcuts")
exe = tw.compile(g, plan, backend="mpi", timeout=2).initialize(seed=1)
feeds = {t.name: np.ones(t.shape, np.float32) for t in g.tensors
         if t.producer is None and t.role in ("input", "label")}
if exe.rank == 1:
    print("rank 1: leaves without stepping", flush=True)
    sys.exit(0)
start = time.monotonic()
try:
    exe.step(feeds)
except tw.CommunicationError as e:
    print(f"rank 0: CommunicationError after {time.monotonic() - start:.1f} s, peer {e.peer}, device {e.device}: {e}",
          flush=True)
    sys.exit(0)
print("rank 0: the step did not fail", flush=True)
sys.exit(1)

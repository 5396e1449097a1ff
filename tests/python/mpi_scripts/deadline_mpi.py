"""Run under ``mpirun -np 2``: rank 1 leaves; rank 0 waits on it past the deadline (2 s) and raises
tw.CommunicationError naming the peer and what it waited for. Prints one line per rank; exits 0
when rank 0 raised as expected.

``python deadline_mpi.py step``: rank 1 leaves without stepping; rank 0's step waits in a receive.
``python deadline_mpi.py gather``: both step once, then rank 1 leaves; rank 0 gathers the
parameters (a collective of the executor's bookkeeping, polled against the deadline too).
"""
import sys
import time

import numpy as np

import tilewise as tw

mode = sys.argv[1] if len(sys.argv) > 1 else "step"
g = tw.models.mlp(layers=2, hidden=16, batch=8)
plan = tw.partition(g, devices=2, algorithm="kcuts")
exe = tw.compile(g, plan, backend="mpi", timeout=2).initialize(seed=1)
feeds = {t.name: np.ones(t.shape, np.float32) for t in g.tensors
         if t.producer is None and t.role in ("input", "label")}
if mode == "gather":
    exe.step(feeds)
if exe.rank == 1:
    print("rank 1: leaves", flush=True)
    sys.exit(0)
start = time.monotonic()
try:
    exe.parameters() if mode == "gather" else exe.step(feeds)
except tw.CommunicationError as e:
    print(f"rank 0: CommunicationError after {time.monotonic() - start:.1f} s, peer {e.peer}, device {e.device}: {e}",
          flush=True)
    sys.exit(0)
print(f"rank 0: the {mode} did not fail", flush=True)
sys.exit(1)

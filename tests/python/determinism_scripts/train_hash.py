"""Trains a zoo model a few steps under a plan and prints the SHA-256 of every parameter's and
optimizer state's bytes (test_determinism.py runs it under different BLAS thread counts)."""

import hashlib
import sys

import tilewise as tw
from tilewise.graph.feeds import example_feeds

model, devices, algorithm = sys.argv[1], int(sys.argv[2]), sys.argv[3]
g = tw.models.get(model, batch=8, optimizer="adam")
exe = tw.compile(g, tw.partition(g, devices, algorithm=algorithm)).initialize(0)
feeds = example_feeds(g, 0)
for _ in range(4):
    exe.step(feeds)
h = hashlib.sha256()
for t in g.tensors:
    if t.producer is None and t.role in ("parameter", "optimizer_state"):
        h.update(t.name.encode())
        h.update(exe.get(t.name).tobytes())
print(h.hexdigest())

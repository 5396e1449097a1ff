"""The process's memory during training steps beside the memory the programs plan (issue 11:
executor costs the plan does not show).

Planned: per device, the resident tensors plus the arena's planned block (``exe.stats.
peak_memory_per_device``; equal to ``plan``'s prediction by ``predicted_memory_per_device``),
summed over devices. Measured: the process's resident set at its high-water mark during three
steps after the warm-up step (``VmHWM`` of /proc/self/status, reset through /proc/self/clear_refs
before them) less its resident set before ``tw.compile``. Each case runs in a fresh process.
The ratio measured / planned is what the plan does not show: kernel scratch outside the arena,
BLAS's own packing buffers, the communicator's message buffers, code and metadata.

    python benchmarks/bench_process_memory.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CASES = {
    "mlp": "tw.models.mlp(layers=4, hidden=2048, batch=512)",
    "wresnet": "tw.models.wresnet(depth=50, width=2, batch=8, image=32, classes=10)",
    "transformer": "tw.models.transformer(layers=2, hidden=256, heads=4, seq=128, batch=16, vocab=4000, classes=2,"
                   " dropout=0.0)",
    "rnn": "tw.models.rnn(layers=2, hidden=1024, steps=10, batch=64, in_features=512)",
}
QUICK = {
    "mlp": "tw.models.mlp(layers=2, hidden=256, batch=64)",
    "wresnet": "tw.models.wresnet(depth=50, width=1, batch=2, image=32, classes=10)",
    "transformer": "tw.models.transformer(layers=1, hidden=64, heads=2, seq=32, batch=4, vocab=500, classes=2,"
                   " dropout=0.0)",
    "rnn": "tw.models.rnn(layers=1, hidden=256, steps=4, batch=16, in_features=128)",
}

CHILD = r"""
import json, sys
import numpy as np
import tilewise as tw
from tilewise import _core

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(key)

g = {model}
devices = {devices}
plan = tw.partition(g, devices=devices, algorithm="tofu") if devices > 1 else tw.Plan.one_device(g)
rng = np.random.default_rng(0)
feeds = {{}}
for t in g.tensors:
    if t.producer is None and t.role in ("input", "label", "constant"):
        if t.dtype == "float32":
            feeds[t.name] = rng.standard_normal(t.shape).astype(np.float32)
        else:
            feeds[t.name] = rng.integers(0, 2, size=t.shape).astype(t.dtype)
base = status("VmRSS")
exe = tw.compile(g, plan).initialize(0)
for k, v in feeds.items():
    exe.set(k, v)
exe.step()  # records and plans the arenas
heap0 = _core.kernel_heap_scratch_bytes() if hasattr(_core, "kernel_heap_scratch_bytes") else -1
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # resets VmHWM to the current resident set
import time
times = []
for _ in range({steps}):
    t0 = time.perf_counter()
    exe.step()
    times.append(time.perf_counter() - t0)
hwm = status("VmHWM")
s = exe.stats
heap = _core.kernel_heap_scratch_bytes() - heap0 if heap0 >= 0 else -1
print(json.dumps(dict(planned=sum(s.peak_memory_per_device), predicted=sum(s.predicted_memory_per_device),
                      grown=hwm - base, message=s.message_buffer_bytes, scratch=sum(s.scratch_bytes_per_device),
                      interpreted=s.interpreted_ops, heap_scratch=heap, step=sorted(times)[len(times) // 2])))
"""


def measure(model: str, devices: int, steps: int = 3) -> dict:
    code = "import tilewise as tw\n" + CHILD.format(model=model, devices=devices, steps=steps)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    cases = QUICK if args.quick else CASES
    rows = []
    print(f"{'model':12} {'dev':>3} {'planned MiB':>12} {'grown MiB':>10} {'ratio':>6} {'msgs MiB':>9} "
          f"{'heap scratch':>12} {'step s':>7}")
    for name, model in cases.items():
        for devices in (1, 2):
            r = measure(model, devices, args.steps)
            r.update(model=name, devices=devices, ratio=r["grown"] / r["planned"])
            rows.append(r)
            print(f"{name:12} {devices:>3} {r['planned'] / 2**20:12.1f} {r['grown'] / 2**20:10.1f} {r['ratio']:6.2f} "
                  f"{r['message'] / 2**20:9.1f} {r['heap_scratch']:>12} {r['step']:7.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

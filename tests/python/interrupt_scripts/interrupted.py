"""Runs one long call, sends this process SIGINT after a delay, prints what happened as JSON.

    python interrupted.py partition|frontier|swap|step|step-2|step-atomic DELAY_SECONDS

Steps: the delay is a quarter of a first step's time instead (the signal lands in the forward pass).
"""

import json
import os
import signal
import sys
import threading
import time

import numpy as np

import tilewise as tw

what, delay = sys.argv[1], float(sys.argv[2])
out: dict = {"what": what}


def call():
    """(the long call, a check run after it was interrupted)."""
    if what == "partition":
        g = tw.models.wresnet(depth=152, width=10, batch=8, image=32, classes=10)
        return (lambda: tw.partition(g, 1024, algorithm="tofu")), None
    if what == "frontier":
        g = tw.models.transformer(layers=1, hidden=256, heads=4, batch=32)
        return (lambda: tw.frontier(g, "tensoropt", devices=16, baselines=False)), None
    if what == "swap":
        g = tw.models.mlp(layers=4, hidden=1024, batch=128)
        return (lambda: tw.swap_plan(g, device_memory=15 * 2**20, time_limit=60)), None
    devices = 2 if what == "step-2" else 1
    g = tw.models.mlp(layers=4, hidden=1536, batch=1536)
    plan = tw.partition(g, devices, algorithm="tofu")
    exe = tw.compile(g, plan, atomic=what == "step-atomic").initialize(0)
    from tilewise.graph.feeds import example_feeds

    feeds = example_feeds(g)
    t = time.perf_counter()
    exe.step(feeds)
    out["step_seconds"] = time.perf_counter() - t
    global delay
    delay = out["step_seconds"] / 4
    params = [t.name for t in g.tensors if t.producer is None and t.name.endswith("weight")]
    before = {p: exe.get(p).copy() for p in params}

    def after():
        out["parameters_unchanged"] = all(np.array_equal(exe.get(p), before[p]) for p in params)
        exe.step(feeds)  # the executable still steps
        out["stepped_after"] = True

    return (lambda: exe.step(feeds)), after


run, after = call()
sent = {}


def fire():
    time.sleep(delay)
    sent["at"] = time.perf_counter()
    os.kill(os.getpid(), signal.SIGINT)


threading.Thread(target=fire, daemon=True).start()
start = time.perf_counter()
try:
    run()
    out["interrupted"] = False
    time.sleep(2 * delay + 1)  # a signal after the call still reaches Python
except KeyboardInterrupt:
    out["interrupted"] = True
    out["latency"] = time.perf_counter() - sent.get("at", start)
    out["seconds"] = time.perf_counter() - start
    if after is not None:
        after()
print(json.dumps(out))

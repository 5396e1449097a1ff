"""Programs (cpp/exec/program.h): what each device runs, built from the cost model's transfer
enumeration. Bytes sent in the programs, and measured, equal the plan's prediction in total and per
device; programs print and serialise; profiled steps export a Chrome/Perfetto trace."""
import json

import numpy as np
import pytest

import tilewise as tw

MODELS = {
    "mlp": lambda: tw.models.mlp(layers=2, hidden=16, batch=8),
    "rnn": lambda: tw.models.rnn(layers=1, hidden=8, steps=3, batch=4, in_features=6),
}
ALGORITHMS = ["tofu", "kcuts", "spartan", "data_parallel", "equal_chop"]


def _feeds(g, rng):
    return {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in g.tensors
            if t.producer is None and t.role in ("input", "label", "constant")}


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_program_bytes_equal_the_plan_per_device(model, devices, algorithm):
    g = MODELS[model]()
    plan = tw.partition(g, devices=devices, algorithm=algorithm)
    exe = tw.compile(g, plan).initialize(seed=1)
    programs = [exe.program(d) for d in range(devices)]
    assert sum(p.bytes_sent for p in programs) == plan.comm_bytes
    assert sum(p.bytes_received for p in programs) == plan.comm_bytes
    exe.step(_feeds(g, np.random.default_rng(0)))
    stats = exe.stats
    assert sum(stats.predicted_bytes_sent_per_device) == plan.comm_bytes
    assert sum(stats.predicted_bytes_received_per_device) == plan.comm_bytes
    assert [p.bytes_sent for p in programs] == stats.predicted_bytes_sent_per_device
    assert [p.bytes_received for p in programs] == stats.predicted_bytes_received_per_device
    assert stats.bytes_sent_per_device == stats.predicted_bytes_sent_per_device
    assert stats.bytes_received_per_device == stats.predicted_bytes_received_per_device
    for row in stats.per_device:
        assert row["bytes_sent"] == row["predicted_bytes_sent"]
        assert row["step_seconds"] > 0
    assert "bytes sent per device" in stats.summary()
    # Ops on the interpreter fallback copy their regions to float64 outside the arena: counted.
    assert (max(stats.scratch_bytes_per_device) > 0) == (stats.interpreted_ops > 0)


def test_programs_print_and_serialise():
    g = MODELS["mlp"]()
    plan = tw.partition(g, devices=2, algorithm="kcuts")
    exe = tw.compile(g, plan)
    prog = exe.program(1)
    text = prog.text()
    assert text.startswith("program of device 1 of 2")
    assert len(text.splitlines()) == len(prog) + 1
    for kind in ("alloc", "compute", "free"):
        assert f"  {kind} " in text
    doc = json.loads(prog.to_json())
    assert doc["device"] == 1 and doc["streams"] == ["compute", "comm"]
    assert all(b["dtype"] == "float32" and b["bytes"] >= 0 for b in doc["buffers"])
    assert len(doc["instructions"]) == len(prog)
    kinds = {i["kind"] for i in doc["instructions"]}
    assert {"alloc", "free", "compute"} <= kinds
    sends = [i for i in doc["instructions"] if i["kind"] == "send"]
    assert sum(i["bytes"] for i in sends) == prog.bytes_sent
    for i in sends:
        assert i["stream"] == "comm" and 0 <= i["peer"] < 2 and i["tag"] >= 0
    assert sum(i["flops"] for i in doc["instructions"]) == pytest.approx(prog.flops)
    # Compute instructions carry the device's share of the FLOPs, as the plan counts them.
    computes = sum(i["flops"] for i in doc["instructions"] if i["kind"] == "compute")
    assert abs(computes - plan.flops_per_device[1]) <= len(g.ops)
    # Every send has its receive on the peer, same tag and box.
    other = json.loads(exe.program(0).to_json())
    recvs = {(i["tag"]): i for i in other["instructions"] if i["kind"] == "recv"}
    for i in sends:
        assert recvs[i["tag"]]["box"] == i["box"] and recvs[i["tag"]]["peer"] == 1
    # Streams wait on each other where they hand data over.
    assert {"record", "wait"} <= kinds
    with pytest.raises(ValueError, match="device must be one of"):
        exe.program(2)


def test_profiled_step_exports_a_trace_with_a_row_per_device_and_stream(tmp_path):
    g = MODELS["mlp"]()
    plan = tw.partition(g, devices=2, algorithm="tofu")
    exe = tw.compile(g, plan, profile=True).initialize()
    with pytest.raises(ValueError, match="no step"):
        exe.trace()
    exe.step(_feeds(g, np.random.default_rng(0)))
    path = tmp_path / "step.json"
    exe.trace(path)
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert processes == {0: "device 0", 1: "device 1"}
    assert set(threads.values()) == {"compute", "comm"} and len(threads) == 4
    spans = [e for e in events if e["ph"] == "X"]
    assert {(e["pid"], e["tid"]) for e in spans} == set(threads)  # every row has instructions
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert any(e["cat"] == "compute" and e["args"]["flops"] > 0 for e in spans)
    assert sum(e["args"]["bytes"] for e in spans if e["cat"] == "send") == plan.comm_bytes
    unprofiled = tw.compile(g, plan).initialize()
    unprofiled.step(_feeds(g, np.random.default_rng(0)))
    with pytest.raises(ValueError, match="profile=True"):
        unprofiled.trace()


def test_steps_reuse_the_workers_and_compile_checks_the_timeout():
    g = MODELS["mlp"]()
    plan = tw.partition(g, devices=4, algorithm="kcuts")
    exe = tw.compile(g, plan).initialize()
    rng = np.random.default_rng(0)
    losses = [float(exe.step(_feeds(g, rng))["loss"]) for _ in range(20)]
    assert all(np.isfinite(losses)) and exe.stats.steps == 20
    with pytest.raises(tw.ExecError, match="timeout"):
        tw.compile(g, plan, timeout=0)
    assert issubclass(tw.CommunicationError, RuntimeError)


def test_a_device_out_of_memory_mid_step_releases_the_others():
    """One device fails inside a step while its peers wait on receives from it: the step raises
    the device's OutOfMemory (not a CommunicationError of a peer) and nothing hangs. The step is
    undone when it failed before any in-place update (the next one fails the same way), else the
    executable refuses further steps."""
    g = tw.models.mlp(layers=3, hidden=64, batch=32)
    plan = tw.partition(g, devices=4, algorithm="kcuts")
    failed_in_step = 0
    for frac in (0.95, 0.9, 0.8, 0.7, 0.6, 0.5):
        try:
            exe = tw.compile(g, plan, memory_per_device=int(max(plan.memory_per_device) * frac),
                             timeout=30).initialize()
        except tw.OutOfMemory:
            break  # the resident tensors no longer fit
        with pytest.raises(tw.OutOfMemory) as err:
            exe.step(_feeds(g, np.random.default_rng(0)))
        assert 0 <= err.value.device < 4
        with pytest.raises((tw.OutOfMemory, tw.ExecError)) as again:
            exe.step()
        if isinstance(again.value, tw.OutOfMemory):  # undone: the arenas hold what they held before
            assert (again.value.bytes, again.value.in_use) == (err.value.bytes, err.value.in_use)
        else:
            assert "previous step" in str(again.value)
        failed_in_step += 1
    assert failed_in_step


def test_a_silent_peer_raises_a_communication_error_within_the_timeout():
    """Device 0 (the caller's thread) stalls in an opaque Python function (an op with no native
    kernel, so the interpreter calls it); device 1, waiting on a message from it, gives up at the
    deadline: tw.CommunicationError names the peer and the instruction."""
    import threading
    import time

    import tdl_ops

    stalled = []

    def slow_row(row):
        if threading.current_thread() is threading.main_thread() and not stalled:
            stalled.append(1)
            time.sleep(2.0)
        return np.asarray(row)

    Slow = tw.tdl.opaque("SlowRow", fn=slow_row, shape=lambda row: (row[0],))

    @tw.op(name="slow_rows")
    def slow_rows(x):
        return lambda b, d: Slow(x[b, :])[d]

    g = tw.Graph()
    x, w, t = g.input("x", (4, 8)), g.parameter("w", (8, 8)), g.label("t", (4, 8))
    loss = tdl_ops.mse_loss(tdl_ops.matmul(slow_rows(x), w), t)
    tw.optim.SGD(0.1).apply(g, tw.grad(g, loss))
    plan = tw.partition(g, devices=2, algorithm="data_parallel")
    exe = tw.compile(g, plan, timeout=0.5).initialize()
    assert any(" from 0 " in line for line in exe.program(1).text().splitlines() if "recv" in line)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((4, 8)).astype(np.float32), "t": rng.standard_normal((4, 8)).astype(np.float32)}
    start = time.perf_counter()
    with pytest.raises(tw.CommunicationError) as err:
        exe.step(feeds)
    assert time.perf_counter() - start < 2.0 + 5
    assert stalled and err.value.device == 1 and err.value.peer == 0
    assert "deadline" in str(err.value) and "recv" in str(err.value)

"""tw.swap_plan: a model's training graph as SwapAdvisor's problem, priced by the time model."""

import pytest

import tilewise as tw
from tilewise.plan.swapping import swap_problem


@pytest.fixture(scope="module")
def graph():
    return tw.models.mlp(layers=3, hidden=512, batch=32)


def test_the_graph_becomes_a_problem_priced_by_the_simulator(graph):
    p = swap_problem(graph, device_memory=10**9)
    names = {t.name for t in graph.tensors}
    assert set(p.tensors) <= names
    # updates are in place: an SGD op lists the parameter it updates as its output
    updated = {t.updates.name for t in graph.tensors if t.updates is not None}
    outputs = {out for _, _, outs, _ in p.ops for out in outs}
    assert updated and updated <= outputs
    assert all(p.tensors[name][1] == "parameter" for name in updated)
    # op seconds are the V100 profile's: the same as one simulated step's per-op times
    seconds = tw.plan.plan.Plan.one_device(graph).predict("swapadvisor").op_seconds
    assert {name: s for name, _, _, s in p.ops} == pytest.approx({op.name: seconds.get(op.name, 0.0)
                                                                  for op in graph.ops})
    assert p.host_link == (12e9, 20e9)


def test_swap_plan_fits_the_memory_and_is_ideal_when_everything_fits(graph):
    p = swap_problem(graph, device_memory=10**9)
    roomy = tw.swap_plan(graph, device_memory=4 * p.total_bytes, time_limit=5)
    assert not roomy.plan.swap_ins and roomy.fraction_of_ideal == pytest.approx(1.0)
    tight = tw.swap_plan(graph, device_memory=p.total_bytes // 3, time_limit=5, seed=1)
    assert tight.plan.peak_memory <= p.total_bytes // 3
    assert tight.plan.swap_ins and tight.fraction_of_ideal < 1.0
    with pytest.raises(tw.swap.InfeasibleError) as err:
        tw.swap_plan(graph, device_memory=p.least_memory // 2, time_limit=5)
    assert err.value.least_memory == p.least_memory


def test_a_cluster_without_a_host_link_is_refused(graph):
    no_host = tw.Cluster.preset("tensoropt").with_devices(1)
    no_host.host = None
    with pytest.raises(ValueError, match="no host link"):
        swap_problem(graph, no_host, device_memory=10**9)


def test_cli_swap(capsys, tmp_path):
    from tilewise.cli import main

    out = tmp_path / "swap.json"
    assert main(["swap", "mlp-2-256", "--batch", "16", "--memory", "0.0015", "--time-limit", "3",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "of ideal" in text and "ODSwap" in text and out.exists()
    assert main(["swap", "mlp-2-256", "--batch", "16", "--memory", "0.00001", "--time-limit", "3"]) == 2
    assert "least memory that would work" in capsys.readouterr().err
    assert main(["swap", "mlp-2-256", "--memory", "-1"]) == 2
    capsys.readouterr()
    assert main(["swap", "mlp-2-256", "--batch", "16", "--memory", "0.0015", "--time-limit", "2", "--run",
                 "--steps", "2"]) == 0
    text = capsys.readouterr().out
    assert "ms measured" in text and "simulated on this-machine" in text and "unswapped:" in text


def test_running_gradient_sums_let_an_rnn_swap_in_less_memory():
    # An RNN's weight gradient summed over its steps by one op holds every step's part at once; added
    # as the parts arrive (MXNet, PyTorch) it holds one: the least memory must drop.
    kw = dict(batch=4, steps=6, in_features=64)
    least = {acc: swap_problem(tw.models.get("rnn-2-256", accumulate=acc, **kw), device_memory=10**9).least_memory
             for acc in ("sum", "running")}
    assert least["running"] < least["sum"] * 0.6

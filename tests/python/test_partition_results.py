"""The papers' qualitative partitioning results, reproduced with our planners and cost model."""
import collections

import pytest

import tdl_ops as T
import tilewise as tw
from tilewise import _core


@pytest.fixture(scope="module")
def wresnet_152_10():
    return tw.models.get("wresnet-152-10", batch=8)


@pytest.fixture(scope="module")
def wresnet_tofu(wresnet_152_10):
    return _core.partition(wresnet_152_10._g, 8, "tofu")


def test_data_parallel_for_large_batch_weight_partitioning_for_small_batch():
    """SoyBean §6.2: large batch and small weights: data parallelism is the best tiling (kcuts, which
    may replicate, finds a plan as cheap as data parallelism); small batch and large weights:
    partitioning weights wins by a wide margin and no weight is replicated."""
    big_batch = tw.models.mlp(layers=4, hidden=256, batch=8192)
    small_batch = tw.models.mlp(layers=4, hidden=4096, batch=16)
    for k in (2, 8):
        kcuts = _core.partition(big_batch._g, k, "kcuts")
        assert kcuts.comm_bytes == _core.partition(big_batch._g, k, "data_parallel").comm_bytes
        kcuts = _core.partition(small_batch._g, k, "kcuts")
        assert kcuts.comm_bytes * 50 < _core.partition(small_batch._g, k, "data_parallel").comm_bytes
        for w in small_batch.tensors:
            if w.role == "parameter" and w.ndim == 2:
                assert -1 not in kcuts.tilings[w.id], w.name


def _fetch_shares(graph, plan):
    """Per ResNet stage: bytes fetched for weights / bytes fetched in all, over the conv ops."""
    cost = _core.evaluate_plan(graph._g, plan)
    fetched = collections.defaultdict(lambda: [0, 0])
    for op in graph.ops:
        if op.type not in ("conv2d", "conv2d_backward_data", "conv2d_backward_filter"):
            continue
        stage = (op if op.type == "conv2d" else op.forward_op).name.split(".")[0]
        for slot, t in enumerate(op.inputs):
            weight = t.role == "parameter" or (t.grad_of is not None and t.grad_of.role == "parameter")
            fetched[stage][0 if weight else 1] += cost.per_op[op.id][0][slot]
    return {s: w / (w + a) for s, (w, a) in fetched.items() if w + a}


def test_wresnet_lower_layers_fetch_weights_upper_layers_fetch_activations(wresnet_152_10, wresnet_tofu):
    """Tofu §7.4 / Fig. 11: on WResNet-152-10 at 8 workers, the lower residual stages (large feature
    maps, small weights) fetch weights; the upper ones (small maps, large weights) fetch activations."""
    share = _fetch_shares(wresnet_152_10, wresnet_tofu)
    stages = ["layer1", "layer2", "layer3", "layer4"]
    assert [share[s] for s in stages] == sorted((share[s] for s in stages), reverse=True)
    assert share["layer1"] > 0.3
    assert share["layer4"] < 0.05


def test_icml18_without_output_reduction_is_worse_than_tofu(wresnet_152_10, wresnet_tofu):
    """Tofu §7.3: ICML18 (no output reduction) is worse than Tofu on RNN-4-8K and WResNet-152-10."""
    rnn = tw.models.get("rnn-4-8k", batch=512)
    assert _core.partition(rnn._g, 8, "icml18").comm_bytes > _core.partition(rnn._g, 8, "tofu").comm_bytes
    assert _core.partition(wresnet_152_10._g, 8, "icml18").comm_bytes > wresnet_tofu.comm_bytes


def test_tofu_beats_the_heuristics_on_wresnet(wresnet_152_10, wresnet_tofu):
    """Tofu §7.3: AllRow-Greedy, Spartan and EqualChop move more data than Tofu."""
    tofu = wresnet_tofu.comm_bytes
    for algorithm in ("allrow_greedy", "spartan", "equal_chop"):
        assert _core.partition(wresnet_152_10._g, 8, algorithm).comm_bytes > tofu, algorithm


def test_spartan_greedy_is_sub_optimal_on_its_fig_3_3_program():
    """Spartan thesis Fig. 3.3: C = A + B, D = A^T + B^T, E = C + D. The greedy decides the most
    connected groups first, tiles C and D alike (row-wise, free for each) and pays for the
    conflicting views; the optimum tiles the transposes column-wise."""
    g = tw.Graph("fig3.3")
    a, b = g.input("A", (16, 16)), g.input("B", (16, 16))
    T.add(T.add(a, b), T.add(T.transpose(a), T.transpose(b)))
    for k in (2, 4):
        best = _core.partition(g._g, k, "brute_force")
        assert _core.partition(g._g, k, "tofu").comm_bytes == best.comm_bytes
        assert _core.partition(g._g, k, "spartan").comm_bytes > best.comm_bytes
    transposes = [t for t in g.tensors if t.name.startswith("transpose")]
    best = _core.partition(g._g, 2, "brute_force")
    assert all(best.tilings[t.id] == [1] for t in transposes)


def test_non_linear_graphs_are_searched_exactly():
    """NASNet's coarsened graph is not linear (cells read the two previous cells): the step search
    stays exact (variable elimination), paying in table size, and its figure is the recount's."""
    g = tw.models.nasnet(cells=2, batch=2)
    assert not tw.coarsen(g).is_linear
    plan = tw.partition(g, devices=4, algorithm="tofu")
    assert plan.largest_table > 0
    assert tw.evaluate(g, plan).comm_bytes == plan.comm_bytes

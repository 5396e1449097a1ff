"""Strategies as data, JSON and HTML (Jupyter)."""

import json

import tilewise as tw


@tw.op
def matmul(a, b):
    return lambda i, j: tw.Sum(lambda k: a[i, k] * b[k, j])


def test_to_dict_round_trips_through_json():
    s = matmul.strategies(parts=2, a=(4, 6), b=(6, 8))[2]
    d = json.loads(s.to_json())
    assert d == {
        "kind": "reduce", "dim": "k", "reducer": "Sum",
        "input_regions": {"a": [[[0, 3], [0, 2]], [[0, 3], [3, 5]]], "b": [[[0, 2], [0, 7]], [[3, 5], [0, 7]]]},
        "output_regions": [[[0, 3], [0, 7]], [[0, 3], [0, 7]]],
    }


def test_html_has_one_row_per_worker():
    s = matmul.strategies(parts=3, a=(6, 6), b=(6, 8))[0]
    html = s._repr_html_()
    assert html.count("<tr>") == 1 + 3
    assert "0..1, 0..5" in html


def test_describe_and_repr():
    s = matmul.symbolic_strategies()[0]
    assert repr(s) == "Strategy(output:i, parts=2)"
    assert "worker 1: out[[X_i/2, X_i - 1], [0, X_j - 1]]" in s.describe()


def test_ops_hash_by_identity():
    assert len({matmul, matmul.with_attrs()}) == 2


def test_draw_shades_each_worker(tmp_path):
    matplotlib = __import__("pytest").importorskip("matplotlib")
    matplotlib.use("Agg")
    s = matmul.strategies(parts=3, a=(6, 6), b=(6, 8))[0]
    axes = s.draw()
    assert len(axes) == 3  # a, b, output
    # Outline plus one shaded rectangle per worker on each tensor.
    assert [len(a.patches) for a in axes] == [4, 4, 4]
    axes[0].figure.savefig(tmp_path / "strategy.png")
    assert (tmp_path / "strategy.png").stat().st_size > 0


def test_symbolic_strategies_cannot_be_drawn():
    with __import__("pytest").raises(ValueError, match="only concrete strategies"):
        matmul.symbolic_strategies()[0].draw()

"""`tilewise ops` and `tilewise analyze`."""

import json

import pytest

from tilewise.cli import main


def test_ops_json_covers_the_library(capsys):
    assert main(["ops", "--json", "--parts", "4"]) == 0
    report = json.loads(capsys.readouterr().out)
    ops = {r["op"]: r for r in report["ops"]}
    assert len(ops) >= 50
    assert report["parts"] == 4
    assert ops["matmul"]["strategies"] == ["i", "j", "k(Sum)", "replicate"]
    assert ops["batch_cholesky"]["strategies"] == ["b", "replicate"]
    assert ops["relu"]["elementwise"] and not ops["matmul"]["elementwise"]


def test_ops_table_and_family_filter(capsys):
    assert main(["ops", "--family", "conv"]) == 0
    out = capsys.readouterr().out
    assert "conv2d" in out and "relu" not in out
    assert "operators analysed in" in out


def test_analyze_prints_regions(capsys):
    args = ["analyze", "conv1d", "--parts", "2", "--shape", "data=8,16,34", "--shape", "filters=32,16,3"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Strategy(reduce:ci, parts=2)" in out
    assert "worker 1: out[4..7, 0..31, 0..31] <- data[4..7, 0..15, 0..33]" in out


def test_analyze_symbolic(capsys):
    assert main(["analyze", "matmul", "--symbolic"]) == 0
    assert "[X_i/2, X_i - 1]" in capsys.readouterr().out


def test_analyze_unknown_op_suggests():
    with pytest.raises(SystemExit, match="no operator 'conv'; did you mean conv1d"):
        main(["analyze", "conv"])


def test_analyze_bad_shape_is_a_message_not_a_traceback(capsys):
    assert main(["analyze", "conv2d", "--shape", "data=2,3,9"]) == 2
    assert "input 'data' was given a shape of rank 3" in capsys.readouterr().err


def test_graph_command_builds_summarises_and_writes(tmp_path, capsys):
    out = tmp_path / "g.json"
    dot = tmp_path / "g.dot"
    assert main(["graph", "mlp-2-32", "--batch", "4", "--json", str(out), "--coarse-dot", str(dot)]) == 0
    text = capsys.readouterr().out
    assert "update:" in text and "linear: yes" in text
    import tilewise as tw

    g = tw.Graph.load(out)
    assert g.to_json() == out.read_text()
    assert dot.read_text().startswith("graph") or dot.read_text().startswith("digraph")


def test_graph_command_unknown_model(capsys):
    assert main(["graph", "resnot-50"]) == 2
    assert "unknown model name 'resnot-50'" in capsys.readouterr().err

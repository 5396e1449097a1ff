"""Writes the seed corpus of the file fuzzers (tests/python/test_fuzz_files.py): small graphs and
plans that the project itself writes; and the op attributes those graphs and the zoo's models
carry, as seeds of the C++ harness tests/fuzz/cpp/op_attrs_fuzzer.cpp (cpp/corpus/op_attrs/).
Run from the repository root after a format change:

    python tests/fuzz/make_corpus.py

Each graph is ``graph_<name>.json``; each plan ``plan_<graph>_<algorithm>_<devices>.json`` names
the graph it belongs to. The files are deterministic (search times are zeroed), so re-running
the script changes nothing unless the writers did.
"""

from __future__ import annotations

import json
import pathlib

import tdl_ops
import tilewise as tw

HERE = pathlib.Path(__file__).resolve().parent

#: (file stem, builder): small enough that the fuzzers load thousands of variants a minute.
GRAPHS = {
    "mlp_sgd": lambda: tw.models.get("mlp-2-8", batch=4, optimizer="sgd"),
    "mlp_adam": lambda: tw.models.get("mlp-1-6", batch=3, optimizer="adam"),
    "mlp_forward": lambda: tw.models.get("mlp-2-4", batch=2, train=False),
}


def _conv_graph() -> tw.Graph:
    """A convolution, a pooling window and a declared output shape (conv padding): ops whose
    shapes the loader checks through their out_shape rules."""
    g = tw.Graph("conv")
    x = g.input("x", (2, 3, 8, 8))
    w = g.parameter("w", (4, 3, 3, 3))
    y = tdl_ops.relu(tdl_ops.conv2d(x, w, padding=1))
    z = tdl_ops.max_pool2d(y, kernel=2, stride=2)
    g.outputs["output"] = z
    return g


GRAPHS["conv"] = _conv_graph

#: (graph stem, algorithm, devices)
PLANS = [("mlp_sgd", "tofu", 4), ("mlp_sgd", "spartan", 2), ("mlp_adam", "kcuts", 3), ("conv", "tofu", 2)]


#: Zoo models whose op attributes seed the attribute parser's fuzzer (every kind of value it meets).
ATTR_MODELS = ["transformer-1-16-2", "wresnet-50-1", "rnn-1-16", "mlp-2-8"]


def write_attr_seeds(graphs) -> int:
    """Every distinct attribute object of the corpus graphs and ATTR_MODELS, one file each."""
    seen = set()
    for g in [*graphs, *(tw.models.get(name, batch=2) for name in ATTR_MODELS)]:
        for op in g.ops:
            seen.add(json.dumps(op.attrs))
    folder = HERE / "cpp" / "corpus" / "op_attrs"
    folder.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(sorted(seen)):
        (folder / f"seed_{i:03d}.json").write_text(text)
    return len(seen)


def main() -> None:
    graphs = {}
    for stem, build in GRAPHS.items():
        g = build()
        g.name = stem
        graphs[stem] = g
        (HERE / f"graph_{stem}.json").write_text(g.to_json())
    for stem, algorithm, devices in PLANS:
        plan = tw.partition(graphs[stem], devices, algorithm)
        data = plan.to_dict()
        data["search_seconds"] = 0.0  # deterministic files
        (HERE / f"plan_{stem}_{algorithm}_{devices}.json").write_text(json.dumps(data, indent=1) + "\n")
    attrs = write_attr_seeds(graphs.values())
    print(f"wrote {len(GRAPHS)} graphs, {len(PLANS)} plans and {attrs} op attribute seeds to {HERE}")


if __name__ == "__main__":
    main()

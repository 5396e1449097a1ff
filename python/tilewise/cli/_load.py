"""What the subcommands share: a model is a zoo name or a graph file."""

from __future__ import annotations

import pathlib


def load_model(model: str, **kwargs):
    """The graph of ``model``: a saved graph (a path ending in .json, ``Graph.load``: validated on
    reading) or a zoo name with ``kwargs`` (batch, image, optimizer)."""
    from ..graph.graph import Graph
    from ..models import get

    if model.endswith(".json"):
        if not pathlib.Path(model).is_file():
            raise ValueError(f"graph file {model!r} does not exist")
        return Graph.load(model)
    return get(model, **{k: v for k, v in kwargs.items() if v is not None})

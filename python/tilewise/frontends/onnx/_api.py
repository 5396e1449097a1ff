"""The ``from_onnx`` entry point and ``OnnxImport``, what the import recorded (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..._core import GraphError
from ...graph.graph import Graph


@dataclass
class OnnxImport:
    """What ``from_onnx`` recorded about the model (``graph.onnx_import``)."""

    model: str  # the ONNX graph's name
    opset: int  # the default-domain opset it imports
    inputs: list = field(default_factory=list)  # graph input names (= the ONNX input names), in order
    outputs: dict = field(default_factory=dict)  # ONNX output name -> graph tensor name
    values: dict = field(default_factory=dict, repr=False)  # parameter / constant name -> its value (float32)
    tensors: dict = field(default_factory=dict, repr=False)  # ONNX value name -> graph tensor name (where one exists)
    integer_inputs: dict = field(default_factory=dict)  # input name -> int64 / int32 / bool (ids, masks)

    def state_dict(self) -> dict:
        """Parameters and constants by name, for ``exe.load_state_dict``."""
        return {k: v.copy() for k, v in self.values.items()}

    def feeds(self, *inputs, dtype=np.float32, **named) -> dict:
        """Inputs (positionally in the model's order, or by name; or one dict), parameters and
        constants as NumPy arrays, ready for ``tw.run_reference`` or ``exe.step``."""
        if len(inputs) == 1 and isinstance(inputs[0], dict):
            named, inputs = {**inputs[0], **named}, ()
        values = list(inputs)
        feeds = {}
        for name in self.inputs:
            kind = self.integer_inputs.get(name, dtype)  # ids and masks keep their types
            if name in named:
                feeds[name] = np.asarray(named[name], dtype=kind)
            elif values:
                feeds[name] = np.asarray(values.pop(0), dtype=kind)
            else:
                raise GraphError(f"from_onnx feeds: no value for input '{name}' (inputs: {', '.join(self.inputs)})")
        for name, v in self.values.items():
            feeds[name] = v.astype(dtype)
        return feeds


def from_onnx(model_or_path, *, batch: int | None = None, dims: dict | None = None,
              name: str | None = None) -> Graph:
    """Import an ONNX model (an ``onnx.ModelProto``, a path, or its bytes) as a ``tw.Graph``.

    The model is checked by ``onnx.checker``; its default-domain opset must be 7 or newer. Graph
    inputs become graph inputs (float32, static shapes: ``dims`` gives the extent of symbolic axes
    by name, ``{"seq": 128}``, and ``batch`` that of any other symbolic first axis),
    float initializers become parameters (BatchNormalization's statistics: constants), integer
    initializers, ``Constant`` nodes and ``Shape`` chains are read at import (shapes, axes, indices).
    Each node is mapped onto tdl_ops by the rule table (``frontends.onnx.TABLE``); ``graph.outputs``
    maps the ONNX output names to tensors, and ``graph.onnx_import`` (an ``OnnxImport``) holds the
    initializers' values (``state_dict()``, ``feeds(...)``).

    Raises ``tw.GraphError`` for a file that is not a valid model, an unsupported opset, inputs or
    outputs that are not float32 or have symbolic axes, and, in one error, every node that cannot
    be converted (operator type, node name, reason: ``err.unsupported`` lists the triples;
    ``err.needs_values`` the graph inputs whose values a rule needed, e.g. Resize's scales).

        >>> g = tw.from_onnx("mlp.onnx", batch=32)                      # doctest: +SKIP
        >>> exe = tw.compile(g, tw.partition(g, devices=2))             # doctest: +SKIP
        >>> exe.load_state_dict(g.onnx_import.state_dict())             # doctest: +SKIP
        >>> exe.step({"input": x})["output"]                            # doctest: +SKIP
    """
    from . import _convert, _load, _table

    model = _load.load(model_or_path)
    opset = _load.opset(model)
    initializers = {t.name: t for t in model.graph.initializer}
    input_shapes = _load.check_types(model, initializers, batch, dims)
    inferred = _load.infer_shapes(model, input_shapes)
    graph = Graph(name or model.graph.name or "onnx")
    info = OnnxImport(model.graph.name, opset)
    conv = _convert.Converter(model, graph, _table.RULES, opset, inferred, info)
    outputs = conv.run(input_shapes)
    err = conv.error(model.graph.name or "the model")
    if err is not None:
        raise err
    graph.outputs = dict(outputs)
    info.outputs = {k: t.name for k, t in outputs.items()}
    graph.onnx_import = info
    return graph

"""``tw.from_onnx``: an ONNX model as a tilewise graph, and an ONNX backend over the runtime.

    import tilewise as tw
    g = tw.from_onnx("model.onnx", batch=8)          # or an onnx.ModelProto, or its bytes
    exe = tw.compile(g, tw.partition(g, devices=2))
    exe.load_state_dict(g.onnx_import.state_dict())  # the initializers
    exe.step({"input": x})                           # {output name: array}

The model is read and validated by ``_load`` (onnx.checker, opset, float32 inputs and outputs,
static shapes), then each node is mapped onto TDL ops by the rule table of ``_rules*``
(``TABLE`` lists it; docs/FROM_ONNX.md); values known at import (initializers used as shapes or
axes, ``Constant``, ``Shape`` chains) are folded by onnx's reference evaluator (``_convert``).
Every node that cannot be converted is reported in one ``tw.GraphError``. ``backend`` is an
``onnx.backend.base.Backend`` running models through ``tw.compile`` (the ONNX node tests use it).

The onnx package is imported only when a model is imported: ``import tilewise`` does not need it.
"""

from ._api import OnnxImport, from_onnx


def __getattr__(name):
    # The rules import tdl_ops, which imports this package while the library is only half loaded
    # (tdl_ops -> tilewise -> frontends): the table is loaded on first use, as from_onnx loads it.
    if name == "TABLE":
        from ._table import TABLE

        return TABLE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["OnnxImport", "TABLE", "from_onnx"]

"""An ONNX backend (``onnx.backend.base.Backend``) over tilewise's runtime, so that ONNX's own
tests run against our kernels:

    from tilewise.frontends.onnx.backend import TilewiseBackend
    rep = TilewiseBackend.prepare(onnx.load("model.onnx"))
    outputs = rep.run([x])                     # a tuple, in the model's output order

``rep.run`` imports the model with ``tw.from_onnx``, plans it on one device, or on
``prepare(model, devices=k)`` devices (``tw.partition``),
lowers it with ``tw.compile`` (native float32 kernels where an op has one, the interpreter
otherwise: ``rep.stats`` says which), loads the initializers and runs one step.

tilewise graphs are static: shapes, axes and scalar operands are attributes of their ops. ONNX
inputs that are integers or booleans (shapes, axes, indices, conditions) or scalars (Clip's
bounds, Pow's exponent) are therefore bound to their values when ``run`` is called, as if they
were initializers, and so are float inputs that a rule needs the values of (``err.needs_values``
of the first attempt: Resize's scales and roi); the graph is built once per distinct bound
values. Other float tensors stay inputs. This module imports onnx (unlike the rest of the package).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from ..._core import GraphError
from ...exec.executable import compile as compile_graph
from ...plan.search import partition
from ._api import from_onnx


def _bound(vi, value) -> bool:
    """Whether an input is read at import: integer / boolean values, and scalars."""
    value = np.asarray(value)
    return value.dtype.kind in "iub" or value.ndim == 0 or vi.type.tensor_type.elem_type != onnx.TensorProto.FLOAT


class TilewiseRep(BackendRep):
    """A model prepared for tilewise: built and compiled on first ``run`` (per bound values)."""

    def __init__(self, model, devices: int = 1):
        self.model = model
        self.devices = devices
        inits = {t.name for t in model.graph.initializer}
        self.inputs = [vi for vi in model.graph.input if vi.name not in inits]
        self._built: dict = {}
        self._needed: set = set()  # float inputs found to be needed at import
        self.stats = None  # the last run's tw.ExecStats (native_ops, interpreted_ops)

    def _build(self, bound: dict):
        key = tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in sorted(bound.items()))
        if key not in self._built:
            m = onnx.ModelProto()
            m.CopyFrom(self.model)
            keep = [vi for vi in m.graph.input if vi.name not in bound]
            del m.graph.input[:]
            m.graph.input.extend(keep)
            for name, value in bound.items():
                m.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
            if m.ir_version < 4:  # initializers outside the inputs need IR version 4
                m.ir_version = 4
            graph = from_onnx(m)
            exe = compile_graph(graph, partition(graph, devices=self.devices))
            exe.load_state_dict(graph.onnx_import.state_dict())
            self._built[key] = (graph, exe)
        return self._built[key]

    def _bind_and_build(self, named: dict, bound: dict):
        """Build with ``bound`` inputs as initializers; inputs a rule needs the value of (Resize's
        scales, a float shape-like operand) are bound too, once, and the build retried."""
        bound = {**bound, **{k: np.asarray(named[k]) for k in self._needed if k in named}}
        try:
            return self._build(bound), bound
        except GraphError as e:
            more = [k for k in getattr(e, "needs_values", ()) if k in named and k not in bound]
            if not more:
                raise
        self._needed.update(more)
        bound = {**bound, **{k: np.asarray(named[k]) for k in more}}
        return self._build(bound), bound

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            named = dict(inputs)
        else:
            inputs = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            named = {vi.name: x for vi, x in zip(self.inputs, inputs, strict=False)}
        bound = {vi.name: np.asarray(named[vi.name]) for vi in self.inputs
                 if vi.name in named and _bound(vi, named[vi.name])}
        (graph, exe), bound = self._bind_and_build(named, bound)
        feeds = {k: np.asarray(v, dtype=np.float32) for k, v in named.items() if k not in bound}
        results = exe.step(feeds)
        self.stats = exe.stats
        out = []
        for vi in self.model.graph.output:
            dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type or onnx.TensorProto.FLOAT)
            out.append(np.asarray(results[vi.name]).astype(dtype))
        return tuple(out)


class TilewiseBackend(Backend):
    """``onnx.backend.base.Backend`` over ``tw.from_onnx`` + ``tw.compile`` (CPU devices)."""

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return device == "CPU"

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> TilewiseRep:
        super().prepare(model, device, **kwargs)
        return TilewiseRep(model, devices=int(kwargs.get("devices", 1)))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = TilewiseBackend.prepare
run_model = TilewiseBackend.run_model
supports_device = TilewiseBackend.supports_device

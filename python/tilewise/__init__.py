"""tilewise: split a deep-learning model's tensors and operators across devices, and run it.

    import tilewise as tw

    @tw.op
    def conv1d(data, filters):
        return lambda b, co, x: tw.Sum(lambda ci, dx: data[b, ci, x + dx] * filters[ci, co, dx])

    conv1d.strategies(parts=2, data=(8, 16, 34), filters=(16, 32, 3))
"""

from ._build_info import preload_blas as _preload_blas

_preload_blas()

from . import _core, optim  # noqa: E402,F401
from ._autodiff import grad  # noqa: E402
from ._build_info import build_info  # noqa: E402
from ._coarsen import CoarseGraph, coarsen  # noqa: E402
from ._core import ExecError, GraphError, ShapeError, TDLError  # noqa: E402
from ._from_torch._api import from_torch  # noqa: E402,F401
from ._graph import GOp, Graph, GTensor  # noqa: E402
from ._partition import Cut, Plan, PlanCost, PlanError, SearchTimeout, SearchTooLarge, evaluate, partition  # noqa: E402
from ._reference import run_reference  # noqa: E402
from ._runtime import ExecStats, Executable, OutOfMemory, compile  # noqa: E402, A004
from ._tdl_op import Op, Strategy, op  # noqa: E402
from ._tdl_trace import (  # noqa: E402
    Max,
    Min,
    Prod,
    Sum,
    abs,
    compute,
    erf,
    exp,
    index_value,
    log,
    max,
    min,
    opaque,
    sigmoid,
    sqrt,
    tanh,
    where,
)
from ._trace import placeholder, trace  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "compile",
    "Executable",
    "ExecError",
    "ExecStats",
    "OutOfMemory",
    "CoarseGraph", "Cut", "GOp", "GTensor", "Graph", "GraphError", "Max", "Min", "Op", "Plan", "PlanCost",
    "PlanError", "Prod", "SearchTimeout", "SearchTooLarge", "ShapeError", "Strategy", "Sum", "TDLError", "abs",
    "build_info", "coarsen", "compute", "erf", "evaluate", "exp", "from_torch", "grad", "index_value", "log", "max",
    "min", "models", "nn", "op", "opaque", "ops", "optim", "partition", "placeholder", "run_reference", "sigmoid",
    "sqrt", "tanh", "trace", "where",
]


def __getattr__(name):
    # The operator library is imported on first use: it imports tilewise itself.
    if name == "ops":
        import tdl_ops

        return tdl_ops
    # nn and models build graphs from tdl_ops ops: imported on first use for the same reason.
    if name in ("nn", "models"):
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tilewise' has no attribute {name!r}")

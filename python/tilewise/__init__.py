"""tilewise: split a deep-learning model's tensors and operators across devices, and run it.

    import tilewise as tw

    @tw.op
    def conv1d(data, filters):
        return lambda b, co, x: tw.Sum(lambda ci, dx: data[b, ci, x + dx] * filters[ci, co, dx])

    conv1d.strategies(parts=2, data=(8, 16, 34), filters=(16, 32, 3))

This module is the façade: it re-exports the public names of the stages (subpackages ``sim``, ``swap``,
``tdl``, ``graph``, ``plan``, ``exec``, ``nn``, ``models``, ``frontends``, and ``optim``) and the operator
library ``tdl_ops`` as ``tw.ops``. Nothing inside the package imports it (docs/ARCHITECTURE.md).
"""

from ._build_info import preload_blas as _preload_blas

_preload_blas()

import tdl_ops as ops  # noqa: E402 - the operator library; importing it fills the op registry

from . import (  # noqa: E402,F401
    _core,
    models,
    nn,
    optim,
    swap,
    tdl,
)
from ._build_info import build_info  # noqa: E402
from ._core import (  # noqa: E402
    CudaError,
    ExecError,
    GraphError,
    NumericalError,
    PlanError,
    SearchTimeout,
    SearchTooLarge,
    ShapeError,
    TDLError,
)
from .calibration_gpu import measure_ops  # noqa: E402 - also registers "this-machine" and "this-gpu"
from .exec.checkpoint import CheckpointError, load_checkpoint  # noqa: E402
from .exec.executable import CommunicationError, ExecStats, Executable, OutOfMemory, Program, compile  # noqa: E402,F401
from .frontends.onnx import from_onnx  # noqa: E402
from .frontends.torch import from_torch  # noqa: E402
from .graph.autodiff import grad  # noqa: E402
from .graph.coarsen import CoarseGraph, coarsen  # noqa: E402
from .graph.graph import GOp, Graph, GTensor  # noqa: E402
from .graph.reference import run_reference  # noqa: E402
from .graph.trace import placeholder, trace  # noqa: E402
from .plan import pareto  # noqa: E402
from .plan.frontier import Frontier, frontier, min_devices, profile_parallelism  # noqa: E402
from .plan.plan import Cut, Plan, PlanCost, evaluate  # noqa: E402
from .plan.search import partition  # noqa: E402
from .plan.swapping import swap_plan  # noqa: E402
from .sim import Cluster, DeviceProfile, Link, OpTimes, Prediction, SimulationError, Timeline, simulate  # noqa: E402
from .tdl import (  # noqa: E402,F401 - abs, max, min: attributes, not in __all__
    Max,
    Min,
    Op,
    Prod,
    Strategy,
    Sum,
    abs,
    compute,
    erf,
    exp,
    index_value,
    log,
    max,
    min,
    op,
    opaque,
    sigmoid,
    sqrt,
    tanh,
    where,
)

__version__ = "0.1.0"

# ``max``, ``min``, ``abs`` (TDL's) and ``compile`` are attributes (``tw.max``, ``tw.compile``) but not in
# ``__all__``: ``from tilewise import *`` must not shadow the builtins.
__all__ = [
    "CheckpointError",
    "CommunicationError",
    "Executable",
    "CudaError",
    "ExecError",
    "NumericalError",
    "ExecStats",
    "OutOfMemory",
    "Program",
    "Cluster", "DeviceProfile", "Link", "OpTimes", "Prediction",
    "CoarseGraph", "Cut", "Frontier", "GOp", "GTensor", "Graph", "GraphError", "Max", "Min", "Op", "Plan",
    "PlanCost", "PlanError", "Prod", "SearchTimeout", "SearchTooLarge", "ShapeError", "SimulationError", "Strategy",
    "Sum", "TDLError", "Timeline",
    "build_info", "coarsen", "compute", "erf", "evaluate", "exp", "from_onnx", "from_torch", "frontier", "grad",
    "index_value", "load_checkpoint", "log", "measure_ops", "min_devices", "models", "nn", "op", "opaque", "ops",
    "optim", "pareto", "partition", "placeholder", "profile_parallelism", "run_reference", "sigmoid", "simulate",
    "sqrt", "swap", "swap_plan", "tanh", "tdl", "trace", "where",
]

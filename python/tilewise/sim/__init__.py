"""Time: clusters (devices, their kernel rates, the links between them) and the discrete-event
simulator that times per-device programs on them (TensorOpt §2.1/§3.2, SwapAdvisor §4.2-4.3).
The one time model of tilewise: planners, frontiers and swap search all ask it.

Modules: ``cluster`` and ``presets`` (``tw.Cluster``), ``simulate`` and ``timeline``
(``tw.simulate``, ``tw.Timeline``: tasks on streams), ``prediction`` (``tw.Prediction``: a plan's
programs simulated), ``op_times`` (``tw.OpTimes``: ops measured on one device).
"""

from . import presets  # noqa: F401 - registers the papers' clusters with Cluster.preset
from .cluster import Cluster, DeviceProfile, Link, register_this_machine
from .op_times import OpTimes
from .prediction import Prediction
from .simulate import SimulationError, SimulationTypeError, simulate
from .timeline import Timeline

__all__ = ["Cluster", "DeviceProfile", "Link", "OpTimes", "Prediction", "SimulationError", "SimulationTypeError",
           "Timeline", "register_this_machine", "simulate"]

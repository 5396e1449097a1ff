"""Time: clusters (devices, their kernel rates, the links between them) and the discrete-event
simulator that times per-device programs on them (TensorOpt §2.1/§3.2, SwapAdvisor §4.2-4.3).
The one time model of tilewise: planners, frontiers and swap search all ask it."""

from .simulate import SimulationError, SimulationTypeError, simulate
from .timeline import Timeline

__all__ = ["SimulationError", "SimulationTypeError", "Timeline", "simulate"]

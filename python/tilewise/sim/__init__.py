"""Time: clusters (devices, their kernel rates, the links between them) and the discrete-event
simulator that times per-device programs on them (TensorOpt §2.1/§3.2, SwapAdvisor §4.2-4.3).
The one time model of tilewise: planners, frontiers and swap search all ask it."""

from . import presets  # noqa: F401 - registers the papers' clusters with Cluster.preset
from .cluster import Cluster, DeviceProfile, Link, register_this_machine

__all__ = ["Cluster", "DeviceProfile", "Link", "register_this_machine"]

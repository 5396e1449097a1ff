"""The planning stage: partition plans of graphs over devices.

Modules: ``tiling`` (device coordinates, tiles, ``Cut``, finding tensors and ops by name),
``plan`` (``Plan``, ``PlanCost``, ``tw.evaluate``, JSON), ``search`` (``tw.partition``: the C++
search driver and its arguments), ``plot`` (pictures of tilings, Tofu Fig. 11), ``pareto``
(``tw.pareto``: cost frontiers of plain decision problems, TensorOpt §3). The public names
are the façade's: ``tw.partition``, ``tw.Plan`` ...
"""

"""The execution stage: plans lowered onto devices and run.

Modules: ``executable`` (``tw.compile``, ``Executable``, ``ExecStats``), ``calibration`` (this
machine's GEMM rate and copy bandwidth for the predicted step time). The runtime takes a plan; it
never searches for one. The public names are the façade's: ``tw.compile``, ``tw.Executable`` ...
"""

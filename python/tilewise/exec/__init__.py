"""The execution stage: plans lowered onto devices and run.

Modules: ``executable`` (``tw.compile``, ``Executable``, ``ExecStats``), ``swapped`` (swap plans
run on one CPU device in the plan's memory pool: ``tw.compile(graph, swap_plan)``), ``mpi`` (the MPI
executable). Predictions of its steps come from the simulator (``tilewise.sim``) on the cluster
"this-machine" (``tilewise.calibration``). The runtime takes a plan; it never searches for one.
The public names are the façade's: ``tw.compile``, ``tw.Executable`` ...
"""

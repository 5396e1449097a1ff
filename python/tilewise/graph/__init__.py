"""The graph stage: dataflow graphs of TDL ops, built, differentiated, traced, run and coarsened.

Modules (each above the ones it imports): ``graph`` (``Graph``, ``GTensor``, ``GOp``, JSON),
``replay`` (scratch graphs and copying ops between graphs), ``autodiff`` (``tw.grad``), ``trace``
(``tw.trace``, ``tw.placeholder``), ``reference`` (``tw.run_reference``), ``coarsen``
(``tw.coarsen``, Tofu §5.1). Library ops (gradient sums, copies) are reached by name through
``tilewise.tdl.registry``, never by importing ``tdl_ops``. The public names are the façade's:
``tw.Graph``, ``tw.grad`` ...
"""

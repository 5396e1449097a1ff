"""The façade's public names: every one documented in ``__all__`` resolves, the TDL math functions
and ``compile`` stay attributes without shadowing builtins in ``from tilewise import *``."""

import builtins

import tdl_ops
import tilewise as tw

# tw.__all__ before the package was split into stages (issue 10), less the names that shadowed
# builtins; each must stay an attribute.
NAMES = [
    "compile", "Executable", "ExecStats", "OutOfMemory", "CoarseGraph", "Cut", "GOp", "GTensor", "Graph",
    "GraphError", "Max", "Min", "Op", "Plan", "PlanCost", "PlanError", "Prod", "SearchTimeout", "SearchTooLarge",
    "ShapeError", "Strategy", "Sum", "TDLError", "abs", "build_info", "coarsen", "compute", "erf", "evaluate", "exp",
    "from_torch", "grad", "index_value", "log", "max", "min", "models", "nn", "op", "opaque", "ops", "optim",
    "partition", "placeholder", "run_reference", "sigmoid", "sqrt", "tanh", "trace", "where",
]


def test_every_public_name_resolves():
    for name in NAMES + list(tw.__all__):
        assert getattr(tw, name) is not None, name
    assert tw.ops is tdl_ops
    assert tw.compile is tw.exec.executable.compile


def test_star_import_does_not_shadow_builtins():
    assert not set(tw.__all__) & set(dir(builtins))
    scope: dict = {}
    exec("from tilewise import *", scope)
    assert "tdl" in scope and "max" not in scope and "compile" not in scope


def test_tdl_namespace_is_the_language():
    for name in ["op", "Op", "Strategy", "Sum", "Max", "Min", "Prod", "exp", "log", "tanh", "sigmoid", "sqrt", "abs",
                 "erf", "max", "min", "where", "compute", "opaque", "index_value"]:
        assert getattr(tw.tdl, name) is getattr(tw, name), name

    @tw.tdl.op
    def _public_api_relu_max(x):
        return lambda i: tw.tdl.max(x[i], 0.0)

    assert _public_api_relu_max.evaluate([-1.0, 2.0]).tolist() == [0.0, 2.0]


def test_registry_finds_library_ops():
    from tilewise.tdl import registry

    assert registry.lookup("matmul") is tdl_ops.matmul
    assert registry.ops.sum_axes is tdl_ops.sum_axes
    assert registry.nary("add", 5) is tdl_ops.elementwise.add_n(5)
    assert registry.lookup("concat_7") is tdl_ops.models.concat_op(7)
    assert not hasattr(registry.ops, "no_such_op")

"""TDL, the tensor description language: describe an operator by a lambda over its output indices.

    from tilewise import tdl

    @tdl.op
    def matmul(a, b):
        return lambda i, j: tdl.Sum(lambda k: a[i, k] * b[k, j])

Modules: ``trace`` (index variables, values, tensors and reducers a description is traced with),
``operator`` (``Op``, ``@op``, ``Strategy``: analysis and reference execution of a description),
``registry`` (ops by name, the hook through which lower layers reach the op library ``tdl_ops``),
``plot`` (pictures of strategies). This package knows nothing of graphs or planners.
"""

from .operator import Op, Strategy, native_kernel_roles, op
from .trace import (
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

__all__ = [
    "Max", "Min", "Op", "Prod", "Strategy", "Sum", "abs", "compute", "erf", "exp", "index_value", "log", "max",
    "min", "native_kernel_roles", "op", "opaque", "sigmoid", "sqrt", "tanh", "where",
]

"""The Op object a graph op applied, found from its traced description.

A graph op stores its op's name; ``GOp.op`` looks the name up in the registry, where the last
``@tw.op`` of a name wins. A user op named like a library op ("matmul") then shadows the library
op in every graph, and autodiff would find no gradient rule (or the wrong one). The applied Op is
the one whose trace cache holds the very description the graph op carries; library ops are
checked besides the registry. Remove once the graph remembers the Op objects it applied.
"""

from __future__ import annotations

from ._graph import GOp


def applied_op(op: GOp):
    """The tw.Op that built ``op`` (the registry's op of that name when none matches)."""
    registered = op.op
    import tdl_ops

    library = tdl_ops.ALL.get(op.type)
    if library is None or library is registered:
        return registered
    desc = op.desc
    for candidate in (registered, library):
        if any(entry[0] is desc for entry in candidate._cache.values()):
            return candidate
    return registered

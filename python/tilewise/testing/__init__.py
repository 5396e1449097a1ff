"""Testing tools: random training graphs run three ways and compared (docs/RELIABILITY.md).

    >>> from tilewise.testing import random_case, run_case
    >>> case = random_case(7)                     # a model, a loss, an optimizer, a planner, 1-8 devices
    >>> run_case(case).ok                         # runtime vs the float64 reference (and torch when present)
    True

``python -m tilewise.testing.differential --cases 5000 --seed 1`` runs many; a failure prints the
case, which ``run_case(Case(...))`` reruns.
"""

from .random_graphs import Case, RandomChooser, build_graph, build_torch, generate_case, random_case

_DIFFERENTIAL = ("CaseResult", "Mismatch", "run_case")


def __getattr__(name: str):
    # Imported on first use, so that ``python -m tilewise.testing.differential`` does not find its
    # module already imported by the package (runpy warns then).
    if name in _DIFFERENTIAL:
        from . import differential

        return getattr(differential, name)
    raise AttributeError(f"module 'tilewise.testing' has no attribute {name!r}")


__all__ = ["Case", "CaseResult", "Mismatch", "RandomChooser", "build_graph", "build_torch", "generate_case",
           "random_case", "run_case"]

"""The swap searches' arguments, progress and result (``Problem.search``, ``Problem.random_search``).

The searches run in C++ (``_core.swap_search``, GIL released; cpp/swap/search.h); this module checks
the arguments, drives an optional progress bar and wraps what comes back in a ``SearchResult``.
"""

from __future__ import annotations

import html
import json
import math
import numbers

from .. import _core
from .._core import SwapError
from .._util import check_int
from .plan import SwapPlan

_HISTORY_FIELDS = ("generation", "evaluations", "seconds", "best", "mean", "worst")


class SearchResult:
    """What a swap search found: ``plan`` (the best, a ``SwapPlan``), ``makespan``, ``history`` (per
    generation: generation, evaluations, seconds, best, mean, worst — SwapAdvisor Fig. 5.4; for random
    search "best" is the best so far), ``evaluations``, ``seconds``, ``simulations_per_second``,
    ``stopped`` ("time_limit", "patience", "generations" or "evaluations") and ``settings``."""

    def __init__(self, problem, core, settings: dict):
        self.settings: dict = settings
        """The search's arguments (method, mode, seed, population, temperature, elitism...)."""
        self.history: list[dict] = [dict(zip(_HISTORY_FIELDS, row)) for row in core.history]
        self.evaluations: int = int(core.evaluations)
        """Plans simulated."""
        self.seconds: float = float(core.seconds)
        self.stopped: str = core.stopped
        ops = problem._op_names
        schedule = [ops[o] for o in core.schedule]
        self.plan: SwapPlan = problem.plan(schedule, (list(core.cls), list(core.cnt)),
                                           double_pass=settings["double_pass"])
        self.makespan: float = self.plan.makespan

    @property
    def simulations_per_second(self) -> float:
        """Plans made and simulated per second of the search (its fitness evaluations)."""
        return self.evaluations / self.seconds if self.seconds > 0 else math.inf

    @property
    def fraction_of_ideal(self) -> float:
        return self.plan.fraction_of_ideal

    def plot(self, ax=None):
        """Best, mean and worst simulated time per generation against search time (Fig. 5.4); returns
        the Axes (a new figure when ``ax`` is None)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        x = [h["seconds"] for h in self.history]
        for key in ("worst", "mean", "best"):
            ax.plot(x, [h[key] for h in self.history], label=key, drawstyle="steps-post")
        ax.set_xlabel("search time (s)")
        ax.set_ylabel("simulated iteration (s)")
        ax.set_title(f"{self.settings['method']} ({self.settings['mode']}): best {self.makespan:.4g} s")
        ax.legend()
        return ax

    def to_dict(self) -> dict:
        return {"format": "tilewise-swap-search/1", "settings": dict(self.settings), "makespan": self.makespan,
                "fraction_of_ideal": self.fraction_of_ideal, "evaluations": self.evaluations,
                "seconds": self.seconds, "simulations_per_second": self.simulations_per_second,
                "stopped": self.stopped, "history": self.history, "plan": self.plan.to_dict()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def _summary(self) -> str:
        return (f"{self.settings['method']} ({self.settings['mode']}): best {self.makespan:.6g} s "
                f"({self.fraction_of_ideal:.1%} of ideal) after {len(self.history)} generations, "
                f"{self.evaluations} evaluations in {self.seconds:.3g} s "
                f"({self.simulations_per_second:.4g}/s); stopped by {self.stopped}")

    def __repr__(self) -> str:
        return f"<tw.swap.SearchResult {self._summary()}>"

    def _repr_html_(self) -> str:
        return f"<p><b>tw.swap.SearchResult</b> {html.escape(self._summary())}</p>" + self.plan._repr_html_()


def _progress(progress, label: str):
    """(callback for the core, close) for progress=True (tqdm), a callable, or nothing."""
    if progress is False or progress is None:
        return None, None
    if progress is True:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            raise ImportError("progress=True needs tqdm: pip install 'tilewise[progress]' (or tqdm)") from None
        bar = tqdm(desc=label, unit="gen", leave=False)

        def report(row):
            g = dict(zip(_HISTORY_FIELDS, row))
            bar.update(1)
            bar.set_postfix(best=f"{g['best']:.4g}s", evals=g["evaluations"], refresh=True)

        return report, bar.close
    if callable(progress):
        return (lambda row: progress(dict(zip(_HISTORY_FIELDS, row)))), None
    raise TypeError(f"progress must be a bool or a callable taking a generation's dict, not {type(progress).__name__}")


def _number(name: str, value, *, positive: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, not {type(value).__name__} ({value!r})")
    if math.isnan(value) or (value <= 0 if positive else value < 0):
        raise SwapError(f"{name} must be {'positive' if positive else '>= 0'}, got {value}")
    return float(value)


def run_search(problem, *, random: bool, mode: str, seed, time_limit, population, threads, progress,
               patience, generations, evaluations, elitism, temperature, mutation, double_pass) -> SearchResult:
    """Checks the arguments, runs the C++ search and wraps its result (Problem.search's docstring)."""
    seed = check_int("seed", seed, minimum=0, maximum=2**64 - 1, error=SwapError)
    population = check_int("population", population, minimum=4, maximum=10**6, error=SwapError)
    threads = 0 if threads is None else check_int("threads", threads, minimum=1, maximum=4096, error=SwapError)
    limit = 0.0 if time_limit is None or time_limit == math.inf else _number("time_limit", time_limit)
    patience = 0 if patience is None else check_int("patience", patience, minimum=1, error=SwapError)
    generations = 0 if generations is None else check_int("generations", generations, minimum=1, error=SwapError)
    evaluations = 0 if evaluations is None else check_int("evaluations", evaluations, minimum=1,
                                                          maximum=2**62, error=SwapError)
    temperature = _number("temperature", temperature)
    mutation = _number("mutation", mutation, positive=False)
    if mutation > 1:
        raise SwapError(f"mutation is a probability, from 0 to 1; got {mutation}")
    for name, flag in (("elitism", elitism), ("double_pass", double_pass)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    method = "random" if random else "genetic"
    report, close = _progress(progress, f"swap {method} search")
    try:
        core = _core.swap_search(problem._core, random, mode, population, mutation, temperature, elitism, double_pass,
                                 seed, threads, limit, patience, generations, evaluations, report)
    finally:
        if close is not None:
            close()
    settings = {"method": method, "mode": mode, "seed": seed, "population": population, "threads": threads or None,
                "time_limit": time_limit, "patience": patience or None, "generations": generations or None,
                "evaluations": evaluations or None, "elitism": elitism, "temperature": temperature,
                "mutation": mutation, "double_pass": double_pass}
    return SearchResult(problem, core, settings)

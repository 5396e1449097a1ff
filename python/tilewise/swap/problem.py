"""``tw.swap.Problem``: the low-level entry to swapping (SwapAdvisor, thesis ch. 4).

A problem is an iteration's tensors and ops on one device with too little memory, and the host link.
``Problem`` checks types and names here (TypeError, SwapError with close matches) and hands indices to
the C++ core (``_core.SwapProblem``), which checks the structure (producers, cycles, the link) once;
plans, ODSwap and the searches run there without the GIL.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence

from .. import _core
from .._core import SwapError
from .._util import check_int, did_you_mean, fmt_bytes
from .plan import SwapPlan
from .search import SearchResult, run_search

#: Tensor kinds: a parameter starts on the host and is dropped without a copy when evicted unchanged;
#: an activation is produced by an op and freed after its last use (unless live out).
KINDS = ("parameter", "activation")

_INT64_MAX = 2**63 - 1


@functools.lru_cache(maxsize=1)
def _swapadvisor_link() -> tuple[float, float]:
    """The host link of the "swapadvisor" cluster preset (SwapAdvisor §5.1: 12 GB/s one way, 20 both)."""
    from ..sim.cluster import Cluster

    host = Cluster.preset("swapadvisor").host
    return float(host.bandwidth_at(2**30)), float(host.duplex_bandwidth)


def _check_seconds(what: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__} ({value!r})")
    if not math.isfinite(value) or value < 0:
        raise SwapError(f"{what} must be finite and >= 0, got {value}")
    return float(value)


class Problem:
    """An iteration to run on one device that cannot hold all its tensors.

    ``Problem(tensors={name: (bytes, kind)}, ops=[(name, inputs, outputs, seconds)], capacity=bytes,
    host_link=(one_way, both_ways), live_out=())``

    * ``kind``: "parameter" (starts on the host; evicted unchanged it is dropped, not copied; one op
      may update it in place by listing it as an output: ops listed before the update read the value it
      started with and run before it, ops listed after it read the updated value, as Adam's weight
      update reads the new moments) or
      "activation" (produced by one op; freed after its last use; ops listed after its producer that
      list it among both inputs and outputs update it in place, in the order listed — a gradient
      summed into its total — and an op reading it reads the latest update listed before it).
    * ``ops``: in any order; ``inputs`` and ``outputs`` name tensors; ``seconds`` is the op's time.
    * ``capacity``: device memory in bytes.
    * ``host_link``: bytes/s for one direction alone and for both directions together (a duplex link
      such as PCIe); None: SwapAdvisor's testbed, the "swapadvisor" cluster preset (12 GB/s, 20 GB/s).
    * ``live_out``: activations kept to the end of the schedule (the backward pass of a partial graph,
      as in the thesis's Fig. 4.1): copied out when evicted, never freed.

    Raises TypeError for values of the wrong type and ``tw.swap.SwapError`` (a ValueError) for values
    the problem cannot take: an unknown tensor, a tensor produced twice, a cycle, bytes < 1...

        p = tw.swap.Problem({"W": (4e6, "parameter"), "X": (4e6, "activation")},
                            [("f", ["W"], ["X"], 1e-3)], capacity=10**7)
        p.plan().makespan, p.search(time_limit=5).plan
    """

    def __init__(self, tensors: Mapping[str, tuple], ops: Sequence[tuple], capacity: int,
                 host_link: tuple[float, float] | None = None, live_out: Iterable[str] = ()):
        if not isinstance(tensors, Mapping):
            raise TypeError(f"tensors must be a dict {{name: (bytes, kind)}}, not {type(tensors).__name__}")
        names: list[str] = []
        rows = []
        for name, spec in tensors.items():
            if not isinstance(name, str):
                raise TypeError(f"tensor names must be str, not {type(name).__name__} ({name!r})")
            if not isinstance(spec, (tuple, list)) or len(spec) != 2:
                raise TypeError(f"tensor {name!r}: expected (bytes, kind), got {spec!r}")
            nbytes, kind = spec
            if isinstance(nbytes, float) and nbytes.is_integer():
                nbytes = int(nbytes)  # 4e6 reads naturally as a byte count
            nbytes = check_int(f"tensor {name!r}: bytes", nbytes, minimum=1, maximum=_INT64_MAX, error=SwapError)
            if not isinstance(kind, str):
                raise TypeError(f"tensor {name!r}: kind must be a str ({' or '.join(KINDS)}), "
                                f"not {type(kind).__name__}")
            if kind not in KINDS:
                raise SwapError(f"tensor {name!r}: unknown kind {kind!r}{did_you_mean(kind, KINDS)}; valid: "
                                f"{', '.join(KINDS)}")
            names.append(name)
            rows.append([name, nbytes, kind, False])
        index = {n: i for i, n in enumerate(names)}
        if isinstance(live_out, str):
            raise TypeError("live_out must be a list of tensor names, not one str")
        for name in live_out:
            if name not in index:
                raise SwapError(f"live_out: {name!r} is not a tensor of the problem{did_you_mean(str(name), index)}")
            rows[index[name]][3] = True

        if isinstance(ops, (str, Mapping)) or not isinstance(ops, Iterable):
            raise TypeError(f"ops must be a list of (name, inputs, outputs, seconds), not {type(ops).__name__}")
        op_rows = []
        for k, op in enumerate(ops):
            if not isinstance(op, (tuple, list)) or len(op) != 4:
                raise TypeError(f"ops[{k}]: expected (name, inputs, outputs, seconds), got {op!r}")
            name, inputs, outputs, seconds = op
            if not isinstance(name, str):
                raise TypeError(f"ops[{k}]: the name must be a str, not {type(name).__name__} ({name!r})")
            lists = []
            for what, tensor_names in (("inputs", inputs), ("outputs", outputs)):
                if isinstance(tensor_names, str) or not isinstance(tensor_names, Iterable):
                    raise TypeError(f"op {name!r}: {what} must be a list of tensor names, not "
                                    f"{type(tensor_names).__name__} ({tensor_names!r})")
                ids = []
                for t in tensor_names:
                    if t not in index:
                        raise SwapError(f"op {name!r}: {what[:-1]} {t!r} is not a tensor of the problem"
                                        f"{did_you_mean(str(t), index)}")
                    ids.append(index[t])
                lists.append(ids)
            op_rows.append((name, lists[0], lists[1], _check_seconds(f"op {name!r}: seconds", seconds)))

        capacity = check_int("capacity", capacity, minimum=1, maximum=_INT64_MAX, error=SwapError)
        if host_link is None:
            host_link = _swapadvisor_link()
        if not isinstance(host_link, (tuple, list)) or len(host_link) != 2:
            raise TypeError(f"host_link must be (one_way, both_ways) in bytes/s, got {host_link!r}")
        for what, v in zip(("one_way", "both_ways"), host_link):
            if isinstance(v, bool) or not isinstance(v, numbers.Real):
                raise TypeError(f"host_link {what} must be a number of bytes/s, not {type(v).__name__}")

        self._core = _core.SwapProblem([tuple(r) for r in rows], op_rows, capacity, float(host_link[0]),
                                       float(host_link[1]))
        self._tensor_names = names
        self._tensor_index = index
        self._tensors = {n: (r[1], r[2]) for n, r in zip(names, rows)}
        self._live_out = [r[0] for r in rows if r[3]]
        self._op_names = [r[0] for r in op_rows]
        self._op_index = {n: i for i, n in enumerate(self._op_names)}
        self._ops = op_rows
        self._host_link = (float(host_link[0]), float(host_link[1]))

    # ----- what the problem is ----------------------------------------------------------------

    @property
    def tensors(self) -> dict[str, tuple[int, str]]:
        """name -> (bytes, kind), in the order given."""
        return dict(self._tensors)

    @property
    def ops(self) -> list[tuple[str, list[str], list[str], float]]:
        """(name, inputs, outputs, seconds) per op, in the order given (``Problem(p.tensors, p.ops,
        ...)`` makes the same problem again)."""
        t = self._tensor_names
        return [(name, [t[i] for i in ins], [t[i] for i in outs], sec) for name, ins, outs, sec in self._ops]

    @property
    def live_out(self) -> list[str]:
        return list(self._live_out)

    @property
    def capacity(self) -> int:
        """Device memory, bytes."""
        return self._core.capacity

    @property
    def host_link(self) -> tuple[float, float]:
        """(one way, both ways) in bytes/s."""
        return self._host_link

    @property
    def sizes(self) -> list[int]:
        """TS (§4.4.3): the unique tensor sizes, ascending; a pool's CLS has one entry per size."""
        return list(self._core.sizes)

    @property
    def total_bytes(self) -> int:
        """All tensors together."""
        return self._core.total_bytes

    @property
    def ideal_time(self) -> float:
        """Seconds of an iteration with unlimited memory: the ops' times summed (one compute stream)."""
        return self._core.total_seconds

    @property
    def least_memory(self) -> int:
        """The smallest capacity any pool works in: every op's inputs and outputs in memory at once,
        objects as large as the largest size of their class (a DP over the monotone CLS)."""
        return self._core.least_pool_bytes

    @property
    def least_pool(self) -> tuple[list[int], list[int]]:
        """(CLS, CNT) of the pool that takes ``least_memory`` bytes."""
        cls = list(self._core.least_pool_cls)
        return cls, list(self._core.least_counts(cls))

    @property
    def default_pool(self) -> tuple[list[int], list[int]]:
        """(CLS, CNT) that ``plan(pool=None)`` uses: each size its own class, as many objects as tensors
        of that size, cut down to the capacity (the GA's repair). Raises InfeasibleError when nothing fits."""
        cls, cnt = self._core.default_pool()
        return list(cls), list(cnt)

    def pool_bytes(self, pool: tuple[Sequence[int], Sequence[int]]) -> int:
        """Bytes of a pool's objects: Σ CNT[c] x the largest size of class c."""
        cls, cnt = self._pool_lists(pool)
        return self._core.pool_bytes(cls, cnt)

    def random_schedule(self, seed: int) -> list[str]:
        """A random topological order (at every step a uniform choice among the ready ops), as op names:
        what the random part of the GA's first generation and ``odswap(seed=...)`` start from."""
        seed = check_int("seed", seed, minimum=0, maximum=2**64 - 1, error=SwapError)
        return [self._op_names[o] for o in self._core.random_order(seed)]

    # ----- plans --------------------------------------------------------------------------------

    def plan(self, schedule: Sequence[str] | None = None, pool=None, double_pass: bool = True) -> SwapPlan:
        """SwapAdvisor's swap plan (§4.3.2) for ``schedule`` (op names in run order; None: the order the
        ops were given, where dependencies allow) and ``pool`` ((CLS, CNT), CLS 1-based over ``sizes``;
        None: ``default_pool``), simulated. ``double_pass``: plan the iteration as one of many (the
        parameters resident at its end are those at its start); False: one iteration from a device
        holding nothing (Fig. 4.1). Raises SwapError for a bad schedule or pool, InfeasibleError when
        no pool fits the capacity."""
        if not isinstance(double_pass, bool):
            raise TypeError(f"double_pass must be a bool, not {type(double_pass).__name__}")
        order = self._schedule(schedule, "schedule")
        cls, cnt = self.default_pool if pool is None else self._pool_lists(pool)
        return SwapPlan(self, _core.swap_plan(self._core, order, cls, cnt, double_pass))

    def ideal(self, schedule: Sequence[str] | None = None) -> SwapPlan:
        """Unlimited memory (§5.1's ideal baseline): no swaps; makespan = ``ideal_time``."""
        return SwapPlan(self, _core.swap_ideal(self._core, self._schedule(schedule, "schedule")))

    def odswap(self, order: Sequence[str] | None = None, seed: int | None = None) -> SwapPlan:
        """ODSwap (§5.1), the online baseline: LRU eviction on demand, prefetch of the next ops' inputs,
        a buddy allocator over the capacity; its second iteration, timed. ``order``: op names (None: the
        given order, or with ``seed`` a random topological order, as a framework's default may be)."""
        if seed is not None:
            if order is not None:
                raise SwapError("odswap: give an order or a seed for a random topological order, not both")
            ids = self._schedule(self.random_schedule(seed), "order")
        else:
            ids = self._schedule(order, "order")
        return SwapPlan(self, _core.swap_odswap(self._core, ids))

    def search(self, seed: int = 0, time_limit: float | None = None, population: int = 144,
               threads: int | None = None, progress=False, patience: int | None = 50,
               generations: int | None = None, elitism: bool = True, temperature: float = 0.01,
               mutation: float = 0.1, double_pass: bool = True, schedule_only: bool = False,
               pool_only: bool = False) -> SearchResult:
        """SwapAdvisor's genetic search over (schedule, pool) (§4.4); docs/SWAP.md gives the operators.

        ``population``: N_p (paper 144). ``mutation``: P (paper 0.1). Survival: softmax of
        t_norm / ``temperature`` (Eq. 4.1 is temperature=1, which barely prefers a 10 % faster plan)
        plus ``elitism`` (the best always survives). Stops at ``time_limit`` seconds, after ``patience``
        generations without a better plan, or after ``generations`` generations (None: no such bound).
        ``threads``: evaluation threads (None: every core); the result depends on ``seed`` only, unless
        the time limit stops it. ``progress``: True for a tqdm bar, or a callable getting each
        generation's dict. ``schedule_only`` / ``pool_only``: §5.4's restricted searches (the pool stays
        ``default_pool``, the schedule the given order)."""
        if schedule_only and pool_only:
            raise SwapError("search: schedule_only and pool_only exclude each other (neither: the joint search)")
        mode = "schedule_only" if schedule_only else "pool_only" if pool_only else "joint"
        return run_search(self, random=False, mode=mode, seed=seed, time_limit=time_limit, population=population,
                          threads=threads, progress=progress, patience=patience, generations=generations,
                          evaluations=None, elitism=elitism, temperature=temperature, mutation=mutation,
                          double_pass=double_pass)

    def random_search(self, evaluations: int, seed: int = 0, time_limit: float | None = None,
                      population: int = 144, threads: int | None = None, progress=False,
                      double_pass: bool = True) -> SearchResult:
        """The random-search baseline: ``evaluations`` random (schedule, pool) pairs drawn as the GA's
        first generation is (the given order with the default pool first), in batches of
        ``population``; a generation's "best" is the best so far."""
        return run_search(self, random=True, mode="joint", seed=seed, time_limit=time_limit, population=population,
                          threads=threads, progress=progress, patience=None, generations=None,
                          evaluations=evaluations, elitism=True, temperature=1.0, mutation=0.0,
                          double_pass=double_pass)

    # ----- helpers ------------------------------------------------------------------------------

    def _schedule(self, schedule, what: str) -> list[int]:
        if schedule is None:
            return list(self._core.given_order())
        if isinstance(schedule, str) or not isinstance(schedule, Iterable):
            raise TypeError(f"{what} must be a list of op names, not {type(schedule).__name__}")
        ids = []
        for name in schedule:
            if name not in self._op_index:
                raise SwapError(f"{what}: {name!r} is not an op of the problem"
                                f"{did_you_mean(str(name), self._op_index)}")
            ids.append(self._op_index[name])
        return ids

    def _pool_lists(self, pool) -> tuple[list[int], list[int]]:
        if not isinstance(pool, (tuple, list)) or len(pool) != 2:
            raise TypeError(f"pool must be (CLS, CNT): two lists of ints, got {pool!r}")
        out = []
        for what, values in zip(("CLS", "CNT"), pool):
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise TypeError(f"pool {what} must be a list of ints, not {type(values).__name__}")
            out.append([check_int(f"pool {what}[{i}]", v, minimum=-_INT64_MAX, maximum=_INT64_MAX, error=SwapError)
                        for i, v in enumerate(values)])
        if any(not -2**31 < c < 2**31 for c in out[0]):
            raise SwapError("pool: CLS entries are size classes, small positive ints")
        return out[0], out[1]

    def __repr__(self) -> str:
        return (f"<tw.swap.Problem: {len(self._op_names)} ops, {len(self._tensor_names)} tensors "
                f"({fmt_bytes(self.total_bytes)}, {len(self.sizes)} sizes) in {fmt_bytes(self.capacity)}; "
                f"least memory {fmt_bytes(self.least_memory)}>")

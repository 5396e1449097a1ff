"""Graph coarsening (Tofu §5.1): the groups the partition search works on.

    cg = tw.coarsen(g)          # g: a training graph (forward, backward and update ops)
    cg.groups                   # [Group(kind='tensor', label='x'), Group(kind='op', label='fc1.linear'), ...]
    cg.is_linear                # True for MLPs, CNNs, ResNets, and RNNs once time steps are merged
    print(cg.summary())

Each forward op is grouped with its backward ops, each forward tensor with its gradients, the
gradient sums producing them, and (for parameters) the optimizer's update ops and state.
Element-wise ops then join their main input's group and unrolled time steps merge. The work runs
in C++ (``_core.coarsen``) without the GIL; the rules are documented in docs/ARCHITECTURE.md.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Sequence

from .. import _core
from .._core import GraphError
from .graph import GOp, Graph, GTensor

KINDS = ("op", "tensor", "merged")


class Group:
    """A node of the coarsened graph: member ops and tensors of the original graph."""

    __slots__ = ("_ops", "_tensors", "coarse", "id", "kind", "label")

    def __init__(self, coarse: CoarseGraph, node):
        self.coarse = coarse
        self.id: int = node.id
        self.kind: str = node.kind
        self.label: str = node.label
        self._ops: list[int] = list(node.ops)
        self._tensors: list[int] = list(node.tensors)

    @property
    def ops(self) -> list[GOp]:
        """Member ops (forward, backward and update), in graph order."""
        return [GOp(self.coarse.graph, o) for o in self._ops]

    @property
    def tensors(self) -> list[GTensor]:
        """Member tensors, in graph order."""
        return [GTensor(self.coarse.graph, t) for t in self._tensors]

    @property
    def forward_ops(self) -> list[GOp]:
        return [o for o in self.ops if o.phase == "forward" and o.forward_op is None]

    def __contains__(self, item) -> bool:
        return self.coarse.group_of(item) is self

    def __repr__(self):
        return f"Group({self.id}, kind={self.kind!r}, label={self.label!r}, ops={len(self._ops)}, " \
               f"tensors={len(self._tensors)})"


class CoarseGraph:
    """The coarsened graph: groups, forward dataflow edges between them, and linearity."""

    def __init__(self, graph: Graph, core):
        self.graph = graph
        self._core = core
        self.groups: list[Group] = [Group(self, n) for n in core.groups]
        self.edges: list[tuple[int, int]] = [tuple(e) for e in core.edges]
        self._op_group: list[int] = list(core.op_group)
        self._tensor_group: list[int] = list(core.tensor_group)

    @property
    def is_linear(self) -> bool:
        """Homeomorphic to a chain, fork-joins allowed: two-terminal series-parallel (see docs)."""
        return self._core.is_linear

    @property
    def irreducible(self) -> list[Group]:
        """Groups the series-parallel reduction could not remove (empty when linear)."""
        return [self.groups[i] for i in self._core.linearity.reduction.remaining]

    @property
    def pendants(self) -> list[Group]:
        """Groups pruned before the reduction because they hang off the rest by one edge (weights,
        inputs read once, the loss): the DP searches them with their neighbour."""
        return [self.groups[i] for i in self._core.linearity.pendants]

    @property
    def entries(self) -> list[Group]:
        """Groups the linearity test joins to its super source."""
        return [self.groups[i] for i in self._core.linearity.entries]

    @property
    def exits(self) -> list[Group]:
        """Groups the linearity test joins to its super sink."""
        return [self.groups[i] for i in self._core.linearity.exits]

    @property
    def elementwise_merges(self) -> int:
        """Element-wise forward ops coalesced into their input's group."""
        return self._core.elementwise_merges

    @property
    def timestep_merges(self) -> int:
        """Forward ops coalesced into the first time step's group."""
        return self._core.timestep_merges

    def counts(self) -> dict[str, int]:
        """Number of groups of each kind."""
        c = Counter(g.kind for g in self.groups)
        return {k: c.get(k, 0) for k in KINDS}

    def group_of(self, item: GOp | GTensor | str) -> Group:
        """The group holding an op or tensor (given as a handle or by name)."""
        if isinstance(item, str):
            name = item
            o, t = self.graph._g.find_op(name), self.graph._g.find_tensor(name)
            if o < 0 and t < 0:
                raise KeyError(f"no op or tensor named {name!r} in the graph")
            item = GOp(self.graph, o) if t < 0 else GTensor(self.graph, t) if o < 0 else None
            if item is None:
                go, gt = self.group_of(GOp(self.graph, o)), self.group_of(GTensor(self.graph, t))
                if go is not gt:  # an op's output is named like the op by default
                    raise GraphError(f"{name!r} names both an op and a tensor in different groups; pass "
                                     f"graph.op({name!r}) or graph.tensor({name!r})")
                return go
        if isinstance(item, GOp):
            index = self._op_group
        elif isinstance(item, GTensor):
            index = self._tensor_group
        else:
            raise TypeError(f"group_of takes a GOp, a GTensor or a name, not {type(item).__name__}")
        if item.graph is not self.graph:
            raise KeyError(f"{item!r} is not part of this coarsened graph's graph")
        if item.id >= len(index):
            raise KeyError(f"{item!r} was added to the graph after it was coarsened; coarsen again")
        return self.groups[index[item.id]]

    def neighbours(self, group: Group | int) -> list[Group]:
        """Groups sharing an edge with ``group`` (edges are undirected for linearity)."""
        gid = group if isinstance(group, int) else group.id
        out = sorted({b for a, b in self.edges if a == gid} | {a for a, b in self.edges if b == gid})
        return [self.groups[i] for i in out]

    def summary(self) -> str:
        """Group counts by kind, members, coalescing merges and linearity."""
        return self._core.summary(self.graph._g)

    def to_dot(self) -> str:
        """Graphviz DOT: op groups as boxes, tensor groups as ellipses, merged groups as octagons."""
        return self._core.to_dot()

    def to_dict(self) -> dict:
        return {
            "groups": [{"id": g.id, "kind": g.kind, "label": g.label, "ops": [o.name for o in g.ops],
                        "tensors": [t.name for t in g.tensors]} for g in self.groups],
            "edges": [list(e) for e in self.edges],
            "is_linear": self.is_linear,
            "elementwise_merges": self.elementwise_merges,
            "timestep_merges": self.timestep_merges,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def __len__(self) -> int:
        return len(self.groups)

    def __repr__(self):
        c = self.counts()
        return f"<tw.CoarseGraph of {self.graph.name!r}: {len(self.groups)} groups ({c['op']} op, {c['tensor']} " \
               f"tensor, {c['merged']} merged), {len(self.edges)} edges, linear={'yes' if self.is_linear else 'no'}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{g.id}</td><td>{g.kind}</td><td>{html.escape(g.label)}</td><td>{len(g._ops)}</td>"
            f"<td>{len(g._tensors)}</td></tr>" for g in self.groups[:200])
        more = f"<p>… {len(self.groups) - 200} more groups</p>" if len(self.groups) > 200 else ""
        return (f"<pre>{html.escape(self.summary())}</pre><table><tr><th>group</th><th>kind</th><th>label</th>"
                f"<th>ops</th><th>tensors</th></tr>{rows}</table>{more}")


def coarsen(graph: Graph, *, merge_elementwise: bool = True, merge_timesteps: bool = True) -> CoarseGraph:
    """Coarsen a training graph into groups (Tofu §5.1).

    ``merge_elementwise`` / ``merge_timesteps`` switch off the two coalescing steps, e.g. to see the
    RNN grid that merging time steps turns into a chain.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"coarsen takes a tw.Graph, not {type(graph).__name__}")
    core = _core.coarsen(graph._g, merge_elementwise=merge_elementwise, merge_timesteps=merge_timesteps)
    return CoarseGraph(graph, core)


def is_series_parallel(n: int, edges: Sequence[tuple[int, int]], sources: Sequence[int] | None = None,
                       sinks: Sequence[int] | None = None) -> bool:
    """The bare reduction on any graph with nodes 0..n-1: two-terminal series-parallel between a
    super source joined to ``sources`` and a super sink joined to ``sinks`` (by default the nodes
    without incoming / outgoing edges)."""
    return _core.reduce_series_parallel(n, [tuple(e) for e in edges], sources, sinks).series_parallel


def is_linear_graph(n: int, edges: Sequence[tuple[int, int]], entries: Sequence[int] = (),
                    exits: Sequence[int] = ()) -> bool:
    """The linearity test ``coarsen`` applies, on any directed graph with nodes 0..n-1: pendant
    pruning, terminals from strongly connected components (``entries`` / ``exits`` mark where
    inputs enter and outputs leave a cycle), then the series-parallel reduction."""
    return _core.check_linear(n, [tuple(e) for e in edges], list(entries), list(exits)).linear

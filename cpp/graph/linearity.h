// Linearity of a graph in Tofu's sense (§5.1, footnote 1: "homeomorphic to a chain; a fork-join
// graph is linear"), decided as two-terminal series-parallel reducibility.
#pragma once
#include <utility>
#include <vector>

namespace tilewise::graph {

/// What the series-parallel reduction left behind.
struct SeriesParallelResult {
  bool series_parallel = false;  ///< reduced to a single super-source - super-sink edge
  int series_reductions = 0;     ///< nodes removed by a series reduction
  int parallel_reductions = 0;   ///< duplicate edges merged by a parallel reduction
  std::vector<int> remaining;    ///< nodes (of the input numbering) no reduction could remove, sorted
};

/// Two-terminal series-parallel test of an undirected multigraph on nodes 0..n-1.
///
/// A super source is joined to every node in `sources` and a super sink to every node in
/// `sinks` (a node may be both); then, until nothing changes, a parallel reduction merges edges
/// with the same end points and a series reduction replaces a node with exactly two distinct
/// neighbours a, b (never the super source or sink) by the edge a-b. The graph is series-parallel
/// iff only the edge super source - super sink remains. Self-loops in `edges` are ignored; a
/// node left with one neighbour (a dead end) blocks the reduction. The empty graph is
/// series-parallel. Linear time up to hashing; throws std::invalid_argument for an out-of-range id.
SeriesParallelResult reduce_series_parallel(int n, const std::vector<std::pair<int, int>>& edges,
                                            const std::vector<int>& sources, const std::vector<int>& sinks);

/// `reduce_series_parallel` with the sources and sinks of a directed graph: nodes with no
/// incoming, respectively no outgoing, edge from/to another node. Meant for DAGs (in a cycle
/// every node has both, so a graph that is one cycle has no terminals and is not linear).
SeriesParallelResult reduce_series_parallel(int n, const std::vector<std::pair<int, int>>& directed_edges);

/// Tofu's linearity of a dataflow graph (see docs/ARCHITECTURE.md, "Edges and linearity").
struct LinearityResult {
  bool linear = false;
  std::vector<int> pendants;        ///< nodes pruned because they hang off the rest by one edge, sorted
  std::vector<int> entries;         ///< nodes joined to the super source, sorted
  std::vector<int> exits;           ///< nodes joined to the super sink, sorted
  SeriesParallelResult reduction;   ///< of the nodes left after pruning, in the input numbering
};

/// Linearity of a directed graph on nodes 0..n-1 whose edges count undirected for the shape:
///  1. Pendant pruning: repeatedly remove a node with at most one neighbour (what is left is the
///     2-core). Pendants are weights, inputs read once, the loss, a recurrence state hanging off its
///     cell: each is searched together with its neighbour. Made terminals, a weight read in the
///     middle of a fork-join branch would tie that branch to the super source: a bridge.
///  2. Terminals: on the strongly connected components of what is left, the super source joins
///     one entry of each component that no other component feeds, the super sink one exit of
///     each component that feeds no other. The entry is the lowest-numbered member fed by a
///     pruned node or marked in `entry_marks` (else the lowest member); the exit the highest
///     member feeding a pruned node or marked in `exit_marks` (else the highest). Components
///     matter once merging time steps closes cycles (L0 -> H0 -> L0); on a DAG they are single
///     nodes, and the terminals are the nodes without in- / out-edges. Number nodes in forward
///     order (coarsen does) so that "lowest" is where a recurrent layer starts.
///  3. `reduce_series_parallel` on what is left.
/// Marks may be empty (no marks) or have n entries.
LinearityResult check_linear(int n, const std::vector<std::pair<int, int>>& directed_edges,
                             const std::vector<char>& entry_marks = {}, const std::vector<char>& exit_marks = {});

}  // namespace tilewise::graph

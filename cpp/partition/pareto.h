// Frontiers of small decision problems independent of DL (tw.pareto.solve): each node takes one
// of its configurations, each costing (time, memory); each edge adds a (time, memory) for the
// pair of configurations at its ends; costs add (TensorOpt Eq. 3). The answer is every Pareto-
// optimal (time, memory) with an assignment reaching it, found by the generic elimination engine
// over FrontierSum (exact; conditioning where a table would pass the limit).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "partition/elimination_engine.h"
#include "partition/frontier.h"

namespace tilewise::partition {

/// Costs for the pairs of configurations of nodes u and v: table[i * |v| + j] for u in i, v in j.
struct ParetoEdge {
  int u = -1, v = -1;
  std::vector<Point> table;
};

struct ParetoProblem {
  std::vector<std::vector<Point>> nodes;  ///< per node, the costs of its configurations
  std::vector<ParetoEdge> edges;
};

struct ParetoOptions {
  /// Entries (configurations of the eliminated node's neighbours) a table may have before the
  /// search conditions on a neighbour (or, with `heuristic`, fixes one).
  int64_t max_table = int64_t{1} << 18;
  bool heuristic = false;       ///< TensorOpt Eq. 7 instead of conditioning (inexact)
  double memory_bucket = 0;     ///< > 0: memories within a bucket count as equal (see memory_error_bound)
  /// Bounds: solve a few weighted sums of time and memory first (scalar searches, each cheap) and
  /// drop every partial point that one of those solutions beats whatever the rest adds (exact: see
  /// FrontierSum::kBounds); their solutions join the result. Exact searches only (not with
  /// `heuristic`: a solution from outside the fixed values would prune the restricted frontier away).
  bool bound = true;
  int threads = 0;              ///< 0 = all cores
  /// Bytes the search's tables may take in all (entries, their frontiers and what unrolling keeps)
  /// before SearchTooLarge, so that a search too large stops with an error rather than exhausting
  /// the machine's memory. 0 = no limit.
  int64_t max_bytes = int64_t{4} << 30;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::function<void(int64_t, int64_t)> progress;
};

struct ParetoSolution {
  std::vector<Point> points;              ///< memory increasing, time strictly decreasing
  std::vector<std::vector<int>> choices;  ///< per point, a configuration index per node
  EngineStats stats;
  int incumbents = 0;  ///< solutions of the weighted-sum searches on their frontier (bound)
  /// With a memory bucket b: every exact frontier point (t, m) has a returned point (t', m')
  /// with t' <= t and m' <= m + memory_error_bound (b per bucketed reduce on a derivation). 0 otherwise.
  double memory_error_bound = 0;
  double seconds = 0;
};

/// The exact cost frontier of `problem` (PlanError on malformed input).
ParetoSolution solve_pareto(const ParetoProblem& problem, const ParetoOptions& options = {});

/// The (time, memory) of one assignment, each a correctly rounded sum of its costs.
Point evaluate_pareto(const ParetoProblem& problem, const std::vector<int>& choice);

}  // namespace tilewise::partition

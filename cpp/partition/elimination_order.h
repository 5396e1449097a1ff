// The symbolic half of variable elimination: which variable goes next and how large its table
// is, from the factors' scopes alone (no costs). Planned before any table is built, so that a
// problem too wide for the table limit is known at once, and so that the variables to condition
// on (or, with the paper's heuristic, to fix) are known before the numeric pass starts.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tilewise::partition {

/// The search would need a table larger than allowed (the graph is too wide for exact search).
struct SearchTooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The time limit passed before the search finished.
struct SearchTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// What to do when the next elimination would build a table past the limit.
enum class TooWide {
  kThrow,      ///< raise SearchTooLarge (the planners: a block too wide is skipped)
  kCondition,  ///< enumerate one variable's values and solve each (exact)
  kHeuristic,  ///< fix one variable to a value chosen from its own costs (TensorOpt Eq. 7; inexact)
};

struct OrderOptions {
  /// Variables in the order to eliminate them; empty = greedy min-weight order.
  std::vector<int> order;
  /// Entries of the table over the eliminated variable's neighbours (its scope) allowed.
  int64_t max_table = int64_t{1} << 26;
  TooWide too_wide = TooWide::kThrow;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// kHeuristic: the value to fix a variable at.
  std::function<int(int)> heuristic_value;
};

struct EliminationPlan {
  std::vector<int> order;                     ///< every variable not fixed, in elimination order
  std::vector<int> conditioned;               ///< variables whose values are enumerated
  std::vector<std::pair<int, int>> fixed;     ///< variables fixed by the heuristic, and their values
};

/// Plans the elimination of variables with `domain_sizes` values linked by factors over `scopes`
/// (a variable with one value must appear in no scope). Greedy order: the variable whose table is
/// smallest goes first; ties to the one with fewer neighbours, then the lowest index.
EliminationPlan plan_elimination(const std::vector<int>& domain_sizes, std::vector<std::vector<int>> scopes,
                                 const OrderOptions& options);

}  // namespace tilewise::partition

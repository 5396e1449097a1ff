// Exact min-sum search over discrete variables by variable elimination (bucket elimination):
// the dynamic programme of Tofu §5 and SoyBean §4.2.2 in general form. On a chain of groups it
// is the chain DP (eliminating a group's variables once the next group is added); on graphs
// that are not chains (NASNet cells) it stays exact, paying in table size for the width.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

namespace tilewise::partition {

/// Cost "impossible"; sums saturate at it.
constexpr int64_t kInfinite = INT64_MAX / 4;

/// A cost table over a few variables, row-major (the last variable varies fastest).
struct Factor {
  std::vector<int> vars;
  std::vector<int64_t> table;
};

/// The search would need a table larger than allowed (the graph is too wide for exact search).
struct SearchTooLarge : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The time limit passed before the search finished.
struct SearchTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct EliminationOptions {
  /// Variables in the order to eliminate them; empty = greedy min-weight order (the variable
  /// whose elimination builds the smallest table goes first).
  std::vector<int> order;
  int64_t max_table = int64_t{1} << 26;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Called with (eliminated, total) now and then.
  std::function<void(int64_t, int64_t)> progress;
};

struct EliminationResult {
  std::vector<int> values;   ///< value index of every variable
  int64_t cost = 0;          ///< sum of all factors at `values` (the minimum)
  int64_t largest_table = 0; ///< entries of the largest table built
};

/// Minimises the sum of `factors` over variables with `domain_sizes` values each.
EliminationResult eliminate(const std::vector<int>& domain_sizes, std::vector<Factor> factors,
                            const EliminationOptions& options = {});

}  // namespace tilewise::partition

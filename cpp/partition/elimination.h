// Exact min-sum search over discrete variables by variable elimination (bucket elimination):
// the dynamic programme of Tofu §5 and SoyBean §4.2.2 in general form. On a chain of groups it
// is the chain DP (eliminating a group's variables once the next group is added); on graphs
// that are not chains (NASNet cells) it stays exact, paying in table size for the width.
// The engine is generic (elimination_engine.h); this is its instantiation over int64 bytes.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "partition/elimination_engine.h"

namespace tilewise::partition {

/// Cost "impossible"; sums saturate at it.
constexpr int64_t kInfinite = INT64_MAX / 4;

/// The min-sum semiring over int64 costs: combine = saturating sum, choose = minimum (the first
/// minimal value of the variable on ties).
struct MinSum {
  using Value = int64_t;
  using Back = int;  ///< the minimising value of the eliminated variable
  static constexpr bool kTracksSizes = false;
  static constexpr bool kBounds = false;
  static Value unit() { return 0; }
  static int64_t size(const Value&) { return 1; }
  static int64_t bytes(const Value&, const Back&) { return sizeof(Value) + sizeof(Back); }
  static double score(const Value& v) { return static_cast<double>(v); }
  static Value combine(Value a, Value b) { return std::min(kInfinite, a + b); }

  template <class At>
  void eliminate(int k, int dv, const At& at, Value& out, Back& back) const {
    int64_t best = kInfinite + 1;
    int arg = 0;
    for (int x = 0; x < dv; ++x) {
      int64_t sum = unit();
      for (int i = 0; i < k; ++i) sum = combine(sum, at(i, x));
      if (sum < best) best = sum, arg = x;
    }
    out = std::min(best, kInfinite);
    back = arg;
  }
  static int unroll(const Back& back, int, int k, int* inputs) {
    for (int i = 0; i < k; ++i) inputs[i] = 0;
    return back;
  }
};

/// A cost table over a few variables, row-major (the last variable varies fastest).
using Factor = BasicFactor<MinSum>;

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

/// Minimises the sum of `factors` over variables with `domain_sizes` values each; a table past
/// `max_table` entries raises SearchTooLarge.
EliminationResult eliminate(const std::vector<int>& domain_sizes, std::vector<Factor> factors,
                            const EliminationOptions& options = {});

}  // namespace tilewise::partition

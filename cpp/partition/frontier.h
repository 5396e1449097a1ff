// Cost frontiers of (time, memory) tuples (TensorOpt §3.1, Definition 1) and the semiring that
// makes variable elimination track them: product = every pairwise sum, union, both reduced by
// Algorithm 1, done as one lazy k-way merge of sorted lists (a product A x B is the union over a in
// A of the list a + B: pairs that cannot reach the frontier are skipped, not made and sorted). On a
// chain, eliminating in order is LDP (Algorithm 3): the table left after eliminating o_1..o_{i-1}
// is CF(o_i, ·).
//
// Costs are doubles. A candidate is the sum of the single-point inputs (in input order), plus the
// points of the inputs with several: the others in input order, the "base" added last (the last
// of them; of three or more, the one with the most points, the first of equals). A fixed order, so
// sums are exact while every partial sum is representable (integer bytes up to 2^53; times on a
// dyadic grid) and otherwise may differ from another order's in the last bit; comparisons take the
// rounded values as they are (pareto.cpp re-evaluates every final point with a correctly rounded sum).
//
// Tie rule (deterministic, independent of threads): candidates are generated in a fixed order
// (by value of the eliminated variable, then by point of the product of the multi-point inputs
// but the base, then by position in the base: memory order within a list) and taken in (memory,
// time, generation) order; a tuple is kept only when its time is strictly lower than every kept
// one. So of equal memories the fastest is kept, and of equal (time, memory) the first generated:
// the lowest value of the eliminated variable.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tilewise::partition {

/// One strategy tuple's costs.
struct Point {
  double time = 0;
  double memory = 0;
};

/// A cost frontier: memory strictly increasing, time strictly decreasing. Empty = impossible.
using Frontier = std::vector<Point>;

/// Algorithm 1: the indices of the points of `c` on its frontier, in frontier order. With
/// `memory_bucket` b > 0, of the frontier points with memory in one bucket [j·b, (j+1)·b) only
/// the fastest is kept, so a dropped point is covered by one at most b heavier and no slower; the
/// lightest point is always kept (so sums of thinned frontiers keep the exact least memory).
std::vector<int> reduce_indices(const std::vector<Point>& c, double memory_bucket = 0);

/// The frontier semiring for elimination_engine.h. Per table entry a frontier; per point a record
/// of the eliminated variable's value and the point of each input it sums.
class FrontierSum {
 public:
  using Value = Frontier;
  /// Per table entry: per kept point two ints (the value of the eliminated variable and which input
  /// gave the point of several, or a record of a product of several; the position in that input's
  /// frontier), then the products' records. 8 bytes a point and nothing per value: wide tables'
  /// entries mostly keep a few points, long chains' thousands.
  using Back = std::vector<int32_t>;
  static constexpr bool kTracksSizes = true;
  /// Bounds (elimination_engine.h): with incumbents, a point p of a new table entry is dropped when
  /// an incumbent beats p + `rest` (what the factors left add at least: per factor its least time
  /// and least memory) — strictly in time, with a margin far above rounding, and in memory or equal:
  /// every completion of p is then dominated by a solution that exists, so the frontier keeps every
  /// point it had (the caller adds the incumbents to the result).
  static constexpr bool kBounds = true;
  using Bound = Point;
  static Bound add(const Bound& a, const Bound& b) { return {a.time + b.time, a.memory + b.memory}; }
  static Bound sub(const Bound& a, const Bound& b) { return {a.time - b.time, a.memory - b.memory}; }
  static Bound largest(const Bound& a, const Bound& b) { return {std::max(a.time, b.time), std::max(a.memory, b.memory)}; }
  /// `b`, a running sum of `operations` additions and subtractions of terms >= 0 whose partial sums
  /// stayed below `largest`, less its rounding error (at most operations x 2^-53 x largest; twice
  /// that is taken off), at least 0: a lower bound on the exact sum.
  static Bound loosen(const Bound& b, const Bound& largest, int64_t operations);
  /// The least time and the least memory over a table's entries (0 for an impossible table: costs are >= 0).
  static Bound lower_of(const std::vector<Value>& table);

  /// `memory_bucket` as in reduce_indices, applied when choosing over a variable (not in sums);
  /// `time_weight`, `memory_weight` scalarise a frontier for the heuristic (score).
  explicit FrontierSum(double memory_bucket = 0, double time_weight = 1, double memory_weight = 0)
      : bucket_(memory_bucket), time_weight_(time_weight), memory_weight_(memory_weight) {}

  /// Complete solutions' costs (a frontier) that bounded eliminations compare against; empty = none.
  void set_incumbents(Frontier incumbents) { incumbents_ = std::move(incumbents); }

  static Value unit() { return {Point{}}; }
  static int64_t size(const Value& v) { return static_cast<int64_t>(v.size()); }
  /// Heap bytes of an entry and its record, with the allocator's overhead (a byte budget's measure).
  static int64_t bytes(const Value& v, const Back& b) {
    return static_cast<int64_t>(v.capacity() * sizeof(Point) + b.capacity() * sizeof(int32_t)) + 2 * 16;
  }
  /// The best weighted sum of time and memory on the frontier (+inf when empty).
  double score(const Value& v) const;

  /// reduce(∪_x ⊗_i at(i, x)), with the record of every kept point.
  template <class At>
  void eliminate(int k, int dv, const At& at, Value& out, Back& back) const {
    eliminate_frontiers(k, dv, gather(k, dv, at), out, back, nullptr);
  }
  template <class At>
  void eliminate(int k, int dv, const At& at, Value& out, Back& back, const Bound& rest) const {
    eliminate_frontiers(k, dv, gather(k, dv, at), out, back, incumbents_.empty() ? nullptr : &rest);
  }
  static int unroll(const Back& back, int point, int k, int* inputs);

 private:
  // ops[x * k + i]: input i's frontier when the variable takes value x (a per-thread buffer).
  template <class At>
  static const Frontier* const* gather(int k, int dv, const At& at) {
    thread_local std::vector<const Frontier*> ops;
    ops.resize(static_cast<size_t>(k) * dv);
    for (int x = 0; x < dv; ++x)
      for (int i = 0; i < k; ++i) ops[static_cast<size_t>(x) * k + i] = &at(i, x);
    return ops.data();
  }
  // `rest`: the bound to prune against the incumbents with (null: no pruning).
  void eliminate_frontiers(int k, int dv, const Frontier* const* ops, Frontier& out, Back& back,
                           const Bound* rest) const;
  double bucket_, time_weight_, memory_weight_;
  Frontier incumbents_;
};

}  // namespace tilewise::partition

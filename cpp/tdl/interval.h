// Intervals as first-class values (Halide Interval/Box): inclusive bounds, explicit empty.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace tilewise::tdl {

/// Inclusive integer interval [lo, hi]; empty when lo > hi.
struct Range {
  int64_t lo = 0;
  int64_t hi = -1;
  static Range nothing() { return {0, -1}; }
  static Range single_point(int64_t v) { return {v, v}; }
  bool empty() const { return lo > hi; }
  int64_t size() const { return empty() ? 0 : hi - lo + 1; }
  /// Smallest interval holding both.
  Range include(const Range& o) const {
    if (empty()) return o;
    if (o.empty()) return *this;
    return {std::min(lo, o.lo), std::max(hi, o.hi)};
  }
  Range intersect(const Range& o) const { return {std::max(lo, o.lo), std::min(hi, o.hi)}; }
  friend bool operator==(const Range& a, const Range& b) {
    return (a.empty() && b.empty()) || (a.lo == b.lo && a.hi == b.hi);
  }
};

/// One Range per dimension; empty when any dimension is empty.
struct Box {
  std::vector<Range> dims;
  bool none = false;  ///< explicitly empty: the only way a rank-0 box (one element) can be empty
  static Box nothing(size_t rank) { return Box{std::vector<Range>(rank, Range::nothing()), true}; }
  bool empty() const {
    return none || std::any_of(dims.begin(), dims.end(), [](const Range& r) { return r.empty(); });
  }
  /// Bounding box of both (an empty box contributes nothing).
  Box include(const Box& o) const {
    if (empty()) return o;
    if (o.empty()) return *this;
    Box r = *this;
    for (size_t d = 0; d < dims.size(); ++d) r.dims[d] = dims[d].include(o.dims[d]);
    return r;
  }
  int64_t volume() const {
    if (none) return 0;
    int64_t v = 1;
    for (const auto& r : dims) v *= r.size();
    return v;
  }
};

/// Interval with bounds in any ordered domain (integers, or affine forms of extents).
template <class T>
struct Interval {
  T lo, hi;
};

}  // namespace tilewise::tdl

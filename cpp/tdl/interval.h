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
  /// The whole of a tensor of this shape: [0, n-1] per dimension.
  static Box whole(const std::vector<int64_t>& shape) {
    Box b;
    b.dims.reserve(shape.size());
    for (int64_t n : shape) b.dims.push_back({0, n - 1});
    return b;
  }
};

// Box geometry, shared by the cost model (counting) and the runtime (copying): one definition of
// "inside" and "meets" so the two never disagree about an edge.

/// Same elements (every empty box is the same box).
inline bool same_box(const Box& a, const Box& b) {
  if (a.empty() || b.empty()) return a.empty() && b.empty();
  return a.dims.size() == b.dims.size() && std::equal(a.dims.begin(), a.dims.end(), b.dims.begin());
}

/// Box intersection (empty when they do not meet).
inline Box intersect(const Box& a, const Box& b) {
  if (a.empty() || b.empty()) return Box::nothing(a.dims.size());
  Box r{std::vector<Range>(a.dims.size())};
  for (size_t d = 0; d < a.dims.size(); ++d) r.dims[d] = a.dims[d].intersect(b.dims[d]);
  return r;
}

/// Elements in both, without building the intersection (the planners' inner loop calls this).
inline int64_t intersect_volume(const Box& a, const Box& b) {
  if (a.empty() || b.empty()) return 0;
  int64_t v = 1;
  for (size_t d = 0; d < a.dims.size(); ++d) {
    int64_t n = a.dims[d].intersect(b.dims[d]).size();
    if (n == 0) return 0;
    v *= n;
  }
  return v;
}

/// Whether `inner` lies inside `outer` (an empty box lies inside anything).
inline bool inside(const Box& inner, const Box& outer) {
  if (inner.empty()) return true;
  if (outer.empty()) return false;
  for (size_t d = 0; d < inner.dims.size(); ++d)
    if (inner.dims[d].lo < outer.dims[d].lo || inner.dims[d].hi > outer.dims[d].hi) return false;
  return true;
}

/// The grid inside `within` cut by the edges of `boxes`: calls cell(box) for every cell, in
/// row-major order of the grid (last dimension slowest). Membership in each of `boxes` is constant
/// on a cell, which is what lets callers decide per cell who holds it. The cell passed is reused
/// between calls (no allocation per cell); copy it to keep it.
template <class Cell>
void for_each_cell(const Box& within, const std::vector<const Box*>& boxes, Cell&& cell) {
  if (within.empty()) return;
  const size_t rank = within.dims.size();
  std::vector<std::vector<int64_t>> cuts(rank);
  for (size_t k = 0; k < rank; ++k) {
    cuts[k] = {within.dims[k].lo, within.dims[k].hi + 1};
    for (const Box* b : boxes) {
      if (b->empty()) continue;
      for (int64_t e : {b->dims[k].lo, b->dims[k].hi + 1})
        if (e > within.dims[k].lo && e <= within.dims[k].hi) cuts[k].push_back(e);
    }
    std::sort(cuts[k].begin(), cuts[k].end());
    cuts[k].erase(std::unique(cuts[k].begin(), cuts[k].end()), cuts[k].end());
  }
  std::vector<size_t> idx(rank, 0);
  Box c{std::vector<Range>(rank)};
  while (true) {
    for (size_t k = 0; k < rank; ++k) c.dims[k] = {cuts[k][idx[k]], cuts[k][idx[k] + 1] - 1};
    cell(static_cast<const Box&>(c));
    size_t k = 0;
    for (; k < rank; ++k) {
      if (++idx[k] + 1 < cuts[k].size()) break;
      idx[k] = 0;
    }
    if (k == rank) return;
  }
}

/// Interval with bounds in any ordered domain (integers, or affine forms of extents).
template <class T>
struct Interval {
  T lo, hi;
};

}  // namespace tilewise::tdl

// Sizes the analyses can do their arithmetic on without overflowing int64, checked where
// shapes, index coefficients and expressions are made, so that what lies beyond them is a
// typed error up front instead of signed overflow (or a hang) deep inside an analysis.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tdl/errors.h"

namespace tilewise::tdl {

/// Largest extent of one tensor dimension or index variable: 2^40. A coefficient times an
/// extent, and an extent times a device count, stay far from 2^63.
inline constexpr int64_t kMaxExtent = int64_t{1} << 40;
/// Largest element count of one tensor: 2^44 (64 TiB of float32). Bytes summed over a
/// graph of up to 2^16 such tensors still fit int64.
inline constexpr int64_t kMaxElements = int64_t{1} << 44;
/// Deepest value expression (nested operations) a description may have. The analyses walk
/// expressions recursively; 20,000 chained additions overflowed the stack.
inline constexpr int kMaxExprDepth = 2000;

/// The product of `extents`, or -1 when it exceeds `limit` (never overflows).
inline int64_t bounded_product(const std::vector<int64_t>& extents, int64_t limit) {
  for (int64_t d : extents)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : extents) {
    if (d < 0 || d > limit || n > limit / d) return -1;
    n *= d;
  }
  return n;
}

/// Throws ShapeError naming `what` unless every extent is in [0, kMaxExtent] and the
/// element count is at most kMaxElements; returns the element count.
inline int64_t check_shape_size(const std::vector<int64_t>& shape, const std::string& what) {
  auto shape_str = [&] {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
  };
  for (int64_t d : shape) {
    if (d < 0) throw ShapeError(what + " has a negative extent: " + shape_str());
    if (d > kMaxExtent)
      throw ShapeError(what + " has extent " + std::to_string(d) + " in shape " + shape_str() +
                       "; extents may be at most 2^40 = " + std::to_string(kMaxExtent));
  }
  int64_t n = bounded_product(shape, kMaxElements);
  if (n < 0)
    throw ShapeError(what + " of shape " + shape_str() + " has more than 2^44 = " + std::to_string(kMaxElements) +
                     " elements");
  return n;
}

}  // namespace tilewise::tdl

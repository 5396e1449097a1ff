// Strided copies between row-major buffers that hold boxes of one tensor: how fetched regions are
// assembled in place (Tofu §6 MultiFetch), partial sums accumulated and tiles scattered/gathered.
#pragma once
#include <cstdint>

#include "tdl/expr.h"
#include "tdl/interval.h"

namespace tilewise::exec {

using tdl::Box;
using tdl::Range;

/// dst[what] = src[what]: `src` holds `src_box`, `dst` holds `dst_box` (row-major, global
/// coordinates, elements of `element_bytes` each: 4 for float32, 8 for int64 ids, 1 for bool
/// masks); `what` must lie inside both. A rank-0 box is one element.
void copy_box(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& what,
              int64_t element_bytes = 4);

/// dst[what] = reducer(dst[what], src[what]) (Sum adds; Max, Min, Prod likewise), same conventions;
/// float32 only (only computed tensors are combined, and ops compute float32).
void combine_box(const float* src, const Box& src_box, float* dst, const Box& dst_box, const Box& what,
                 tdl::Reducer reducer);

/// NaN and infinite values among the floats of `what` in a buffer holding `box`
/// (exe.step(check_finite=True)).
struct NonFinite {
  int64_t nan = 0, inf = 0;
  bool any() const { return nan + inf > 0; }
};
NonFinite count_nonfinite(const float* buf, const Box& box, const Box& what);

}  // namespace tilewise::exec

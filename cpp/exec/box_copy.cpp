#include "exec/box_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tdl/errors.h"

namespace tilewise::exec {

namespace {

// Calls row(src_offset, dst_offset, length) for every innermost run of `what`.
template <class Row>
void for_each_row(const Box& src_box, const Box& dst_box, const Box& what, Row row) {
  const size_t rank = what.dims.size();
  if (what.empty()) return;
  TW_ASSERT(tdl::inside(what, src_box) && tdl::inside(what, dst_box), "a copied box lies inside both buffers");
  if (rank == 0) {
    row(0, 0, 1);
    return;
  }
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    src_stride[d - 1] = src_stride[d] * src_box.dims[d].size();
    dst_stride[d - 1] = dst_stride[d] * dst_box.dims[d].size();
  }
  const int64_t len = what.dims[rank - 1].size();
  std::vector<int64_t> idx(rank, 0);
  for (size_t d = 0; d < rank; ++d) idx[d] = what.dims[d].lo;
  while (true) {
    int64_t so = 0, doff = 0;
    for (size_t d = 0; d < rank; ++d) {
      so += (idx[d] - src_box.dims[d].lo) * src_stride[d];
      doff += (idx[d] - dst_box.dims[d].lo) * dst_stride[d];
    }
    row(so, doff, len);
    if (rank == 1) return;
    size_t d = rank - 2;
    while (true) {
      if (++idx[d] <= what.dims[d].hi) break;
      idx[d] = what.dims[d].lo;
      if (d == 0) return;
      --d;
    }
  }
}

}  // namespace

void copy_box(const float* src, const Box& src_box, float* dst, const Box& dst_box, const Box& what) {
  for_each_row(src_box, dst_box, what, [&](int64_t s, int64_t d, int64_t n) {
    std::memcpy(dst + d, src + s, static_cast<size_t>(n) * sizeof(float));
  });
}

void combine_box(const float* src, const Box& src_box, float* dst, const Box& dst_box, const Box& what,
                 tdl::Reducer reducer) {
  for_each_row(src_box, dst_box, what, [&](int64_t s, int64_t d, int64_t n) {
    float* o = dst + d;
    const float* x = src + s;
    switch (reducer) {
      case tdl::Reducer::kSum: for (int64_t i = 0; i < n; ++i) o[i] += x[i]; break;
      case tdl::Reducer::kProd: for (int64_t i = 0; i < n; ++i) o[i] *= x[i]; break;
      case tdl::Reducer::kMax: for (int64_t i = 0; i < n; ++i) o[i] = std::max(o[i], x[i]); break;
      case tdl::Reducer::kMin: for (int64_t i = 0; i < n; ++i) o[i] = std::min(o[i], x[i]); break;
    }
  });
}

}  // namespace tilewise::exec

#include "exec/box_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "tdl/errors.h"

namespace tilewise::exec {

namespace {

// Calls row(src_offset, dst_offset, length) for every contiguous run of `what`: the innermost
// dimensions that `what` covers whole in both buffers merge with the one outside them, so a box of
// whole rows (a 1x1 convolution's weights, a batch slice) is one run, not one per innermost row.
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
  auto whole = [&](size_t d) {
    return what.dims[d].lo == src_box.dims[d].lo && what.dims[d].hi == src_box.dims[d].hi &&
           what.dims[d].lo == dst_box.dims[d].lo && what.dims[d].hi == dst_box.dims[d].hi;
  };
  size_t inner = rank - 1;  // runs span dimensions inner.. (whole beyond inner)
  int64_t len = what.dims[rank - 1].size();
  while (inner > 0 && whole(inner)) len *= what.dims[--inner].size();
  int64_t so = 0, doff = 0;
  for (size_t d = 0; d < rank; ++d) {
    so += (what.dims[d].lo - src_box.dims[d].lo) * src_stride[d];
    doff += (what.dims[d].lo - dst_box.dims[d].lo) * dst_stride[d];
  }
  if (inner == 0) {
    row(so, doff, len);
    return;
  }
  // Odometer over the outer dimensions 0..inner-1, offsets updated incrementally.
  std::vector<int64_t> idx(inner, 0);
  while (true) {
    row(so, doff, len);
    size_t d = inner - 1;
    while (true) {
      if (++idx[d] < what.dims[d].size()) {
        so += src_stride[d], doff += dst_stride[d];
        break;
      }
      so -= (what.dims[d].size() - 1) * src_stride[d], doff -= (what.dims[d].size() - 1) * dst_stride[d];
      idx[d] = 0;
      if (d == 0) return;
      --d;
    }
  }
}

}  // namespace

void copy_box(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& what,
              int64_t element_bytes) {
  const auto* from = static_cast<const unsigned char*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  const auto e = static_cast<size_t>(element_bytes);
  for_each_row(src_box, dst_box, what, [&](int64_t s, int64_t d, int64_t n) {
    std::memcpy(to + static_cast<size_t>(d) * e, from + static_cast<size_t>(s) * e, static_cast<size_t>(n) * e);
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

#include "exec/box_copy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tdl/errors.h"

namespace tilewise::exec {

namespace {

// Calls rows(src_offset, dst_offset, length, count, src_step, dst_step) for every contiguous run of
// `what`, `count` runs at a time: the innermost dimensions that `what` covers whole in both buffers
// merge with the one outside them, so a box of whole rows (a 1x1 convolution's weights, a batch
// slice) is one run, not one per innermost row; the runs along the next dimension out come as one
// call (offsets advancing by the steps), so a box of narrow columns costs a tight loop per run, not
// an odometer step (random plans split images along their width: runs of 2-8 floats).
template <class Rows>
void for_each_run(const Box& src_box, const Box& dst_box, const Box& what, Rows rows) {
  const size_t rank = what.dims.size();
  if (what.empty()) return;
  TW_ASSERT(tdl::inside(what, src_box) && tdl::inside(what, dst_box), "a copied box lies inside both buffers");
  if (rank == 0) {
    rows(0, 0, 1, 1, 0, 0);
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
    rows(so, doff, len, 1, 0, 0);
    return;
  }
  // Dimension inner-1 is the batch of runs; an odometer over dimensions 0..inner-2, offsets updated
  // incrementally.
  const size_t batch = inner - 1;
  const int64_t count = what.dims[batch].size();
  if (batch == 0) {
    rows(so, doff, len, count, src_stride[0], dst_stride[0]);
    return;
  }
  std::vector<int64_t> idx(batch, 0);
  while (true) {
    rows(so, doff, len, count, src_stride[batch], dst_stride[batch]);
    size_t d = batch - 1;
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

// `count` runs of B bytes: a fixed-size copy the compiler inlines (a memcpy call per run of a few
// bytes costs more than the bytes).
template <size_t B>
void copy_runs_of(unsigned char* to, const unsigned char* from, int64_t count, size_t src_step, size_t dst_step) {
  for (int64_t k = 0; k < count; ++k, from += src_step, to += dst_step) std::memcpy(to, from, B);
}

template <class Op>
void combine_runs(float* dst, const float* src, int64_t n, int64_t count, int64_t src_step, int64_t dst_step, Op op) {
  for (int64_t k = 0; k < count; ++k, src += src_step, dst += dst_step)
    for (int64_t i = 0; i < n; ++i) dst[i] = op(dst[i], src[i]);
}

}  // namespace

void copy_box(const void* src, const Box& src_box, void* dst, const Box& dst_box, const Box& what,
              int64_t element_bytes) {
  const auto* from = static_cast<const unsigned char*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  const auto e = static_cast<size_t>(element_bytes);
  for_each_run(src_box, dst_box, what, [&](int64_t s, int64_t d, int64_t n, int64_t count, int64_t ss, int64_t ds) {
    const unsigned char* f = from + static_cast<size_t>(s) * e;
    unsigned char* t = to + static_cast<size_t>(d) * e;
    const size_t bytes = static_cast<size_t>(n) * e, fs = static_cast<size_t>(ss) * e, ts = static_cast<size_t>(ds) * e;
    switch (bytes) {
      case 4: copy_runs_of<4>(t, f, count, fs, ts); return;
      case 8: copy_runs_of<8>(t, f, count, fs, ts); return;
      case 12: copy_runs_of<12>(t, f, count, fs, ts); return;
      case 16: copy_runs_of<16>(t, f, count, fs, ts); return;
      case 24: copy_runs_of<24>(t, f, count, fs, ts); return;
      case 32: copy_runs_of<32>(t, f, count, fs, ts); return;
      case 48: copy_runs_of<48>(t, f, count, fs, ts); return;
      case 64: copy_runs_of<64>(t, f, count, fs, ts); return;
      default:
        for (int64_t k = 0; k < count; ++k, f += fs, t += ts) std::memcpy(t, f, bytes);
    }
  });
}

void combine_box(const float* src, const Box& src_box, float* dst, const Box& dst_box, const Box& what,
                 tdl::Reducer reducer) {
  for_each_run(src_box, dst_box, what, [&](int64_t s, int64_t d, int64_t n, int64_t count, int64_t ss, int64_t ds) {
    float* o = dst + d;
    const float* x = src + s;
    switch (reducer) {
      case tdl::Reducer::kSum: combine_runs(o, x, n, count, ss, ds, [](float a, float b) { return a + b; }); break;
      case tdl::Reducer::kProd: combine_runs(o, x, n, count, ss, ds, [](float a, float b) { return a * b; }); break;
      // NaN wins and stays, as in the kernels' and the interpreter's Max and Min: a NaN partial on
      // one device must not be dropped by the combine (std::max(a, NaN) is a).
      case tdl::Reducer::kMax:
        combine_runs(o, x, n, count, ss, ds, [](float a, float b) { return std::isnan(b) || b > a ? b : a; });
        break;
      case tdl::Reducer::kMin:
        combine_runs(o, x, n, count, ss, ds, [](float a, float b) { return std::isnan(b) || b < a ? b : a; });
        break;
    }
  });
}

NonFinite count_nonfinite(const float* buf, const Box& box, const Box& what) {
  NonFinite out;
  for_each_run(box, what, what, [&](int64_t s, int64_t, int64_t n, int64_t count, int64_t ss, int64_t) {
    for (int64_t k = 0; k < count; ++k) {
      const float* x = buf + s + k * ss;
      bool bad = false;  // one branch-free pass over the run first: almost every run is finite
      for (int64_t i = 0; i < n; ++i) bad |= !std::isfinite(x[i]);
      if (!bad) continue;
      for (int64_t i = 0; i < n; ++i)
        if (std::isnan(x[i])) ++out.nan;
        else if (std::isinf(x[i])) ++out.inf;
    }
  });
  return out;
}

}  // namespace tilewise::exec

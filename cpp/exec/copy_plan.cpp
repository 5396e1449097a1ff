#include "exec/copy_plan.h"

#include "tdl/errors.h"

namespace tilewise::exec {

int64_t CopyPlan::runs() const {
  int64_t n = 1;
  for (int64_t e : extents) n *= e;
  return n;
}

void CopyPlan::offsets(int64_t i, int64_t* src, int64_t* dst) const {
  int64_t run = i / run_length, within = i % run_length;
  int64_t s = src_base + within, d = dst_base + within;
  // Innermost outer dimension first: the run index in mixed radix `extents`.
  for (size_t k = extents.size(); k-- > 0;) {
    const int64_t idx = run % extents[k];
    run /= extents[k];
    s += idx * src_strides[k];
    d += idx * dst_strides[k];
  }
  *src = s;
  *dst = d;
}

CopyPlan plan_copy(const tdl::Box& src_box, const tdl::Box& dst_box, const tdl::Box& what) {
  CopyPlan plan;
  if (what.empty()) return plan;
  TW_ASSERT(tdl::inside(what, src_box) && tdl::inside(what, dst_box), "a copied box lies inside both buffers");
  const size_t rank = what.dims.size();
  plan.run_length = 1;
  if (rank == 0) return plan;
  std::vector<int64_t> src_stride(rank, 1), dst_stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    src_stride[d - 1] = src_stride[d] * src_box.dims[d].size();
    dst_stride[d - 1] = dst_stride[d] * dst_box.dims[d].size();
  }
  auto whole = [&](size_t d) {
    return what.dims[d].lo == src_box.dims[d].lo && what.dims[d].hi == src_box.dims[d].hi &&
           what.dims[d].lo == dst_box.dims[d].lo && what.dims[d].hi == dst_box.dims[d].hi;
  };
  // The same merging as box_copy.cpp's for_each_run: runs span dimensions inner.. .
  size_t inner = rank - 1;
  int64_t len = what.dims[rank - 1].size();
  while (inner > 0 && whole(inner)) len *= what.dims[--inner].size();
  plan.run_length = len;
  for (size_t d = 0; d < rank; ++d) {
    plan.src_base += (what.dims[d].lo - src_box.dims[d].lo) * src_stride[d];
    plan.dst_base += (what.dims[d].lo - dst_box.dims[d].lo) * dst_stride[d];
  }
  for (size_t d = 0; d < inner; ++d) {
    plan.extents.push_back(what.dims[d].size());
    plan.src_strides.push_back(src_stride[d]);
    plan.dst_strides.push_back(dst_stride[d]);
  }
  return plan;
}

void run_copy_plan(const CopyPlan& plan, const float* src, float* dst) {
  const int64_t n = plan.elements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t s, d;
    plan.offsets(i, &s, &d);
    dst[d] = src[s];
  }
}

}  // namespace tilewise::exec

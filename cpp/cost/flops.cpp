#include "cost/flops.h"

#include <algorithm>

#include "tdl/op_cost.h"

namespace tilewise::cost {

std::vector<int64_t> flops_per_device(const std::vector<OpView>& ops, const std::vector<OpSplit>& splits,
                                      const std::vector<int>& parts) {
  const int m = static_cast<int>(parts.size());
  const int64_t n = device_count(parts);
  std::vector<int64_t> out(n, 0);
  for (size_t o = 0; o < ops.size(); ++o) {
    const OpView& view = ops[o];
    auto work = tdl::op_work(*view.desc, view.extents, view.input_shapes);
    double out_elems = 1, iter = 1;
    for (int64_t s : view.output_shape) out_elems *= static_cast<double>(s);
    for (int64_t e : view.extents) iter *= static_cast<double>(std::max<int64_t>(e, 1));
    double flops = work.flops_per_element * out_elems;
    for (int64_t d = 0; d < n; ++d) {
      auto ranges = var_ranges(view.extents, splits[o], parts, device_coords(d, parts, m));
      double share = 1;
      for (const auto& r : ranges) share *= static_cast<double>(std::max<int64_t>(r.size(), 1));
      out[d] += static_cast<int64_t>(flops * share / iter);
    }
  }
  return out;
}

}  // namespace tilewise::cost

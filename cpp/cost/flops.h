// Arithmetic per device (DESIGN.md "Cost of an op"): each op's FLOPs (tdl::op_work) in proportion
// to the device's share of its iteration space. Read by `evaluate` and the runtime's statistics.
#pragma once
#include <cstdint>
#include <vector>

#include "cost/comm_cost.h"

namespace tilewise::cost {

/// FLOPs each device performs for the ops `ops` (views of the graph's ops, in order) under
/// `splits` over all steps of `parts`: [device].
std::vector<int64_t> flops_per_device(const std::vector<OpView>& ops, const std::vector<OpSplit>& splits,
                                      const std::vector<int>& parts);

}  // namespace tilewise::cost

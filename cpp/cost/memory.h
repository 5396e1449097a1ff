// Per-device memory of a partitioned training iteration (TensorOpt §2.1, Tofu §5 "memory"): the
// local tiles of every tensor while it is alive plus the buffers an op needs for communication,
// peaked over the ops in graph order. The runtime's static memory planner follows the same rules.
#pragma once
#include <cstdint>
#include <vector>

#include "cost/comm_cost.h"
#include "graph/graph.h"

namespace tilewise::cost {

struct MemoryEstimate {
  std::vector<int64_t> peak;        ///< per device: the largest footprint over the ops
  std::vector<int64_t> resident;    ///< per device: tiles alive the whole iteration (parameters, optimizer
                                    ///< state, constants, inputs, labels)
  std::vector<int> peak_op;         ///< per device: the op at which the peak occurs (-1 for an empty graph)
};

/// Lifetimes: parameters, optimizer state, constants, inputs and labels live all iteration; an
/// optimizer's new value is written in place of the tensor it updates (0 bytes); any other tensor
/// lives from its producer to its last consumer. While an op runs on device d it also holds
/// what it fetches (sum over inputs of |reads \ tile|), a buffer for the region it computes when
/// that is not exactly its own tile of the output (partial sums, misplaced rows), and the elements
/// it receives in the output conversion.
MemoryEstimate estimate_memory(const graph::Graph& g, const std::vector<OpView>& ops,
                               const std::vector<Tiling>& tilings, const std::vector<OpSplit>& splits,
                               const std::vector<int>& parts);

}  // namespace tilewise::cost

// What a partition plan decides, without how it was found: the devices, the part count of each
// recursion step, and per tensor its cuts and per op its strategies. Planners (cpp/partition)
// produce one; the cost model and the runtime (cpp/exec) consume it, so it lives here, below both.
#pragma once
#include <string>
#include <vector>

#include "cost/tiling.h"
#include "graph/graph.h"

namespace tilewise::cost {

/// Per tensor its cuts, per op its strategies (one per decided step).
struct Assignment {
  std::vector<Tiling> tilings;
  std::vector<OpSplit> splits;
};

/// A placement of a graph on devices: everything lowering needs from a plan.
struct Placement {
  int devices = 1;
  std::vector<int> parts;  ///< the cuts' part counts, first (slowest link) first
  Assignment assignment;   ///< per tensor its cuts, per op its strategies
};

/// Why `placement` does not fit `g` (tensor/op counts, step counts, a cut or strategy out of
/// range, parts that do not multiply to its devices), or "" when it fits. A message rather than an
/// exception: the planners report a misfit as PlanError, the runtime as ExecError.
std::string placement_misfit(const graph::Graph& g, const Placement& placement);

}  // namespace tilewise::cost

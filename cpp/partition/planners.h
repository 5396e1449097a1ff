// The planners behind `partition` (internal to cpp/partition).
#pragma once
#include "partition/plan.h"

namespace tilewise::partition {

/// Tofu §5.2 / SoyBean Algorithm 1: one exact min-sum search per recursion step over the classes,
/// each step seeing the previous steps' choices. The baselines are this search with narrower choices.
/// Eliminations go in greedy min-weight order (SoyBean's BFS levels of a training graph interleave
/// forward and backward ops and need tables past 2^26 entries on WResNet-152 and RNN-10).
Plan plan_recursive(const Problem& p, const Policy& policy, const SearchOptions& options,
                    std::chrono::steady_clock::time_point deadline);

/// Spartan §2.3.3 (Fig. 2.8): per step, decide the most connected class first, each at its cheapest
/// choice given what is decided (undecided neighbours at their best), with optional duplication.
Plan plan_spartan(const Problem& p, const Policy& policy, const SearchOptions& options,
                  std::chrono::steady_clock::time_point deadline);

/// Every combination of whole tilings (all steps at once) for the tensor classes; each op class at
/// its best split sequence. The oracle for small graphs.
Plan plan_brute_force(const Problem& p, const Policy& policy, const SearchOptions& options,
                      std::chrono::steady_clock::time_point deadline);

}  // namespace tilewise::partition

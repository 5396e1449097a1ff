// ODSwap, SwapAdvisor's online baseline (§5.1): memory from a buddy allocator as tensors need it; when
// an op's tensor does not fit, the least recently used tensors not needed by the op are evicted (copied
// out unless the host has them) until it does; a prefetcher brings the inputs of the next ops in the
// schedule into free memory while the current op runs, never evicting for them (when nothing used is
// left to evict, a prefetched tensor is dropped, the one needed last; then an input of the op placed
// earlier, which fragments the blocks, leaves and comes back). The executor issues
// everything on demand: an eviction or swap-in for an op starts only when the op before it has ended.
// The steady state is timed: the second iteration, starting from what the first left in memory.
#pragma once
#include "swap/plan.h"

namespace tilewise::swap {

/// How far ahead the prefetcher looks: the inputs of this many following ops.
inline constexpr int kOdswapLookahead = 2;

/// ODSwap's swaps for `schedule` in the problem's capacity. Throws SwapError for a bad schedule and
/// when an op's inputs and outputs cannot be placed even with everything else evicted (naming the op).
SwapPlan odswap_plan(const Problem& p, const Schedule& schedule);

}  // namespace tilewise::swap

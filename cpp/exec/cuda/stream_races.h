// A check of a launch plan's streams, on the host: every pair of instructions on different streams
// of one GPU that touch the same bytes (the same buffer, or two buffers the arena planner placed on
// overlapping bytes at different times), at least one of them writing, must be ordered by the plan's
// events. The GPU runs each stream in issue order and orders streams only through cudaEventRecord /
// cudaStreamWaitEvent (a Wait waits for the last Record of its event issued before it), while the
// host executable runs everything in one order, so a missing event is invisible to the host tests;
// this check finds it. Happens-before is computed with vector clocks over the three streams in the
// executor's issue order (program order; a swapped program's stream_order).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "exec/cuda/launch_plan.h"
#include "exec/cuda/swapped_launch.h"
#include "exec/lowering.h"

namespace tilewise::exec::cuda {

/// Two unordered instructions on different streams that touch the same bytes.
struct StreamRace {
  size_t first = 0, second = 0;  ///< instruction indices, `first` issued earlier
  std::string what;              ///< the instructions, their streams, the buffers and the access kinds
};

/// The races of `device`'s launch plan `plan` (of `low`), in the order found; at most `limit`;
/// `ordered` (when given): how many cross-stream pairs touching the same bytes the events do order. A
/// swapped program needs its SwappedLaunch: buffers start a step in their home objects and are where
/// their Alloc, or the compute stream's Wait for their SwapIn, places them, as the executors place
/// them; a SwapIn writes and a SwapOut reads at their own offsets.
std::vector<StreamRace> stream_races(const Lowered& low, const LaunchPlan& plan, int device, size_t limit = 20,
                                     const SwappedLaunch* swapped = nullptr, size_t* ordered = nullptr);

}  // namespace tilewise::exec::cuda

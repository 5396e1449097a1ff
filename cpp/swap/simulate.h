// Timing a swap plan (SwapAdvisor §4.2-4.3): the augmented graph as tasks of the discrete-event
// simulator (sim/simulator.h) on three streams, one for compute and one per copy direction (§4.3.1).
// The host link is shared and duplex: a swap-in uses the resource "host->device" (capacity one_way)
// and the resource "host link" (capacity both_ways), a swap-out "device->host" and "host link"; one
// direction alone moves at one_way, both together at both_ways / 2 each. Op times are fixed. The
// search's fitness runs it for every individual, so it replays the three streams directly (same times).
#pragma once
#include <cstdint>
#include <vector>

#include "sim/simulator.h"
#include "swap/plan.h"

namespace tilewise::swap {

/// Simulator streams of a plan.
enum Stream : int { kCompute = 0, kSwapIn = 1, kSwapOut = 2 };

/// When every node of a plan ran.
struct PlanTimes {
  double makespan = 0;
  std::vector<double> op_start, op_end;        ///< per schedule position
  std::vector<double> in_start, in_end;        ///< per swap-in
  std::vector<double> out_start, out_end;      ///< per swap-out
  std::vector<double> stay_start, stay_end;    ///< per stay: when the tensor held its object
  std::vector<double> stream_busy;             ///< compute, swap-in, swap-out: seconds busy
  int64_t peak_memory = 0;        ///< most bytes of objects holding a tensor at once
  int64_t peak_tensor_bytes = 0;  ///< most bytes of tensors in memory at once
};

/// Times `plan`; with `details` false only the makespan and stream_busy are filled (the search's
/// fitness). Throws std::invalid_argument on a dependency cycle (naming it).
PlanTimes simulate_plan(const Problem& p, const SwapPlan& plan, bool details = true);

/// The plan's tasks (compute positions, swap-ins, swap-outs) timed: by default by a replay of the
/// three streams that does the general simulator's arithmetic without its heap and task list (what
/// simulate_plan uses); with `general`, by sim::simulate itself. The two are equal to the last bit
/// (tested): the fast one is only faster.
sim::Timeline plan_timeline(const Problem& p, const SwapPlan& plan, bool general = false);

/// A plan with its simulated times: what the planners' callers get.
struct TimedPlan {
  SwapPlan plan;
  PlanTimes times;
};

/// `plan` and simulate_plan(p, plan).
TimedPlan timed(const Problem& p, SwapPlan plan);

}  // namespace tilewise::swap

// Lowering a swap plan (SwapAdvisor §4.3, Figs. 4.2-4.3): one device's program in which memory is a
// pool of objects and tensors move between it and a host store. The base is the one-device lowering
// (lowering.h): its buffers (tiles of tensors, regions assembled for ops) and its per-op copy and
// compute instructions are kept; what changes is where buffers live and when:
//  - ops run in the plan's schedule order on the "compute" stream;
//  - a buffer lives at the offset of the memory object the plan gives it (`Alloc` with `offset`),
//    for each stay anew: a tensor swapped back in may land in another object (`Instr::offset`);
//  - swap-ins on the "swap-in" stream, swap-outs on the "swap-out" stream, and `Record`/`Wait`
//    events for the plan's control edges: swap-in -> the op reading it; swap-out (or the last use
//    of a dropped tensor) -> the swap-in or op taking its object; last use -> swap-out.
// Exec cannot see the swap stage (it sits above), so the plan arrives as `SwapSchedule`, in the
// base program's buffer ids; the layer composing the stages converts a swap::SwapPlan into it.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "exec/lowering.h"
#include "graph/graph.h"

namespace tilewise::exec {

/// Where a stay of a buffer in an object begins or ends (swap::Stay::Edge, same values).
enum class StayEdge : int { kIterationStart, kOpStart, kOpEnd, kSwapInStart, kSwapInEnd, kSwapOutEnd, kIterationEnd };

/// What must have ended before something may start: the op at a schedule position, a swap-out, a
/// swap-in (indices; -1: nothing).
struct SwapReady {
  int op = -1, swap_out = -1, swap_in = -1;
};

/// A swap plan in exec's terms. Buffers are ids of the base one-device program (`one_device_base`).
struct SwapSchedule {
  std::vector<int> order;                   ///< graph op ids, in run order
  int64_t memory_bytes = 0;                 ///< the pool
  std::vector<std::pair<int64_t, int64_t>> objects;  ///< per object: (offset, bytes)
  struct In {
    int buffer = -1, object = -1, position = -1;
    SwapReady after;
    int issued = -1;  ///< not before the op at this position ended (-1: none)
  };
  struct Out {
    int buffer = -1, object = -1, after = -1;  ///< after: the position of its last use
    int issued = -1;
  };
  struct Stay {
    int buffer = -1, object = -1;
    StayEdge from = StayEdge::kIterationStart, to = StayEdge::kIterationEnd;
    int from_index = -1, to_index = -1;
  };
  std::vector<In> swap_ins;              ///< in swap-in stream order
  std::vector<Out> swap_outs;            ///< in swap-out stream order
  std::vector<SwapReady> outputs_ready;  ///< per position: its outputs' objects are free
  std::vector<Stay> stays;
};

/// The one-device lowering a swap plan refers to (its program's buffers are the plan's tensors).
/// `in_place`: gradient sums stored in their running total (lower's `in_place`), for plans made
/// with in-place sums.
Lowered one_device_base(const graph::Graph& g, const std::vector<int>& keep,
                        const std::vector<std::pair<int, int>>& in_place = {});

/// Where a buffer's data is between steps: an object of the pool (`object` >= 0) or the host store.
struct SwapHome {
  int object = -1;  ///< at the start of a step (initial residents), -1: on the host
  int end_object = -1;  ///< at the end of a step (results kept on the device), -1: on the host
};

/// A graph lowered for swapped execution.
struct SwappedLowered {
  Lowered low;                     ///< programs[0] is the swapped program (3 streams); ops, tiles as the base
  SwapSchedule schedule;
  std::vector<SwapHome> home;      ///< per buffer
  int64_t swap_in_bytes = 0, swap_out_bytes = 0;
};

/// Lowers `g` under swap plan `s`. Throws ExecError when the plan does not fit the graph's base
/// program: a schedule that is not an order of every op (or breaks a dependency), an object or
/// buffer out of range, a buffer larger than its object or an object past the pool, two tensors in
/// one object at once, an op whose buffers are not all in memory when it runs, an initial resident
/// not back in its object at the end, a tensor living across steps updated in place but neither
/// copied out after its update nor kept (a single-pass plan), control edges that cannot all be met
/// (a cycle), a base program
/// with buffers the pool cannot hold (partials of a reduction: never on one device).
SwappedLowered lower_swapped(const graph::Graph& g, const SwapSchedule& s, const std::vector<int>& keep = {},
                             const std::vector<std::pair<int, int>>& in_place = {});

}  // namespace tilewise::exec

// The augmented dataflow graph (SwapAdvisor §4.3, Figs. 4.2-4.3): the schedule's ops plus swap-in and
// swap-out nodes, and the control edges that keep memory safe:
//   swap-in  -> the op that reads it        (the op starts only once its input is in memory)
//   swap-out -> the swap-in or op that takes its object (memory is free only once the copy is done)
//   last use -> swap-out                    (a tensor leaves only after the op using it has ended)
// An unchanged tensor (a parameter never updated, an activation copied out before) is dropped, not
// copied: the next occupant of its object waits for its last use alone. The swap planner (planner.h)
// and ODSwap (odswap.h) both produce one; simulate.h times it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "swap/pool.h"
#include "swap/schedule.h"

namespace tilewise::swap {

/// What must have ended before an object can take its next tensor. Every stream runs in order, so the
/// latest task on each suffices (merging two objects takes the later).
struct Ready {
  int op = -1;        ///< schedule position whose op must have ended (-1: none)
  int swap_out = -1;  ///< swap-out that must have ended: the object's tensor copied out (-1: none)
  int swap_in = -1;   ///< swap-in that must have ended: a prefetched tensor dropped unused (ODSwap; -1: none)
  void merge(const Ready& o) {
    op = std::max(op, o.op);
    swap_out = std::max(swap_out, o.swap_out);
    swap_in = std::max(swap_in, o.swap_in);
  }
};

/// A piece of device memory that holds one tensor at a time: a pool object or a buddy block.
struct MemoryObject {
  int64_t offset = 0;  ///< from the start of device memory
  int64_t bytes = 0;
  int size_class = 0;  ///< 1-based pool class; 0 for a buddy block
};

/// Host -> device: `tensor` into `object` for the op at schedule position `position`.
struct SwapIn {
  int tensor = -1, object = -1, position = -1;
  Ready after;      ///< the object's previous tensor gone
  int issued = -1;  ///< not before the op at this position has ended (ODSwap: when its executor asks); -1 none
};

/// Device -> host: `tensor` copied out of `object` after its last use at position `after`.
struct SwapOut {
  int tensor = -1, object = -1, after = -1;
  int issued = -1;  ///< not before the op at this position has ended (ODSwap: on demand); -1 none
};

/// One eviction (Fig. 4.3's "W1 -> W3"): `victim` left its object for `newcomer` (-1: it was copied
/// out at the end of the iteration) when the op at `position` needed room.
struct Eviction {
  int victim = -1, newcomer = -1, position = -1;
  int swap_out = -1;  ///< the copy out, or -1 when the victim was dropped (the host holds it already)
};

/// A tensor's stay in one object, between two events of the augmented graph.
struct Stay {
  enum Edge : uint8_t { kIterationStart, kOpStart, kOpEnd, kSwapInStart, kSwapInEnd, kSwapOutEnd, kIterationEnd };
  int tensor = -1, object = -1;
  Edge from = kIterationStart, to = kIterationEnd;
  int from_index = -1, to_index = -1;  ///< the position or swap index of each edge (unused for iteration edges)
};

/// A swap plan: an augmented dataflow graph and where every tensor sits when.
struct SwapPlan {
  std::string method;  ///< "swapadvisor", "odswap" or "ideal"
  Schedule schedule;
  Pool pool;  ///< empty for ODSwap (a buddy allocator)
  bool double_pass = false;
  std::vector<MemoryObject> objects;
  std::vector<SwapIn> swap_ins;    ///< in the order of the swap-in stream
  std::vector<SwapOut> swap_outs;  ///< in the order of the swap-out stream
  std::vector<Ready> outputs_ready;  ///< per position: the objects its outputs take are free
  std::vector<Eviction> evictions;
  std::vector<Stay> stays;
  std::vector<int> initial_residents;  ///< tensors in memory when the iteration starts (parameters)
  int64_t memory_bytes = 0;            ///< the pool's bytes (the buddy allocator's capacity)
};

}  // namespace tilewise::swap

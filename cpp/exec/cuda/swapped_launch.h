// A swap plan's program made ready to issue from one host thread, for the CUDA executor and the host
// executable alike: the lowering and its launch plan, where buffers live between steps, the pool, the
// buffers that need a host store, where the compute stream places a swapped-in buffer, the streams'
// issue order (step_schedule.h), and where a tensor is set and read (as the CPU's swapped executable).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "exec/cuda/launch_plan.h"
#include "exec/swap_lowering.h"
#include "graph/graph.h"

namespace tilewise::exec::cuda {

struct SwappedLaunch {
  std::vector<SwapHome> home;                        ///< per buffer: its object between steps
  std::vector<std::pair<int64_t, int64_t>> objects;  ///< the pool's objects (offset, bytes)
  int64_t pool_bytes = 0;
  std::vector<char> host_stored;  ///< per buffer: has a host store (set between steps, or swapped)
  /// Per event: the (buffer, pool offset) of the SwapIn its Record follows on the swap-in stream
  /// ((-1, 0) otherwise): the compute stream's Wait for it places the buffer there.
  std::vector<std::pair<int, int64_t>> swapped_in_by;
  std::vector<size_t> order;  ///< stream_order of the program

  /// Where `tensor` is read after `steps` steps: its buffer (-1: none), the pool object holding it
  /// (-1: none), or else whether the host store does (`on_host`: the buffers swapped out this step).
  struct Source {
    int buffer = -1, object = -1;
    bool host = false;
  };
  Source source(const graph::Graph& g, const Lowered& low, int tensor, int steps, const std::vector<char>& on_host) const;
};

/// Lowers `g` under swap plan `s` into `low` (programs[0] the swapped program), translates it into
/// `plan`, and returns the rest of what issuing it needs.
SwappedLaunch prepare_swapped(const graph::Graph& g, const SwapSchedule& s, const std::vector<int>& keep,
                              const std::vector<std::pair<int, int>>& in_place, Lowered* low, LaunchPlan* plan);

/// A swapped program's buffer of `tensor` (its storage's tile), or -1; ExecError for no such tensor.
int swapped_buffer(const Lowered& low, int tensor);

}  // namespace tilewise::exec::cuda

// The CUDA executor's launch plans run on the host (no GPU, no CUDA call): what CudaExecutable does
// with a plan — an arena block laid out by the translation's offsets, resident tensors in their own
// allocations, every instruction in program order — with host memory, each Compute's steps through
// host_reference (cuBLAS's and cuDNN's documented semantics, the device functors of device_math.h),
// each Copy and Combine through its CopyPlan element by element (the copy kernel's arithmetic), and
// the devices' Send/Recv pairs through a mailbox in the waves the CUDA executor issues to NCCL
// (step_schedule.h: one host thread, each send grouped with its receive).
//
// So a whole training step goes through the translation (arena offsets and lifetimes, steps, copy
// geometry, element sizes, reducers) and can be compared with the CPU runtime's step: what is left
// for a GPU is the launches and the streams. Buffers are filled with NaN when allocated and freed, so
// a read of bytes the plan does not hold shows as NaN.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cost/placement.h"
#include "exec/cuda/launch_plan.h"
#include "exec/cuda/swapped_launch.h"
#include "exec/lowering.h"
#include "exec/swap_lowering.h"
#include "graph/graph.h"

namespace tilewise::exec::cuda {

class HostExecutable {
 public:
  /// Lowers `plan` for `g` and translates every device's program (Untranslatable names the ops
  /// without a CUDA kernel); swapped programs are refused.
  HostExecutable(const graph::Graph& g, const cost::Placement& plan, const std::vector<int>& keep);
  /// The swapped program of swap plan `s` on one device (swap_lowering.h): its pool, a host store,
  /// SwapIn/SwapOut as copies between them, its three streams in stream_order (step_schedule.h), the
  /// buffers placed where each Alloc, or the Wait for their SwapIn, puts them (as the CPU's swapped
  /// executable and the CUDA executor place them).
  HostExecutable(const graph::Graph& g, const SwapSchedule& s, const std::vector<int>& keep,
                 const std::vector<std::pair<int, int>>& in_place);

  /// Sets a full tensor (row-major, its dtype's bytes): every device's resident tile of it.
  void set_tensor(int tensor, const void* data);
  /// Reads a full tensor from the devices' tiles (resident tensors, or results kept after a step).
  void read_tensor(int tensor, void* out) const;
  /// One step of every device's launch plan. `timed`: the host clock around every instruction that
  /// does work (as CudaExecutable::step times launches), into instruction_seconds().
  void step(bool timed = false);
  /// Per device, per instruction: (start, end) seconds after the last timed step began; (0, 0) for
  /// instructions that do no work (Alloc, Free, Record, Wait).
  const std::vector<std::vector<std::pair<double, double>>>& instruction_seconds() const { return times_; }
  const Lowered& lowered() const { return low_; }

  int devices() const { return low_.devices; }

 private:
  struct Device {
    std::vector<std::byte> block;
    std::vector<std::vector<std::byte>> resident;  // per buffer: resident storage, else empty
    std::vector<std::byte*> ptr;                   // per buffer: where it is during a step
  };
  // Runs instruction `index` of device d's program (not a Send or Recv: those go in waves).
  void execute(int d, size_t index);

  const graph::Graph& g_;
  Lowered low_;
  std::vector<LaunchPlan> plans_;
  std::vector<Device> dev_;
  std::map<int64_t, std::vector<std::byte>> mailbox_;  // tag -> a sent box, row-major
  // Swapped programs: the swap plan made ready to issue, the host store, the buffers copied out this step.
  bool swapped_ = false;
  SwappedLaunch swap_;
  std::vector<std::vector<std::byte>> host_;
  std::vector<char> on_host_;
  int steps_ = 0;
  IdError id_error_;  // an embedding's id outside its table, raised after its instruction (as the CPU's)
  bool timing_ = false;
  std::chrono::steady_clock::time_point origin_;
  std::vector<std::vector<std::pair<double, double>>> times_;
  void timed_execute(int d, size_t index);
};

}  // namespace tilewise::exec::cuda

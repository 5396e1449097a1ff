// The CUDA executor: runs the launch plans of launch_plan.h on GPUs — a device arena (one
// cudaMalloc'd block laid out by exec::plan_block, resident tensors in their own cudaMalloc), a
// compute stream and two copy streams with the program's events between them (SwapAdvisor's three),
// a cuBLAS and a cuDNN handle per device, host<->device copies of feeds and parameters.
//
// Several GPUs in one process: one NCCL communicator per GPU (ncclCommInitAll), one host thread
// driving them in step_schedule's order (a Send packed into staging where it stands, sent with its Recv
// in one group); the host executable (host_executor.h) runs the same order and checks whole steps.
//
// Status: compiled in CI, never run on a GPU. Construction translates every program first (ops
// without a CUDA kernel: Untranslatable, before any CUDA call), then makes the first device call
// (cudaSetDevice), which fails with CudaError on a machine without a GPU.
//
// One rank of an MPI job (RankSetup): the process drives its own plan device only, on a local GPU, and
// joins an NCCL communicator of one rank per device (`connect`, ncclCommInitRank with the id rank 0
// made by nccl_unique_id and broadcast). Every rank walks the same step_schedule over all programs and
// issues only its device's launches and its device's part of each wave, so a wave's Send and Recv meet
// across processes as they do in one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cost/placement.h"
#include "exec/cuda/launch_plan.h"
#include "exec/cuda/swapped_launch.h"
#include "exec/lowering.h"
#include "exec/swap_lowering.h"
#include "graph/graph.h"

namespace tilewise::exec::cuda {

/// This process's part of an MPI job: plan device `rank` on local GPU `gpu`.
struct RankSetup {
  int rank = 0;
  int gpu = 0;
};

/// cuDNN's algorithm for one convolution step, chosen on its first launch (cudnnGet*Algorithm_v7).
struct ConvAlgorithm {
  int device = 0;
  std::string op;
  std::string mode;  ///< "forward", "backward_data" or "backward_filter"
  int algo = 0;      ///< the cudnnConvolution*Algo_t value
  int64_t workspace = 0;
};

/// A new NCCL unique id (ncclGetUniqueId, 128 bytes) for ranks to join one communicator.
std::string nccl_unique_id();

class CudaExecutable {
 public:
  /// Lowers `plan` for `g`, translates its programs and sets up the devices. capacity: bytes per
  /// device for the arena block plus resident tensors (0 = unlimited; checked before cudaMalloc).
  CudaExecutable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity, const std::vector<int>& keep);
  /// One rank of an MPI job: device `rank.rank` of the plan only (the others' tensors are not set or
  /// read here). Several devices: `connect` before the first step.
  CudaExecutable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity, const std::vector<int>& keep,
                 const RankSetup& rank);
  /// Joins the communicator of every rank (ncclCommInitRank; collective: every rank calls it with the
  /// same id). Only for an executable made with a RankSetup.
  void connect(const std::string& nccl_id);
  /// Swap plan `s` on GPU 0 (swap_lowering.h): the device memory is the plan's pool (one cudaMalloc;
  /// capacity checked first), a pinned host store, SwapIn/SwapOut as cudaMemcpyAsync on the two copy
  /// streams, the three streams issued in stream_order, buffers placed as the host executable
  /// (host_executor.h) places them, which checks the same steps on the host.
  CudaExecutable(const graph::Graph& g, const SwapSchedule& s, int64_t capacity, const std::vector<int>& keep,
                 const std::vector<std::pair<int, int>>& in_place);
  ~CudaExecutable();
  CudaExecutable(const CudaExecutable&) = delete;
  CudaExecutable& operator=(const CudaExecutable&) = delete;

  /// Copies a full tensor (row-major, its dtype's bytes) from the host into its device buffer.
  void set_tensor(int tensor, const void* data);
  /// Copies a resident tensor, or one kept after the last step, to the host.
  void read_tensor(int tensor, void* out) const;
  /// This process's tiles of `tensor` (a tensor held after a step, as read_tensor): per local device
  /// that holds one, its box (global coordinates) and its bytes, row-major. What an MPI rank gives to
  /// the gather on rank 0 (tilewise/exec/cuda.py).
  std::vector<std::pair<tdl::Box, std::vector<std::byte>>> local_tiles(int tensor) const;
  /// One step: every launch of the plan on its stream, then a synchronisation. `timed`: CUDA events
  /// around every launch that puts work on a stream (compute, copy, combine, a Send's pack, swaps; a
  /// Recv from its wave's group to its unpack), read after the synchronisation into
  /// instruction_seconds().
  void step(bool timed = false);
  /// Per plan device, per instruction of its program: (start, end) seconds after the step began on
  /// that GPU, from the last timed step; (0, 0) for instructions that put no work on a stream (Alloc,
  /// Free, Record, Wait) and for other ranks' devices.
  const std::vector<std::vector<std::pair<double, double>>>& instruction_seconds() const { return times_; }
  /// The convolution algorithms chosen so far (after the first step: every convolution step's), by
  /// device, op and mode.
  std::vector<ConvAlgorithm> conv_algorithms() const;
  /// The per-device programs the launch plans translate (the lowering every backend runs).
  const Lowered& lowered() const { return low_; }

  int devices() const { return low_.devices; }
  /// The plan device this process drives (-1: all of them).
  int rank() const { return rank_; }
  const LaunchPlan& launch_plan(int device) const { return plans_.at(static_cast<size_t>(device)); }
  int steps() const { return steps_; }

 private:
  struct Device;
  void launch(Device& dev, const LaunchPlan& plan, const Program& prog, size_t instr);
  void plan_staging(Device& dev, const Program& prog);

  const graph::Graph& g_;
  Lowered low_;
  std::vector<LaunchPlan> plans_;
  std::vector<std::unique_ptr<Device>> devices_;
  int steps_ = 0;
  int rank_ = -1;  // RankSetup: the one device driven here; devices_ holds null for the others
  // Swapped programs (device 0): the swap plan made ready to issue, the pinned host store, the
  // buffers copied out this step.
  bool swapped_ = false;
  SwappedLaunch swap_;
  std::vector<void*> pinned_;
  std::vector<char> on_host_;
  // Timed steps: events around launches (Device::starts/ends), their seconds after the last one.
  bool timing_ = false;
  std::vector<std::vector<std::pair<double, double>>> times_;
  void check_ids();
  void begin_timing();
  void end_timing();
  void open_device(Device& dev, int d, int64_t block_bytes, int gpu);
  void open_plan_device(int d, int64_t capacity, int gpu);
  bool local(int d) const { return devices_[static_cast<size_t>(d)] != nullptr; }
};

}  // namespace tilewise::exec::cuda

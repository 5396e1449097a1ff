// The CPU runtime: one worker thread per device, each with its own arena, running the lowered
// plan op by op in lockstep (assemble inputs | compute | reduce partials | distribute results,
// with a barrier between phases, so buffers are reused exactly as the cost model assumes).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cost/placement.h"
#include "exec/arena.h"
#include "exec/communicator.h"
#include "exec/errors.h"
#include "exec/lowering.h"
#include "graph/graph.h"
#include "kernels/cpu/tile_kernels.h"
#include "tdl/interpreter.h"

namespace tilewise::exec {

/// What a step measured.
struct RunStats {
  int64_t bytes_moved = 0;                 ///< all devices, last step
  std::vector<int64_t> bytes_received;     ///< per device, last step
  std::vector<int64_t> peak_bytes;         ///< per device: resident tensors + the planned block (the
                                           ///< first step: the dynamic peak, before planning)
  std::vector<double> op_seconds;          ///< per op, last step (wall time of the op's four phases)
  std::vector<char> op_native;             ///< per op: 1 = native kernel on every active device, 0 = interpreter
  double step_seconds = 0;                 ///< last step
  int steps = 0;
};

class Executable {
 public:
  /// Lowers `plan` (a partition::Plan is one) for `g` and allocates the tensors that live all iteration. capacity 0 = unlimited.
  /// A device is one core: its worker thread runs its kernels alone (one BLAS thread).
  /// Throws ExecError for a plan of another graph or a graph this runtime cannot hold, OutOfMemory.
  /// `keep`: tensors to hold after a step for reading (the loss, the model's output), besides the
  /// results no op reads.
  /// `opaque`: per op, the opaque functions of its description (empty when it has none); they run
  /// in the interpreter fallback, called from the device's worker thread.
  Executable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity_per_device,
             const std::vector<int>& keep = {}, std::vector<tdl::OpaqueCall> opaque = {});
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  /// Scatters a full float32 array (row-major, the tensor's shape) into the devices' tiles. Only
  /// tensors that live all iteration (inputs, labels, parameters, optimizer state, constants).
  void set_tensor(int tensor, const float* data);
  /// Gathers a tensor from the devices' tiles (resident tensors, or any tensor kept after a step).
  std::vector<float> get_tensor(int tensor) const;
  /// Runs one iteration; optimizer updates are written in place of the tensors they update.
  void step();
  const RunStats& stats() const { return stats_; }
  int devices() const { return low_.devices; }

 private:
  struct Worker;
  void run_device(int d);
  const graph::Graph& g_;
  Lowered low_;
  std::vector<std::unique_ptr<Arena>> arenas_;
  std::unique_ptr<Communicator> comm_;
  std::vector<std::vector<float*>> tiles_;  ///< [tensor][device], null when not allocated
  std::vector<int> storage_of_;             ///< a tensor whose tiles are another's (in-place updates)
  std::vector<int> last_use_;               ///< op after which a tensor's tiles are freed (-1: resident)
  std::vector<int> keep_;                   ///< results kept after the step (no consumers)
  RunStats stats_;
  bool failed_ = false;
  std::vector<tdl::OpaqueCall> opaque_;
  std::vector<std::vector<kernels::TileCall>> calls_;  ///< [op][device], inputs' and output's buffers set per step
  struct Shared;
  std::unique_ptr<Shared> shared_;
};

}  // namespace tilewise::exec

// Executors of programs (program.h). The part every executor shares is DeviceRunner: one device's
// buffers, arena and prepared kernel calls, running that device's program instruction by
// instruction against a Communicator. The thread executor (Executable) runs one DeviceRunner per
// device on persistent worker threads of this process with a MailboxCommunicator; an MPI executor
// runs one DeviceRunner per rank (its own device's program) with a communicator over MPI.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cost/placement.h"
#include "exec/arena.h"
#include "exec/communicator.h"
#include "exec/errors.h"
#include "exec/kernel_call.h"
#include "exec/lowering.h"
#include "exec/program.h"
#include "graph/graph.h"
#include "kernels/cpu/tile_kernels.h"
#include "tdl/interpreter.h"

namespace tilewise::exec {

/// What a step measured.
struct RunStats {
  int64_t bytes_moved = 0;                 ///< all devices, last step
  std::vector<int64_t> bytes_received;     ///< per device, last step
  std::vector<int64_t> bytes_sent;         ///< per device, last step
  std::vector<int64_t> peak_bytes;         ///< per device: resident tensors + the planned block (the
                                           ///< first step: the dynamic peak, before planning)
  /// Per device: the most scratch one instruction took from the heap, outside the arena (0 when every
  /// Compute ran in its planned scratch buffer: kernel_call.h; a kernel that declined to the
  /// interpreter, or a swapped program's instruction, takes its scratch from the heap).
  std::vector<int64_t> scratch_bytes;
  std::vector<int64_t> undo_bytes;         ///< per device: copies kept to undo a failed atomic step (outside the arenas)
  std::vector<double> device_seconds;      ///< per device: its program's wall time, last step
  std::vector<double> op_seconds;          ///< per op, last step (device 0's wall time in the op's instructions)
  std::vector<char> op_native;             ///< per op: 1 = native kernel on every active device, 0 = interpreter
  double step_seconds = 0;                 ///< last step
  int64_t message_bytes = 0;               ///< message buffers of the communicator (outside the arenas)
  int64_t swapped_in_bytes = 0;            ///< swapped execution: bytes copied host -> device, last step
  int64_t swapped_out_bytes = 0;           ///< swapped execution: bytes copied device -> host, last step
  int64_t pool_peak_bytes = 0;             ///< swapped execution: most bytes of tensors in the pool at once
  int steps = 0;
  /// With profiling: per device, per instruction of its program, [start, end] in seconds from the step's start.
  std::vector<std::vector<std::array<double, 2>>> profile;
};

/// Throws ExecError unless the runtime can hold every tensor of `g`: float32, and int64, int32 or
/// bool for tensors no op computes (token ids, labels, masks; ops compute float32).
void check_dtypes(const graph::Graph& g);

/// One device's state and its program's interpreter.
class DeviceRunner {
 public:
  DeviceRunner(const graph::Graph& g, const Lowered& low, int device, int64_t capacity,
               const std::vector<tdl::OpaqueCall>& opaque);
  ~DeviceRunner();
  DeviceRunner(const DeviceRunner&) = delete;
  DeviceRunner& operator=(const DeviceRunner&) = delete;

  /// Runs the program once. Throws what an instruction throws (OutOfMemory, CommunicationError
  /// naming the instruction waited on, a kernel's error).
  void run(Communicator& comm, Deadline deadline, bool profile);
  /// The buffer holding `tensor`'s tile here (its storage's), null when not held.
  std::byte* tile(int tensor) const;
  /// Releases tiles of results kept after the last step (before the next one).
  void release_kept();
  /// After a failed step: drops the buffers the step allocated (the arena takes them back) and, for
  /// an atomic step, restores the buffers it updated in place.
  void abort_step();
  /// Whether the last run wrote into a buffer that lives across steps (a parameter or optimizer
  /// state updated in place).
  bool wrote_resident() const { return wrote_resident_; }
  /// Atomic steps: before a step first writes a buffer that lives across steps, its bytes are
  /// saved (a copy per such buffer, outside the arena, made once and reused), and abort_step()
  /// puts them back, so a step failing anywhere, updates included, leaves the device as it was.
  void set_atomic(bool on) { atomic_ = on; }
  /// Whether abort_step() restores everything the last run changed.
  bool can_undo() const { return atomic_ || !wrote_resident_; }
  /// Ctrl-C (tdl/interrupt.h) between instructions: the devices of one step share `gate` (a
  /// StepGate value), so that either the step stops on every device while it can still be taken
  /// back, or, once one device has started updating in place (non-atomic steps), every device
  /// finishes it and the interrupt waits for the step to return. Null: runs are not interrupted.
  void set_step_gate(std::atomic<int>* gate) { gate_ = gate; }
  /// After every compute and combine, look for NaN and Inf in what it wrote, and throw
  /// NumericalError at the first (exe.step(check_finite=True); a pass over each output).
  void set_check_finite(bool on) { check_finite_ = on; }
  /// Bytes held for undoing (the copies of updated buffers).
  int64_t undo_bytes() const;
  /// An atomic step: puts back the buffers the last run updated in place (abort_step does it too;
  /// this alone is for a step whose program completed but that failed afterwards).
  void restore_updates();
  /// For executors that place buffers themselves (the swapped executor, swap_runtime.h): puts
  /// buffer `b` at `p` (memory the caller owns; null: not held), and runs one Compute or Copy
  /// instruction (index `i` of the program) on the buffers as placed.
  void place(int b, std::byte* p) { ptr_[b] = p; }
  void execute(size_t i);
  Arena& arena() { return arena_; }
  const Program& program() const { return prog_; }
  const std::vector<char>& native() const { return native_; }
  const std::vector<double>& op_seconds() const { return op_seconds_; }
  const std::vector<std::array<double, 2>>& profile() const { return profile_; }
  double seconds() const { return seconds_; }
  int64_t scratch_bytes() const { return scratch_bytes_; }
  /// Bytes of buffer `b` (its elements times its dtype's size).
  int64_t buffer_bytes(int b) const { return bytes_[b]; }
  /// Bytes of one element of buffer `b`.
  int64_t element_bytes(int b) const { return kernels::dtype_bytes(dtype_[b]); }

 private:
  void compute(const Instr& in, size_t index);
  /// Throws NumericalError when the buffer `in` wrote holds NaN or Inf.
  void check_finite(const Instr& in);
  /// An interrupt was requested: throws Interrupted when this step can still be taken back.
  void interrupt_if_undoable();
  /// Before the first in-place write of a non-atomic step: from here the step is finished.
  void begin_writing();
  /// Points the call's input j at buffer `b` as the kernel reads it: integer and bool buffers as
  /// they are for kernels that read integers, else as float32 copies at byte `offset` of the
  /// instruction's `scratch` (on the heap when there is none).
  void bind_input(kernels::TileCall& call, size_t j, int b, std::byte* scratch, int64_t offset);
  const graph::Graph& g_;
  const Lowered& low_;
  const Program& prog_;
  int device_;
  Arena arena_;
  const std::vector<tdl::OpaqueCall>& opaque_;
  std::vector<std::byte*> ptr_;                ///< per buffer, null when not held
  std::vector<kernels::DType> dtype_;          ///< per buffer
  std::vector<int64_t> bytes_;                 ///< per buffer
  std::vector<std::vector<float>> as_float_;   ///< per op input: float32 copies without scratch (swapped)
  std::vector<kernels::TileCall> calls_;       ///< per instruction (Compute ones), prepared once
  std::vector<ScratchLayout> layouts_;         ///< per instruction (Compute ones): its scratch buffer's parts
  std::vector<char> native_;                   ///< per op
  std::vector<double> op_seconds_;             ///< per op
  std::vector<std::array<double, 2>> profile_;  ///< per instruction
  double seconds_ = 0;
  int64_t scratch_bytes_ = 0;  ///< most heap scratch of one instruction
  int64_t heap_now_ = 0;       ///< heap scratch of the instruction running
  bool wrote_resident_ = false;
  bool atomic_ = false;
  std::atomic<int>* gate_ = nullptr;
  bool check_finite_ = false;
  std::vector<std::vector<std::byte>> saved_;  ///< per buffer: its bytes before this step wrote it
  std::vector<char> saved_now_;                ///< per buffer: saved_ holds this step's copy
};

/// The states of a step shared by its devices for interrupts (DeviceRunner::set_step_gate).
enum StepGate : int { kStepRunning = 0, kStepWriting = 1, kStepInterrupted = 2 };

/// The thread executor: one persistent worker thread per device (device 0 on the caller's thread),
/// each running its device's program; data moves only through send and receive.
class Executable {
 public:
  /// Lowers `plan` (a partition::Plan is one) for `g` into programs and allocates the tensors that
  /// live all iteration. capacity 0 = unlimited. A device is one core: its worker thread runs its
  /// kernels alone (one BLAS thread).
  /// Throws ExecError for a plan of another graph or a graph this runtime cannot hold, OutOfMemory.
  /// `keep`: tensors to hold after a step for reading (the loss, the model's output), besides the
  /// results no op reads.
  /// `opaque`: per op, the opaque functions of its description (empty when it has none); they run
  /// in the interpreter fallback, called from the device's worker thread.
  /// `timeout_seconds`: a receive waiting longer raises CommunicationError (a bug in one process).
  Executable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity_per_device,
             const std::vector<int>& keep = {}, std::vector<tdl::OpaqueCall> opaque = {},
             double timeout_seconds = 300);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  /// Scatters a full array (row-major, the tensor's shape and dtype: float32, int64, int32 or bool
  /// as one byte) into the devices' tiles. Only tensors that live all iteration (inputs, labels,
  /// parameters, optimizer state, constants).
  void set_tensor(int tensor, const void* data);
  /// Gathers a tensor from the devices' tiles into `out` (the tensor's bytes, its dtype): resident
  /// tensors, or any tensor kept after a step.
  void read_tensor(int tensor, void* out) const;
  /// read_tensor for a float32 tensor.
  std::vector<float> get_tensor(int tensor) const;
  /// Runs one iteration; optimizer updates are written in place of the tensors they update.
  void step();
  const RunStats& stats() const { return stats_; }
  int devices() const { return low_.devices; }
  const Program& program(int device) const;
  const Lowered& lowered() const { return low_; }
  const graph::Graph& graph() const { return g_; }
  /// Per-instruction timings in later steps (RunStats::profile).
  void set_profile(bool on) { profile_ = on; }
  /// Atomic steps (DeviceRunner::set_atomic): a step failing anywhere leaves every device as it was.
  void set_atomic(bool on) {
    for (auto& r : runners_) r->set_atomic(on);
  }
  /// NaN/Inf checks after every compute and combine (DeviceRunner::set_check_finite).
  void set_check_finite(bool on) {
    for (auto& r : runners_) r->set_check_finite(on);
  }
  /// After a step that completed but whose results could not be read: puts back its in-place
  /// updates (atomic steps only; until the next step).
  void restore_updates() {
    for (auto& r : runners_) r->restore_updates();
  }

 private:
  void run_device(int d);
  void worker(int d);
  const graph::Graph& g_;
  Lowered low_;
  std::vector<tdl::OpaqueCall> opaque_;
  std::vector<std::unique_ptr<DeviceRunner>> runners_;
  std::unique_ptr<MailboxCommunicator> comm_;
  RunStats stats_;
  bool failed_ = false;
  bool profile_ = false;
  double timeout_;
  Deadline deadline_;
  struct Pool;
  std::unique_ptr<Pool> pool_;
  ExclusiveUse use_;  ///< step/set/get from one thread at a time
};

}  // namespace tilewise::exec

// The swapped executor (SwapAdvisor §4.3; issue 17): one device whose memory is the swap plan's pool,
// a host store, and three threads running the swapped program's streams (swap_lowering.h): compute
// on the caller's thread, one copy worker per copy stream (swap-in, swap-out), synchronised by the
// program's Record/Wait events. Kernels run through DeviceRunner's prepared calls, as in every
// executor; only where buffers live differs.
//
// Memory: the pool is one block of the plan's `memory_bytes`, allocated once (its bytes are the
// device's footprint, checked against the capacity); a tensor on the device lives at its memory
// object's offset, so its address changes when it comes back into another object. The host store
// holds the canonical copies of tensors without a producer and whatever is swapped out. Tensors
// the plan keeps in the pool between iterations (its initial residents) are read and written
// there; the others on the host.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "exec/runtime.h"
#include "exec/swap_lowering.h"

namespace tilewise::exec {

/// A graph run under a swap plan on one CPU device.
class SwapExecutable {
 public:
  /// Lowers `s` for `g` (lower_swapped: ExecError when it does not fit) and allocates the pool;
  /// throws OutOfMemory when the pool exceeds `capacity` (0 = unlimited). `keep`, `opaque`,
  /// `timeout_seconds`: as Executable's (a stream waiting longer for an event raises ExecError).
  /// `in_place`: gradient sums stored in their running total (plans made with in-place sums).
  SwapExecutable(const graph::Graph& g, const SwapSchedule& s, int64_t capacity, const std::vector<int>& keep = {},
                 std::vector<tdl::OpaqueCall> opaque = {}, double timeout_seconds = 300,
                 const std::vector<std::pair<int, int>>& in_place = {});
  ~SwapExecutable();
  SwapExecutable(const SwapExecutable&) = delete;
  SwapExecutable& operator=(const SwapExecutable&) = delete;

  /// A full array (the tensor's dtype) into a tensor without a producer: its host copy, and its pool
  /// copy when the plan keeps it on the device between iterations.
  void set_tensor(int tensor, const void* data);
  /// A tensor without a producer (where its current copy is), or a result of the last step, into
  /// `out` (the tensor's bytes).
  void read_tensor(int tensor, void* out) const;
  /// read_tensor for a float32 tensor.
  std::vector<float> get_tensor(int tensor) const;
  /// One iteration. A failure (a kernel's error, a stream past its timeout) is rethrown. When no op
  /// had written a tensor that lives across steps (an update in place), the step is undone: the
  /// initial residents that left their objects are copied back from the host store, which holds
  /// their values (dropped unchanged, or copied out before any update). Otherwise the executable is
  /// unusable and later steps raise ExecError.
  void step();
  const RunStats& stats() const { return stats_; }
  int devices() const { return 1; }
  const Program& program(int device) const;
  const SwappedLowered& lowered() const { return low_; }
  const graph::Graph& graph() const { return g_; }
  void set_profile(bool on) { profile_ = on; }

 private:
  using Clock = std::chrono::steady_clock;
  void run_stream(int stream);
  void stream_thread(int stream);  // run_stream, errors kept for step()
  void worker(int stream);
  void wait(int event, int stream);
  void record(int event);
  void add_in_use(int64_t bytes);
  int buffer_of(int tensor) const;
  std::byte* at(int64_t offset) const { return pool_.get() + offset; }
  int64_t bytes_of(int b) const;  ///< buffer b's bytes

  const graph::Graph& g_;
  SwappedLowered low_;
  std::vector<tdl::OpaqueCall> opaque_;
  std::unique_ptr<std::byte[]> pool_;
  std::vector<std::vector<std::byte>> host_;  ///< per buffer: its host copy (empty: never on the host)
  std::vector<char> on_host_;                ///< per buffer: swapped out in the last step
  std::vector<char> left_;                   ///< per buffer: its stay ended in this step (Free or SwapOut)
  std::vector<char> lives_across_;           ///< per buffer: the storage of a tensor without a producer
  std::atomic<bool> wrote_state_{false};     ///< an op wrote a buffer that lives across steps
  std::unique_ptr<DeviceRunner> runner_;     ///< prepared kernel calls; buffers placed by the compute stream
  std::vector<std::vector<int>> stream_instrs_;
  std::vector<std::pair<int, int64_t>> swapped_in_by_;  ///< per event: the (buffer, offset) a swap-in recording it placed
  double timeout_;
  bool profile_ = false, failed_ = false;
  RunStats stats_;
  std::vector<std::array<double, 2>> profile_times_;
  std::vector<double> op_seconds_;
  std::atomic<int64_t> in_use_{0}, peak_{0}, swapped_in_{0}, swapped_out_{0};

  // One step: event stamps, the first error, the copy workers.
  std::mutex m_;
  std::condition_variable go_, done_;
  std::unique_ptr<std::condition_variable[]> ready_;  ///< per stream: wakes it from wait()
  std::vector<int> asleep_on_;                         ///< per stream: the event it sleeps on (-1: none)
  std::vector<std::atomic<int64_t>> recorded_;  ///< per event: the generation (step) that recorded it
  int64_t generation_ = 0;                        ///< written between steps only
  bool abort_ = false, stop_ = false;
  int pending_ = 0;
  std::exception_ptr error_;
  Clock::time_point start_, deadline_;
  std::vector<std::thread> workers_;
  ExclusiveUse use_;
};

}  // namespace tilewise::exec

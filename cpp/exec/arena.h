// A device's memory: a capacity, what is in use, the peak. Every buffer the runtime holds on a
// device (tiles, assembled regions, partial outputs, staging) is allocated here, so an allocation
// past the capacity is an error naming the device, the tensor and the bytes (tw.OutOfMemory).
//
// Static planning: the first step allocates from the system and records every transient buffer
// (size, when allocated, when released); `plan()` then assigns each one an offset in a single block
// (largest first, lowest offset that no buffer alive at the same time overlaps), and later steps
// hand out block + offset in the same order. Tensors allocated outside a step (parameters,
// inputs) keep their own buffers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace tilewise::exec {

/// An allocation beyond a device's capacity.
struct OutOfMemory : std::runtime_error {
  OutOfMemory(int device, std::string tensor, int64_t bytes, int64_t in_use, int64_t capacity);
  int device;
  std::string tensor;  ///< the tensor (or buffer) being allocated
  int64_t bytes, in_use, capacity;
};

/// One transient buffer of a step: its bytes and the allocation events (a counter over the step's
/// allocations and releases) that bound its life.
struct BufferLife {
  int64_t bytes = 0;
  int64_t born = 0, dies = 0;
};

/// The static plan of a step's transient buffers: each at the lowest 16-byte aligned offset (bytes)
/// free of every buffer alive at the same time, largest first. Returns the block's bytes; fills
/// `offsets` when given. The arena plans with it and the simulator predicts memory with it.
int64_t plan_block(const std::vector<BufferLife>& lives, std::vector<int64_t>* offsets = nullptr);

/// Owns the buffers of one device (float32 tiles, int64 ids, bool masks) and accounts for their bytes.
class Arena {
 public:
  /// capacity 0 = unlimited.
  Arena(int device, int64_t capacity) : device_(device), capacity_(capacity) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  /// A buffer of `bytes` bytes (16-byte aligned) for `what` (a tensor or buffer name, for the error message).
  std::byte* allocate(int64_t bytes, const std::string& what);
  /// Returns a buffer of `bytes` bytes from allocate(); null is ignored.
  void release(std::byte* p, int64_t bytes);

  /// Starts recording a step's allocations (the first step), or replaying the plan.
  void begin_step();
  /// Ends the step; after the recorded step, plans the offsets (throws OutOfMemory when the planned
  /// block plus the tensors kept outside it passes the capacity).
  void end_step();
  bool planned() const { return planned_; }
  /// A step that failed: every buffer it allocated goes back (the recorded step's to the system),
  /// so the next step starts as this one did; buffers held outside steps stay.
  void abort_step();
  /// Bytes of the planned block (0 before planning).
  int64_t block_bytes() const { return block_bytes_; }
  /// What the device really holds at its peak: the buffers outside steps plus the planned block
  /// (the dynamic peak before planning).
  int64_t footprint() const;

  int64_t in_use() const { return in_use_; }
  int64_t peak() const { return peak_; }
  int64_t capacity() const { return capacity_; }
  void reset_peak() { peak_ = in_use_; }

 private:
  struct Record {
    int64_t bytes = 0;
    int64_t born = 0, dies = -1;  ///< event times; dies -1 = still alive at the end of the step
    std::string what;
  };
  int device_;
  int64_t capacity_;
  int64_t in_use_ = 0, peak_ = 0;
  bool recording_ = false, planned_ = false;
  int64_t clock_ = 0;
  std::vector<Record> records_;
  std::unordered_map<const std::byte*, size_t> live_;  ///< recorded or replayed buffer -> record
  std::vector<int64_t> offsets_;                   ///< per record, in bytes
  size_t next_ = 0;                                ///< replay position
  std::unique_ptr<std::byte[]> block_;
  int64_t block_bytes_ = 0;
  int64_t outside_ = 0;  ///< bytes held outside the step (allocated before it began)
};

}  // namespace tilewise::exec

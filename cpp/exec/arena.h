// A device's memory: a capacity, what is in use, the peak. Every buffer the runtime holds on a
// device (tiles, assembled regions, partial outputs, staging) is allocated here, so an allocation
// past the capacity is an error naming the device, the tensor and the bytes (tw.OutOfMemory).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace tilewise::exec {

/// An allocation beyond a device's capacity.
struct OutOfMemory : std::runtime_error {
  OutOfMemory(int device, std::string tensor, int64_t bytes, int64_t in_use, int64_t capacity);
  int device;
  std::string tensor;  ///< the tensor (or buffer) being allocated
  int64_t bytes, in_use, capacity;
};

/// Owns float32 buffers of one device and accounts for their bytes.
class Arena {
 public:
  /// capacity 0 = unlimited.
  Arena(int device, int64_t capacity) : device_(device), capacity_(capacity) {}
  /// A buffer of `elements` floats for `what` (a tensor or buffer name, for the error message).
  float* allocate(int64_t elements, const std::string& what);
  /// Returns a buffer from allocate(); null is ignored.
  void release(float* p, int64_t elements);
  int64_t in_use() const { return in_use_; }
  int64_t peak() const { return peak_; }
  int64_t capacity() const { return capacity_; }
  void reset_peak() { peak_ = in_use_; }

 private:
  int device_;
  int64_t capacity_;
  int64_t in_use_ = 0, peak_ = 0;
};

}  // namespace tilewise::exec

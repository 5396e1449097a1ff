// A device's arena on a GPU: one cudaMalloc'd block (never managed memory) laid out by the same
// static planner as the CPU arena (exec::plan_block, arena.h), so the simulator's memory prediction,
// the CPU runtime and the GPU agree byte for byte on where every transient buffer lives.
#pragma once
#include <cstdint>
#include <vector>

#include "exec/arena.h"

namespace tilewise::exec::cuda {

/// The planned layout of a step's transient buffers: offsets (bytes, 16-aligned) and the block's
/// bytes, from plan_block. Host only: built and checked without a device.
struct DevicePlan {
  std::vector<int64_t> offsets;
  int64_t block_bytes = 0;
};
DevicePlan plan_device_block(const std::vector<BufferLife>& lives);

/// The block of one GPU: cudaSetDevice(device) + cudaMalloc(plan.block_bytes). Throws OutOfMemory
/// when the block passes `capacity` (bytes, 0 = unlimited; checked before any CUDA call) and
/// CudaError when the runtime fails (no driver, no device, cudaErrorMemoryAllocation).
class DeviceArena {
 public:
  DeviceArena(int device, DevicePlan plan, int64_t capacity);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  int device() const { return device_; }
  const DevicePlan& plan() const { return plan_; }
  /// The device address of buffer `i` (never dereferenced on the host).
  void* buffer(size_t i) const;

 private:
  int device_;
  DevicePlan plan_;
  void* block_ = nullptr;
};

}  // namespace tilewise::exec::cuda

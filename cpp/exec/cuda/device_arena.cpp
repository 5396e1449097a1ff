#include "exec/cuda/device_arena.h"

#include <cuda_runtime_api.h>

#include <string>

#include "exec/cuda/device.h"
#include "exec/errors.h"
#include "tdl/errors.h"

namespace tilewise::exec::cuda {

DevicePlan plan_device_block(const std::vector<BufferLife>& lives) {
  DevicePlan plan;
  plan.block_bytes = plan_block(lives, &plan.offsets);
  return plan;
}

DeviceArena::DeviceArena(int device, DevicePlan plan, int64_t capacity) : device_(device), plan_(std::move(plan)) {
  if (device < 0) throw ExecError("a CUDA device index is >= 0, got " + std::to_string(device));
  if (capacity > 0 && plan_.block_bytes > capacity)
    throw OutOfMemory(device, "the planned block", plan_.block_bytes, 0, capacity);
  check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  if (plan_.block_bytes > 0)
    check(cudaMalloc(&block_, static_cast<size_t>(plan_.block_bytes)),
          "cudaMalloc(" + std::to_string(plan_.block_bytes) + " bytes) on device " + std::to_string(device));
}

DeviceArena::~DeviceArena() {
  if (block_) cudaFree(block_);  // a failure here cannot be reported; the process is past caring
}

void* DeviceArena::buffer(size_t i) const {
  if (i >= plan_.offsets.size())
    throw ExecError("buffer " + std::to_string(i) + " is not in the plan (it has " +
                    std::to_string(plan_.offsets.size()) + ")");
  return static_cast<char*>(block_) + plan_.offsets[i];
}

}  // namespace tilewise::exec::cuda

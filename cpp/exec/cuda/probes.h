// Measurements of one GPU for the time model's GPU profile (`tilewise calibrate --gpu`,
// tilewise/calibration_gpu.py): the host link through pinned memory in each direction and in both at
// once, the backend's own copy and combine kernels on device buffers, a peer copy between two GPUs,
// and what the device is. Each timing is the median of `repeats` runs timed with CUDA events after
// one untimed run. Built only with TILEWISE_WITH_CUDA; on a machine without a GPU every call throws
// CudaError from its first CUDA call.
#pragma once
#include <cstdint>
#include <string>

namespace tilewise::exec::cuda {

enum class LinkDirection { kHostToDevice = 0, kDeviceToHost = 1, kBoth = 2 };

/// Seconds to move `bytes` between pinned host memory and GPU `gpu` with cudaMemcpyAsync: one
/// direction alone, or one copy each way on two streams at once (the time until both end: a duplex
/// link's shared rate is 2 * bytes / seconds).
double host_link_seconds(int gpu, int64_t bytes, LinkDirection direction, int repeats);

/// Seconds of one launch of the backend's copy kernel (or, `combine`, the sum kernel) moving `bytes`
/// of float32 between two buffers of GPU `gpu`: the whole buffer (contiguous), or half the columns of
/// a matrix whose rows hold 2 * `run` floats (strided), as exec::box_copy_seconds measures the CPU's.
double device_copy_seconds(int gpu, int64_t bytes, bool strided, bool combine, int64_t run, int repeats);

/// Seconds of a cudaMemcpyPeerAsync of `bytes` from GPU `a` to GPU `b`.
double peer_copy_seconds(int a, int b, int64_t bytes, int repeats);

/// What GPU `gpu` is: its name, its memory in bytes, its compute capability (major * 10 + minor).
struct DeviceInfo {
  std::string name;
  int64_t memory = 0;
  int capability = 0;
};
DeviceInfo device_info(int gpu);

}  // namespace tilewise::exec::cuda

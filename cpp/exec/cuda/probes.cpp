#include "exec/cuda/probes.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "exec/copy_plan.h"
#include "exec/cuda/copy_kernel.h"
#include "exec/cuda/device.h"
#include "exec/errors.h"

namespace tilewise::exec::cuda {

namespace {

// What a probe holds, released on every path (a failed call throws CudaError from check()).
struct Held {
  std::vector<void*> device, pinned;
  std::vector<cudaStream_t> streams;
  std::vector<cudaEvent_t> events;
  ~Held() {
    for (auto s : streams) cudaStreamSynchronize(s);
    for (auto e : events) cudaEventDestroy(e);
    for (auto s : streams) cudaStreamDestroy(s);
    for (void* p : device) cudaFree(p);
    for (void* p : pinned) cudaFreeHost(p);
  }
  void* on_device(size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<size_t>(bytes, 1)), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
    device.push_back(p);
    return p;
  }
  void* on_host(size_t bytes) {
    void* p = nullptr;
    check(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault),
          "cudaHostAlloc(" + std::to_string(bytes) + " bytes)");
    pinned.push_back(p);
    return p;
  }
  cudaStream_t stream() {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    streams.push_back(s);
    return s;
  }
  cudaEvent_t event() {
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    events.push_back(e);
    return e;
  }
};

void open(int gpu) {
  if (gpu < 0) throw ExecError("GPU " + std::to_string(gpu) + " is not a device index");
  check(cudaSetDevice(gpu), "cudaSetDevice(" + std::to_string(gpu) + ")");
}

void check_bytes(int64_t bytes) {
  if (bytes < 4) throw ExecError("a probe moves at least 4 bytes, got " + std::to_string(bytes));
}

// The median of `repeats` timed runs of `enqueue` (after one untimed run): `enqueue` issues its work
// on streams that wait for `start` and ends with `end` recorded after all of it, on `first`.
double median_seconds(int repeats, cudaStream_t first, cudaEvent_t start, cudaEvent_t end,
                      const std::function<void()>& enqueue) {
  std::vector<double> runs;
  for (int r = -1; r < std::max(repeats, 1); ++r) {
    check(cudaEventRecord(start, first), "cudaEventRecord");
    enqueue();
    check(cudaEventRecord(end, first), "cudaEventRecord");
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, end), "cudaEventElapsedTime");
    if (r >= 0) runs.push_back(ms * 1e-3);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

double host_link_seconds(int gpu, int64_t bytes, LinkDirection direction, int repeats) {
  check_bytes(bytes);
  open(gpu);
  Held h;
  const auto n = static_cast<size_t>(bytes);
  void* dev_in = h.on_device(n);
  void* dev_out = h.on_device(n);
  void* host_in = h.on_host(n);
  void* host_out = h.on_host(n);
  cudaStream_t in = h.stream(), out = h.stream();
  cudaEvent_t start = h.event(), end = h.event(), out_done = h.event();
  return median_seconds(repeats, in, start, end, [&] {
    check(cudaStreamWaitEvent(out, start, 0), "cudaStreamWaitEvent");
    if (direction != LinkDirection::kDeviceToHost)
      check(cudaMemcpyAsync(dev_in, host_in, n, cudaMemcpyHostToDevice, in), "cudaMemcpyAsync(host -> device)");
    if (direction != LinkDirection::kHostToDevice)
      check(cudaMemcpyAsync(host_out, dev_out, n, cudaMemcpyDeviceToHost, out), "cudaMemcpyAsync(device -> host)");
    check(cudaEventRecord(out_done, out), "cudaEventRecord");
    check(cudaStreamWaitEvent(in, out_done, 0), "cudaStreamWaitEvent");
  });
}

double device_copy_seconds(int gpu, int64_t bytes, bool strided, bool combine, int64_t run, int repeats) {
  check_bytes(bytes);
  if (run < 1) throw ExecError("device_copy_seconds: run must be >= 1 float, got " + std::to_string(run));
  open(gpu);
  const int64_t n = bytes / 4;
  const int64_t cols = strided ? 2 * run : n;
  const int64_t rows = strided ? std::max<int64_t>(1, n / run) : 1;  // half the columns: n floats
  const tdl::Box src_box{{tdl::Range{0, rows - 1}, tdl::Range{0, cols - 1}}};
  const tdl::Box what{{tdl::Range{0, rows - 1}, tdl::Range{0, (strided ? run : cols) - 1}}};
  const CopyPlan plan = plan_copy(src_box, what, what);
  Held h;
  auto* src = static_cast<float*>(h.on_device(static_cast<size_t>(rows * cols) * 4));
  auto* dst = static_cast<float*>(h.on_device(static_cast<size_t>(what.volume()) * 4));
  check(cudaMemset(src, 0, static_cast<size_t>(rows * cols) * 4), "cudaMemset");
  check(cudaMemset(dst, 0, static_cast<size_t>(what.volume()) * 4), "cudaMemset");
  cudaStream_t s = h.stream();
  cudaEvent_t start = h.event(), end = h.event();
  return median_seconds(repeats, s, start, end, [&] {
    if (combine) launch_combine(plan, src, dst, tdl::Reducer::kSum, s);
    else launch_copy(plan, src, dst, 4, s);
  });
}

double peer_copy_seconds(int a, int b, int64_t bytes, int repeats) {
  check_bytes(bytes);
  open(b);
  void* dst = nullptr;
  check(cudaMalloc(&dst, static_cast<size_t>(bytes)), "cudaMalloc(" + std::to_string(bytes) + " bytes) on GPU " +
                                                          std::to_string(b));
  struct FreeOn {
    int gpu;
    void* p;
    ~FreeOn() {
      cudaSetDevice(gpu);
      cudaFree(p);
    }
  } free_dst{b, dst};
  open(a);
  Held h;
  void* src = h.on_device(static_cast<size_t>(bytes));
  cudaStream_t s = h.stream();
  cudaEvent_t start = h.event(), end = h.event();
  return median_seconds(repeats, s, start, end, [&] {
    check(cudaMemcpyPeerAsync(dst, b, src, a, static_cast<size_t>(bytes), s), "cudaMemcpyPeerAsync");
  });
}

DeviceInfo device_info(int gpu) {
  open(gpu);
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, gpu), "cudaGetDeviceProperties(" + std::to_string(gpu) + ")");
  return DeviceInfo{p.name, static_cast<int64_t>(p.totalGlobalMem), p.major * 10 + p.minor};
}

}  // namespace tilewise::exec::cuda

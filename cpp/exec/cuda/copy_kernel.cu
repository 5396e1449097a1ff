#include <cuda_runtime_api.h>

#include <string>
#include <type_traits>

#include "exec/cuda/copy_kernel.h"
#include "exec/cuda/device.h"
#include "exec/errors.h"

namespace tilewise::exec::cuda {

namespace {

// A CopyPlan by value (kernel arguments live in constant memory).
struct KernelPlan {
  long long src_base, dst_base, run_length, elements;
  int dims;
  long long extents[kMaxCopyDims], src_strides[kMaxCopyDims], dst_strides[kMaxCopyDims];
};

// The Combine reducers (tdl::Reducer's order); kAssign is a copy. Max and Min keep NaN (NaN wins and
// stays, as the kernels' and the CPU runtime's combine).
enum Fold : int { kSumFold, kMaxFold, kMinFold, kProdFold, kAssign };
static_assert(static_cast<int>(tdl::Reducer::kSum) == kSumFold && static_cast<int>(tdl::Reducer::kMax) == kMaxFold &&
              static_cast<int>(tdl::Reducer::kMin) == kMinFold && static_cast<int>(tdl::Reducer::kProd) == kProdFold);

template <class T>
__device__ T fold(int op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case kSumFold: return a + b;
      case kMaxFold: return b != b || b > a ? b : a;
      case kMinFold: return b != b || b < a ? b : a;
      case kProdFold: return a * b;
    }
  }
  return b;
}

// CopyPlan::offsets, per thread (grid-stride loop); dst = fold(dst, src) for a Combine (float), else
// dst = src (T an unsigned type of the element's size for copies: bits moved as they are).
template <class T>
__global__ void copy_kernel(KernelPlan p, const T* __restrict__ src, T* __restrict__ dst, int op) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < p.elements;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    long long run = i / p.run_length, within = i % p.run_length;
    long long s = p.src_base + within, d = p.dst_base + within;
    for (int k = p.dims - 1; k >= 0; --k) {
      const long long idx = run % p.extents[k];
      run /= p.extents[k];
      s += idx * p.src_strides[k];
      d += idx * p.dst_strides[k];
    }
    dst[d] = op == kAssign ? src[s] : fold(op, dst[d], src[s]);
  }
}

template <class T>
void launch(const CopyPlan& plan, const T* src, T* dst, void* stream, int op) {
  if (plan.extents.size() > static_cast<size_t>(kMaxCopyDims))
    throw ExecError("a box copy with " + std::to_string(plan.extents.size()) +
                    " outer dimensions; the CUDA copy kernel takes at most " + std::to_string(kMaxCopyDims));
  KernelPlan p{};
  p.src_base = plan.src_base, p.dst_base = plan.dst_base, p.run_length = plan.run_length;
  p.elements = plan.elements();
  p.dims = static_cast<int>(plan.extents.size());
  for (int k = 0; k < p.dims; ++k) {
    p.extents[k] = plan.extents[k], p.src_strides[k] = plan.src_strides[k], p.dst_strides[k] = plan.dst_strides[k];
  }
  if (p.elements == 0) return;
  constexpr int threads = 256;
  const long long blocks = (p.elements + threads - 1) / threads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
  copy_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(p, src, dst, op);
  check_lazy(cudaGetLastError(), [&] { return std::string("copy_kernel<<<" + std::to_string(grid) + ", " + std::to_string(threads) + ">>>"); });
}

}  // namespace

void launch_copy(const CopyPlan& plan, const void* src, void* dst, int element_bytes, void* stream) {
  switch (element_bytes) {
    case 1: return launch(plan, static_cast<const unsigned char*>(src), static_cast<unsigned char*>(dst), stream, kAssign);
    case 4: return launch(plan, static_cast<const unsigned*>(src), static_cast<unsigned*>(dst), stream, kAssign);
    case 8:
      return launch(plan, static_cast<const unsigned long long*>(src), static_cast<unsigned long long*>(dst), stream, kAssign);
  }
  throw ExecError("a box copy of " + std::to_string(element_bytes) + "-byte elements (the copy kernel moves 1, 4 or 8)");
}

void launch_combine(const CopyPlan& plan, const float* src, float* dst, tdl::Reducer reducer, void* stream) {
  launch(plan, src, dst, stream, static_cast<int>(reducer));
}

}  // namespace tilewise::exec::cuda

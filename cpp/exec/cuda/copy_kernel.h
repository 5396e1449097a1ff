// The region-assembly kernel (Tofu §6 MultiFetch on a GPU): one launch copies a box between two
// device buffers following an exec::CopyPlan (copy_plan.h), one thread per element. Compiled by
// nvcc for CMAKE_CUDA_ARCHITECTURES (90); the CUDA executor (executor.h) calls it; it has not run on a GPU:
// its index arithmetic is CopyPlan::offsets, which the host tests check against box_copy.
#pragma once
#include "exec/copy_plan.h"
#include "tdl/expr.h"

namespace tilewise::exec::cuda {

/// The most outer dimensions a plan may have for the kernel (merged runs leave at most rank - 1).
constexpr int kMaxCopyDims = 8;

/// Enqueues dst[...] = src[...] per `plan` (in elements of `element_bytes`: 4 for float32 and int32,
/// 8 for int64 ids, 1 for bool masks; the bits are moved, never converted) on `stream` (a
/// cudaStream_t; null = the default stream). Throws ExecError for a plan with more than
/// kMaxCopyDims outer dimensions or another element size, CudaError when the launch fails.
void launch_copy(const CopyPlan& plan, const void* src, void* dst, int element_bytes, void* stream);

/// Enqueues dst[...] = reducer(dst[...], src[...]) per `plan` (a Combine instruction: partial results
/// received into the computed buffer; Max and Min keep NaN), same geometry and errors as launch_copy.
void launch_combine(const CopyPlan& plan, const float* src, float* dst, tdl::Reducer reducer, void* stream);

}  // namespace tilewise::exec::cuda

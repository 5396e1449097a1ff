// The CUDA backend's own kernels for element-wise maps and reductions: launch wrappers around the
// __host__ __device__ functions of device_math.h (one thread per output element, grid-stride), so
// what runs on the GPU is what the host tests ran. Compiled by nvcc; not run on a GPU yet.
#pragma once
#include "exec/cuda/device_math.h"

namespace tilewise::exec::cuda {

/// Enqueues out[i] = map_element(args, in, i) for every output element on `stream` (a
/// cudaStream_t). `in[r]`: read r's device buffer. Throws CudaError when the launch fails.
void launch_map(const MapArgs& args, const float* const* in, float* out, void* stream);

/// Enqueues out[o] = reduce_element(args, x, y, o) for every output element on `stream`; a split
/// reduction (args.split > 1) in two phases through `scratch` (reduce_scratch_doubles(args) doubles).
void launch_reduce(const ReduceArgs& args, const float* x, const float* y, float* out, double* scratch, void* stream);

/// Enqueues row_thread(args, in, out, t) for every thread t < args.threads on `stream` (one thread
/// per row: softmax, norms, losses; a block-per-row kernel is the next step for long rows).
/// A staged op (args.staged) runs row_stage_thread first, into `scratch` (row_scratch_doubles(args)).
/// `error` (device memory, or null): where an embedding reports an id outside its table, with `tag`.
void launch_row(const RowArgs& args, const float* const* in, float* out, double* scratch, void* stream,
                IdError* error = nullptr, long long tag = 0);

/// Enqueues batch norm's three phases for the block's channels (device_math.h: one thread per
/// (channel, chunk) summing, one per channel combining, one per element of the block applying),
/// through `scratch` (channel_scratch_doubles(args) doubles). `in`: kMaxReads pointers.
void launch_channel(const ChannelArgs& args, const float* const* in, float* out, double* scratch, void* stream);

/// Enqueues out[e] = gather_element(args, in, e) for every output element (pooling, reshape).
void launch_gather(const GatherArgs& args, const float* const* in, float* out, void* stream);

}  // namespace tilewise::exec::cuda

#include <cuda_runtime_api.h>

#include <string>

#include "exec/cuda/device.h"
#include "exec/cuda/map_kernels.h"

namespace tilewise::exec::cuda {

namespace {

struct Reads {
  const float* p[kMaxReads];
};

__global__ void map_kernel(MapArgs a, Reads in, float* out) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < a.elements;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    out[map_out_offset(a, i)] = map_element(a, in.p, i);
}

__global__ void reduce_kernel(ReduceArgs a, const float* __restrict__ x, const float* __restrict__ y,
                              float* __restrict__ out) {
  for (long long o = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; o < a.outputs;
       o += static_cast<long long>(gridDim.x) * blockDim.x)
    out[o] = reduce_element(a, x, y, o);
}

__global__ void reduce_partial_kernel(ReduceArgs a, const float* __restrict__ x, const float* __restrict__ y,
                                      double* __restrict__ partials) {
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < a.outputs * a.split;
       q += static_cast<long long>(gridDim.x) * blockDim.x)
    partials[q] = reduce_partial_element(a, x, y, q);
}

__global__ void reduce_combine_kernel(ReduceArgs a, const double* __restrict__ partials, float* __restrict__ out) {
  for (long long o = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; o < a.outputs;
       o += static_cast<long long>(gridDim.x) * blockDim.x)
    out[o] = reduce_combine_element(a, partials, o);
}

__global__ void row_kernel(RowArgs a, Reads in, float* out, const double* stage, IdError* error, long long tag) {
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < a.threads;
       t += static_cast<long long>(gridDim.x) * blockDim.x)
    row_thread(a, in.p, out, t, stage, error, tag);
}

__global__ void row_stage_kernel(RowArgs a, Reads in, double* stage) {
  for (long long r = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; r < a.rows;
       r += static_cast<long long>(gridDim.x) * blockDim.x)
    row_stage_thread(a, in.p, stage, r);
}

__global__ void channel_partial_kernel(ChannelArgs a, Reads in, double* stage) {
  for (long long q = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; q < a.cs * a.chunks;
       q += static_cast<long long>(gridDim.x) * blockDim.x)
    channel_partial_thread(a, in.p, stage, q);
}

__global__ void channel_combine_kernel(ChannelArgs a, Reads in, double* stage, float* out) {
  for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < a.cs;
       t += static_cast<long long>(gridDim.x) * blockDim.x)
    channel_combine_thread(a, in.p, stage, out, t);
}

__global__ void channel_apply_kernel(ChannelArgs a, Reads in, const double* stage, float* out) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < channel_elements(a);
       e += static_cast<long long>(gridDim.x) * blockDim.x)
    channel_apply_element(a, in.p, stage, out, e);
}

__global__ void gather_kernel(GatherArgs a, Reads in, float* out) {
  for (long long e = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; e < a.elements;
       e += static_cast<long long>(gridDim.x) * blockDim.x)
    out[e] = gather_element(a, in.p, e);
}

unsigned grid_for(long long n, int threads) {
  const long long blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

}  // namespace

void launch_map(const MapArgs& args, const float* const* in, float* out, void* stream) {
  if (args.elements == 0) return;
  Reads r{};
  for (int i = 0; i < args.reads; ++i) r.p[i] = in[i];
  constexpr int threads = 256;
  const unsigned grid = grid_for(args.elements, threads);
  map_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(args, r, out);
  check_lazy(cudaGetLastError(), [&] { return std::string("map_kernel<<<" + std::to_string(grid) + ", " + std::to_string(threads) + ">>> (fn " +
                                std::to_string(args.fn) + ")"); });
}

void launch_reduce(const ReduceArgs& args, const float* x, const float* y, float* out, double* scratch, void* stream) {
  if (args.outputs == 0) return;
  constexpr int threads = 128;
  if (args.split > 1) {  // partials into the scratch, then each output folds its own
    const unsigned g1 = grid_for(args.outputs * args.split, threads), g2 = grid_for(args.outputs, threads);
    reduce_partial_kernel<<<g1, threads, 0, static_cast<cudaStream_t>(stream)>>>(args, x, y, scratch);
    check_lazy(cudaGetLastError(), [&] { return std::string("reduce_partial_kernel<<<" + std::to_string(g1) + ", " + std::to_string(threads) + ">>>"); });
    reduce_combine_kernel<<<g2, threads, 0, static_cast<cudaStream_t>(stream)>>>(args, scratch, out);
    check_lazy(cudaGetLastError(), [&] { return std::string("reduce_combine_kernel<<<" + std::to_string(g2) + ", " + std::to_string(threads) + ">>>"); });
    return;
  }
  const unsigned grid = grid_for(args.outputs, threads);
  reduce_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(args, x, y, out);
  check_lazy(cudaGetLastError(), [&] { return std::string("reduce_kernel<<<" + std::to_string(grid) + ", " + std::to_string(threads) + ">>>"); });
}

void launch_row(const RowArgs& args, const float* const* in, float* out, double* scratch, void* stream, IdError* error,
                long long tag) {
  if (args.threads == 0) return;
  Reads r{};
  for (int i = 0; i < args.inputs; ++i) r.p[i] = in[i];
  constexpr int threads = 64;
  if (args.staged) {  // phase 1: one thread per row into the scratch
    const unsigned g1 = grid_for(args.rows, threads);
    row_stage_kernel<<<g1, threads, 0, static_cast<cudaStream_t>(stream)>>>(args, r, scratch);
    check_lazy(cudaGetLastError(), [&] { return std::string("row_stage_kernel<<<" + std::to_string(g1) + ", " + std::to_string(threads) + ">>> (fn " +
                                  std::to_string(args.fn) + ")"); });
  }
  const unsigned grid = grid_for(args.threads, threads);
  row_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(args, r, out, args.staged ? scratch : nullptr, error,
                                                                      tag);
  check_lazy(cudaGetLastError(), [&] { return std::string("row_kernel<<<" + std::to_string(grid) + ", " + std::to_string(threads) + ">>> (fn " +
                                std::to_string(args.fn) + ")"); });
}

void launch_channel(const ChannelArgs& args, const float* const* in, float* out, double* scratch, void* stream) {
  if (args.cs == 0) return;
  Reads r{};
  for (int i = 0; i < kMaxReads; ++i) r.p[i] = in[i];
  auto* s = static_cast<cudaStream_t>(stream);
  const std::string fn = " (fn " + std::to_string(args.fn) + ")";
  constexpr int threads = 128;
  const unsigned g1 = grid_for(args.cs * args.chunks, threads);
  channel_partial_kernel<<<g1, threads, 0, s>>>(args, r, scratch);
  check_lazy(cudaGetLastError(), [&] { return std::string("channel_partial_kernel<<<" + std::to_string(g1) + ", " + std::to_string(threads) + ">>>" + fn); });
  const unsigned g2 = grid_for(args.cs, 32);
  channel_combine_kernel<<<g2, 32, 0, s>>>(args, r, scratch, out);
  check_lazy(cudaGetLastError(), [&] { return std::string("channel_combine_kernel<<<" + std::to_string(g2) + ", 32>>>" + fn); });
  if (!channel_writes_elements(args)) return;
  const unsigned g3 = grid_for(channel_elements(args), threads);
  channel_apply_kernel<<<g3, threads, 0, s>>>(args, r, scratch, out);
  check_lazy(cudaGetLastError(), [&] { return std::string("channel_apply_kernel<<<" + std::to_string(g3) + ", " + std::to_string(threads) + ">>>" + fn); });
}

void launch_gather(const GatherArgs& args, const float* const* in, float* out, void* stream) {
  if (args.elements == 0) return;
  Reads r{};
  for (int i = 0; i < kMaxReads; ++i) r.p[i] = in[i];
  constexpr int threads = 256;
  const unsigned grid = grid_for(args.elements, threads);
  gather_kernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(args, r, out);
  check_lazy(cudaGetLastError(), [&] { return std::string("gather_kernel<<<" + std::to_string(grid) + ", " + std::to_string(threads) + ">>> (fn " +
                                std::to_string(args.fn) + ")"); });
}

}  // namespace tilewise::exec::cuda

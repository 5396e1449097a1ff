// The host reference of the CUDA backend's plans: each Step of kernel_select.h run on the CPU with
// the semantics of what will run it on a GPU — cuBLAS's column-major sgemm (strided batched) on the
// call's own parameters, cuDNN's NCHW cross-correlation (forward, backward data, backward filter) on
// the descriptor's dimensions, strides and padding, and the backend's own kernels through the very
// __host__ __device__ functions of device_math.h. Tests compare its output with the CPU kernel's on
// the same call: what is checked is the parameter derivation, without a GPU.
#pragma once
#include <vector>

#include "exec/cuda/kernel_select.h"
#include "kernels/cpu/tile_kernels.h"

namespace tilewise::exec::cuda {

/// cublasSgemmStridedBatched's result, column-major: C[i + j ldc] = alpha sum_p op(A)(i, p) op(B)(p, j)
/// + beta C (beta 0: C is not read), per batch entry.
void host_sgemm(const GemmCall& g, const float* a, const float* b, float* c);

/// cuDNN's convolution for `c` (CROSS_CORRELATION, beta 0): y from x and w, dx from dy and w, or dw
/// from x and dy; the output packed.
void host_conv(const ConvCall& c, const float* x, const float* w, const float* y, float* out);

/// Runs `steps` for `call` (its inputs' data and `out` set) as the GPU would, into call.out.
void run_steps_on_host(const std::vector<Step>& steps, const kernels::TileCall& call, IdError* error = nullptr,
                       long long tag = 0);

}  // namespace tilewise::exec::cuda

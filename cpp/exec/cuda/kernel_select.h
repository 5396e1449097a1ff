// Kernel selection for the CUDA backend (host code, no CUDA dependency): one device's share of an op
// (a kernels::TileCall, as the CPU runtime builds it) becomes the library calls and kernels that
// compute it on a GPU, as data:
//   - cuBLAS for the GEMM family: our tensors are row-major, cuBLAS is column-major, so the row-major
//     C = A B is issued as the column-major C^T = B^T A^T (A and B swap places, m and n swap); each
//     operand's transposition and leading dimension come from the strides of the region holding it;
//   - cuDNN for 2-D convolutions (forward, backward data, backward filter): NCHW descriptors with the
//     regions' strides, the filter packed, symmetric padding;
//   - the backend's own kernels (device_math.h) for element-wise maps and reductions.
// host_reference.h runs every Step on the CPU with the libraries' documented semantics, and the tests
// compare that with the CPU kernel's output on the same call: the parameter derivation is what breaks
// in such backends, and it is checked without a GPU.
#pragma once
#include <string>
#include <vector>

#include "exec/cuda/device_math.h"
#include "kernels/cpu/tile_kernels.h"

namespace tilewise::exec::cuda {

/// Where a step's operand lives: input `j` of the call (>= 0) or the call's output buffer.
constexpr int kOutput = -1;

/// One cublasSgemmStridedBatched call, column-major: C[c_offset + batch * stride_c] =
/// alpha op(A) op(B) + beta C, with A = operand `a` (a call input), B = operand `b`, C the output.
struct GemmCall {
  bool transa = false, transb = false;
  long long m = 1, n = 1, k = 1, lda = 1, ldb = 1, ldc = 1;
  int a = 0, b = 0;  ///< call inputs
  long long a_offset = 0, b_offset = 0, c_offset = 0;  ///< floats into each buffer
  long long batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
  float alpha = 1.0f, beta = 0.0f;
};

/// One cuDNN convolution (CUDNN_CROSS_CORRELATION, float32), as cudnnConvolution{Forward,
/// BackwardData,BackwardFilter} take it: x (n, c, h, w) and dy (n, k, p, q) with strides, the filter
/// w (k, c, r, s) packed; symmetric padding. The output (y, dx or dw) is the call's output, packed.
struct ConvCall {
  enum Mode { kForward, kBackwardData, kBackwardFilter };
  Mode mode = kForward;
  long long n = 1, c = 1, h = 1, w = 1;  ///< x (or dx)
  long long k = 1, r = 1, s = 1;         ///< filter
  long long p = 1, q = 1;                ///< y (or dy)
  long long pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  long long x_stride[4] = {0, 0, 0, 1}, y_stride[4] = {0, 0, 0, 1};  ///< x's / y's (dy's) strides
  int x_input = kOutput, w_input = kOutput, y_input = kOutput;  ///< which call input holds x, w, dy
  long long x_offset = 0, w_offset = 0, y_offset = 0;             ///< floats into those inputs
};

/// One unit of work on the compute stream.
struct Step {
  enum Kind { kGemm, kConv, kMap, kReduce, kRow, kChannel, kGather };
  Kind kind = kMap;
  GemmCall gemm;
  ConvCall conv;
  MapArgs map;
  int map_inputs[kMaxReads] = {kOutput, kOutput, kOutput, kOutput, kOutput, kOutput, kOutput, kOutput};  ///< per read: call input or kOutput
  ReduceArgs reduce;
  int reduce_input = 0;
  int reduce_input2 = 0;  ///< y of a paired reduction (reduce.term != kNone)
  RowArgs row;
  int row_inputs[kMaxReads] = {kOutput, kOutput, kOutput, kOutput, kOutput, kOutput, kOutput, kOutput};  ///< also the channel step's inputs
  ChannelArgs channel;  ///< channel_thread for c_lo .. c_lo + cs - 1 (batch norm)
  GatherArgs gather;    ///< gather_element for every output element (pooling, reshape)
};

/// The kernel choice of one call: `library` "cublas", "cudnn" or "kernel" (the backend's own), the
/// steps in order; or empty steps and `why_not` naming what has no CUDA kernel yet.
struct Selection {
  std::string library;
  std::vector<Step> steps;
  std::string why_not;
  bool ok() const { return why_not.empty(); }
};

/// The CUDA kernels for `call` (a kernels::TileCall as exec::kernel_call builds it; its data pointers
/// are not read). Every GEMM, cuDNN and own-kernel parameter is derived here.
Selection select_kernel(const kernels::TileCall& call);

/// The kernels select_kernel knows (some calls of them may still be refused, e.g. a spatially split
/// convolution with an asymmetric halo), by library.
std::vector<std::pair<std::string, std::string>> cuda_kernels();

}  // namespace tilewise::exec::cuda

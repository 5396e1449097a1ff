// A product as a GEMM over a block, independent of who runs it: which variables play m, n and k,
// which input dimension each variable indexes, and how a strided matrix reads as a BLAS operand.
// Shared by the CPU GEMM kernels (gemm_kernels.cpp) and the CUDA kernel selection (exec/cuda), so
// that both derive transposes and leading dimensions by one rule.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace tilewise::kernels {

constexpr int kNoGemmVar = -1;  ///< a GEMM dimension no variable plays (size 1)

/// One GEMM operand: input `input`, whose dimension d is indexed by variable dims[d].
struct GemmOperand {
  int input = 0;
  std::vector<int> dims;
};

/// out[loops.., m, n] = sum_k A[.., m, k] B[.., k, n] in the roles each kernel gives its variables;
/// `loops` holds every variable not in m, n, k.
struct Contraction {
  GemmOperand a, b;
  int m = kNoGemmVar, n = kNoGemmVar, k = kNoGemmVar;
  std::vector<int> loops;
};

/// A batched product over r - 2 leading batch axes: variables 0..r-1 are the output (rows m = r-2,
/// columns n = r-1), r is k. `a_tail` / `b_tail` give each operand's last two dimensions as roles
/// (0 = m, 1 = n, 2 = k); `b_batched`: b has the batch axes too.
inline Contraction batched_contraction(int r, const std::vector<int>& a_tail, const std::vector<int>& b_tail,
                                       bool b_batched) {
  const int role[3] = {r - 2, r - 1, r};
  Contraction c;
  c.a.input = 0, c.b.input = 1;
  for (int t = 0; t < r - 2; ++t) {
    c.loops.push_back(t);
    c.a.dims.push_back(t);
    if (b_batched) c.b.dims.push_back(t);
  }
  for (int x : a_tail) c.a.dims.push_back(role[x]);
  for (int x : b_tail) c.b.dims.push_back(role[x]);
  c.m = role[0], c.n = role[1], c.k = role[2];
  return c;
}

/// How a BLAS reads a matrix whose element (r, c) lies at r * row_stride + c * col_stride: as stored
/// (ld = row stride) or transposed (ld = column stride).
struct BlasLayout {
  bool trans = false;
  int64_t ld = 1;
};

/// A rows x cols matrix with the given strides as a BLAS operand; false when neither layout fits
/// (no unit stride).
inline bool blas_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, BlasLayout* out) {
  if ((cols <= 1 || col_stride == 1) && (rows <= 1 || row_stride >= std::max<int64_t>(cols, 1))) {
    *out = {false, rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride};
    return true;
  }
  if ((rows <= 1 || row_stride == 1) && (cols <= 1 || col_stride >= std::max<int64_t>(rows, 1))) {
    *out = {true, cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride};
    return true;
  }
  return false;
}

}  // namespace tilewise::kernels

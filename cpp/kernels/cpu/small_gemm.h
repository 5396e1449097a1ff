// Float GEMMs with few rows (m <= kSmallGemmMaxRows) computed without packing, for the shapes of a
// recurrent step: an LSTM's h projection (16 x 512 times a 2048 x 512 weight read transposed) and its
// data gradient (16 x 2048 times 2048 x 512). A BLAS packs the whole weight on every call, which a
// block of 16 rows does not pay back (OpenBLAS: about 60 GFLOP/s there); these read the weight once,
// straight from memory, and keep a register tile of outputs. AVX-512 only, chosen at run time
// (__builtin_cpu_supports), so a build still runs on any x86-64; elsewhere, and for other shapes,
// gemm() in blas.cpp calls the BLAS as before. One thread, the caller's; gemm() chooses it by the
// shapes alone, so a product's bits never depend on the BLAS's thread count; no scratch: the tiles
// live in registers.
// Internal to cpp/kernels/cpu.
#pragma once

#include <cstdint>

namespace tilewise::kernels {

/// Rows (m) up to which small_gemm computes a product.
constexpr int64_t kSmallGemmMaxRows = 32;
/// Multiply-adds (m n k) below which gemm() leaves a product to the BLAS anyway: it is over before
/// packing matters, and the BLAS's small-matrix path is as fast (16 x 10 x 512: 2 us either way).
constexpr int64_t kSmallGemmMinWork = int64_t{1} << 17;

/// C = alpha op(A) op(B) + beta C, row-major, A not transposed, as gemm() in blas.h (beta == 0: C
/// only written; k == 0: C = beta C). Returns false, having written nothing, when it does not
/// compute this case (A transposed, m outside [1, kSmallGemmMaxRows], n < 1, or no AVX-512 on this
/// CPU). The arguments are gemm()'s, already checked there.
bool small_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// Whether this CPU runs small_gemm's kernels (AVX-512F).
bool small_gemm_available();

}  // namespace tilewise::kernels

// Dense matrix multiply on the CPU, backed by the BLAS the build linked (cmake/blas.cmake:
// scipy-openblas32 from PyPI, or the system's CBLAS). Every CPU kernel that multiplies matrices
// (matmul, convolution via im2col, the reference runtime) goes through here, so the BLAS in use is
// chosen in one place and reported by build_info().
#pragma once

#include <cstdint>
#include <string>

namespace tilewise::kernels {

/// C = alpha * op(A) * op(B) + beta * C, all matrices row-major.
///
/// op(A) is m×k and op(B) is k×n; C is m×n. A is stored m×k, or k×m when trans_a, with leading
/// dimension (distance between rows) lda ≥ max(1, its stored column count); likewise B (k×n, or
/// n×k when trans_b) with ldb, and C with ldc ≥ max(1, n). When beta is 0, C is only written, as in
/// BLAS: NaNs already in C do not propagate. C must not overlap A or B.
///
/// Throws std::invalid_argument, naming the argument, for a negative size, a leading dimension too
/// small for its matrix, a null pointer to a non-empty matrix, or a size past the BLAS integer range
/// (2^31 - 1 for scipy-openblas32).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

/// The double-precision version of gemm above; same contract.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

/// Name and version of the linked BLAS, e.g. "scipy-openblas32 0.3.27.44.6" or
/// "system OpenBLAS (libopenblas.so)".
std::string blas_name();

/// Threads the BLAS uses for one call (OpenBLAS: its pool size); 1 when it does not say.
int blas_threads();

/// Sets the BLAS's threads per call (OpenBLAS only; elsewhere a no-op). The runtime gives each of
/// several device workers one thread so that devices, not the BLAS, share the cores.
void set_blas_threads(int threads);

}  // namespace tilewise::kernels

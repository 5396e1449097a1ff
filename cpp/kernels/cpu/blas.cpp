#include "kernels/cpu/blas.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <cblas.h>

#include "kernels/cpu/small_gemm.h"

// cmake/blas.cmake says which BLAS this is. scipy-openblas32 prefixes every exported symbol with
// scipy_ so that it can share a process with NumPy's or a system OpenBLAS without clashing.
#ifndef TILEWISE_BLAS_NAME
#error "TILEWISE_BLAS_NAME is not defined: cpp/kernels/cpu/blas.cpp must be built through cmake/blas.cmake"
#endif
#if TILEWISE_BLAS_SCIPY_PREFIX
#define TILEWISE_CBLAS(name) scipy_cblas_##name
#define TILEWISE_OPENBLAS(name) scipy_openblas_##name
#else
#define TILEWISE_CBLAS(name) cblas_##name
#define TILEWISE_OPENBLAS(name) openblas_##name
#endif

#if TILEWISE_BLAS_OPENBLAS
// Declared here as well because a system cblas.h need not be OpenBLAS's own.
extern "C" int TILEWISE_OPENBLAS(get_num_threads)(void);
extern "C" void TILEWISE_OPENBLAS(set_num_threads)(int);
#endif

namespace tilewise::kernels {
namespace {

constexpr int64_t kBlasIntMax = std::numeric_limits<int>::max();

void check_size(const char* name, int64_t value) {
  if (value < 0) {
    throw std::invalid_argument("gemm: " + std::string(name) + " = " + std::to_string(value) +
                                " is negative");
  }
  if (value > kBlasIntMax) {
    throw std::invalid_argument("gemm: " + std::string(name) + " = " + std::to_string(value) +
                                " exceeds the BLAS integer range (at most " +
                                std::to_string(kBlasIntMax) + ")");
  }
}

// `rows`×`cols` is the matrix as stored (before any transpose).
void check_matrix(const char* name, const char* ld_name, const void* data, int64_t rows,
                  int64_t cols, int64_t ld) {
  check_size(ld_name, ld);
  if (ld < std::max<int64_t>(1, cols)) {
    throw std::invalid_argument("gemm: " + std::string(ld_name) + " = " + std::to_string(ld) +
                                " is smaller than max(1, " + std::to_string(cols) +
                                "), the column count of " + name + " as stored (" +
                                std::to_string(rows) + "x" + std::to_string(cols) + ")");
  }
  if (data == nullptr && rows > 0 && cols > 0) {
    throw std::invalid_argument("gemm: " + std::string(name) + " is null but has " +
                                std::to_string(rows) + "x" + std::to_string(cols) + " elements");
  }
}

void check_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const void* a,
                int64_t lda, const void* b, int64_t ldb, const void* c, int64_t ldc) {
  check_size("m", m);
  check_size("n", n);
  check_size("k", k);
  check_matrix(trans_a ? "A (transposed, stored k x m)" : "A", "lda", a, trans_a ? k : m,
               trans_a ? m : k, lda);
  check_matrix(trans_b ? "B (transposed, stored n x k)" : "B", "ldb", b, trans_b ? n : k,
               trans_b ? k : n, ldb);
  check_matrix("C", "ldc", c, m, n, ldc);
}

CBLAS_TRANSPOSE to_cblas(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  check_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  if (m == 0 || n == 0) return;  // nothing to write; some BLAS builds still inspect the pointers
  // A few rows: no packing (small_gemm.h). Chosen by the shapes alone, never by the BLAS's thread
  // count: that count is process-wide, and executables stepping in two threads at once set and
  // restore it around their steps, so a product could take either path and its bits would differ.
  if (m * n * k >= kSmallGemmMinWork &&
      small_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) {
    return;
  }
  TILEWISE_CBLAS(sgemm)(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), static_cast<int>(m),
                        static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
                        static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  check_gemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc);
  if (m == 0 || n == 0) return;
  TILEWISE_CBLAS(dgemm)(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), static_cast<int>(m),
                        static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b,
                        static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

std::string blas_name() { return TILEWISE_BLAS_NAME; }

int blas_threads() {
#if TILEWISE_BLAS_OPENBLAS
  return std::max(1, TILEWISE_OPENBLAS(get_num_threads)());
#else
  return 1;
#endif
}

void set_blas_threads(int threads) {
#if TILEWISE_BLAS_OPENBLAS
  TILEWISE_OPENBLAS(set_num_threads)(std::max(1, threads));
#else
  (void)threads;
#endif
}

}  // namespace tilewise::kernels

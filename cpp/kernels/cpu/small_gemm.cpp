#include "kernels/cpu/small_gemm.h"

#include <algorithm>
#include <array>
#include <utility>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TW_SMALL_GEMM_X86 1
#include <immintrin.h>
#else
#define TW_SMALL_GEMM_X86 0
#endif

namespace tilewise::kernels {

#if TW_SMALL_GEMM_X86
// GCC 12's avx512fintrin.h warns that its own _mm512_undefined_ps() is uninitialised (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

#define TW_AVX512 __attribute__((target("avx512f")))
#define TW_AVX512_INLINE __attribute__((target("avx512f"), always_inline)) inline

TW_AVX512_INLINE __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}

// out = alpha * acc + beta * out (beta == 0: out only written, as BLAS).
TW_AVX512_INLINE __m512 finish(__m512 acc, float alpha, float beta, const float* c, __mmask16 mask) {
  const __m512 r = _mm512_mul_ps(acc, _mm512_set1_ps(alpha));
  if (beta == 0.0f) return r;
  return _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, c), _mm512_set1_ps(beta), r);
}

// ---- C = A B^T: both operands' rows run along k, so each output is a dot product of two
// contiguous rows. An MR x NR tile keeps MR * NR 16-lane partial sums; each step of 16 k loads MR
// rows of A and NR rows of B for MR * NR fused multiply-adds; the lanes are summed at the end.

// Sums each of 16 vectors' lanes into lane r of one vector (r = 4 i + j): pairs, then quads
// within each 128-bit lane, then across lanes (45 instructions, not 16 separate reductions).
TW_AVX512_INLINE __m512 reduce16(const __m512 (&acc)[4][4]) {
  __m512 s[8], u[4];
#pragma GCC unroll 8
  for (int p = 0; p < 8; ++p) {
    const __m512 x = acc[(2 * p) / 4][(2 * p) % 4], y = acc[(2 * p + 1) / 4][(2 * p + 1) % 4];
    s[p] = _mm512_add_ps(_mm512_unpacklo_ps(x, y), _mm512_unpackhi_ps(x, y));
  }
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m512 x = s[2 * q], y = s[2 * q + 1];
    u[q] = _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x44), _mm512_shuffle_ps(x, y, 0xEE));
  }
  const __m512 v0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
  const __m512 v1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(v0, v1, 0x88), _mm512_shuffle_f32x4(v0, v1, 0xDD));
}

template <int MR, int NR>
TW_AVX512 void nt_tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, float alpha,
                       float beta, float* c, int64_t ldc) {
  __m512 acc[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; p += 16) {
    const __mmask16 mask = tail_mask(k - p);
    __m512 bv[NR];
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) bv[j] = _mm512_maskz_loadu_ps(mask, b + j * ldb + p);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_maskz_loadu_ps(mask, a + i * lda + p);
#pragma GCC unroll 8
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
  }
  if constexpr (MR == 4 && NR == 4) {
    // The 16 sums at once: lane 4 i + j of the result holds acc[i][j].
    const __m512 sums = _mm512_mul_ps(reduce16(acc), _mm512_set1_ps(alpha));
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m128 row = _mm512_extractf32x4_ps(sums, i);  // needs an immediate: unrolled
      float* out = c + i * ldc;
      _mm_storeu_ps(out, beta == 0.0f ? row : _mm_add_ps(row, _mm_mul_ps(_mm_set1_ps(beta), _mm_loadu_ps(out))));
    }
    return;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const float s = alpha * _mm512_reduce_add_ps(acc[i][j]);
      float* out = c + i * ldc + j;
      *out = beta == 0.0f ? s : s + beta * *out;
    }
  }
}

using NtTile = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float, float, float*, int64_t);
constexpr int kNtRows = 4, kNtCols = 4;

template <int MR, int... NRs>
constexpr auto nt_row(std::integer_sequence<int, NRs...>) {
  return std::array<NtTile, sizeof...(NRs)>{&nt_tile<MR, NRs + 1>...};
}

template <int... MRs>
constexpr auto nt_table(std::integer_sequence<int, MRs...>) {
  return std::array<std::array<NtTile, kNtCols>, sizeof...(MRs)>{
      nt_row<MRs + 1>(std::make_integer_sequence<int, kNtCols>())...};
}

// Tile sizes 1..kNtRows x 1..kNtCols, for the edges.
constexpr auto kNtTiles = nt_table(std::make_integer_sequence<int, kNtRows>());

void gemm_nt(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
             float beta, float* c, int64_t ldc) {
  // Columns outside: a block of B's rows (kNtCols x k) stays in L1 while every row block of A passes.
  for (int64_t j = 0; j < n; j += kNtCols) {
    const int nr = static_cast<int>(std::min<int64_t>(kNtCols, n - j));
    for (int64_t i = 0; i < m; i += kNtRows) {
      const int mr = static_cast<int>(std::min<int64_t>(kNtRows, m - i));
      kNtTiles[mr - 1][nr - 1](a + i * lda, lda, b + j * ldb, ldb, k, alpha, beta, c + i * ldc + j, ldc);
    }
  }
}

// ---- C = A B: each k broadcasts MR elements of A's column against NV 16-wide pieces of B's row;
// MR x NV vectors of C stay in registers over the whole of k.

template <int MR, int NV>
TW_AVX512 void nn_tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, float alpha, float beta,
                       float* c, int64_t ldc, int64_t cols) {
  __mmask16 mask[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) mask[v] = tail_mask(cols - 16 * v);
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], b + p * ldb + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(a[i * lda + p]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* out = c + i * ldc + 16 * v;
      _mm512_mask_storeu_ps(out, mask[v], finish(acc[i][v], alpha, beta, out, mask[v]));
    }
  }
}

using NnTile = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float, float, float*, int64_t, int64_t);
constexpr int kNnRows = 6, kNnVectors = 4;

template <int MR, int... NVs>
constexpr auto nn_row(std::integer_sequence<int, NVs...>) {
  return std::array<NnTile, sizeof...(NVs)>{&nn_tile<MR, NVs + 1>...};
}

template <int... MRs>
constexpr auto nn_table(std::integer_sequence<int, MRs...>) {
  return std::array<std::array<NnTile, kNnVectors>, sizeof...(MRs)>{
      nn_row<MRs + 1>(std::make_integer_sequence<int, kNnVectors>())...};
}

constexpr auto kNnTiles = nn_table(std::make_integer_sequence<int, kNnRows>());

void gemm_nn(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
             float beta, float* c, int64_t ldc) {
  // Columns outside: B's panel (k x 64 columns) stays in L2 while every row block of A passes.
  constexpr int64_t width = 16 * kNnVectors;
  for (int64_t j = 0; j < n; j += width) {
    const int64_t cols = std::min(width, n - j);
    const int nv = static_cast<int>((cols + 15) / 16);
    for (int64_t i = 0; i < m; i += kNnRows) {
      const int mr = static_cast<int>(std::min<int64_t>(kNnRows, m - i));
      kNnTiles[mr - 1][nv - 1](a + i * lda, lda, b + j, ldb, k, alpha, beta, c + i * ldc + j, ldc, cols);
    }
  }
}

}  // namespace
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

bool small_gemm_available() {
#if TW_SMALL_GEMM_X86
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
#else
  return false;
#endif
}

bool small_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if TW_SMALL_GEMM_X86
  if (trans_a || m < 1 || m > kSmallGemmMaxRows || n < 1 || k < 0 || !small_gemm_available()) {
    return false;
  }
  if (trans_b) {
    gemm_nt(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } else {
    gemm_nn(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  return true;
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
  (void)beta, (void)c, (void)ldc;
  return false;
#endif
}

}  // namespace tilewise::kernels

#include "kernels/cpu/conv_direct.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TW_DIRECT_X86 1
#else
#define TW_DIRECT_X86 0
#endif

namespace tilewise::kernels::tile {
namespace {

bool cpu_has_avx512() {
#if TW_DIRECT_X86
  static const bool has = __builtin_cpu_supports("avx512f");  // libgcc also checks the OS saves zmm state
  return has;
#else
  return false;
#endif
}

// TILEWISE_CONV_IM2COL=1 in the environment (read once) keeps the im2col + BLAS path: A/B timings,
// or a CPU whose AVX-512 runs slower than its BLAS.
bool im2col_asked() {
  const char* v = std::getenv("TILEWISE_CONV_IM2COL");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

std::atomic<bool> enabled{!im2col_asked()};

}  // namespace

bool direct_available() { return cpu_has_avx512() && enabled.load(std::memory_order_relaxed); }

void set_direct_enabled(bool on) { enabled.store(on, std::memory_order_relaxed); }

#if TW_DIRECT_X86
// GCC 12's AVX-512 headers fill "undefined" operands with an uninitialised variable and warn about
// it (GCC bug 105593, fixed in 13).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace {

#define TW_AVX512 __attribute__((target("avx512f")))

// The sum of a vector's 16 lanes.
TW_AVX512 inline float lane_sum(__m512 v) {
  const __m256 s8 = _mm512_castps512_ps256(_mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xEE)));  // + upper half
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s4, _mm_movehdup_ps(s4)));
}

// R rows of C by P vectors of positions (each its own image run and C column, so a tile may span
// batch elements): the R x P sums live in registers over all of k.
template <int R, int P>
TW_AVX512 void gemm_tile(int64_t k, const float* ap, const float* const* image, const int64_t* off,
                         const uint16_t* mask, float* const* c, int64_t ldc) {
  __m512 acc[R][P];
  const float* b[P];
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) b[p] = image[p];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  for (int64_t kk = 0; kk < k; ++kk, ap += R, mask += 4) {
    const int64_t o = off[kk];
    __m512 v[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) v[p] = _mm512_maskz_loadu_ps(mask[p], b[p] + o);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(ap[r]);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_fmadd_ps(a, v[p], acc[r][p]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(c[p] + r * ldc, acc[r][p]);
  }
}

// R rows of C by J kernel offsets: each sum a vector of 16 partial sums over q, added up at the end.
template <int R, int J>
TW_AVX512 void reduce_tile(int64_t n, int64_t groups, const float* b, int64_t ldb, int64_t b_group,
                           const float* image, int64_t image_group, const int64_t* off, const uint16_t* tap_mask,
                           int64_t row_vectors, const uint16_t* mask, float* c, int64_t ldc, bool overwrite) {
  __m512 acc[R][J];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  const int64_t chunks = (n + 15) / 16;
  for (int64_t g = 0; g < groups; ++g) {
    const float* bg = b + g * b_group;
    const float* x[J];
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) x[j] = image + g * image_group + off[j];
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const uint16_t live = mask[ch];
      const int64_t phase = ch & (row_vectors - 1);  // row_vectors is 1, 2 or 4
      __m512 d[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) d[r] = _mm512_loadu_ps(bg + r * ldb + 16 * ch);
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) {
        const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>(live & tap_mask[4 * j + phase]), x[j] + 16 * ch);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r][j] = _mm512_fmadd_ps(d[r], v, acc[r][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      const float s = lane_sum(acc[r][j]);
      c[r * ldc + j] = overwrite ? s : c[r * ldc + j] + s;
    }
  }
}

using GemmTile = void (*)(int64_t, const float*, const float* const*, const int64_t*, const uint16_t*, float* const*,
                          int64_t);
using ReduceTile = void (*)(int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t,
                            const int64_t*, const uint16_t*, int64_t, const uint16_t*, float*, int64_t, bool);

constexpr int kVectors = 4;       // windows_gemm: vectors of positions per tile
constexpr int kReduceRows = 4;    // windows_reduce: rows of C per tile
constexpr int kReduceCols = 6;    // windows_reduce: kernel offsets per tile

#define TW_GEMM_ROW(R) {gemm_tile<R, 1>, gemm_tile<R, 2>, gemm_tile<R, 3>, gemm_tile<R, 4>}
const GemmTile kGemmTiles[kDirectRows][kVectors] = {TW_GEMM_ROW(1), TW_GEMM_ROW(2), TW_GEMM_ROW(3),
                                                    TW_GEMM_ROW(4), TW_GEMM_ROW(5), TW_GEMM_ROW(6)};
#undef TW_GEMM_ROW
#define TW_REDUCE_ROW(R) \
  {reduce_tile<R, 1>, reduce_tile<R, 2>, reduce_tile<R, 3>, reduce_tile<R, 4>, reduce_tile<R, 5>, reduce_tile<R, 6>}
const ReduceTile kReduceTiles[kReduceRows][kReduceCols] = {TW_REDUCE_ROW(1), TW_REDUCE_ROW(2), TW_REDUCE_ROW(3),
                                                           TW_REDUCE_ROW(4)};
#undef TW_REDUCE_ROW

}  // namespace

void windows_gemm(int64_t m, int64_t n, int64_t k, int64_t groups, const float* packed_a, const float* image,
                  int64_t image_group, const int64_t* off, const uint16_t* tap_mask, float* c, int64_t ldc,
                  int64_t c_group) {
  const int64_t per_group = (n + 15) / 16, vectors = groups * per_group;
  for (int64_t v0 = 0; v0 < vectors; v0 += kVectors) {  // a block of positions, then every row tile
    const int64_t nv = std::min<int64_t>(kVectors, vectors - v0);
    const float* bases[kVectors];
    float* outs[kVectors];
    for (int64_t p = 0; p < nv; ++p) {
      const int64_t g = (v0 + p) / per_group, q = 16 * ((v0 + p) % per_group);
      bases[p] = image + g * image_group + q, outs[p] = c + g * c_group + q;
    }
    for (int64_t i0 = 0; i0 < m; i0 += kDirectRows) {
      const int64_t rows = std::min(kDirectRows, m - i0);
      float* row_outs[kVectors];
      for (int64_t p = 0; p < nv; ++p) row_outs[p] = outs[p] + i0 * ldc;
      kGemmTiles[rows - 1][nv - 1](k, packed_a + i0 * k, bases, off, tap_mask, row_outs, ldc);
    }
  }
}

void windows_reduce(int64_t m, int64_t k, int64_t n, int64_t groups, const float* b, int64_t ldb, int64_t b_group,
                    const float* image, int64_t image_group, const int64_t* off, const uint16_t* tap_mask,
                    int64_t row_vectors, const uint16_t* mask, float* c, int64_t ldc, bool overwrite) {
  for (int64_t i0 = 0; i0 < m; i0 += kReduceRows) {
    const int64_t rows = std::min<int64_t>(kReduceRows, m - i0);
    for (int64_t k0 = 0; k0 < k; k0 += kReduceCols) {
      const int64_t cols = std::min<int64_t>(kReduceCols, k - k0);
      kReduceTiles[rows - 1][cols - 1](n, groups, b + i0 * ldb, ldb, b_group, image, image_group, off + k0,
                                       tap_mask + 4 * k0, row_vectors, mask, c + i0 * ldc + k0, ldc, overwrite);
    }
  }
}

#pragma GCC diagnostic pop

#else  // not x86-64: direct_available() is false and nothing calls these

void windows_gemm(int64_t, int64_t, int64_t, int64_t, const float*, const float*, int64_t, const int64_t*,
                  const uint16_t*, float*, int64_t, int64_t) {}
void windows_reduce(int64_t, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t,
                    const int64_t*, const uint16_t*, int64_t, const uint16_t*, float*, int64_t, bool) {}

#endif

}  // namespace tilewise::kernels::tile

// The convolution kernels' inner products without im2col (conv_kernels.cpp): the input (or, for the
// data gradient, the output gradient) is copied once into a zero-padded "window image", laid out so
// that every kernel offset's reads for a run of output positions are one contiguous run of the image
// at a fixed offset. Row k of the im2col matrix is then image + off[k], read in place by
//   windows_gemm    C[i, q]  = Sum_k A[i, k] image[off[k] + q]            (forward, data gradient)
//   windows_reduce  C[i, k] += Sum_q B[i, q] image[off[k] + q] [mask q]   (filter gradient)
// with register-blocked AVX-512 tiles. The image's rows are as wide as the output row plus the
// window's reach, so q runs over the output positions with a few unused ones at each row's end
// (garbage computed and dropped by the caller, or masked to 0 in the reduction).
//
// Compiled for AVX-512F by function attributes and chosen at run time (direct_available()): the
// library itself stays baseline x86-64, and machines without AVX-512 keep the im2col + BLAS path.
#pragma once
#include <cstdint>

namespace tilewise::kernels::tile {

/// Whether the window kernels may run: the CPU has AVX-512F and they are enabled (they are unless
/// the environment sets TILEWISE_CONV_IM2COL=1 when the library loads).
bool direct_available();

/// Turns the window kernels off (or back on, where the CPU has them): tests run both paths.
void set_direct_enabled(bool enabled);

/// Rows of A per register tile of windows_gemm: A is packed in tiles of this many rows.
constexpr int64_t kDirectRows = 6;

/// Positions per vector: q runs in whole vectors (the image and C have room for round_up(q, 16)).
constexpr int64_t kDirectLanes = 16;

/// windows_gemm's A, m x k, packed from A(i, kk): tiles of kDirectRows rows (the last one shorter),
/// each stored k-major (the tile's rows of column 0, then of column 1, ...); m x k floats.
template <typename At>
void pack_a(int64_t m, int64_t k, At a, float* packed) {
  for (int64_t i0 = 0; i0 < m; i0 += kDirectRows) {
    const int64_t rows = m - i0 < kDirectRows ? m - i0 : kDirectRows;
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t r = 0; r < rows; ++r) *packed++ = a(i0 + r, kk);
    }
  }
}

/// Each kernel offset kk's reads come with lane masks tap_mask[4 kk + phase] (a lane whose bit is
/// clear reads 0): where an image keeps no padding columns, the lanes of a tap that fall off the row.
/// A row of positions spans row_vectors (1, 2 or 4) vectors, whose masks differ; `phase` is a vector's
/// place in its row. The callers keep every part's positions a whole number of rows and of vectors.

/// For each of `groups` parts g (a batch element each): C_g[i, q] = Sum_k A[i, k] image_g[off[k] + q] for
/// i < m and q < round_up(n, 16), where image_g = image + g * image_group and C_g = c + g * c_group
/// (rows ldc apart), A packed by pack_a. Reads image_g up to off[k] + round_up(n, 16) and writes C_g's
/// rows that far. The parts' positions are tiled together, so small planes fill whole tiles; a tile's
/// p-th vector (tiles start at multiples of 4 vectors) reads with tap_mask[4 kk + p].
void windows_gemm(int64_t m, int64_t n, int64_t k, int64_t groups, const float* packed_a, const float* image,
                  int64_t image_group, const int64_t* off, const uint16_t* tap_mask, float* c, int64_t ldc,
                  int64_t c_group);

/// For each of `groups` parts g (a batch element each): C[i, kk] += Sum_{q < n} B_g[i, q] image_g[off[kk] + q],
/// where B_g = b + g * b_group (rows ldb apart) and image_g = image + g * image_group, and the image
/// term is read as 0 where bit (q % 16) of mask[q / 16] & tap_mask[4 kk + (q / 16) % row_vectors] is
/// clear (B_g must be finite there, its rows readable up to round_up(n, 16)). C is m x k with rows ldc
/// apart; `overwrite` stores the sum instead of adding it.
void windows_reduce(int64_t m, int64_t k, int64_t n, int64_t groups, const float* b, int64_t ldb, int64_t b_group,
                    const float* image, int64_t image_group, const int64_t* off, const uint16_t* tap_mask,
                    int64_t row_vectors, const uint16_t* mask, float* c, int64_t ldc, bool overwrite);

}  // namespace tilewise::kernels::tile

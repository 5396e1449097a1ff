// 2-D convolutions (NCHW data, (co, ci, kh, kw) filters) on a device's block, as GEMMs over
// im2col matrices, one batch element at a time:
//   forward          out[co, (y, x)]        = W[co, (ci, kh, kw)] col[(ci, kh, kw), (y, x)]
//   backward data    cols[(ci, kh, kw), (y, x)] = W^T dy[co, (y, x)], then col2im into dx
//   backward filter  dW[co, (ci, kh, kw)]  += dy[co, (y, x)] col^T
// The kernel-offset variables and the input channels may be sub-ranges (a partial reduction of the
// forward conv), as may the batch and output positions of the filter gradient. Reads outside the
// tensor are the zero padding; im2col writes them as zeros.
// Where the CPU has AVX-512F (conv_direct.h) the three run without im2col: the data (dy for the
// data gradient at stride 1) is copied once into a zero-padded window image and the products read
// each kernel offset's run of it in place; the padding terms are the same products as im2col's.
// Depthwise 2-D and 1-D convolutions are direct loops at the end of the file.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {
namespace {

bool geometry(const Attrs& attrs, Window* g) {
  g->s = attrs.integer("stride", 1);
  g->p = attrs.integer("padding", 0);
  g->d = attrs.integer("dilation", 1);
  return attrs.ok() && g->s >= 1 && g->p >= 0 && g->d >= 1;
}

/// A rank-4 input's region with its row-major strides.
struct Region4 {
  const float* data = nullptr;
  int64_t lo[4] = {0, 0, 0, 0};
  int64_t st[4] = {0, 0, 0, 1};
  int64_t size[4] = {0, 0, 0, 0};
  int64_t shape[4] = {0, 0, 0, 0};
  const float* at(int64_t a, int64_t b, int64_t c, int64_t e) const {
    return data + (a - lo[0]) * st[0] + (b - lo[1]) * st[1] + (c - lo[2]) * st[2] + (e - lo[3]) * st[3];
  }
  /// Whether the region's dimension dim is exactly the span (so a sub-box is contiguous along it).
  bool exactly(int dim, Span s) const { return lo[dim] == s.lo && size[dim] == s.size(); }
};

// The input as a Region4 when its region holds the box's in-tensor part; false to decline.
// `need_data` false: from the region alone (scratch sizes, which see no data).
bool region4(const TileIn& in, const std::vector<Span>& box, Region4* r, bool need_data = true) {
  if (in.shape.size() != 4 || !(need_data ? holds(in, box) : covers(in, box))) return false;
  std::vector<int64_t> rs = region_strides(in);
  r->data = in.data;
  for (int d = 0; d < 4; ++d) {
    r->lo[d] = in.region[d].lo;
    r->st[d] = rs[d];
    r->size[d] = in.region[d].size();
    r->shape[d] = in.shape[d];
  }
  return true;
}

/// A read-only matrix: rows `ld` apart.
struct MatRef {
  const float* p = nullptr;
  int64_t ld = 1;
};

// Whether matrix_of reads the sub-box in place (else it packs |r1| x |r2||r3| floats).
bool matrix_in_place(const Region4& r, Span r2, Span r3) { return r.exactly(2, r2) && r.exactly(3, r3); }

// The sub-box a x r1 x r2 x r3 (a fixed, every index inside the region) as a |r1| x |r2||r3|
// matrix: the region itself when its last two dimensions are exactly r2, r3, else packed into buf.
MatRef matrix_of(const Region4& r, int64_t a, Span r1, Span r2, Span r3, float* buf) {
  const int64_t cols = r2.size() * r3.size();
  if (matrix_in_place(r, r2, r3)) return {r.at(a, r1.lo, r2.lo, r3.lo), std::max<int64_t>(r.st[1], 1)};
  float* dst = buf;
  for (int64_t i = r1.lo; i <= r1.hi; ++i) {
    for (int64_t j = r2.lo; j <= r2.hi; ++j, dst += r3.size()) {
      std::memcpy(dst, r.at(a, i, j, r3.lo), sizeof(float) * r3.size());
    }
  }
  return {buf, std::max<int64_t>(cols, 1)};
}

// Whether filter_matrix reads the block in place (else it packs |r0| x |r1||r2||r3| floats).
bool filter_in_place(const Region4& r, Span r1, Span r2, Span r3) {
  return r.exactly(1, r1) && r.exactly(2, r2) && r.exactly(3, r3);
}

// The filter block r0 x r1 x r2 x r3 as a |r0| x |r1||r2||r3| matrix (direct or packed into buf).
MatRef filter_matrix(const Region4& r, Span r0, Span r1, Span r2, Span r3, float* buf) {
  const int64_t cols = r1.size() * r2.size() * r3.size();
  if (filter_in_place(r, r1, r2, r3)) return {r.at(r0.lo, r1.lo, r2.lo, r3.lo), std::max<int64_t>(r.st[0], 1)};
  float* dst = buf;
  for (int64_t a = r0.lo; a <= r0.hi; ++a) {
    for (int64_t b = r1.lo; b <= r1.hi; ++b) {
      for (int64_t c = r2.lo; c <= r2.hi; ++c, dst += r3.size()) {
        std::memcpy(dst, r.at(a, b, c, r3.lo), sizeof(float) * r3.size());
      }
    }
  }
  return {buf, std::max<int64_t>(cols, 1)};
}
// col[((ci, kh, kw)), (y, x)] = data[b, ci, s y + d kh - p, s x + d kw - p], zero outside the tensor.
void im2col(const Region4& data, int64_t b, Span ci, Span kh, Span kw, Span y, Span x, const Window& g,
            float* col) {
  const int64_t H = data.shape[2], W = data.shape[3], nx = x.size(), ncols = y.size() * nx;
  for (int64_t c = ci.lo; c <= ci.hi; ++c) {
    for (int64_t i = kh.lo; i <= kh.hi; ++i) {
      for (int64_t j = kw.lo; j <= kw.hi; ++j, col += ncols) {
        const Span xs = g.positions(x, j, 0, W - 1);  // x whose column lies in the tensor
        float* dst = col;
        for (int64_t yy = y.lo; yy <= y.hi; ++yy, dst += nx) {
          const int64_t h = g.in(yy, i);
          if (h < 0 || h >= H || xs.lo > xs.hi) {
            std::fill(dst, dst + nx, 0.0f);
            continue;
          }
          std::fill(dst, dst + (xs.lo - x.lo), 0.0f);
          std::fill(dst + (xs.hi - x.lo + 1), dst + nx, 0.0f);
          const float* src = data.at(b, c, h, g.in(xs.lo, j));
          float* o = dst + (xs.lo - x.lo);
          const int64_t n = xs.size();
          if (g.s == 1) {
            std::memcpy(o, src, sizeof(float) * n);
          } else {
            for (int64_t t = 0; t < n; ++t) o[t] = src[t * g.s];
          }
        }
      }
    }
  }
}

// dx[ci, h, w] += col[(ci, kh, kw), (y, x)] for h = s y + d kh - p in h_out, w likewise in w_out;
// dx is the block ci x h_out x w_out.
void col2im(const float* col, Span ci, Span kh, Span kw, Span y, Span x, Span h_out, Span w_out,
            const Window& g, float* dx) {
  const int64_t nx = x.size(), ncols = y.size() * nx, nw = w_out.size(), plane = h_out.size() * nw;
  for (int64_t c = ci.lo; c <= ci.hi; ++c) {
    float* dplane = dx + (c - ci.lo) * plane;
    for (int64_t i = kh.lo; i <= kh.hi; ++i) {
      for (int64_t j = kw.lo; j <= kw.hi; ++j, col += ncols) {
        const Span xs = g.positions(x, j, w_out.lo, w_out.hi);
        const Span ys = g.positions(y, i, h_out.lo, h_out.hi);
        if (xs.lo > xs.hi) continue;
        for (int64_t yy = ys.lo; yy <= ys.hi; ++yy) {
          const float* src = col + (yy - y.lo) * nx + (xs.lo - x.lo);
          float* dst = dplane + (g.in(yy, i) - h_out.lo) * nw + (g.in(xs.lo, j) - w_out.lo);
          const int64_t n = xs.size();
          if (g.s == 1) {
            for (int64_t t = 0; t < n; ++t) dst[t] += src[t];
          } else {
            for (int64_t t = 0; t < n; ++t) dst[t * g.s] += src[t];
          }
        }
      }
    }
  }
}

// The window image of a call (conv_direct.h): output rows i < oh and columns j < ow read the source
// at (h0 + s i + d t, w0 + s j + d u) for taps t < th, u < tw. The source's rows (columns) are split
// by their residue mod s into phases, so each tap reads its phase at a whole-row (column) shift:
// tap t reads phase (d t) % s at row i + (d t) / s. Only the residues some tap reads are stored.
// Image: channel, row phase, column phase, then a hq x wq plane; position q = i wq + j.
// Padded rows: wq = ow + (d (tw - 1)) / s, the positions j >= ow unused (computed and dropped).
// Masked rows, at stride 1 over whole source rows whose width suits the vectors (a multiple of 16 up
// to 64, or a divisor of 16 with planes of whole vectors): wq = ow, the image keeps the source's
// columns only, every position is used, and each tap masks the lanes whose column is off the row.
struct WindowLayout {
  int64_t h0 = 0, w0 = 0, oh = 0, ow = 0, s = 1, d = 1, th = 1, tw = 1, channels = 0;
  std::vector<int> phase_h, phase_w;  // per residue: its phase's index, -1 when no tap reads it
  int64_t nph = 0, npw = 0, hq = 0, wq = 0;
  bool masked = false;
  int64_t margin = 0;       // masked: zeros before the planes (a tap reading left of column 0)
  int64_t row_vectors = 1;  // masked: vectors per row of positions (each its own masks)

  // x_lo, width: the first output column and the source's width (masked rows need ow == width).
  WindowLayout(int64_t h0_, int64_t w0_, int64_t oh_, int64_t ow_, int64_t s_, int64_t d_, int64_t th_, int64_t tw_,
               int64_t channels_, int64_t x_lo, int64_t width)
      : h0(h0_), w0(w0_), oh(oh_), ow(ow_), s(s_), d(d_), th(th_), tw(tw_), channels(channels_),
        phase_h(s_, -1), phase_w(s_, -1) {
    // phases numbered in residue order, the order fill() writes them
    for (int64_t t = 0; t < th; ++t) phase_h[d * t % s] = 0;
    for (int64_t u = 0; u < tw; ++u) phase_w[d * u % s] = 0;
    for (int64_t r = 0; r < s; ++r) {
      if (phase_h[r] == 0) phase_h[r] = static_cast<int>(nph++);
      if (phase_w[r] == 0) phase_w[r] = static_cast<int>(npw++);
    }
    hq = oh + d * (th - 1) / s, wq = ow + d * (tw - 1) / s;
    masked = s == 1 && x_lo == 0 && ow == width &&
             ((ow == 16 || ow == 32 || ow == 64) || (16 % ow == 0 && oh * ow % 16 == 0));
    if (masked) {
      wq = ow, row_vectors = std::max<int64_t>(ow / 16, 1);
      margin = round_up16(std::max<int64_t>(-w0, 0));
    }
  }
  static int64_t round_up16(int64_t n) { return (n + 15) / 16 * 16; }
  int64_t plane() const { return hq * wq; }
  int64_t positions() const { return oh * wq; }
  int64_t padded_positions() const { return round_up16(positions()); }
  int64_t taps() const { return channels * th * tw; }
  // The image column tap u reads for position column 0, past the row's start.
  int64_t column(int64_t u) const { return masked ? w0 + d * u : d * u / s; }
  int64_t offset(int64_t c, int64_t t, int64_t u) const {
    return margin + ((c * nph + phase_h[d * t % s]) * npw + phase_w[d * u % s]) * plane() + d * t / s * wq +
           column(u);
  }
  /// Floats the windows read: the planes, and room for the last tap's run of padded_positions().
  int64_t data_floats() const {
    const int64_t last = margin + (channels * nph * npw - 1) * plane() + d * (th - 1) / s * wq + column(tw - 1);
    return std::max(margin + channels * nph * npw * plane(), last + padded_positions());
  }
  /// Floats of the image's scratch: the data, then (strided) one source row that fill() splits.
  int64_t floats() const { return data_floats() + (s > 1 ? s * wq : 0); }
  void offsets(int64_t* off) const {
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t t = 0; t < th; ++t) {
        for (int64_t u = 0; u < tw; ++u) *off++ = offset(c, t, u);
      }
    }
  }
  /// Per tap, the lane masks of the vectors at each place p < 4 of a tile (conv_direct.h): all lanes
  /// with padded rows; with masked rows those whose column j + column(u) lies on the row.
  void masks(uint16_t* mask) const {
    for (int64_t k = 0; k < taps(); ++k) {
      const int64_t u = k % tw;
      for (int64_t p = 0; p < 4; ++p) {
        uint16_t bits = 0xFFFF;
        if (masked) {
          bits = 0;
          for (int64_t lane = 0; lane < 16; ++lane) {
            const int64_t j = (16 * (p % row_vectors) + lane) % ow, col = j + column(u);
            if (col >= 0 && col < ow) bits = static_cast<uint16_t>(bits | (1u << lane));
          }
        }
        *mask++ = bits;
      }
    }
  }
  /// Fills the image from channels ch of batch element b of `src`: zero outside the tensor and the
  /// region (what the region lacks no kept position reads).
  void fill(const Region4& src, int64_t b, Span ch, float* image) const {
    const int64_t rlo = std::max<int64_t>(src.lo[2], 0), rhi = std::min(src.lo[2] + src.size[2], src.shape[2]) - 1;
    const int64_t clo = std::max<int64_t>(src.lo[3], 0), chi = std::min(src.lo[3] + src.size[3], src.shape[3]) - 1;
    const int64_t col0 = masked ? 0 : w0;  // the source column of the plane's column 0 (phase 0)
    std::fill(image, image + margin, 0.0f);
    float* dst = image + margin;
    if (s > 1) {
      fill_strided(src, b, ch, rlo, rhi, clo, chi, col0, dst, image + data_floats());
      dst += channels * nph * npw * plane();
    }
    for (int64_t c = ch.lo; c <= ch.hi && s == 1; ++c) {
      // the plane's columns j whose source column col0 + j lies in [clo, chi]
      const int64_t jlo = std::max<int64_t>(clo - col0, 0), jhi = std::min<int64_t>(chi - col0, wq - 1);
      for (int64_t r = 0; r < hq; ++r, dst += wq) {
        const int64_t h = h0 + r;
        if (h < rlo || h > rhi || jlo > jhi) {
          std::fill(dst, dst + wq, 0.0f);
          continue;
        }
        std::fill(dst, dst + jlo, 0.0f);
        std::fill(dst + jhi + 1, dst + wq, 0.0f);
        std::memcpy(dst + jlo, src.at(b, c, h, col0 + jlo), sizeof(float) * (jhi - jlo + 1));
      }
    }
    std::fill(dst, image + data_floats(), 0.0f);
  }
  /// fill() at stride s > 1: each source row read once into `row` (s wq floats, zero off the tensor
  /// and the region) and split into its column phases' rows (a loop the compiler vectorises).
  void fill_strided(const Region4& src, int64_t b, Span ch, int64_t rlo, int64_t rhi, int64_t clo, int64_t chi,
                    int64_t col0, float* planes, float* row) const {
    const int64_t tlo = std::max<int64_t>(clo - col0, 0), thi = std::min<int64_t>(chi - col0, s * wq - 1);
    for (int64_t c = ch.lo; c <= ch.hi; ++c) {
      for (int64_t ph = 0; ph < s; ++ph) {
        if (phase_h[ph] < 0) continue;
        float* first = planes + ((c - ch.lo) * nph + phase_h[ph]) * npw * plane();
        for (int64_t r = 0; r < hq; ++r) {
          const int64_t h = h0 + s * r + ph;
          const bool empty = h < rlo || h > rhi || tlo > thi;
          if (!empty) {
            std::fill(row, row + tlo, 0.0f);
            std::fill(row + thi + 1, row + s * wq, 0.0f);
            std::memcpy(row + tlo, src.at(b, c, h, col0 + tlo), sizeof(float) * (thi - tlo + 1));
          }
          for (int64_t pw = 0; pw < s; ++pw) {
            if (phase_w[pw] < 0) continue;
            float* out = first + phase_w[pw] * plane() + r * wq;
            if (empty) {
              std::fill(out, out + wq, 0.0f);
            } else if (s == 2) {
              for (int64_t j = 0; j < wq; ++j) out[j] = row[2 * j + pw];
            } else {
              for (int64_t j = 0; j < wq; ++j) out[j] = row[s * j + pw];
            }
          }
        }
      }
    }
  }

  /// Copies the kept positions (j < ow) of `rows` rows of C (ldc apart) into `out`, rows of oh x ow.
  void compact(const float* c, int64_t ldc, int64_t rows, float* out) const {
    for (int64_t r = 0; r < rows; ++r, c += ldc) {
      for (int64_t i = 0; i < oh; ++i, out += ow) std::memcpy(out, c + i * wq, sizeof(float) * ow);
    }
  }
};

// One call of a convolution GEMM kernel, as decided from the call alone: its variables, the views
// of its inputs and the floats of scratch each piece needs (0: read in place). The kernel and its
// scratch size come from the same setup, so the size is what the kernel takes.
struct ConvSetup {
  Window g;
  Span b, co, ci, kh, kw, y, x;  // forward: output y, x; backward data: the dy positions read
  Span h, w;                     // backward data: the block of dx
  Region4 data, filt, dy;
  int64_t m = 0, n = 0, k = 0;   // the GEMM's sizes
  int64_t packed_filter = 0, packed_dy = 0, col = 0;  // scratch floats per piece
  bool direct = false;           // forward: a 1x1 stride-1 conv reads its data block as the col matrix
  bool zero = false;             // backward data: no kernel offset reaches the block (writes zeros)
  // The window kernels (conv_direct.h) in place of im2col + BLAS, and their scratch: packed A,
  // images and C in floats, offsets in int64s, lane masks in uint16s; `groups` batch elements at a
  // time (filter gradient).
  bool windows = false;
  int64_t w_pack = 0, w_off = 0, w_image = 0, w_out = 0, w_dy = 0, w_mask = 0, groups = 1;
};

int64_t scratch_of(const ConvSetup& c) {
  return scratch_piece(c.packed_filter * 4) + scratch_piece(c.packed_dy * 4) + scratch_piece(c.col * 4) +
         scratch_piece(c.w_pack * 4) + scratch_piece(c.w_off * 8) + scratch_piece(c.w_image * 4) +
         scratch_piece(c.w_out * 4) + scratch_piece(c.w_dy * 4) + scratch_piece(c.w_mask * 2);
}

// The window images: of the data for the forward conv and the filter gradient (output positions y,
// x; taps kh, kw; channels ci), of dy for the data gradient at stride 1 (positions h, w of dx; tap
// t reads kernel offset kh.hi - t, so the image is dy correlated with the flipped filters).
WindowLayout data_windows(const ConvSetup& c) {
  const Window& g = c.g;
  return WindowLayout(g.in(c.y.lo, c.kh.lo), g.in(c.x.lo, c.kw.lo), c.y.size(), c.x.size(), g.s, g.d, c.kh.size(),
                      c.kw.size(), c.ci.size(), c.x.lo, c.data.shape[3]);
}

WindowLayout dy_windows(const ConvSetup& c) {
  const Window& g = c.g;
  return WindowLayout(c.h.lo + g.p - g.d * c.kh.hi, c.w.lo + g.p - g.d * c.kw.hi, c.h.size(), c.w.size(), 1, g.d,
                      c.kh.size(), c.kw.size(), c.co.size(), c.w.lo, c.dy.shape[3]);
}

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// Whether the window kernels suit a stride: at stride 1, or windows that overlap (a stride as large
// as the window, e.g. a ViT's patches, makes im2col a mere reshuffle and BLAS the better product).
bool windows_suit(const Window& g, int64_t kh, int64_t kw) {
  return direct_available() && (g.s == 1 || g.s < g.d * (kh - 1) + 1 || g.s < g.d * (kw - 1) + 1);
}

// Batch elements per pass of the window kernels, each taking `floats` of scratch: `want`, within
// about 4 MiB (at least one).
int64_t window_groups(Span b, int64_t want, int64_t floats) {
  return std::max<int64_t>(1, std::min({b.size(), want, (int64_t{1} << 20) / std::max<int64_t>(floats, 1)}));
}

// lambda b, co, y, x: Sum(ci, dy, dx: data[b, ci, s y + d dy - p, s x + d dx - p] filters[co, ci, dy, dx])
bool conv2d_setup(const TileCall& call, const Attrs& attrs, bool need_data, ConvSetup* c) {
  Window& g = c->g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 7 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3}) {
    return false;
  }
  c->b = call.vars[0], c->co = call.vars[1], c->y = call.vars[2], c->x = call.vars[3], c->ci = call.vars[4],
  c->kh = call.vars[5], c->kw = call.vars[6];
  const TileIn& din = call.inputs[0];
  if (din.shape.size() != 4) return false;
  Region4 &data = c->data, &filt = c->filt;
  if (!region4(din, {c->b, c->ci, g.reads(c->y, c->kh, din.shape[2]), g.reads(c->x, c->kw, din.shape[3])}, &data,
               need_data) ||
      !region4(call.inputs[1], {c->co, c->ci, c->kh, c->kw}, &filt, need_data) || filt.shape[2] != call.extents[5] ||
      filt.shape[3] != call.extents[6] || c->b.hi >= data.shape[0] || c->ci.hi >= data.shape[1] ||
      c->co.hi >= filt.shape[0] || c->ci.hi >= filt.shape[1]) {
    return false;
  }
  c->k = c->ci.size() * c->kh.size() * c->kw.size(), c->n = c->y.size() * c->x.size();
  const int64_t ld = filter_in_place(filt, c->ci, c->kh, c->kw) ? std::max<int64_t>(filt.st[0], 1)
                                                                 : std::max<int64_t>(c->k, 1);
  if (!fits_blas({c->co.size(), c->n, c->k, ld, data.st[1]})) return false;
  if (!filter_in_place(filt, c->ci, c->kh, c->kw)) c->packed_filter = c->co.size() * c->k;
  // A single kernel offset at stride 1 whose reads all lie inside the tensor reads the data block
  // itself as the im2col matrix (a 1x1 conv on whole planes: no copy).
  const Span hs{g.in(c->y.lo, c->kh.lo), g.in(c->y.hi, c->kh.hi)}, ws{g.in(c->x.lo, c->kw.lo), g.in(c->x.hi, c->kw.hi)};
  c->h = hs, c->w = ws;
  c->direct = c->kh.size() == 1 && c->kw.size() == 1 && g.s == 1 && hs.lo >= 0 && hs.hi < data.shape[2] &&
              ws.lo >= 0 && ws.hi < data.shape[3] && data.exactly(2, hs) && data.exactly(3, ws);
  if (c->direct) return true;
  if (windows_suit(g, call.extents[5], call.extents[6])) {
    // four elements at a time: small planes' positions fill the tiles of four vectors
    const WindowLayout l = data_windows(*c);
    const int64_t out = l.masked ? 0 : c->co.size() * l.padded_positions();  // masked: C is the output
    c->windows = true, c->groups = window_groups(c->b, 4, round16(l.floats()) + out),
    c->w_pack = c->co.size() * c->k, c->w_off = c->k, c->w_mask = 4 * c->k,
    c->w_image = c->groups * round16(l.floats()), c->w_out = c->groups * out, c->packed_filter = 0;
  } else {
    c->col = c->k * c->n;
  }
  return true;
}

// lambda b, ci, h, w: Sum(co, kh, kw: [s | h + p - d kh] [s | w + p - d kw]
//                                     dy[b, co, (h + p - d kh) / s, (w + p - d kw) / s] filters[co, ci, kh, kw])
bool conv2d_backward_data_setup(const TileCall& call, const Attrs& attrs, bool need_data, ConvSetup* c) {
  Window& g = c->g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 7 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3}) {
    return false;
  }
  c->b = call.vars[0], c->ci = call.vars[1], c->h = call.vars[2], c->w = call.vars[3], c->co = call.vars[4];
  const TileIn& dyin = call.inputs[0];
  if (dyin.shape.size() != 4 || call.inputs[1].shape.size() != 4) return false;
  // Only the kernel offsets through which some output position reaches the block contribute (a
  // strided conv skips the others), and only the positions they reach are read.
  c->kh = g.offsets_reaching(c->h, call.vars[5], dyin.shape[2]);
  c->kw = g.offsets_reaching(c->w, call.vars[6], dyin.shape[3]);
  if (c->kh.size() == 0 || c->kw.size() == 0) {
    c->zero = true;
    return true;
  }
  c->y = g.readers(c->h, c->kh, dyin.shape[2]), c->x = g.readers(c->w, c->kw, dyin.shape[3]);
  Region4 &dy = c->dy, &filt = c->filt;
  if (!region4(dyin, {c->b, c->co, c->y, c->x}, &dy, need_data) ||
      !region4(call.inputs[1], {c->co, c->ci, c->kh, c->kw}, &filt, need_data) || filt.shape[2] != call.extents[5] ||
      filt.shape[3] != call.extents[6] || c->b.hi >= dy.shape[0] || c->co.hi >= dy.shape[1] ||
      c->co.hi >= filt.shape[0] || c->ci.hi >= filt.shape[1]) {
    return false;
  }
  c->m = c->ci.size() * c->kh.size() * c->kw.size(), c->n = c->y.size() * c->x.size();
  if (!fits_blas({c->m, c->n, c->co.size(), filt.st[0], dy.st[1]})) return false;
  if (!filter_in_place(filt, c->ci, c->kh, c->kw)) c->packed_filter = c->co.size() * c->m;
  if (!matrix_in_place(dy, c->y, c->x)) c->packed_dy = c->co.size() * c->n;
  c->col = c->m * c->n;
  if (g.s == 1 && direct_available()) {  // the im2col path's pieces stay: non-finite filters take it
    const WindowLayout l = dy_windows(*c);
    const int64_t out = l.masked ? 0 : c->ci.size() * l.padded_positions();  // masked: C is the output
    c->windows = true, c->groups = window_groups(c->b, 4, round16(l.floats()) + out),
    c->w_pack = c->ci.size() * l.taps(), c->w_off = l.taps(), c->w_mask = 4 * l.taps(),
    c->w_image = c->groups * round16(l.floats()), c->w_out = c->groups * out;
  }
  return true;
}

// lambda co, ci, kh, kw: Sum(b, y, x: dy[b, co, y, x] data[b, ci, s y + d kh - p, s x + d kw - p])
bool conv2d_backward_filter_setup(const TileCall& call, const Attrs& attrs, bool need_data, ConvSetup* c) {
  Window& g = c->g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 7 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3}) {
    return false;
  }
  c->co = call.vars[0], c->ci = call.vars[1], c->kh = call.vars[2], c->kw = call.vars[3], c->b = call.vars[4],
  c->y = call.vars[5], c->x = call.vars[6];
  const TileIn& din = call.inputs[0];
  if (din.shape.size() != 4) return false;
  Region4 &data = c->data, &dy = c->dy;
  if (!region4(din, {c->b, c->ci, g.reads(c->y, c->kh, din.shape[2]), g.reads(c->x, c->kw, din.shape[3])}, &data,
               need_data) ||
      !region4(call.inputs[1], {c->b, c->co, c->y, c->x}, &dy, need_data) || c->b.hi >= data.shape[0] ||
      c->ci.hi >= data.shape[1] || c->b.hi >= dy.shape[0] || c->co.hi >= dy.shape[1] || c->y.hi >= dy.shape[2] ||
      c->x.hi >= dy.shape[3]) {
    return false;
  }
  c->k = c->y.size() * c->x.size(), c->n = c->ci.size() * c->kh.size() * c->kw.size();
  if (!fits_blas({c->co.size(), c->n, c->k, dy.st[1]})) return false;
  const WindowLayout l = data_windows(*c);
  // each sum runs over 256 vectors of positions (when the batch has them) before it is added up;
  // sums over fewer than 64 are left to BLAS (adding up 16 lanes per output would cost too much)
  if (windows_suit(g, call.extents[2], call.extents[3]) && c->b.size() * l.padded_positions() >= 64 * 16) {
    const int64_t per = round16(l.floats()) + c->co.size() * l.padded_positions();
    c->windows = true, c->groups = window_groups(c->b, ceil_div(256 * 16, l.padded_positions()), per),
    c->w_off = c->n,
    c->w_image = c->groups * round16(l.floats()), c->w_dy = c->groups * c->co.size() * l.padded_positions(),
    c->w_mask = 4 * c->n + l.padded_positions() / 16;
    return true;
  }
  c->col = c->n * c->k;
  if (!matrix_in_place(dy, c->y, c->x)) c->packed_dy = c->co.size() * c->k;
  return true;
}

}  // namespace

int64_t conv2d_scratch(const TileCall& call, const Attrs& attrs) {
  ConvSetup c;
  return conv2d_setup(call, attrs, false, &c) ? scratch_of(c) : 0;
}

int64_t conv2d_backward_data_scratch(const TileCall& call, const Attrs& attrs) {
  ConvSetup c;
  return conv2d_backward_data_setup(call, attrs, false, &c) ? scratch_of(c) : 0;
}

int64_t conv2d_backward_filter_scratch(const TileCall& call, const Attrs& attrs) {
  ConvSetup c;
  return conv2d_backward_filter_setup(call, attrs, false, &c) ? scratch_of(c) : 0;
}

namespace {

// out[b, i, kept positions] = Sum_k A[i, k] windows_b[k, positions] over the batch, c.groups elements
// a pass: the source's images (channels ch), windows_gemm into cbuf, the kept positions into out.
void windows_in_groups(const TileCall& call, const ConvSetup& c, const WindowLayout& l, const Region4& src, Span ch,
                       int64_t m, int64_t k, const float* packed, const int64_t* off, const uint16_t* tap_mask,
                       float* image, float* cbuf) {
  const int64_t np = l.padded_positions(), image_floats = round16(l.floats()), block = m * l.oh * l.ow;
  for (int64_t b0 = c.b.lo; b0 <= c.b.hi; b0 += c.groups) {
    const int64_t groups = std::min(c.groups, c.b.hi - b0 + 1);
    for (int64_t gi = 0; gi < groups; ++gi) l.fill(src, b0 + gi, ch, image + gi * image_floats);
    if (l.masked) {  // every position kept, planes of whole vectors: C is the output block
      windows_gemm(m, l.positions(), k, groups, packed, image, image_floats, off, tap_mask,
                   call.out + (b0 - c.b.lo) * block, np, block);
      continue;
    }
    windows_gemm(m, l.positions(), k, groups, packed, image, image_floats, off, tap_mask, cbuf, np, m * np);
    for (int64_t gi = 0; gi < groups; ++gi) {
      l.compact(cbuf + gi * m * np, np, m, call.out + (b0 + gi - c.b.lo) * block);
    }
  }
}

// windows_gemm over `l`'s image of `src` (channels `ch`): an m x k filter matrix packed from
// `filter(i, k)` times the windows, in the scratch the setup stated.
template <class Filter>
void windows_product(const TileCall& call, const ConvSetup& c, const WindowLayout& l, const Region4& src, Span ch,
                     int64_t m, int64_t k, Filter filter) {
  Scratch scratch(call);
  float* packed = scratch.floats(c.w_pack);
  int64_t* off = scratch.ints(c.w_off);
  auto* tap_mask = static_cast<uint16_t*>(scratch.take(c.w_mask * 2));
  float* image = scratch.floats(c.w_image);
  float* cbuf = c.w_out ? scratch.floats(c.w_out) : nullptr;
  pack_a(m, k, filter, packed);
  l.offsets(off);
  l.masks(tap_mask);
  windows_in_groups(call, c, l, src, ch, m, k, packed, off, tap_mask, image, cbuf);
}

// The forward conv by windows_gemm: C = W x the data's windows.
void conv2d_windows(const TileCall& call, const ConvSetup& c) {
  const int64_t nkh = c.kh.size(), nkw = c.kw.size();
  windows_product(call, c, data_windows(c), c.data, c.ci, c.co.size(), c.k, [&](int64_t i, int64_t k) {
    return *c.filt.at(c.co.lo + i, c.ci.lo + k / (nkh * nkw), c.kh.lo + k / nkw % nkh, c.kw.lo + k % nkw);
  });
}

// The data gradient at stride 1 by windows_gemm: dx = dy correlated with the flipped, transposed
// filters, over dy's window image (zero where dy has no position).
void conv2d_backward_data_windows(const TileCall& call, const ConvSetup& c) {
  const WindowLayout l = dy_windows(c);
  const int64_t nkh = c.kh.size(), nkw = c.kw.size();
  windows_product(call, c, l, c.dy, c.co, c.ci.size(), l.taps(), [&](int64_t i, int64_t k) {
    return *c.filt.at(c.co.lo + k / (nkh * nkw), c.ci.lo + i, c.kh.hi - k / nkw % nkh, c.kw.hi - k % nkw);
  });
}

// The filter gradient by windows_reduce: groups of batch elements, each its data's window image and
// dy laid out on the image's positions (zero at unused positions, where the image reads are masked).
void conv2d_backward_filter_windows(const TileCall& call, const ConvSetup& c) {
  const WindowLayout l = data_windows(c);
  Scratch scratch(call);
  int64_t* off = scratch.ints(c.w_off);
  float* images = scratch.floats(c.w_image);
  float* dys = scratch.floats(c.w_dy);
  auto* tap_mask = static_cast<uint16_t*>(scratch.take(c.w_mask * 2));
  uint16_t* mask = tap_mask + 4 * c.n;  // per vector of positions: those kept
  l.offsets(off);
  l.masks(tap_mask);
  const int64_t np = l.padded_positions(), image_floats = round16(l.floats()), nco = c.co.size();
  for (int64_t v = 0; v < np / 16; ++v) {
    uint16_t bits = 0;
    for (int64_t q = 16 * v; q < 16 * v + 16; ++q) {
      if (q < l.positions() && q % l.wq < l.ow) bits = static_cast<uint16_t>(bits | (1u << (q - 16 * v)));
    }
    mask[v] = bits;
  }
  for (int64_t b0 = c.b.lo; b0 <= c.b.hi; b0 += c.groups) {
    const int64_t groups = std::min(c.groups, c.b.hi - b0 + 1);
    for (int64_t gi = 0; gi < groups; ++gi) {
      l.fill(c.data, b0 + gi, c.ci, images + gi * image_floats);
      float* dst = dys + gi * nco * np;
      std::fill(dst, dst + nco * np, 0.0f);
      for (int64_t o = 0; o < nco; ++o) {
        for (int64_t i = 0; i < l.oh; ++i) {
          std::memcpy(dst + o * np + i * l.wq, c.dy.at(b0 + gi, c.co.lo + o, c.y.lo + i, c.x.lo),
                      sizeof(float) * l.ow);
        }
      }
    }
    windows_reduce(nco, c.n, l.positions(), groups, dys, np, nco * np, images, image_floats, off, tap_mask,
                   l.row_vectors, mask, call.out, c.n, b0 == c.b.lo);
  }
}

// Whether every filter the data gradient reads is finite: the window image multiplies dy's padding
// by them (0 x Inf = NaN), where the im2col path skips those terms as torch does.
bool filters_finite(const ConvSetup& c) {
  for (int64_t o = c.co.lo; o <= c.co.hi; ++o) {
    for (int64_t i = c.ci.lo; i <= c.ci.hi; ++i) {
      for (int64_t a = c.kh.lo; a <= c.kh.hi; ++a) {
        const float* f = c.filt.at(o, i, a, c.kw.lo);
        for (int64_t e = 0; e < c.kw.size(); ++e) {
          if (!std::isfinite(f[e])) return false;
        }
      }
    }
  }
  return true;
}

}  // namespace

bool conv2d(const TileCall& call, const Attrs& attrs) {
  ConvSetup c;
  if (!conv2d_setup(call, attrs, true, &c)) return false;
  if (c.windows) {
    conv2d_windows(call, c);
    return true;
  }
  Scratch scratch(call);
  float* wbuf = c.packed_filter ? scratch.floats(c.packed_filter) : nullptr;
  float* col = c.col ? scratch.floats(c.col) : nullptr;
  const MatRef w = filter_matrix(c.filt, c.co, c.ci, c.kh, c.kw, wbuf);
  const int64_t n = c.n, k = c.k;
  for (int64_t bb = c.b.lo; bb <= c.b.hi; ++bb) {
    MatRef cm{col, std::max<int64_t>(n, 1)};
    if (c.direct) {
      cm = {c.data.at(bb, c.ci.lo, c.h.lo, c.w.lo), std::max<int64_t>(c.data.st[1], 1)};
    } else {
      im2col(c.data, bb, c.ci, c.kh, c.kw, c.y, c.x, c.g, col);
    }
    gemm(false, false, c.co.size(), n, k, 1.0f, w.p, w.ld, cm.p, cm.ld, 0.0f,
         call.out + (bb - c.b.lo) * c.co.size() * n, std::max<int64_t>(n, 1));
  }
  return true;
}

bool conv2d_backward_data(const TileCall& call, const Attrs& attrs) {
  ConvSetup c;
  if (!conv2d_backward_data_setup(call, attrs, true, &c)) return false;
  if (!c.zero && c.windows && filters_finite(c)) {  // writes every element
    conv2d_backward_data_windows(call, c);
    return true;
  }
  const int64_t plane = c.ci.size() * c.h.size() * c.w.size();
  std::fill(call.out, call.out + c.b.size() * plane, 0.0f);
  if (c.zero) return true;
  Scratch scratch(call);
  float* wbuf = c.packed_filter ? scratch.floats(c.packed_filter) : nullptr;
  float* dybuf = c.packed_dy ? scratch.floats(c.packed_dy) : nullptr;
  float* cols = scratch.floats(c.col);
  const MatRef wt = filter_matrix(c.filt, c.co, c.ci, c.kh, c.kw, wbuf);  // |co| x m, read transposed
  for (int64_t bb = c.b.lo; bb <= c.b.hi; ++bb) {
    const MatRef d = matrix_of(c.dy, bb, c.co, c.y, c.x, dybuf);
    gemm(true, false, c.m, c.n, c.co.size(), 1.0f, wt.p, wt.ld, d.p, d.ld, 0.0f, cols, std::max<int64_t>(c.n, 1));
    col2im(cols, c.ci, c.kh, c.kw, c.y, c.x, c.h, c.w, c.g, call.out + (bb - c.b.lo) * plane);
  }
  return true;
}

bool conv2d_backward_filter(const TileCall& call, const Attrs& attrs) {
  ConvSetup c;
  if (!conv2d_backward_filter_setup(call, attrs, true, &c)) return false;
  if (c.windows) {
    conv2d_backward_filter_windows(call, c);
    return true;
  }
  Scratch scratch(call);
  float* dybuf = c.packed_dy ? scratch.floats(c.packed_dy) : nullptr;
  float* col = scratch.floats(c.col);
  for (int64_t bb = c.b.lo; bb <= c.b.hi; ++bb) {
    im2col(c.data, bb, c.ci, c.kh, c.kw, c.y, c.x, c.g, col);
    const MatRef d = matrix_of(c.dy, bb, c.co, c.y, c.x, dybuf);
    gemm(false, true, c.co.size(), c.n, c.k, 1.0f, d.p, d.ld, col, std::max<int64_t>(c.k, 1),
         bb == c.b.lo ? 0.0f : 1.0f, call.out, std::max<int64_t>(c.n, 1));
  }
  return true;
}

// ----- depthwise convolutions (groups = channels, filters (c, 1, kh, kw)): direct loops, a few
// multiply-adds per output. A padded read is 0 times the other factor, as in the description and in
// torch's zero-padded convolution (0 * Inf is NaN there too).

namespace {

// The (c, 1, kh, kw) filters holding channels c and offsets kh x kw of a (b, c, ...) data tensor.
bool depthwise_filters(const TileIn& f, Span c, Span kh, Span kw, int64_t channels, Region4* r) {
  return f.shape.size() == 4 && f.shape[0] == channels && f.shape[1] == 1 && kh.hi < f.shape[2] &&
         kw.hi < f.shape[3] && c.hi < channels && region4(f, {c, {0, 0}, kh, kw}, r);
}

}  // namespace

// lambda b, c, y, x: Sum(dy, dx: data[b, c, s y + d dy - p, s x + d dx - p] filters[c, 0, dy, dx]),
// partial over dy, dx.
bool depthwise_conv2d(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 6 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3})
    return false;
  const Span b = call.vars[0], c = call.vars[1], y = call.vars[2], x = call.vars[3], ky = call.vars[4],
             kx = call.vars[5];
  const TileIn& din = call.inputs[0];
  if (din.shape.size() != 4 || b.hi >= din.shape[0]) return false;
  const int64_t H = din.shape[2], W = din.shape[3];
  Region4 data, f;
  if (!region4(din, {b, c, g.reads(y, ky, H), g.reads(x, kx, W)}, &data) ||
      !depthwise_filters(call.inputs[1], c, ky, kx, din.shape[1], &f) || call.extents[4] != f.shape[2] ||
      call.extents[5] != f.shape[3])
    return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t yy = y.lo; yy <= y.hi; ++yy) {
        for (int64_t xx = x.lo; xx <= x.hi; ++xx) {
          double acc = 0;
          for (int64_t i = ky.lo; i <= ky.hi; ++i) {
            const int64_t h = g.in(yy, i);
            for (int64_t j = kx.lo; j <= kx.hi; ++j) {
              const int64_t w = g.in(xx, j);
              const float v = h >= 0 && h < H && w >= 0 && w < W ? *data.at(bb, cc, h, w) : 0.0f;
              acc += static_cast<double>(v) * *f.at(cc, 0, i, j);
            }
          }
          *out++ = static_cast<float>(acc);
        }
      }
    }
  }
  return true;
}

// lambda b, c, h, w: Sum(kh, kw: [s | h + p - d kh] [s | w + p - d kw] dy[b, c, (h + p - d kh) / s, ...]
// filters[c, 0, kh, kw]), partial over kh, kw; the terms whose dy index is not whole are skipped.
bool depthwise_conv2d_backward_data(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 6 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3})
    return false;
  const Span b = call.vars[0], c = call.vars[1], h = call.vars[2], w = call.vars[3], ky = call.vars[4],
             kx = call.vars[5];
  const TileIn& dyin = call.inputs[0];
  if (dyin.shape.size() != 4 || b.hi >= dyin.shape[0]) return false;
  const int64_t OH = dyin.shape[2], OW = dyin.shape[3];
  Region4 dy, f;
  if (!region4(dyin, {b, c, g.readers(h, ky, OH), g.readers(w, kx, OW)}, &dy) ||
      !depthwise_filters(call.inputs[1], c, ky, kx, dyin.shape[1], &f) || call.extents[4] != f.shape[2] ||
      call.extents[5] != f.shape[3])
    return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t hh = h.lo; hh <= h.hi; ++hh) {
        for (int64_t ww = w.lo; ww <= w.hi; ++ww) {
          double acc = 0;
          for (int64_t i = ky.lo; i <= ky.hi; ++i) {
            const int64_t th = hh + g.p - g.d * i;
            if (th < 0 || th % g.s != 0 || th / g.s >= OH) continue;  // reads outside dy are 0
            for (int64_t j = kx.lo; j <= kx.hi; ++j) {
              const int64_t tw = ww + g.p - g.d * j;
              if (tw < 0 || tw % g.s != 0 || tw / g.s >= OW) continue;
              acc += static_cast<double>(*dy.at(bb, cc, th / g.s, tw / g.s)) * *f.at(cc, 0, i, j);
            }
          }
          *out++ = static_cast<float>(acc);
        }
      }
    }
  }
  return true;
}

// lambda c, one, kh, kw: Sum(b, y, x: dy[b, c, y, x] data[b, c, s y + d kh - p, s x + d kw - p]),
// partial over b, y, x.
bool depthwise_conv2d_backward_filter(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 7 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3})
    return false;
  const Span c = call.vars[0], one = call.vars[1], ky = call.vars[2], kx = call.vars[3], b = call.vars[4],
             y = call.vars[5], x = call.vars[6];
  const TileIn &din = call.inputs[0], &dyin = call.inputs[1];
  if (din.shape.size() != 4 || dyin.shape.size() != 4 || one.lo != 0 || one.hi != 0 || b.hi >= din.shape[0] ||
      c.hi >= din.shape[1] || y.hi >= dyin.shape[2] || x.hi >= dyin.shape[3] || b.hi >= dyin.shape[0] ||
      c.hi >= dyin.shape[1])
    return false;
  const int64_t H = din.shape[2], W = din.shape[3];
  Region4 data, dy;
  if (!region4(din, {b, c, g.reads(y, ky, H), g.reads(x, kx, W)}, &data) || !region4(dyin, {b, c, y, x}, &dy))
    return false;
  float* out = call.out;
  for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
    for (int64_t i = ky.lo; i <= ky.hi; ++i) {
      for (int64_t j = kx.lo; j <= kx.hi; ++j) {
        double acc = 0;
        for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
          for (int64_t yy = y.lo; yy <= y.hi; ++yy) {
            const int64_t hh = g.in(yy, i);
            const float* d = dy.at(bb, cc, yy, x.lo);
            for (int64_t xx = x.lo; xx <= x.hi; ++xx) {
              const int64_t ww = g.in(xx, j);
              const float v = hh >= 0 && hh < H && ww >= 0 && ww < W ? *data.at(bb, cc, hh, ww) : 0.0f;
              acc += static_cast<double>(d[xx - x.lo]) * v;
            }
          }
        }
        *out++ = static_cast<float>(acc);
      }
    }
  }
  return true;
}

// ----- 1-D convolutions: data (n, ci, w), filters (co, ci, k), direct loops. As for the depthwise
// ones, a padded read is 0 times the other factor.

namespace {

/// A rank-3 input's region addressed by full-tensor coordinates.
struct View3 {
  const float* data = nullptr;
  int64_t lo[3] = {0, 0, 0};
  int64_t st[3] = {0, 0, 1};
  const float* at(int64_t a, int64_t b, int64_t c) const {
    return data + (a - lo[0]) * st[0] + (b - lo[1]) * st[1] + (c - lo[2]) * st[2];
  }
};

bool view3(const TileIn& in, const std::vector<Span>& box, View3* v) {
  if (in.shape.size() != 3 || box.size() != 3 || !holds(in, box)) return false;
  for (int d = 0; d < 2; ++d)
    if (box[d].lo < 0 || box[d].hi >= in.shape[d]) return false;  // only the last axis is padded
  const std::vector<int64_t> rs = region_strides(in);
  v->data = in.data;
  for (int d = 0; d < 3; ++d) v->lo[d] = in.region[d].lo, v->st[d] = rs[d];
  return true;
}

}  // namespace

// lambda b, co, x: Sum(ci, dx: data[b, ci, s x + d dx - p] filters[co, ci, dx]), partial over ci, dx.
bool conv1d(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 5 || !outputs_first(call, 3))
    return false;
  const Span b = call.vars[0], co = call.vars[1], x = call.vars[2], ci = call.vars[3], k = call.vars[4];
  const TileIn &din = call.inputs[0], &fin = call.inputs[1];
  if (din.shape.size() != 3 || fin.shape.size() != 3 || fin.shape[2] != call.extents[4]) return false;
  const int64_t W = din.shape[2];
  View3 data, f;
  if (!view3(din, {b, ci, g.reads(x, k, W)}, &data) || !view3(fin, {co, ci, k}, &f)) return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t o = co.lo; o <= co.hi; ++o) {
      for (int64_t xx = x.lo; xx <= x.hi; ++xx) {
        double acc = 0;
        for (int64_t c = ci.lo; c <= ci.hi; ++c) {
          for (int64_t t = k.lo; t <= k.hi; ++t) {
            const int64_t w = g.in(xx, t);
            const float v = w >= 0 && w < W ? *data.at(bb, c, w) : 0.0f;
            acc += static_cast<double>(v) * *f.at(o, c, t);
          }
        }
        *out++ = static_cast<float>(acc);
      }
    }
  }
  return true;
}

// lambda b, ci, x: Sum(co, k: [s | x + p - d k] dy[b, co, (x + p - d k) / s] filters[co, ci, k]),
// partial over co, k; the terms whose dy index is not whole are skipped.
bool conv1d_backward_data(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 5 || !outputs_first(call, 3))
    return false;
  const Span b = call.vars[0], ci = call.vars[1], x = call.vars[2], co = call.vars[3], k = call.vars[4];
  const TileIn &dyin = call.inputs[0], &fin = call.inputs[1];
  if (dyin.shape.size() != 3 || fin.shape.size() != 3 || fin.shape[2] != call.extents[4]) return false;
  const int64_t OW = dyin.shape[2];
  View3 dy, f;
  if (!view3(dyin, {b, co, g.readers(x, k, OW)}, &dy) || !view3(fin, {co, ci, k}, &f)) return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t c = ci.lo; c <= ci.hi; ++c) {
      for (int64_t xx = x.lo; xx <= x.hi; ++xx) {
        double acc = 0;
        for (int64_t t = k.lo; t <= k.hi; ++t) {
          const int64_t tw = xx + g.p - g.d * t;
          if (tw < 0 || tw % g.s != 0 || tw / g.s >= OW) continue;  // reads outside dy are 0
          for (int64_t o = co.lo; o <= co.hi; ++o)
            acc += static_cast<double>(*dy.at(bb, o, tw / g.s)) * *f.at(o, c, t);
        }
        *out++ = static_cast<float>(acc);
      }
    }
  }
  return true;
}

// lambda co, ci, k: Sum(b, x: dy[b, co, x] data[b, ci, s x + d k - p]), partial over b, x.
bool conv1d_backward_filter(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 || call.vars.size() != 5 || !outputs_first(call, 3))
    return false;
  const Span co = call.vars[0], ci = call.vars[1], k = call.vars[2], b = call.vars[3], x = call.vars[4];
  const TileIn &din = call.inputs[0], &dyin = call.inputs[1];
  if (din.shape.size() != 3 || dyin.shape.size() != 3 || x.hi >= dyin.shape[2]) return false;
  const int64_t W = din.shape[2];
  View3 data, dy;
  if (!view3(din, {b, ci, g.reads(x, k, W)}, &data) || !view3(dyin, {b, co, x}, &dy)) return false;
  float* out = call.out;
  for (int64_t o = co.lo; o <= co.hi; ++o) {
    for (int64_t c = ci.lo; c <= ci.hi; ++c) {
      for (int64_t t = k.lo; t <= k.hi; ++t) {
        double acc = 0;
        for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
          const float* d = dy.at(bb, o, x.lo);
          for (int64_t xx = x.lo; xx <= x.hi; ++xx) {
            const int64_t w = g.in(xx, t);
            const float v = w >= 0 && w < W ? *data.at(bb, c, w) : 0.0f;
            acc += static_cast<double>(d[xx - x.lo]) * v;
          }
        }
        *out++ = static_cast<float>(acc);
      }
    }
  }
  return true;
}

}  // namespace tilewise::kernels::tile

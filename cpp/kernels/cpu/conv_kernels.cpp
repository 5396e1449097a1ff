// 2-D convolutions (NCHW data, (co, ci, kh, kw) filters) on a device's block, as GEMMs over
// im2col matrices, one batch element at a time:
//   forward          out[co, (y, x)]        = W[co, (ci, kh, kw)] col[(ci, kh, kw), (y, x)]
//   backward data    cols[(ci, kh, kw), (y, x)] = W^T dy[co, (y, x)], then col2im into dx
//   backward filter  dW[co, (ci, kh, kw)]  += dy[co, (y, x)] col^T
// The kernel-offset variables and the input channels may be sub-ranges (a partial reduction of the
// forward conv), as may the batch and output positions of the filter gradient. Reads outside the
// tensor are the zero padding; im2col writes them as zeros.
// Depthwise 2-D and 1-D convolutions are direct loops at the end of the file.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/blas.h"
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
bool region4(const TileIn& in, const std::vector<Span>& box, Region4* r) {
  if (in.shape.size() != 4 || !holds(in, box)) return false;
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

// The sub-box a x r1 x r2 x r3 (a fixed, every index inside the region) as a |r1| x |r2||r3|
// matrix: the region itself when its last two dimensions are exactly r2, r3, else packed into buf.
MatRef matrix_of(const Region4& r, int64_t a, Span r1, Span r2, Span r3, std::vector<float>& buf) {
  const int64_t cols = r2.size() * r3.size();
  if (r.exactly(2, r2) && r.exactly(3, r3)) return {r.at(a, r1.lo, r2.lo, r3.lo), std::max<int64_t>(r.st[1], 1)};
  buf.resize(static_cast<size_t>(r1.size() * cols));
  float* dst = buf.data();
  for (int64_t i = r1.lo; i <= r1.hi; ++i) {
    for (int64_t j = r2.lo; j <= r2.hi; ++j, dst += r3.size()) {
      std::memcpy(dst, r.at(a, i, j, r3.lo), sizeof(float) * r3.size());
    }
  }
  return {buf.data(), std::max<int64_t>(cols, 1)};
}

// The filter block r0 x r1 x r2 x r3 as a |r0| x |r1||r2||r3| matrix (direct or packed).
MatRef filter_matrix(const Region4& r, Span r0, Span r1, Span r2, Span r3, std::vector<float>& buf) {
  const int64_t cols = r1.size() * r2.size() * r3.size();
  if (r.exactly(1, r1) && r.exactly(2, r2) && r.exactly(3, r3)) {
    return {r.at(r0.lo, r1.lo, r2.lo, r3.lo), std::max<int64_t>(r.st[0], 1)};
  }
  buf.resize(static_cast<size_t>(r0.size() * cols));
  float* dst = buf.data();
  for (int64_t a = r0.lo; a <= r0.hi; ++a) {
    for (int64_t b = r1.lo; b <= r1.hi; ++b) {
      for (int64_t c = r2.lo; c <= r2.hi; ++c, dst += r3.size()) {
        std::memcpy(dst, r.at(a, b, c, r3.lo), sizeof(float) * r3.size());
      }
    }
  }
  return {buf.data(), std::max<int64_t>(cols, 1)};
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

}  // namespace

// lambda b, co, y, x: Sum(ci, dy, dx: data[b, ci, s y + d dy - p, s x + d dx - p] filters[co, ci, dy, dx])
bool conv2d(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3}) {
    return false;
  }
  const Span b = call.vars[0], co = call.vars[1], y = call.vars[2], x = call.vars[3], ci = call.vars[4],
             kh = call.vars[5], kw = call.vars[6];
  const TileIn& din = call.inputs[0];
  if (din.shape.size() != 4) return false;
  Region4 data, filt;
  if (!region4(din, {b, ci, g.reads(y, kh, din.shape[2]), g.reads(x, kw, din.shape[3])}, &data) ||
      !region4(call.inputs[1], {co, ci, kh, kw}, &filt) || filt.shape[2] != call.extents[5] ||
      filt.shape[3] != call.extents[6] || b.hi >= data.shape[0] || ci.hi >= data.shape[1] || co.hi >= filt.shape[0] ||
      ci.hi >= filt.shape[1]) {
    return false;
  }
  std::vector<float> wbuf, col;
  const MatRef w = filter_matrix(filt, co, ci, kh, kw, wbuf);
  const int64_t k = ci.size() * kh.size() * kw.size(), n = y.size() * x.size();
  if (!fits_blas({co.size(), n, k, w.ld, data.st[1]})) return false;
  // A single kernel offset at stride 1 whose reads all lie inside the tensor reads the data block
  // itself as the im2col matrix (a 1x1 conv on whole planes: no copy).
  const Span hs{g.in(y.lo, kh.lo), g.in(y.hi, kh.hi)}, ws{g.in(x.lo, kw.lo), g.in(x.hi, kw.hi)};
  const bool direct = kh.size() == 1 && kw.size() == 1 && g.s == 1 && hs.lo >= 0 && hs.hi < data.shape[2] &&
                      ws.lo >= 0 && ws.hi < data.shape[3] && data.exactly(2, hs) && data.exactly(3, ws);
  if (!direct) col.resize(static_cast<size_t>(k * n));
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    MatRef cm{col.data(), std::max<int64_t>(n, 1)};
    if (direct) {
      cm = {data.at(bb, ci.lo, hs.lo, ws.lo), std::max<int64_t>(data.st[1], 1)};
    } else {
      im2col(data, bb, ci, kh, kw, y, x, g, col.data());
    }
    gemm(false, false, co.size(), n, k, 1.0f, w.p, w.ld, cm.p, cm.ld, 0.0f, call.out + (bb - b.lo) * co.size() * n,
         std::max<int64_t>(n, 1));
  }
  return true;
}

// lambda b, ci, h, w: Sum(co, kh, kw: [s | h + p - d kh] [s | w + p - d kw]
//                                     dy[b, co, (h + p - d kh) / s, (w + p - d kw) / s] filters[co, ci, kh, kw])
bool conv2d_backward_data(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3}) {
    return false;
  }
  const Span b = call.vars[0], ci = call.vars[1], h = call.vars[2], w = call.vars[3], co = call.vars[4];
  const TileIn& dyin = call.inputs[0];
  if (dyin.shape.size() != 4 || call.inputs[1].shape.size() != 4) return false;
  // Only the kernel offsets through which some output position reaches the block contribute (a
  // strided conv skips the others), and only the positions they reach are read.
  const Span kh = g.offsets_reaching(h, call.vars[5], dyin.shape[2]);
  const Span kw = g.offsets_reaching(w, call.vars[6], dyin.shape[3]);
  const int64_t plane = ci.size() * h.size() * w.size();
  if (kh.size() == 0 || kw.size() == 0) {
    std::fill(call.out, call.out + b.size() * plane, 0.0f);
    return true;
  }
  const Span ys = g.readers(h, kh, dyin.shape[2]), xs = g.readers(w, kw, dyin.shape[3]);
  Region4 dy, filt;
  if (!region4(dyin, {b, co, ys, xs}, &dy) || !region4(call.inputs[1], {co, ci, kh, kw}, &filt) ||
      filt.shape[2] != call.extents[5] || filt.shape[3] != call.extents[6] || b.hi >= dy.shape[0] ||
      co.hi >= dy.shape[1] || co.hi >= filt.shape[0] || ci.hi >= filt.shape[1]) {
    return false;
  }
  const int64_t m = ci.size() * kh.size() * kw.size(), n = ys.size() * xs.size();
  if (!fits_blas({m, n, co.size(), filt.st[0], dy.st[1]})) return false;
  std::fill(call.out, call.out + b.size() * plane, 0.0f);
  std::vector<float> wbuf, dybuf, cols;
  const MatRef wt = filter_matrix(filt, co, ci, kh, kw, wbuf);  // |co| x m, read transposed
  cols.resize(static_cast<size_t>(m * n));
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    const MatRef d = matrix_of(dy, bb, co, ys, xs, dybuf);
    gemm(true, false, m, n, co.size(), 1.0f, wt.p, wt.ld, d.p, d.ld, 0.0f, cols.data(), std::max<int64_t>(n, 1));
    col2im(cols.data(), ci, kh, kw, ys, xs, h, w, g, call.out + (bb - b.lo) * plane);
  }
  return true;
}

// lambda co, ci, kh, kw: Sum(b, y, x: dy[b, co, y, x] data[b, ci, s y + d kh - p, s x + d kw - p])
bool conv2d_backward_filter(const TileCall& call, const Attrs& attrs) {
  Window g;
  if (!geometry(attrs, &g) || call.inputs.size() != 2 ||
      call.output_vars != std::vector<int>{0, 1, 2, 3}) {
    return false;
  }
  const Span co = call.vars[0], ci = call.vars[1], kh = call.vars[2], kw = call.vars[3], b = call.vars[4],
             y = call.vars[5], x = call.vars[6];
  const TileIn& din = call.inputs[0];
  if (din.shape.size() != 4) return false;
  Region4 data, dy;
  if (!region4(din, {b, ci, g.reads(y, kh, din.shape[2]), g.reads(x, kw, din.shape[3])}, &data) ||
      !region4(call.inputs[1], {b, co, y, x}, &dy) || b.hi >= data.shape[0] || ci.hi >= data.shape[1] ||
      b.hi >= dy.shape[0] || co.hi >= dy.shape[1] || y.hi >= dy.shape[2] || x.hi >= dy.shape[3]) {
    return false;
  }
  const int64_t k = y.size() * x.size(), n = ci.size() * kh.size() * kw.size();
  if (!fits_blas({co.size(), n, k, dy.st[1]})) return false;
  std::vector<float> col(static_cast<size_t>(n * k)), dybuf;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    im2col(data, bb, ci, kh, kw, y, x, g, col.data());
    const MatRef d = matrix_of(dy, bb, co, y, x, dybuf);
    gemm(false, true, co.size(), n, k, 1.0f, d.p, d.ld, col.data(), std::max<int64_t>(k, 1), bb == b.lo ? 0.0f : 1.0f,
         call.out, std::max<int64_t>(n, 1));
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

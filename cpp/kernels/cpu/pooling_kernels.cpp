// Pooling over windows of NCHW maps: max and average pooling (stride, zero padding, partial over
// the window offsets) and their gradients, non-overlapping window sums (AdaptiveAvgPool2d, the
// gradients of nearest upsampling), and 1-D max pooling over non-overlapping windows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {

// ----------------------------------------------------------------------------------- max_pool2d

// lambda b, c, y, xx: Max(i, j: x[b, c, s y + i - p, s xx + j - p]), padded positions -inf (when
// padding > 0; with no padding the description reads x directly, where outside reads are 0).
bool max_pool2d(const TileCall& call, const Attrs& attrs) {
  const int64_t k = attrs.integer("kernel", 2), s = attrs.integer("stride", 2), p = attrs.integer("padding", 0);
  if (!attrs.ok() || k < 1 || s < 1 || p < 0 || call.inputs.size() != 1) return false;
  if (!outputs_first(call, 4)) return false;
  if (call.extents[4] != k || call.extents[5] != k) return false;
  const Span b = call.vars[0], c = call.vars[1], y = call.vars[2], x = call.vars[3], i = call.vars[4],
             j = call.vars[5];
  const TileIn& in = call.inputs[0];
  if (in.shape.size() != 4) return false;
  const Window win{s, p, 1};
  View4 v;
  if (!view4(in, {b, c, win.reads(y, i, in.shape[2]), win.reads(x, j, in.shape[3])}, &v)) return false;
  const int64_t H = in.shape[2], W = in.shape[3];
  const float outside = p > 0 ? -std::numeric_limits<float>::infinity() : 0.0f;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t yy = y.lo; yy <= y.hi; ++yy) {
        for (int64_t xx = x.lo; xx <= x.hi; ++xx) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t ii = i.lo; ii <= i.hi; ++ii) {
            const int64_t h = s * yy + ii - p;
            for (int64_t jj = j.lo; jj <= j.hi; ++jj) {
              const int64_t w = s * xx + jj - p;
              const float val = (h >= 0 && h < H && w >= 0 && w < W) ? *v.at(bb, cc, h, w) : outside;
              m = (val > m || std::isnan(val)) && !std::isnan(m) ? val : m;  // NaN wins, as in torch
            }
          }
          *out++ = m;
        }
      }
    }
  }
  return true;
}

// lambda b, c, h, w: Sum(i, j: [s | h + p - i] [s | w + p - j] [winner(oh, ow) == i k + j] dy[b, c, oh, ow])
// with oh = (h + p - i) / s, ow likewise, and winner(oh, ow) the row-major offset of the one input that
// gets the window's gradient, the index torch's max_pool2d reports: the first in-bounds input equal to
// y[b, c, oh, ow] (Min over u, v), the last NaN when y is NaN (Max over q, r). Ties do not share dy.
// Walks each window that reaches the tile once and routes its dy to its winner when the winner lies in
// the tile, at an offset inside the partial range of i, j.
bool max_pool2d_grad(const TileCall& call, const Attrs& attrs) {
  const int64_t k = attrs.integer("kernel", 2), s = attrs.integer("stride", 2), p = attrs.integer("padding", 0);
  if (!attrs.ok() || k < 1 || s < 1 || p < 0 || call.inputs.size() != 3) return false;
  if (!outputs_first(call, 4) || call.vars.size() != 10) return false;
  for (int v = 4; v < 10; ++v) {
    if (call.extents[v] != k) return false;
  }
  if (!full_range(call, 6, 10)) return false;
  const Span b = call.vars[0], c = call.vars[1], h = call.vars[2], w = call.vars[3], i = call.vars[4],
             j = call.vars[5];
  const TileIn &xin = call.inputs[0], &yin = call.inputs[1], &dyin = call.inputs[2];
  if (xin.shape.size() != 4 || yin.shape.size() != 4 || dyin.shape != yin.shape) return false;
  const int64_t H = xin.shape[2], W = xin.shape[3], OH = yin.shape[2], OW = yin.shape[3];
  if (h.hi >= H || w.hi >= W) return false;
  const Window win{s, p, 1};
  const Span oh = win.readers(h, i, OH), ow = win.readers(w, j, OW), whole{0, k - 1};
  View4 x, y, dy;
  const bool any = oh.size() > 0 && ow.size() > 0;
  if (any && (!view4(xin, {b, c, win.reads(oh, whole, H), win.reads(ow, whole, W)}, &x) ||
              !view4(yin, {b, c, oh, ow}, &y) || !view4(dyin, {b, c, oh, ow}, &dy))) {
    return false;
  }
  float* out = call.out;
  std::fill(out, out + output_size(call), 0.0f);
  if (!any) return true;
  const int64_t sw = w.size(), sh = h.size() * sw, sc = c.size() * sh;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t o1 = oh.lo; o1 <= oh.hi; ++o1) {
        for (int64_t o2 = ow.lo; o2 <= ow.hi; ++o2) {
          const float yv = *y.at(bb, cc, o1, o2);
          const bool nan = std::isnan(yv);
          int64_t wu = -1, wv = -1;
          for (int64_t u = 0; u < k && (nan || wu < 0); ++u) {
            const int64_t hh = win.in(o1, u);
            if (hh < 0 || hh >= H) continue;
            for (int64_t v = 0; v < k && (nan || wu < 0); ++v) {
              const int64_t ww = win.in(o2, v);
              if (ww < 0 || ww >= W) continue;
              const float xv = *x.at(bb, cc, hh, ww);
              if (nan ? std::isnan(xv) : xv == yv) wu = u, wv = v;
            }
          }
          const int64_t hh = win.in(o1, wu), ww = win.in(o2, wv);
          if (wu < i.lo || wu > i.hi || wv < j.lo || wv > j.hi || hh < h.lo || hh > h.hi || ww < w.lo || ww > w.hi)
            continue;  // no winner (wu = -1), or one outside this tile or partial range
          out[(bb - b.lo) * sc + (cc - c.lo) * sh + (hh - h.lo) * sw + (ww - w.lo)] += *dy.at(bb, cc, o1, o2);
        }
      }
    }
  }
  return true;
}

// lambda b, c, y, xx: Sum(i, j: x[b, c, s y + i - p, s xx + j - p]) / k^2: padded positions count as 0
// (count_include_pad), partial over i, j.
bool avg_pool2d(const TileCall& call, const Attrs& attrs) {
  const int64_t k = attrs.integer("kernel", 2), s = attrs.integer("stride", 2), p = attrs.integer("padding", 0);
  if (!attrs.ok() || k < 1 || s < 1 || p < 0 || call.inputs.size() != 1) return false;
  if (!outputs_first(call, 4) || call.vars.size() != 6) return false;
  if (call.extents[4] != k || call.extents[5] != k) return false;
  const Span b = call.vars[0], c = call.vars[1], y = call.vars[2], x = call.vars[3], i = call.vars[4],
             j = call.vars[5];
  const TileIn& in = call.inputs[0];
  if (in.shape.size() != 4) return false;
  const Window win{s, p, 1};
  View4 v;
  if (!view4(in, {b, c, win.reads(y, i, in.shape[2]), win.reads(x, j, in.shape[3])}, &v)) return false;
  const int64_t H = in.shape[2], W = in.shape[3];
  const double inv = 1.0 / static_cast<double>(k * k);
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t yy = y.lo; yy <= y.hi; ++yy) {
        for (int64_t xx = x.lo; xx <= x.hi; ++xx) {
          double acc = 0;
          for (int64_t ii = i.lo; ii <= i.hi; ++ii) {
            const int64_t h = s * yy + ii - p;
            if (h < 0 || h >= H) continue;
            const int64_t w0 = std::max(s * xx + j.lo - p, int64_t{0}), w1 = std::min(s * xx + j.hi - p, W - 1);
            if (w0 > w1) continue;
            const float* row = v.at(bb, cc, h, w0);
            for (int64_t t = 0; t <= w1 - w0; ++t) acc += row[t];
          }
          *out++ = static_cast<float>(acc * inv);
        }
      }
    }
  }
  return true;
}

// lambda b, c, h, w: Sum(i, j: [s | h + p - i] [s | w + p - j] dy[b, c, oh, ow]) / k^2 with
// oh = (h + p - i) / s, ow likewise: each window's dy spread evenly over it, partial over i, j.
bool avg_pool2d_grad(const TileCall& call, const Attrs& attrs) {
  const int64_t k = attrs.integer("kernel", 2), s = attrs.integer("stride", 2), p = attrs.integer("padding", 0);
  if (!attrs.ok() || k < 1 || s < 1 || p < 0 || call.inputs.size() != 1) return false;
  if (!outputs_first(call, 4) || call.vars.size() != 6) return false;
  if (call.extents[4] != k || call.extents[5] != k) return false;
  const Span b = call.vars[0], c = call.vars[1], h = call.vars[2], w = call.vars[3], i = call.vars[4],
             j = call.vars[5];
  const TileIn& in = call.inputs[0];
  if (in.shape.size() != 4) return false;
  const Window win{s, p, 1};
  const int64_t OH = in.shape[2], OW = in.shape[3];
  View4 dy;
  if (!view4(in, {b, c, win.readers(h, i, OH), win.readers(w, j, OW)}, &dy)) return false;
  const double inv = 1.0 / static_cast<double>(k * k);
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t hh = h.lo; hh <= h.hi; ++hh) {
        for (int64_t ww = w.lo; ww <= w.hi; ++ww) {
          double acc = 0;
          for (int64_t ii = i.lo; ii <= i.hi; ++ii) {
            const int64_t th = hh + p - ii;
            if (th < 0 || th % s != 0 || th / s >= OH) continue;  // reads outside dy are 0
            for (int64_t jj = j.lo; jj <= j.hi; ++jj) {
              const int64_t tw = ww + p - jj;
              if (tw < 0 || tw % s != 0 || tw / s >= OW) continue;
              acc += *dy.at(bb, cc, th / s, tw / s);
            }
          }
          *out++ = static_cast<float>(acc * inv);
        }
      }
    }
  }
  return true;
}

namespace {

// lambda b, c, y, z: Sum(i, j: x[b, c, kh y + i, kw z + j]) * scale, partial over i, j.
bool window_sums(const TileCall& call, int64_t kh, int64_t kw, double scale) {
  if (kh < 1 || kw < 1 || call.inputs.size() != 1) return false;
  if (!outputs_first(call, 4) || call.vars.size() != 6) return false;
  if (call.extents[4] != kh || call.extents[5] != kw) return false;
  const Span b = call.vars[0], c = call.vars[1], y = call.vars[2], z = call.vars[3], i = call.vars[4],
             j = call.vars[5];
  const TileIn& in = call.inputs[0];
  if (in.shape.size() != 4) return false;
  const Window rows{kh, 0, 1}, cols{kw, 0, 1};
  View4 x;
  if (!view4(in, {b, c, rows.reads(y, i, in.shape[2]), cols.reads(z, j, in.shape[3])}, &x)) return false;
  const int64_t H = in.shape[2], W = in.shape[3];
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t yy = y.lo; yy <= y.hi; ++yy) {
        for (int64_t zz = z.lo; zz <= z.hi; ++zz) {
          double acc = 0;
          for (int64_t ii = i.lo; ii <= i.hi; ++ii) {
            const int64_t hh = kh * yy + ii;
            if (hh >= H) continue;
            const int64_t w0 = kw * zz + j.lo, w1 = std::min(kw * zz + j.hi, W - 1);
            if (w0 > w1) continue;
            const float* row = x.at(bb, cc, hh, w0);
            for (int64_t t = 0; t <= w1 - w0; ++t) acc += row[t];
          }
          *out++ = static_cast<float>(acc * scale);
        }
      }
    }
  }
  return true;
}

}  // namespace

// lambda b, c, y, z: Sum(i, j: x[b, c, kh y + i, kw z + j]) / (kh kw), partial over i, j.
bool adaptive_avg_pool2d(const TileCall& call, const Attrs& attrs) {
  const int64_t kh = attrs.integer("kernel_h", 1), kw = attrs.integer("kernel_w", 1);
  return attrs.ok() && kh >= 1 && kw >= 1 && window_sums(call, kh, kw, 1.0 / static_cast<double>(kh * kw));
}

// The gradients of nearest upsampling: the sum of each scale x scale (sh x sw) block of dy.
bool upsample_nearest2d_grad(const TileCall& call, const Attrs& attrs) {
  const int64_t s = attrs.integer("scale", 2);
  return attrs.ok() && window_sums(call, s, s, 1.0);
}

bool upsample_nearest2d_hw_grad(const TileCall& call, const Attrs& attrs) {
  const int64_t sh = attrs.integer("sh", 1), sw = attrs.integer("sw", 1);
  return attrs.ok() && window_sums(call, sh, sw, 1.0);
}

// lambda b, c, y, z: dy[b, c, y / kh, z / kw] / (kh kw).
bool adaptive_avg_pool2d_grad(const TileCall& call, const Attrs& attrs) {
  const int64_t kh = attrs.integer("kernel_h", 1), kw = attrs.integer("kernel_w", 1);
  if (!attrs.ok() || kh < 1 || kw < 1 || call.inputs.size() != 1) return false;
  if (!outputs_first(call, 4)) return false;
  const Span b = call.vars[0], c = call.vars[1], y = call.vars[2], z = call.vars[3];
  const TileIn& in = call.inputs[0];
  if (in.shape.size() != 4) return false;
  View4 dy;
  if (!view4(in, {b, c, {y.lo / kh, y.hi / kh}, {z.lo / kw, z.hi / kw}}, &dy)) return false;
  const int64_t OH = in.shape[2], OW = in.shape[3];
  const float inv = static_cast<float>(1.0 / static_cast<double>(kh * kw));
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t yy = y.lo; yy <= y.hi; ++yy) {
        for (int64_t zz = z.lo; zz <= z.hi; ++zz) {
          const bool inside = yy / kh < OH && zz / kw < OW;
          *out++ = inside ? *dy.at(bb, cc, yy / kh, zz / kw) * inv : 0.0f;
        }
      }
    }
  }
  return true;
}

// ----------------------------------------------------------------------------------- max_pool1d

// lambda b, c, i: Max(k: x[b, c, kernel i + k]) over non-overlapping windows, partial over k; NaN
// wins and stays, as in the interpreter.
bool max_pool1d(const TileCall& call, const Attrs& attrs) {
  const int64_t k = attrs.integer("kernel", 2);
  if (!attrs.ok() || k < 1 || call.inputs.size() != 1 || !outputs_first(call, 3) || call.vars.size() != 4 ||
      call.extents[3] != k)
    return false;
  const TileIn& x = call.inputs[0];
  const Span b = call.vars[0], c = call.vars[1], i = call.vars[2], j = call.vars[3];
  if (x.shape.size() != 3 || k * i.hi + j.hi >= x.shape[2] ||
      !holds(x, {b, c, {k * i.lo + j.lo, k * i.hi + j.hi}}) || b.hi >= x.shape[0] || c.hi >= x.shape[1])
    return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t ii = i.lo; ii <= i.hi; ++ii) {
        const float* w = element(x, {bb, cc, k * ii + j.lo});
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t t = 0; t < j.size(); ++t) m = std::isnan(w[t]) || w[t] > m ? w[t] : m;
        *out++ = m;
      }
    }
  }
  return true;
}

// lambda b, c, i: [winner(i / kernel) == i % kernel] dy[b, c, i / kernel], winner(o) the offset in window o
// torch's indices name: the first input equal to y[b, c, o] (Min over u), the last NaN when y is NaN (Max
// over q). Past the last whole window y and dy read 0.
bool max_pool1d_grad(const TileCall& call, const Attrs& attrs) {
  const int64_t k = attrs.integer("kernel", 2);
  if (!attrs.ok() || k < 1 || call.inputs.size() != 3 || !outputs_first(call, 3) || call.vars.size() != 5 ||
      call.extents[3] != k || call.extents[4] != k || !full_range(call, 3, 5))
    return false;
  const TileIn &x = call.inputs[0], &y = call.inputs[1], &dy = call.inputs[2];
  const Span b = call.vars[0], c = call.vars[1], i = call.vars[2];
  if (x.shape.size() != 3 || y.shape.size() != 3 || dy.shape != y.shape || i.hi >= x.shape[2] ||
      b.hi >= x.shape[0] || c.hi >= x.shape[1] || b.hi >= y.shape[0] || c.hi >= y.shape[1])
    return false;
  const int64_t windows = y.shape[2];
  const Span read{i.lo / k, std::min(i.hi / k, windows - 1)};
  if (read.size() > 0 && (!holds(x, {b, c, {k * read.lo, k * read.hi + k - 1}}) || !holds(y, {b, c, read}) ||
                          !holds(dy, {b, c, read})))
    return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      int64_t window = -1, winner = -1;
      float yv = 0.0f;
      for (int64_t ii = i.lo; ii <= i.hi; ++ii) {
        const int64_t o = ii / k;
        if (o >= windows) {
          *out++ = 0.0f;
          continue;
        }
        if (o != window) {  // find the window's winner once
          window = o, winner = -1, yv = *element(y, {bb, cc, o});
          const float* xw = element(x, {bb, cc, k * o});
          const bool nan = std::isnan(yv);
          for (int64_t u = 0; u < k && (nan || winner < 0); ++u) {
            if (nan ? std::isnan(xw[u]) : xw[u] == yv) winner = u;
          }
        }
        // the description's product: 0 * Inf is NaN there too
        *out++ = static_cast<float>(winner == ii - k * o) * *element(dy, {bb, cc, o});
      }
    }
  }
  return true;
}

}  // namespace tilewise::kernels::tile

// Layout ops that only move elements: the attention heads split out of a (b, s, pieces*heads*dh)
// projection and merged back. Each output row (the last axis) is one contiguous run of the input.
#include <algorithm>
#include <vector>

#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {
namespace {

struct Heads {
  int64_t heads = 1, dh = 1, piece = 0, pieces = 1;
};

bool heads_of(const Attrs& attrs, Heads* h) {
  h->heads = attrs.integer("heads", 1);
  h->dh = attrs.integer("dim_head", 1);
  h->piece = attrs.integer("piece", 0);
  h->pieces = attrs.integer("pieces", 1);
  return attrs.ok() && h->heads > 0 && h->dh > 0 && h->pieces > 0 && h->piece >= 0 && h->piece < h->pieces;
}

bool rank3_block(const TileCall& call) {
  return call.inputs.size() == 1 && call.vars.size() == 3 && call.output_vars == std::vector<int>{0, 1, 2} &&
         call.inputs[0].shape.size() == 3;
}

}  // namespace

// out[n, s, d] = x[n / heads, s, off + (n % heads) dh + d], off = piece heads dh.
bool split_heads(const TileCall& call, const Attrs& attrs) {
  Heads h;
  if (!heads_of(attrs, &h) || !rank3_block(call)) return false;
  const TileIn& x = call.inputs[0];
  const Span n = call.vars[0], s = call.vars[1], d = call.vars[2];
  const int64_t off = h.piece * h.heads * h.dh;
  if (d.hi >= h.dh || x.shape[2] != h.pieces * h.heads * h.dh) return false;
  for (int64_t nn = n.lo; nn <= n.hi; ++nn) {
    const int64_t col = off + (nn % h.heads) * h.dh;
    if (!holds(x, {{nn / h.heads, nn / h.heads}, s, {col + d.lo, col + d.hi}})) return false;
  }
  float* out = call.out;
  for (int64_t nn = n.lo; nn <= n.hi; ++nn) {
    const int64_t col = off + (nn % h.heads) * h.dh;
    for (int64_t ss = s.lo; ss <= s.hi; ++ss) {
      const float* src = element(x, {nn / h.heads, ss, col + d.lo});
      out = std::copy(src, src + d.size(), out);
    }
  }
  return true;
}

// out[b, s, c] = x[b heads + (c - off) / dh, s, (c - off) % dh] for c in this piece, else 0.
bool merge_heads(const TileCall& call, const Attrs& attrs) {
  Heads h;
  if (!heads_of(attrs, &h) || !rank3_block(call)) return false;
  const TileIn& x = call.inputs[0];
  const Span b = call.vars[0], s = call.vars[1], c = call.vars[2];
  const int64_t e = h.heads * h.dh, off = h.piece * e;
  if (x.shape[2] != h.dh || x.shape[0] % h.heads != 0) return false;
  // The piece's columns inside the block, and the heads they come from.
  const int64_t lo = std::max(c.lo, off), hi = std::min(c.hi, off + e - 1);
  if (lo <= hi) {
    const int64_t h0 = (lo - off) / h.dh, h1 = (hi - off) / h.dh;
    const Span cols = h0 == h1 ? Span{(lo - off) % h.dh, (hi - off) % h.dh} : Span{0, h.dh - 1};
    if (!holds(x, {{b.lo * h.heads + h0, b.hi * h.heads + h1}, s, cols})) return false;
  }
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t ss = s.lo; ss <= s.hi; ++ss) {
      int64_t cc = c.lo;
      for (; cc <= c.hi && cc < off; ++cc) *out++ = 0.0f;
      while (cc <= c.hi && cc < off + e) {
        const int64_t k = cc - off, head = k / h.dh, within = k % h.dh;
        const int64_t run = std::min(h.dh - within, std::min(c.hi, off + e - 1) - cc + 1);
        const float* src = element(x, {bb * h.heads + head, ss, within});
        out = std::copy(src, src + run, out);
        cc += run;
      }
      for (; cc <= c.hi; ++cc) *out++ = 0.0f;
    }
  }
  return true;
}

}  // namespace tilewise::kernels::tile

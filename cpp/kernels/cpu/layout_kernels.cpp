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

// out[i] = x[j] with j[perm[d]] = i[d]: walks the block with x's strides, copying whole runs
// where the last output axis is x's last axis.
bool permute(const TileCall& call, const Attrs& attrs) {
  const std::vector<int64_t> perm = attrs.ints("perm");
  const int r = static_cast<int>(call.vars.size());
  if (!attrs.ok() || call.inputs.size() != 1 || static_cast<int>(perm.size()) != r || r < 1 ||
      static_cast<int>(call.output_vars.size()) != r)
    return false;
  for (int d = 0; d < r; ++d)
    if (call.output_vars[d] != d || perm[d] < 0 || perm[d] >= r) return false;
  const TileIn& x = call.inputs[0];
  if (static_cast<int>(x.shape.size()) != r) return false;
  std::vector<Span> box(r);
  for (int d = 0; d < r; ++d) box[perm[d]] = call.vars[d];
  if (!holds(x, box)) return false;
  const std::vector<int64_t> rs = region_strides(x);
  std::vector<int64_t> step(r);  // x's stride along output axis d
  std::vector<int64_t> corner(r);
  for (int d = 0; d < r; ++d) {
    step[d] = rs[perm[d]];
    corner[perm[d]] = call.vars[d].lo;
  }
  const float* base = element(x, corner);
  const int64_t inner = call.vars[r - 1].size(), s_inner = step[r - 1];
  std::vector<int64_t> idx(r, 0);
  float* out = call.out;
  while (true) {
    const float* src = base;
    for (int d = 0; d + 1 < r; ++d) src += idx[d] * step[d];
    if (s_inner == 1) {
      out = std::copy(src, src + inner, out);
    } else {
      for (int64_t t = 0; t < inner; ++t) *out++ = src[t * s_inner];
    }
    int d = r - 2;
    while (d >= 0 && idx[d] + 1 == call.vars[d].size()) idx[d] = 0, --d;
    if (d < 0) return true;
    ++idx[d];
  }
}

// Row-major reshape: the output element at flat position f is x's element at flat position f.
// Needs x whole on the device (its regions under a split follow the // and % of the description).
bool reshape(const TileCall& call, const Attrs&) {
  const int r = static_cast<int>(call.output_vars.size());
  if (call.inputs.size() != 1 || static_cast<int>(call.vars.size()) != r) return false;
  for (int d = 0; d < r; ++d)
    if (call.output_vars[d] != d) return false;
  const TileIn& x = call.inputs[0];
  std::vector<Span> whole;
  int64_t nx = 1, nout = 1;
  for (int64_t e : x.shape) whole.push_back({0, e - 1}), nx *= e;
  for (int64_t e : call.output_shape) nout *= e;
  if (nx != nout || x.region.size() != whole.size() || (nx > 0 && !holds(x, whole))) return false;
  for (size_t d = 0; d < whole.size(); ++d)
    if (x.region[d].lo != 0 || x.region[d].hi != whole[d].hi) return false;  // x's buffer is the whole tensor
  const std::vector<int64_t> so = [&] {
    std::vector<int64_t> st(r, 1);
    for (int d = r - 2; d >= 0; --d) st[d] = st[d + 1] * call.output_shape[d + 1];
    return st;
  }();
  std::vector<int64_t> idx(r);
  for (int d = 0; d < r; ++d) idx[d] = call.vars[d].lo;
  const int64_t inner = r == 0 ? 1 : call.vars[r - 1].size();
  float* out = call.out;
  while (true) {
    int64_t flat = 0;
    for (int d = 0; d < r; ++d) flat += idx[d] * so[d];
    out = std::copy(x.data + flat, x.data + flat + inner, out);
    int d = r - 2;
    while (d >= 0 && idx[d] == call.vars[d].hi) idx[d] = call.vars[d].lo, --d;
    if (d < 0) return true;
    ++idx[d];
  }
}

}  // namespace tilewise::kernels::tile

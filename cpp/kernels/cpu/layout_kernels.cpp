// Layout ops that only move elements: the attention heads split out of a (b, s, pieces*heads*dh)
// projection and merged back, permutations and reshapes, concatenation, stacking and slicing along an
// axis (and their gradients, which place a piece among zeros), nearest upsampling. Output rows (the
// last axis) are copied as contiguous runs of the input where they are ones.
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

// `inputs` inputs and the variables are the output's axes, in order.
bool in_order(const TileCall& call, size_t inputs) {
  if (call.inputs.size() != inputs || call.vars.size() != call.output_vars.size()) return false;
  for (size_t d = 0; d < call.output_vars.size(); ++d)
    if (call.output_vars[d] != static_cast<int>(d)) return false;
  return true;
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

namespace {

// out[i] = x[j] with j[perm[d]] = i[d]: walks the block with x's strides, copying whole runs
// where the last output axis is x's last axis.
bool permuted(const TileCall& call, const std::vector<int64_t>& perm) {
  const int r = static_cast<int>(call.vars.size());
  if (call.inputs.size() != 1 || static_cast<int>(perm.size()) != r || r < 1 ||
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

}  // namespace

bool permute(const TileCall& call, const Attrs& attrs) {
  const std::vector<int64_t> perm = attrs.ints("perm");
  return attrs.ok() && permuted(call, perm);
}

// The 2-D transpose: x[j, i].
bool transpose(const TileCall& call, const Attrs&) { return permuted(call, {1, 0}); }

// Row-major reshape: the output element at flat position f is x's element at flat position f. Each
// output row is a run of consecutive flat positions, copied piece by piece along x's last axis from
// whatever part of x the device holds (a split output reads a box of x, not all of it); declines
// when the region lacks a piece. The first pass only checks, so a decline writes nothing.
bool reshape(const TileCall& call, const Attrs&) {
  const int r = static_cast<int>(call.output_vars.size());
  if (!in_order(call, 1)) return false;
  const TileIn& x = call.inputs[0];
  const int nx = static_cast<int>(x.shape.size());
  int64_t count = 1, nout = 1;
  for (int64_t e : x.shape) count *= e;
  for (int64_t e : call.output_shape) nout *= e;
  if (count != nout || x.region.size() != x.shape.size()) return false;
  std::vector<int64_t> so(r, 1);
  for (int d = r - 2; d >= 0; --d) so[d] = so[d + 1] * call.output_shape[d + 1];
  const int64_t inner = r == 0 ? 1 : call.vars[r - 1].size();
  const int64_t last = nx == 0 ? 1 : x.shape[nx - 1];
  auto runs = [&](bool copy) {
    std::vector<int64_t> idx(r), at(nx);
    for (int d = 0; d < r; ++d) idx[d] = call.vars[d].lo;
    float* out = call.out;
    while (true) {
      int64_t flat = 0;
      for (int d = 0; d < r; ++d) flat += idx[d] * so[d];
      for (int64_t left = inner; left > 0;) {
        int64_t rest = flat;
        for (int d = nx - 1; d >= 0; --d) at[d] = rest % x.shape[d], rest /= x.shape[d];
        const int64_t len = std::min(left, nx == 0 ? 1 : last - at[nx - 1]);
        if (copy) {
          const float* src = element(x, at);
          out = std::copy(src, src + len, out);
        } else {
          for (int d = 0; d < nx; ++d)
            if (at[d] < x.region[d].lo || at[d] + (d == nx - 1 ? len - 1 : 0) > x.region[d].hi) return false;
          if (x.data == nullptr) return false;
        }
        flat += len;
        left -= len;
      }
      int d = r - 2;
      while (d >= 0 && idx[d] == call.vars[d].hi) idx[d] = call.vars[d].lo, --d;
      if (d < 0) return true;
      ++idx[d];
    }
  };
  return runs(false) && runs(true);
}

// ----- along one axis: concatenation, stacking, slicing and the gradients that put a piece back.

namespace {

// Copies the box `sizes` (row-major) from src (element strides ss) to dst (element strides ds),
// or fills it with zeros when src is null.
void move_box(const float* src, const std::vector<int64_t>& ss, float* dst, const std::vector<int64_t>& ds,
              const std::vector<int64_t>& sizes) {
  const int r = static_cast<int>(sizes.size());
  for (int64_t n : sizes)
    if (n <= 0) return;
  const int64_t n = r == 0 ? 1 : sizes[r - 1];
  const int64_t si = r == 0 || !src ? 0 : ss[r - 1], di = r == 0 ? 1 : ds[r - 1];
  std::vector<int64_t> idx(r > 0 ? r - 1 : 0, 0);
  while (true) {
    const float* s = src;
    float* d = dst;
    for (int k = 0; k + 1 < r; ++k) {
      if (src) s += idx[k] * ss[k];
      d += idx[k] * ds[k];
    }
    if (!src) {
      for (int64_t t = 0; t < n; ++t) d[t * di] = 0.0f;
    } else if (si == 1 && di == 1) {
      std::copy(s, s + n, d);
    } else {
      for (int64_t t = 0; t < n; ++t) d[t * di] = s[t * si];
    }
    int k = r - 2;
    while (k >= 0 && ++idx[k] == sizes[k]) idx[k--] = 0;
    if (k < 0) return;
  }
}

// Whether `in` holds the box and the box lies inside the tensor (the reads below never fall in padding).
bool has(const TileIn& in, const std::vector<Span>& box) {
  if (box.size() != in.shape.size()) return false;
  for (size_t d = 0; d < box.size(); ++d)
    if (box[d].lo < 0 || box[d].hi >= in.shape[d]) return false;
  return holds(in, box);
}

// The output block: its spans, sizes and row-major strides (the variables are the output's axes).
struct Block {
  std::vector<Span> box;
  std::vector<int64_t> size, stride;
  explicit Block(const TileCall& call) : box(call.vars), size(call.vars.size()), stride(call.vars.size(), 1) {
    for (size_t d = 0; d < box.size(); ++d) size[d] = box[d].size();
    for (int d = static_cast<int>(box.size()) - 2; d >= 0; --d) stride[d] = stride[d + 1] * size[d + 1];
  }
};

// v without position `axis`.
template <class T>
std::vector<T> without(std::vector<T> v, int axis) {
  v.erase(v.begin() + axis);
  return v;
}

// The output axis named by attribute "axis" of rank `rank` (negative counting from the end).
bool axis_of(const Attrs& attrs, int rank, int* axis, bool negative = true) {
  const int64_t a = attrs.integer("axis", 0);
  if (!attrs.ok() || a < (negative ? -rank : 0) || a >= rank) return false;
  *axis = static_cast<int>(a < 0 ? a + rank : a);
  return true;
}

// Inputs of the output's shape except along `axis` (those with the axis) or without it.
bool same_but(const TileCall& call, const TileIn& in, int axis, bool has_axis) {
  const std::vector<int64_t> want = has_axis ? call.output_shape : without(call.output_shape, axis);
  if (in.shape.size() != want.size()) return false;
  for (size_t d = 0; d < want.size(); ++d)
    if (in.shape[d] != want[d] && !(has_axis && static_cast<int>(d) == axis)) return false;
  return true;
}

// Slab t (an index along `axis` of the output block) of the output: a copy of `in`'s slab whose
// corner (in `in`'s coordinates, without the axis when `in` lacks it) is `corner`, or zeros.
void put_slab(const TileCall& call, const Block& out, int axis, int64_t t, const TileIn* in,
              const std::vector<int64_t>& corner, bool has_axis) {
  std::vector<int64_t> size = out.size;
  size[axis] = 1;
  float* dst = call.out + (t - out.box[axis].lo) * out.stride[axis];
  if (!in) return move_box(nullptr, {}, dst, out.stride, size);
  std::vector<int64_t> rs = region_strides(*in);
  if (!has_axis) rs.insert(rs.begin() + axis, 0);
  move_box(element(*in, corner), rs, dst, out.stride, size);
}

// Corner of the output block without position `axis` (for an input lacking the axis), or with
// `at` there.
std::vector<int64_t> corner_of(const Block& out, int axis, int64_t at, bool has_axis) {
  std::vector<int64_t> c;
  for (size_t d = 0; d < out.box.size(); ++d) {
    if (static_cast<int>(d) != axis) c.push_back(out.box[d].lo);
    else if (has_axis) c.push_back(at);
  }
  return c;
}

std::vector<Span> box_at(const Block& out, int axis, Span along, bool has_axis) {
  std::vector<Span> b = out.box;
  if (has_axis) b[axis] = along;
  else b.erase(b.begin() + axis);
  return b;
}

}  // namespace

// concat_<n>: the inputs one after another along `axis` (each read where the output lies in it).
bool concat(const TileCall& call, const Attrs& attrs) {
  const size_t n = call.inputs.size();
  const int rank = static_cast<int>(call.output_vars.size());
  int ax = 0;
  if (n == 0 || !in_order(call, n) || !axis_of(attrs, rank, &ax)) return false;
  const Block out(call);
  struct Piece {
    size_t input;
    Span rows;  ///< output positions along the axis
    int64_t offset;
  };
  std::vector<Piece> pieces;
  int64_t offset = 0;
  for (size_t k = 0; k < n; ++k) {
    const TileIn& in = call.inputs[k];
    if (!same_but(call, in, ax, true)) return false;
    const Span rows{std::max(out.box[ax].lo, offset), std::min(out.box[ax].hi, offset + in.shape[ax] - 1)};
    if (rows.size() > 0) {
      if (!has(in, box_at(out, ax, {rows.lo - offset, rows.hi - offset}, true))) return false;
      pieces.push_back({k, rows, offset});
    }
    offset += in.shape[ax];
  }
  if (offset != call.output_shape[ax]) return false;
  for (const Piece& p : pieces) {
    const TileIn& in = call.inputs[p.input];
    std::vector<int64_t> size = out.size;
    size[ax] = p.rows.size();
    move_box(element(in, corner_of(out, ax, p.rows.lo - p.offset, true)), region_strides(in),
             call.out + (p.rows.lo - out.box[ax].lo) * out.stride[ax], out.stride, size);
  }
  return true;
}

namespace {

// stack_<n>'s and unselect's shifted reads x[..., j + (t - k) inner] are in the tensor only at
// t = k when inner is x's last extent, which the kernels below rely on.
bool shifted_rows(const Attrs& attrs, const TileIn& in) {
  const int64_t inner = attrs.integer("inner", 1);
  return attrs.ok() && !in.shape.empty() && inner == in.shape.back();
}

}  // namespace

// stack_<n>: input t at position t of a new `axis`.
bool stack(const TileCall& call, const Attrs& attrs) {
  const size_t n = call.inputs.size();
  const int rank = static_cast<int>(call.output_vars.size());
  int ax = 0;
  if (n == 0 || !in_order(call, n) || !axis_of(attrs, rank, &ax) || call.output_shape[ax] != static_cast<int64_t>(n))
    return false;
  const Block out(call);
  for (const TileIn& in : call.inputs)
    if (!same_but(call, in, ax, false) || !shifted_rows(attrs, in)) return false;
  for (int64_t t = out.box[ax].lo; t <= out.box[ax].hi; ++t)
    if (!has(call.inputs[t], box_at(out, ax, {}, false))) return false;
  for (int64_t t = out.box[ax].lo; t <= out.box[ax].hi; ++t)
    put_slab(call, out, ax, t, &call.inputs[t], corner_of(out, ax, 0, false), false);
  return true;
}

// unselect (the gradient of select): g at position `index` of a new `axis` of extent `size`, zeros elsewhere.
bool unselect(const TileCall& call, const Attrs& attrs) {
  const int rank = static_cast<int>(call.output_vars.size());
  const int64_t index = attrs.integer("index", 0);
  int ax = 0;
  if (!in_order(call, 1) || !axis_of(attrs, rank, &ax)) return false;
  const TileIn& g = call.inputs[0];
  if (!same_but(call, g, ax, false) || !shifted_rows(attrs, g)) return false;
  const Block out(call);
  const bool hit = out.box[ax].lo <= index && index <= out.box[ax].hi;
  if (hit && !has(g, box_at(out, ax, {}, false))) return false;
  for (int64_t t = out.box[ax].lo; t <= out.box[ax].hi; ++t)
    put_slab(call, out, ax, t, t == index ? &g : nullptr, corner_of(out, ax, 0, false), false);
  return true;
}

namespace {

// Output position t along `ax` reads x at start + step t (step < 0 walks x backwards).
bool strided(const TileCall& call, int ax, int64_t start, int64_t step) {
  const TileIn& x = call.inputs[0];
  if (!same_but(call, x, ax, true)) return false;
  const Block out(call);
  const int64_t first = start + step * out.box[ax].lo, last = start + step * out.box[ax].hi;
  if (!has(x, box_at(out, ax, {std::min(first, last), std::max(first, last)}, true))) return false;
  std::vector<int64_t> rs = region_strides(x);
  rs[ax] *= step;
  move_box(element(x, corner_of(out, ax, first, true)), rs, call.out, out.stride, out.size);
  return true;
}

}  // namespace

// x[start : stop : step] along `axis`.
bool slice_axis(const TileCall& call, const Attrs& attrs) {
  const int rank = static_cast<int>(call.output_vars.size());
  const int64_t start = attrs.integer("start", 0), step = attrs.integer("step", 1);
  int ax = 0;
  if (!in_order(call, 1) || !axis_of(attrs, rank, &ax) || start < 0 || step < 1) return false;
  return strided(call, ax, start, step);
}

// Piece `index` of x split into `sections` equal pieces along `axis`.
bool split(const TileCall& call, const Attrs& attrs) {
  const int rank = static_cast<int>(call.output_vars.size());
  const int64_t sections = attrs.integer("sections", 2), index = attrs.integer("index", 0);
  int ax = 0;
  if (!in_order(call, 1) || !axis_of(attrs, rank, &ax) || sections < 1 || index < 0 ||
      call.inputs[0].shape.size() != static_cast<size_t>(rank))
    return false;
  return strided(call, ax, index * (call.inputs[0].shape[ax] / sections), 1);
}

// x reversed along `axis`: x[n - 1 - i].
bool flip(const TileCall& call, const Attrs& attrs) {
  const int rank = static_cast<int>(call.output_vars.size());
  int ax = 0;
  if (!in_order(call, 1) || !axis_of(attrs, rank, &ax) || call.inputs[0].shape.size() != static_cast<size_t>(rank))
    return false;
  return strided(call, ax, call.inputs[0].shape[ax] - 1, -1);
}

// slice_axis_grad: dy's position k at start + step k of an axis of extent `size`, zeros elsewhere.
// (Between the hits the description multiplies dy by a 0 mask, so a non-finite dy gives NaN there in
// the interpreter; here those positions are 0, as in torch.)
bool slice_axis_grad(const TileCall& call, const Attrs& attrs) {
  const int rank = static_cast<int>(call.output_vars.size());
  const int64_t start = attrs.integer("start", 0), step = attrs.integer("step", 1);
  int ax = 0;
  if (!in_order(call, 1) || !axis_of(attrs, rank, &ax, false) || step < 1) return false;
  const TileIn& dy = call.inputs[0];
  if (!same_but(call, dy, ax, true)) return false;
  const Block out(call);
  auto source = [&](int64_t t) -> int64_t {  // dy's position written at t, or -1
    const int64_t k = t - start;
    return k >= 0 && k % step == 0 && k / step < dy.shape[ax] ? k / step : -1;
  };
  for (int64_t t = out.box[ax].lo; t <= out.box[ax].hi; ++t)
    if (source(t) >= 0 && !has(dy, box_at(out, ax, {source(t), source(t)}, true))) return false;
  for (int64_t t = out.box[ax].lo; t <= out.box[ax].hi; ++t) {
    const int64_t k = source(t);
    put_slab(call, out, ax, t, k >= 0 ? &dy : nullptr, corner_of(out, ax, k, true), true);
  }
  return true;
}

// x[b, i, i]: the diagonals of a batch of square matrices.
bool batch_diagonal(const TileCall& call, const Attrs&) {
  if (!in_order(call, 1) || call.vars.size() != 2) return false;
  const TileIn& x = call.inputs[0];
  const Span b = call.vars[0], i = call.vars[1];
  if (x.shape.size() != 3 || !has(x, {b, i, i})) return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb)
    for (int64_t ii = i.lo; ii <= i.hi; ++ii) *out++ = *element(x, {bb, ii, ii});
  return true;
}

// dy[b, i] on the diagonal, 0 elsewhere (as torch.diag_embed; the description multiplies dy by a 0/1
// mask, which makes an Inf off the diagonal NaN there).
bool batch_diagonal_grad(const TileCall& call, const Attrs&) {
  if (!in_order(call, 1) || call.vars.size() != 3) return false;
  const TileIn& dy = call.inputs[0];
  const Span b = call.vars[0], i = call.vars[1], j = call.vars[2];
  if (dy.shape.size() != 2 || !has(dy, {b, i})) return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb)
    for (int64_t ii = i.lo; ii <= i.hi; ++ii)
      for (int64_t jj = j.lo; jj <= j.hi; ++jj) *out++ = ii == jj ? *element(dy, {bb, ii}) : 0.0f;
  return true;
}

// ----- zero padding of the leading axes, pads = ((before, after), ...), and its gradient.

namespace {

// The pads of an input of rank `rank`: before[d] for its first axes, 0 for the others.
bool befores(const Attrs& attrs, size_t rank, std::vector<int64_t>* before) {
  const auto pads = attrs.pairs("pads");
  if (!attrs.ok() || pads.size() > rank) return false;
  before->assign(rank, 0);
  for (size_t d = 0; d < pads.size(); ++d) {
    if (pads[d].first < 0 || pads[d].second < 0) return false;
    (*before)[d] = pads[d].first;
  }
  return true;
}

}  // namespace

// out[i] = x[i - before]: zeros, then the part of the block that lies over x.
bool pad(const TileCall& call, const Attrs& attrs) {
  const size_t rank = call.output_vars.size();
  std::vector<int64_t> before;
  if (!in_order(call, 1) || call.inputs[0].shape.size() != rank || !befores(attrs, rank, &before)) return false;
  const TileIn& x = call.inputs[0];
  const Block out(call);
  std::vector<Span> over(rank);  // the block's part over x, in x's coordinates
  bool any = true;
  for (size_t d = 0; d < rank; ++d) {
    over[d] = {std::max(out.box[d].lo - before[d], int64_t{0}), std::min(out.box[d].hi - before[d], x.shape[d] - 1)};
    any = any && over[d].size() > 0;
  }
  if (any && !has(x, over)) return false;
  move_box(nullptr, {}, call.out, out.stride, out.size);
  if (!any) return true;
  std::vector<int64_t> corner(rank), size(rank);
  float* dst = call.out;
  for (size_t d = 0; d < rank; ++d) {
    corner[d] = over[d].lo;
    size[d] = over[d].size();
    dst += (over[d].lo + before[d] - out.box[d].lo) * out.stride[d];
  }
  move_box(element(x, corner), region_strides(x), dst, out.stride, size);
  return true;
}

// out[i] = dy[i + before]: the interior of dy (the gradient of pad).
bool unpad(const TileCall& call, const Attrs& attrs) {
  const size_t rank = call.output_vars.size();
  std::vector<int64_t> before;
  if (!in_order(call, 1) || call.inputs[0].shape.size() != rank || !befores(attrs, rank, &before)) return false;
  const TileIn& dy = call.inputs[0];
  const Block out(call);
  std::vector<Span> box(rank);
  std::vector<int64_t> corner(rank);
  for (size_t d = 0; d < rank; ++d) {
    box[d] = {out.box[d].lo + before[d], out.box[d].hi + before[d]};
    corner[d] = box[d].lo;
  }
  if (!has(dy, box)) return false;
  move_box(element(dy, corner), region_strides(dy), call.out, out.stride, out.size);
  return true;
}

// ----- nearest upsampling: out[b, c, y, z] = x[b, c, y / sh, z / sw].

namespace {

bool upsample(const TileCall& call, int64_t sh, int64_t sw) {
  if (sh < 1 || sw < 1 || !in_order(call, 1) || call.output_vars.size() != 4) return false;
  const TileIn& x = call.inputs[0];
  const Span b = call.vars[0], c = call.vars[1], y = call.vars[2], z = call.vars[3];
  if (x.shape.size() != 4 || !has(x, {b, c, {y.lo / sh, y.hi / sh}, {z.lo / sw, z.hi / sw}})) return false;
  float* out = call.out;
  const int64_t first = z.lo / sw;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      for (int64_t yy = y.lo; yy <= y.hi; ++yy) {
        const float* row = element(x, {bb, cc, yy / sh, first});
        for (int64_t zz = z.lo; zz <= z.hi; ++zz) *out++ = row[zz / sw - first];
      }
    }
  }
  return true;
}

}  // namespace

bool upsample_nearest2d(const TileCall& call, const Attrs& attrs) {
  const int64_t s = attrs.integer("scale", 2);
  return attrs.ok() && upsample(call, s, s);
}

bool upsample_nearest2d_hw(const TileCall& call, const Attrs& attrs) {
  const int64_t sh = attrs.integer("sh", 1), sw = attrs.integer("sw", 1);
  return attrs.ok() && upsample(call, sh, sw);
}

}  // namespace tilewise::kernels::tile

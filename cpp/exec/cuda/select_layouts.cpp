// Kernel selection of layouts as strided box copies (concat, pad, flip, split, strided slices and their
// gradient), permutations and batch diagonals.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "exec/cuda/select_parts.h"

namespace tilewise::exec::cuda::select {

// ---- more layouts: strided copies between boxes (concat, pad, flip, strided slices), permutations --

// A copy of `size` elements per dimension (the output's rank; x of the same rank): output element
// out_lo + i * out_step (output tensor coordinates, inside the block) from x's x_lo + i * x_step
// (inside its region). Steps may be negative (flip) or larger than 1 (strided slices).
std::string strided_copy(const TileCall& call, int input, const std::vector<long long>& out_lo,
                         const std::vector<long long>& out_step, const std::vector<long long>& x_lo,
                         const std::vector<long long>& x_step, const std::vector<long long>& size,
                         std::vector<Step>* steps) {
  const int rank = static_cast<int>(call.output_vars.size());
  const TileIn& x = call.inputs[input];
  if (rank > kMaxDims || static_cast<int>(x.region.size()) != rank) return "not a box copy's layout";
  Step st;
  st.kind = Step::kMap;
  MapArgs& m = st.map;
  m.fn = static_cast<int>(MapFn::kCopy);
  m.dims = rank, m.reads = 1, m.elements = 1, m.out_strided = 1;
  st.map_inputs[0] = input;
  const std::vector<long long> rs = region_strides(x), os = output_strides(call);
  for (int d = 0; d < rank; ++d) {
    if (size[d] <= 0) return "";  // nothing of x lies in the block
    const Span v = call.vars[call.output_vars[d]];
    const long long o_last = out_lo[d] + (size[d] - 1) * out_step[d], x_last = x_lo[d] + (size[d] - 1) * x_step[d];
    if (std::min(out_lo[d], o_last) < v.lo || std::max(out_lo[d], o_last) > v.hi) return "a box outside the block";
    if (std::min(x_lo[d], x_last) < x.region[d].lo || std::max(x_lo[d], x_last) > x.region[d].hi)
      return "an input's region does not hold the block";
    m.size[d] = size[d];
    m.elements *= size[d];
    m.base[0] += (x_lo[d] - x.region[d].lo) * rs[d];
    m.stride[0][d] = rs[d] * x_step[d];
    m.out_base += (out_lo[d] - v.lo) * os[call.output_vars[d]];
    m.out_stride[d] = os[call.output_vars[d]] * out_step[d];
  }
  steps->push_back(st);
  return "";
}

std::vector<long long> block_lo(const TileCall& call) {
  std::vector<long long> lo;
  for (int v : call.output_vars) lo.push_back(call.vars[v].lo);
  return lo;
}
std::vector<long long> block_size(const TileCall& call) {
  std::vector<long long> n;
  for (int v : call.output_vars) n.push_back(call.vars[v].size());
  return n;
}

// Output position t along `ax` reads x at start + step t (slice_axis, split, flip).
std::string strided_read(const TileCall& call, int ax, long long start, long long step, std::vector<Step>* s) {
  if (call.inputs[0].shape.size() != call.output_vars.size()) return "not a strided read's layout";
  const std::vector<long long> lo = block_lo(call);
  std::vector<long long> x_lo = lo, x_step(lo.size(), 1);
  x_lo[ax] = start + step * lo[ax];
  x_step[ax] = step;
  return strided_copy(call, 0, lo, std::vector<long long>(lo.size(), 1), x_lo, x_step, block_size(call), s);
}

std::string concat_op(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const size_t n = call.inputs.size();
  const int rank = static_cast<int>(call.output_vars.size());
  int ax = 0;
  if (n == 0 || !in_order(call, n) || !axis_attr(a, rank, &ax)) return "not concat's layout";
  const std::vector<long long> lo = block_lo(call), unit(rank, 1);
  const Span t = call.vars[ax];
  long long offset = 0;
  for (size_t k = 0; k < n; ++k) {
    const TileIn& in = call.inputs[k];
    if (static_cast<int>(in.shape.size()) != rank) return "not concat's layout";
    const long long first = std::max<long long>(t.lo, offset), last = std::min<long long>(t.hi, offset + in.shape[ax] - 1);
    if (first <= last) {
      std::vector<long long> out_lo = lo, x_lo = lo, size = block_size(call);
      out_lo[ax] = first, x_lo[ax] = first - offset, size[ax] = last - first + 1;
      const std::string why = strided_copy(call, static_cast<int>(k), out_lo, unit, x_lo, unit, size, s);
      if (!why.empty()) return why;
    }
    offset += in.shape[ax];
  }
  return offset == call.output_shape[ax] ? "" : "not concat's layout";
}

// The pads before each of the first axes of a rank-`rank` tensor (pads = ((before, after), ...)).
bool pads_before(Attr& a, size_t rank, std::vector<long long>* before) {
  const auto* v = a.a.find("pads");
  before->assign(rank, 0);
  if (!v) return true;
  if (!v->numeric || (v->inner != 2 && !v->nums.empty()) || v->nums.size() / 2 > rank) return false;
  for (size_t d = 0; 2 * d + 1 < v->nums.size(); ++d) {
    if (v->nums[2 * d] < 0 || v->nums[2 * d + 1] < 0) return false;
    (*before)[d] = static_cast<long long>(v->nums[2 * d]);
  }
  return true;
}

// pad: zeros, then the block's part over x (out[i] = x[i - before]); unpad: out[i] = dy[i + before].
std::string pad_op(const TileCall& call, Attr& a, bool un, std::vector<Step>* s) {
  const size_t rank = call.output_vars.size();
  std::vector<long long> before;
  if (!in_order(call, 1) || call.inputs[0].shape.size() != rank || !pads_before(a, rank, &before))
    return un ? "not unpad's layout" : "not pad's layout";
  const std::vector<long long> lo = block_lo(call), unit(rank, 1);
  std::vector<long long> size = block_size(call), x_lo(rank), out_lo = lo;
  if (un) {
    for (size_t d = 0; d < rank; ++d) x_lo[d] = lo[d] + before[d];
    return strided_copy(call, 0, lo, unit, x_lo, unit, size, s);
  }
  std::string why = zero_fill(call, s);
  for (size_t d = 0; d < rank; ++d) {
    const long long first = std::max<long long>(lo[d] - before[d], 0);
    const long long last = std::min<long long>(lo[d] + size[d] - 1 - before[d], call.inputs[0].shape[d] - 1);
    x_lo[d] = first, out_lo[d] = first + before[d], size[d] = last - first + 1;
  }
  return why.empty() ? strided_copy(call, 0, out_lo, unit, x_lo, unit, size, s) : why;
}

// slice_axis_grad: dy's position k at start + step k along `axis`, zeros elsewhere.
std::string slice_grad(const TileCall& call, int ax, long long start, long long step, std::vector<Step>* s) {
  const int rank = static_cast<int>(call.output_vars.size());
  const TileIn& dy = call.inputs[0];
  std::string why = zero_fill(call, s);
  const Span t = call.vars[ax];
  // The hits in the block: k in [k0, k1] with start + step k in [t.lo, t.hi] and k < dy's extent.
  auto floor_div = [](long long x, long long y) { return x >= 0 ? x / y : -((-x + y - 1) / y); };
  const long long k0 = std::max<long long>(0, -floor_div(start - t.lo, step));
  const long long k1 = std::min<long long>(dy.shape[ax] - 1, floor_div(t.hi - start, step));
  if (!why.empty() || k1 < k0) return why;
  std::vector<long long> out_lo = block_lo(call), out_step(rank, 1), x_lo = out_lo, size = block_size(call);
  out_lo[ax] = start + step * k0, out_step[ax] = step, x_lo[ax] = k0, size[ax] = k1 - k0 + 1;
  return strided_copy(call, 0, out_lo, out_step, x_lo, std::vector<long long>(rank, 1), size, s);
}

// Output dimension d reads x's dimension perm[d].
std::string permute_op(const TileCall& call, const std::vector<long long>& perm, std::vector<Step>* s) {
  const int r = static_cast<int>(call.output_vars.size());
  if (!in_order(call, 1) || static_cast<int>(perm.size()) != r || static_cast<int>(call.inputs[0].shape.size()) != r)
    return "not permute's layout";
  Read x{0, std::vector<int>(r, -2), {}};
  for (int d = 0; d < r; ++d) {
    if (perm[d] < 0 || perm[d] >= r || x.at[perm[d]] != -2) return "not permute's layout";
    x.at[perm[d]] = d;
  }
  return add_map(call, MapFn::kCopy, {}, {x}, s);
}

std::string batch_diagonal_grad(const TileCall& call, std::vector<Step>* s) {
  if (!in_order(call, 1) || call.vars.size() != 3 || call.inputs[0].shape.size() != 2) return "not batch_diagonal_grad's layout";
  std::string why = zero_fill(call, s);
  const Span b = call.vars[0], i = call.vars[1], j = call.vars[2];
  const long long first = std::max(i.lo, j.lo), last = std::min(i.hi, j.hi);
  if (!why.empty() || first > last) return why;
  // dy[b, k] to out[b, k, k]: a 2-D map whose output steps along both i and j at once.
  const TileIn& dy = call.inputs[0];
  const std::vector<long long> rs = region_strides(dy), os = output_strides(call);
  if (b.lo < dy.region[0].lo || b.hi > dy.region[0].hi || first < dy.region[1].lo || last > dy.region[1].hi)
    return "dy's region does not hold the block's diagonal";
  Step st;
  st.kind = Step::kMap;
  MapArgs& m = st.map;
  m.fn = static_cast<int>(MapFn::kCopy);
  m.dims = 2, m.reads = 1, m.out_strided = 1;
  st.map_inputs[0] = 0;
  m.size[0] = b.size(), m.size[1] = last - first + 1;
  m.elements = m.size[0] * m.size[1];
  m.base[0] = (b.lo - dy.region[0].lo) * rs[0] + (first - dy.region[1].lo) * rs[1];
  m.stride[0][0] = rs[0], m.stride[0][1] = rs[1];
  m.out_base = (first - i.lo) * os[1] + (first - j.lo) * os[2];
  m.out_stride[0] = os[0], m.out_stride[1] = os[1] + os[2];
  s->push_back(st);
  return "";
}

}  // namespace tilewise::exec::cuda::select

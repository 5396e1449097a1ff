// Reductions (sums, means, extrema along axes), batch normalisation, losses and row-wise ops
// (softmax, layer and RMS norm). Sums accumulate in double, as the TDL interpreter does, so a long
// reduction (a batch-norm channel, a loss) matches it to float rounding. Nested reductions (the statistics inside batch norm, the softmax inside a loss) must
// cover their full extent; a restricted top-level reduction variable gives the partial result.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {
namespace {

Span all(int64_t n) { return {0, n - 1}; }

// sum of term(t) for t in [0, n), in double with four independent accumulators: the adds overlap
// instead of each waiting on the last (the order differs from the interpreter's only in rounding).
template <class F>
double sum_of(int64_t n, F term) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    a0 += term(t);
    a1 += term(t + 1);
    a2 += term(t + 2);
    a3 += term(t + 3);
  }
  for (; t < n; ++t) a0 += term(t);
  return (a0 + a1) + (a2 + a3);
}

// Calls f(row, len) for the rows (over w) of channel c of a rank-4 view restricted to n x h x w.
template <class F>
void rows_of_channel(const View4& v, Span n, int64_t c, Span h, Span w, F&& f) {
  for (int64_t a = n.lo; a <= n.hi; ++a) {
    for (int64_t y = h.lo; y <= h.hi; ++y) f(v.at(a, c, y, w.lo), w.size());
  }
}

/// Batch-norm statistics of one channel over the full (n, h, w): the TDL's E[x] and E[x^2] - E[x]^2.
struct Stats {
  double mean = 0, rstd = 0;
};

Stats channel_stats(const View4& x, const std::vector<int64_t>& shape, int64_t c, double eps) {
  double s = 0, s2 = 0;
  rows_of_channel(x, all(shape[0]), c, all(shape[2]), all(shape[3]), [&](const float* row, int64_t len) {
    s += sum_of(len, [row](int64_t t) { return static_cast<double>(row[t]); });
    s2 += sum_of(len, [row](int64_t t) { return static_cast<double>(row[t]) * row[t]; });
  });
  const double count = static_cast<double>(shape[0] * shape[2] * shape[3]);
  Stats st;
  st.mean = s / count;
  st.rstd = 1.0 / std::sqrt(s2 / count - st.mean * st.mean + eps);
  return st;
}

// Variables from `first` on are nested reductions: they must span their extents.
bool nested_full(const TileCall& call, int first) {
  return full_range(call, first, static_cast<int>(call.vars.size()));
}

// The box every variable in `dim_vars` spans, each clipped to nothing beyond the tensor.
bool in_tensor(const TileIn& in, const std::vector<Span>& box) {
  for (size_t d = 0; d < box.size(); ++d) {
    if (box[d].hi >= in.shape[d]) return false;
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------------------------- sums

namespace {

// The box of the one input a reduction reads, its axis d read by variable dim_var[d]: output
// variables (the first ones, in output order) or reduced ones, restricted or not (a partial
// result). Output variables that read no axis have extent 1. False to decline.
bool reduction_box(const TileCall& call, const std::vector<int>& dim_var, std::vector<Span>* box) {
  if (call.inputs.size() != 1) return false;
  const TileIn& in = call.inputs[0];
  const int kept = static_cast<int>(call.output_vars.size());
  if (dim_var.size() != in.shape.size() || !outputs_first(call, kept)) return false;
  std::vector<int> reads(call.vars.size(), 0);
  for (int v : dim_var) {
    if (v < 0 || v >= static_cast<int>(call.vars.size()) || reads[v]++) return false;
  }
  for (int v = 0; v < static_cast<int>(call.vars.size()); ++v)
    if (!reads[v] && (v >= kept || call.extents[v] != 1)) return false;
  *box = box_of(call, dim_var);
  return in_tensor(in, *box) && holds(in, *box);
}

// lambda i..: Sum(r..: x[..]) * scale over reduction_box's box. Accumulates the input block row by
// row into a double buffer.
bool sum_into(const TileCall& call, const std::vector<int>& dim_var, double scale) {
  std::vector<Span> box;
  if (!reduction_box(call, dim_var, &box)) return false;
  const TileIn& in = call.inputs[0];
  const int nd = static_cast<int>(in.shape.size());

  const int64_t outputs = output_size(call);
  Scratch scratch(call);
  double* acc = scratch.doubles(outputs);  // accumulator_scratch
  std::fill(acc, acc + outputs, 0.0);
  auto finish = [&] {
    for (int64_t t = 0; t < outputs; ++t) call.out[t] = static_cast<float>(acc[t] * scale);
    return true;
  };
  if (nd == 0) {
    acc[0] = *in.data;
    return finish();
  }
  std::vector<int64_t> rs = region_strides(in), os = output_strides(call), corner(nd);
  for (int d = 0; d < nd; ++d) corner[d] = box[d].lo;
  const float* base = element(in, corner);
  const int64_t len = box[nd - 1].size(), ostep = os[dim_var[nd - 1]];
  std::vector<int64_t> idx(nd, 0);
  int64_t xo = 0, oo = 0;
  while (true) {
    const float* row = base + xo;
    if (ostep == 0) {
      acc[oo] += sum_of(len, [row](int64_t t) { return static_cast<double>(row[t]); });
    } else {
      double* a = acc + oo;
      for (int64_t t = 0; t < len; ++t) a[t * ostep] += row[t];
    }
    int d = nd - 1;
    while (true) {
      if (--d < 0) return finish();
      const int64_t o = os[dim_var[d]];
      if (++idx[d] < box[d].size()) {
        xo += rs[d];
        oo += o;
        break;
      }
      xo -= rs[d] * (box[d].size() - 1);
      oo -= o * (box[d].size() - 1);
      idx[d] = 0;
    }
  }
}

// lambda i..: R(r..: x[..]) over reduction_box's box for the reducer `fold(acc, v)` starting at
// `init`, element by element in double (Max, Min, Prod).
template <class Fold>
bool fold_into(const TileCall& call, const std::vector<int>& dim_var, double init, Fold fold) {
  std::vector<Span> box;
  if (!reduction_box(call, dim_var, &box)) return false;
  const TileIn& in = call.inputs[0];
  const int nd = static_cast<int>(in.shape.size());
  const int64_t outputs = output_size(call);
  Scratch scratch(call);
  double* acc = scratch.doubles(outputs);  // accumulator_scratch
  std::fill(acc, acc + outputs, init);
  std::vector<int64_t> rs = region_strides(in), os = output_strides(call), corner(nd), idx(nd, 0);
  for (int d = 0; d < nd; ++d) corner[d] = box[d].lo;
  const float* base = nd == 0 ? in.data : element(in, corner);
  const int64_t len = nd == 0 ? 1 : box[nd - 1].size(), ostep = nd == 0 ? 0 : os[dim_var[nd - 1]];
  int64_t xo = 0, oo = 0;
  while (true) {
    for (int64_t t = 0; t < len; ++t) {
      double& a = acc[oo + t * ostep];
      a = fold(a, static_cast<double>(base[xo + t]));
    }
    int d = nd - 1;
    while (true) {
      if (--d < 0) {
        for (int64_t t = 0; t < outputs; ++t) call.out[t] = static_cast<float>(acc[t]);
        return true;
      }
      if (++idx[d] < box[d].size()) {
        xo += rs[d];
        oo += os[dim_var[d]];
        break;
      }
      xo -= rs[d] * (box[d].size() - 1);
      oo -= os[dim_var[d]] * (box[d].size() - 1);
      idx[d] = 0;
    }
  }
}

// Max (Min when !is_max): NaN wins and stays, as in the interpreter and torch.
bool extremum_into(const TileCall& call, const std::vector<int>& dim_var, bool is_max) {
  const double inf = std::numeric_limits<double>::infinity();
  return fold_into(call, dim_var, is_max ? -inf : inf, [is_max](double a, double v) {
    return std::isnan(v) || (is_max ? v > a : v < a) ? v : a;
  });
}

// Variables of a reduction along attribute "axis" of the input (the output keeps the other axes in
// order; the reduction variable comes last).
bool along_axis(const TileCall& call, const Attrs& attrs, std::vector<int>* dim_var, int64_t* extent) {
  if (call.inputs.size() != 1) return false;
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  const int64_t axis = attrs.integer("axis", -1);
  if (!attrs.ok() || axis < -nd || axis >= nd || static_cast<int>(call.vars.size()) != nd) return false;
  const int a = static_cast<int>(axis < 0 ? axis + nd : axis);
  dim_var->clear();
  for (int d = 0; d < nd; ++d) dim_var->push_back(d < a ? d : (d == a ? nd - 1 : d - 1));
  *extent = call.inputs[0].shape[a];
  return true;
}

}  // namespace

// lambda i..: Sum(r..: x[..]) with the kept axes read by i0.. and the summed ones by r0.., each in
// axis order.
bool sum_axes(const TileCall& call, const Attrs& attrs) {
  if (call.inputs.size() != 1) return false;
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  std::vector<bool> reduced(nd, false);
  for (int64_t a : attrs.ints("axes")) {
    if (a < -nd || a >= nd) return false;
    reduced[a < 0 ? a + nd : a] = true;
  }
  if (!attrs.ok() || static_cast<int>(call.vars.size()) != nd) return false;
  const int kept = static_cast<int>(std::count(reduced.begin(), reduced.end(), false));
  if (kept == nd) return false;
  std::vector<int> dim_var(nd);
  for (int d = 0, ki = 0, ri = kept; d < nd; ++d) dim_var[d] = reduced[d] ? ri++ : ki++;
  return sum_into(call, dim_var, 1.0);
}

// lambda i..: Sum(k..: x[k_lead.., i or k_bcast..]): x summed down to `shape` over its extra leading
// axes and the axes in `bcast` (extent 1 in the output), the summed variables in axis order.
bool sum_to(const TileCall& call, const Attrs& attrs) {
  if (call.inputs.size() != 1) return false;
  const int rank = static_cast<int>(call.output_vars.size());
  const int lead = static_cast<int>(call.inputs[0].shape.size()) - rank;
  std::vector<bool> bcast(rank, false);
  for (int64_t a : attrs.ints("bcast")) {
    if (a < 0 || a >= rank) return false;  // the description reads the axes as listed
    bcast[a] = true;
  }
  if (!attrs.ok() || lead < 0) return false;
  std::vector<int> dim_var;
  int next = rank;
  for (int d = 0; d < lead; ++d) dim_var.push_back(next++);
  for (int d = 0; d < rank; ++d) dim_var.push_back(bcast[d] ? next++ : d);
  return sum_into(call, dim_var, 1.0);
}

// lambda r..: Sum(k..: x[k.., r..]) over the first `lead` axes.
bool sum_leading(const TileCall& call, const Attrs& attrs) {
  const int64_t lead = attrs.integer("lead", 1);
  if (!attrs.ok() || call.inputs.size() != 1) return false;
  const int nd = static_cast<int>(call.inputs[0].shape.size()), rank = static_cast<int>(call.output_vars.size());
  if (lead < 0 || lead != nd - rank) return false;
  std::vector<int> dim_var;
  for (int d = 0; d < nd; ++d) dim_var.push_back(d < lead ? rank + d : d - static_cast<int>(lead));
  return sum_into(call, dim_var, 1.0);
}

// lambda i..: Sum(k: x[i.. with k at axis]) / n: the mean (a partial sum / n over a restricted k).
bool reduce_mean(const TileCall& call, const Attrs& attrs) {
  std::vector<int> dim_var;
  int64_t n = 0;
  return along_axis(call, attrs, &dim_var, &n) && sum_into(call, dim_var, 1.0 / static_cast<double>(n));
}

bool reduce_sum(const TileCall& call, const Attrs& attrs) {
  std::vector<int> dim_var;
  int64_t n = 0;
  return along_axis(call, attrs, &dim_var, &n) && sum_into(call, dim_var, 1.0);
}

bool reduce_max(const TileCall& call, const Attrs& attrs) {
  std::vector<int> dim_var;
  int64_t n = 0;
  return along_axis(call, attrs, &dim_var, &n) && extremum_into(call, dim_var, true);
}

bool reduce_min(const TileCall& call, const Attrs& attrs) {
  std::vector<int> dim_var;
  int64_t n = 0;
  return along_axis(call, attrs, &dim_var, &n) && extremum_into(call, dim_var, false);
}

// lambda i..: Prod(k: x[i.. with k at axis]), partial over k (the runtime multiplies the parts).
bool reduce_prod(const TileCall& call, const Attrs& attrs) {
  std::vector<int> dim_var;
  int64_t n = 0;
  return along_axis(call, attrs, &dim_var, &n) &&
         fold_into(call, dim_var, 1.0, [](double a, double v) { return a * v; });
}

// lambda i, j: Sum(k: x[i, k] [k <= j]) (cumsum, prefix sums over the last axis of a matrix) or
// [k >= j] (cumsum_grad, suffix sums), partial over k. Positions outside the prefix are skipped, as
// in torch: the description multiplies them by 0, which makes an Inf there NaN.
namespace {
bool prefix_sums(const TileCall& call, bool suffix) {
  if (call.inputs.size() != 1 || call.vars.size() != 3 || !outputs_first(call, 2)) return false;
  const TileIn& x = call.inputs[0];
  const Span i = call.vars[0], j = call.vars[1], k = call.vars[2];
  if (x.shape.size() != 2 || i.hi >= x.shape[0] || k.hi >= x.shape[1] || !holds(x, {i, k})) return false;
  float* out = call.out;
  for (int64_t ii = i.lo; ii <= i.hi; ++ii) {
    const float* row = element(x, {ii, k.lo});  // row[t - k.lo] is x[ii, t] for t in k
    // The running sum over k in order (or in reverse), read off at each j of the block.
    double acc = 0;
    if (!suffix) {
      int64_t t = k.lo;
      for (int64_t jj = j.lo; jj <= j.hi; ++jj) {
        for (; t <= std::min(jj, k.hi); ++t) acc += row[t - k.lo];
        *out++ = static_cast<float>(acc);
      }
    } else {
      int64_t t = k.hi;
      for (int64_t jj = j.hi; jj >= j.lo; --jj) {
        for (; t >= std::max(jj, k.lo); --t) acc += row[t - k.lo];
        out[jj - j.lo] = static_cast<float>(acc);
      }
      out += j.size();
    }
  }
  return true;
}
}  // namespace

bool cumsum(const TileCall& call, const Attrs&) { return prefix_sums(call, false); }
bool cumsum_grad(const TileCall& call, const Attrs&) { return prefix_sums(call, true); }

// ----- reductions along one axis whose formula needs the whole row first (a max, a mean): the
// output's variables are x's other axes in order, then the row's nested reductions (whole), then
// the top-level one, if any (a partial result over its range).

namespace {

inline double sticky_max(double m, double v) { return std::isnan(v) || v > m ? v : m; }  // NaN wins and stays

// Calls f(row, stride, out) for each output element, in order: row points at x's element 0 along
// `axis` (the whole axis held), stride is the axis' step in the region buffer.
template <class F>
bool for_each_row_along(const TileCall& call, const TileIn& x, int axis, F&& f) {
  const int nd = static_cast<int>(x.shape.size());
  if (axis < 0 || axis >= nd || !outputs_first(call, nd - 1)) return false;
  std::vector<Span> box(call.vars.begin(), call.vars.begin() + (nd - 1));
  box.insert(box.begin() + axis, Span{0, x.shape[axis] - 1});
  if (!in_tensor(x, box) || !holds(x, box)) return false;
  const int64_t stride = region_strides(x)[axis];
  std::vector<int64_t> at(nd);
  for (int d = 0; d < nd; ++d) at[d] = box[d].lo;
  float* out = call.out;
  while (true) {
    f(element(x, at), stride, out++);
    int d = nd - 1;
    while (d >= 0 && (d == axis || at[d] == box[d].hi)) {
      if (d != axis) at[d] = box[d].lo;
      --d;
    }
    if (d < 0) return true;
    ++at[d];
  }
}

bool axis_attr(const Attrs& attrs, int nd, int64_t fallback, int* axis) {
  const int64_t a = attrs.integer("axis", fallback);
  if (!attrs.ok() || a < -nd || a >= nd) return false;
  *axis = static_cast<int>(a < 0 ? a + nd : a);
  return true;
}

}  // namespace

// lambda i..: Max(k: row) + log(Sum(k': exp(row - Max(k: row)))), both reductions whole.
bool logsumexp(const TileCall& call, const Attrs& attrs) {
  if (call.inputs.size() != 1) return false;
  const TileIn& x = call.inputs[0];
  const int nd = static_cast<int>(x.shape.size());
  int axis = 0;
  if (!axis_attr(attrs, nd, -1, &axis) || static_cast<int>(call.vars.size()) != nd + 1 || !nested_full(call, nd - 1))
    return false;
  const int64_t n = x.shape[axis];
  return for_each_row_along(call, x, axis, [n](const float* row, int64_t st, float* out) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t t = 0; t < n; ++t) m = sticky_max(m, row[t * st]);
    for (int64_t t = 0; t < n; ++t) s += std::exp(row[t * st] - m);
    *out = static_cast<float>(m + std::log(s));
  });
}

inline double sticky_min(double m, double v) { return std::isnan(v) || v < m ? v : m; }

// lambda i..: Min(k': k' where row[k'] == Max(k: row) or row[k'] is NaN, else inf): the index torch.argmax
// returns (the first maximum; the first NaN in a row holding one), partial over k'. argmin alike.
template <bool kMax>
bool arg_extremum(const TileCall& call, const Attrs& attrs) {
  if (call.inputs.size() != 1) return false;
  const TileIn& x = call.inputs[0];
  const int nd = static_cast<int>(x.shape.size());
  int axis = 0;
  if (!axis_attr(attrs, nd, -1, &axis) || static_cast<int>(call.vars.size()) != nd + 1 || !full_range(call, nd - 1, nd))
    return false;
  const int64_t n = x.shape[axis];
  const Span k = call.vars[nd];
  return for_each_row_along(call, x, axis, [n, k](const float* row, int64_t st, float* out) {
    double m = kMax ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    for (int64_t t = 0; t < n; ++t) m = kMax ? sticky_max(m, row[t * st]) : sticky_min(m, row[t * st]);
    float best = std::numeric_limits<float>::infinity();
    for (int64_t t = k.lo; t <= k.hi; ++t) {
      if (row[t * st] == m || std::isnan(row[t * st])) {
        best = static_cast<float>(t);
        break;
      }
    }
    *out = best;
  });
}

bool argmax(const TileCall& call, const Attrs& attrs) { return arg_extremum<true>(call, attrs); }
bool argmin(const TileCall& call, const Attrs& attrs) { return arg_extremum<false>(call, attrs); }

// lambda i..: Sum(k': (row[k'] - Sum(k: row) / n)^2) / n: the biased variance, partial over k'.
bool reduce_var(const TileCall& call, const Attrs& attrs) {
  if (call.inputs.size() != 1) return false;
  const TileIn& x = call.inputs[0];
  const int nd = static_cast<int>(x.shape.size());
  int axis = 0;
  if (!axis_attr(attrs, nd, -1, &axis) || static_cast<int>(call.vars.size()) != nd + 1 || !full_range(call, nd - 1, nd))
    return false;
  const int64_t n = x.shape[axis];
  const Span k = call.vars[nd];
  return for_each_row_along(call, x, axis, [n, k](const float* row, int64_t st, float* out) {
    double mu = 0, s = 0;
    for (int64_t t = 0; t < n; ++t) mu += row[t * st];
    mu /= static_cast<double>(n);
    for (int64_t t = k.lo; t <= k.hi; ++t) s += (row[t * st] - mu) * (row[t * st] - mu);
    *out = static_cast<float>(s / static_cast<double>(n));
  });
}

// lambda b, k: (exp(l[b, k] - m) / Sum(j': exp(l[b, j'] - m)) - target[b, k]) / batch, m = Max(j: l[b, j]).
bool cross_entropy_grad(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 2 || call.vars.size() != 4 || !outputs_first(call, 2) || !nested_full(call, 2))
    return false;
  const TileIn &logits = call.inputs[0], &target = call.inputs[1];
  if (logits.shape.size() != 2 || target.shape != logits.shape) return false;
  const Span b = call.vars[0], k = call.vars[1];
  const int64_t nj = logits.shape[1];
  if (!in_tensor(logits, {b, all(nj)}) || !holds(logits, {b, all(nj)}) || !holds(target, {b, k})) return false;
  const double batch = static_cast<double>(logits.shape[0]);
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    const float* row = element(logits, {bb, 0});
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t t = 0; t < nj; ++t) m = sticky_max(m, row[t]);
    for (int64_t t = 0; t < nj; ++t) s += std::exp(row[t] - m);
    const float* trow = element(target, {bb, k.lo});
    for (int64_t kk = k.lo; kk <= k.hi; ++kk)
      *out++ = static_cast<float>((std::exp(row[kk] - m) / s - trow[kk - k.lo]) / batch);
  }
  return true;
}

namespace {

// The gradient of a whole-row reduction along `axis` (inputs (dy, x); outputs first, the nested
// reduction whole): checks the call, then for every row of x along the axis that the block meets
// calls row_grad(row, stride, n, dy at the row, out, out stride, the block's span on the axis),
// `out` pointing at the block's element for position 0 of the axis.
template <class RowGrad>
bool axis_row_grad(const TileCall& call, const Attrs& attrs, RowGrad&& row_grad) {
  if (call.inputs.size() != 2) return false;
  const TileIn &dy = call.inputs[0], &x = call.inputs[1];
  const int nd = static_cast<int>(x.shape.size());
  int axis = 0;
  if (!axis_attr(attrs, nd, 0, &axis) || static_cast<int>(call.vars.size()) != nd + 1 || !outputs_first(call, nd) ||
      !nested_full(call, nd) || dy.shape.size() != static_cast<size_t>(nd - 1))
    return false;
  std::vector<Span> block(call.vars.begin(), call.vars.begin() + nd), whole = block, rest = block;
  whole[axis] = {0, x.shape[axis] - 1};
  rest.erase(rest.begin() + axis);
  if (!in_tensor(x, whole) || !holds(x, whole) || !in_tensor(dy, rest) || !holds(dy, rest)) return false;
  const int64_t n = x.shape[axis], st = region_strides(x)[axis];
  const std::vector<int64_t> os = output_strides(call);
  std::vector<int64_t> at(nd), j(nd - 1);
  for (int d = 0; d < nd; ++d) at[d] = whole[d].lo;
  while (true) {
    for (int d = 0, e = 0; d < nd; ++d)
      if (d != axis) j[e++] = at[d];
    int64_t o = -block[axis].lo * os[axis];
    for (int d = 0; d < nd; ++d)
      if (d != axis) o += (at[d] - block[d].lo) * os[d];
    row_grad(element(x, at), st, n, static_cast<double>(*element(dy, j)), call.out + o, os[axis], block[axis]);
    int d = nd - 1;
    while (d >= 0 && (d == axis || at[d] == block[d].hi)) {
      if (d != axis) at[d] = block[d].lo;
      --d;
    }
    if (d < 0) return true;
    ++at[d];
  }
}

}  // namespace

// lambda i..: 2 dy[j] (x[i] - Sum(k: x[i with k at axis]) / n) / n, j = i without `axis`: the
// gradient of reduce_var (the mean a whole-row nested reduction).
bool reduce_var_grad(const TileCall& call, const Attrs& attrs) {  // (dy, x)
  return axis_row_grad(call, attrs, [](const float* row, int64_t st, int64_t n, double g, float* out, int64_t os,
                                       Span span) {
    double mu = 0;
    for (int64_t t = 0; t < n; ++t) mu += row[t * st];
    mu /= static_cast<double>(n);
    for (int64_t t = span.lo; t <= span.hi; ++t)
      out[t * os] = static_cast<float>(2.0 * g * (row[t * st] - mu) / static_cast<double>(n));
  });
}

// lambda i..: dy[j] Prod(k: 1 at k = i[axis], else x[i with k at axis]): the gradient of reduce_prod,
// exact with zeros (a prefix times a suffix product, no division); the product is whole.
bool reduce_prod_grad(const TileCall& call, const Attrs& attrs) {  // (dy, x)
  std::vector<double> suffix;
  return axis_row_grad(call, attrs, [&](const float* row, int64_t st, int64_t n, double g, float* out, int64_t os,
                                        Span span) {
    suffix.assign(static_cast<size_t>(n) + 1, 1.0);
    for (int64_t t = n - 1; t >= 0; --t) suffix[t] = suffix[t + 1] * row[t * st];
    double prefix = 1.0;
    for (int64_t t = 0; t <= span.hi; ++t) {
      if (t >= span.lo) out[t * os] = static_cast<float>(g * (prefix * suffix[t + 1]));
      prefix *= row[t * st];
    }
  });
}

// lambda c: Sum(x^2) / (n h w) - (Sum(x) / (n h w))^2 over channel c: batch norm's biased variance
// (both sums whole).
bool batch_norm_var(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 1 || call.vars.size() != 7 || !outputs_first(call, 1) || !nested_full(call, 1)) return false;
  const TileIn& xin = call.inputs[0];
  if (xin.shape.size() != 4) return false;
  const Span c = call.vars[0];
  const std::vector<Span> box = {all(xin.shape[0]), c, all(xin.shape[2]), all(xin.shape[3])};
  View4 x;
  if (!in_tensor(xin, box) || !view4(xin, box, &x)) return false;
  const double count = static_cast<double>(xin.shape[0] * xin.shape[2] * xin.shape[3]);
  for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
    double s = 0, s2 = 0;
    rows_of_channel(x, box[0], cc, box[2], box[3], [&](const float* row, int64_t len) {
      s += sum_of(len, [row](int64_t t) { return static_cast<double>(row[t]); });
      s2 += sum_of(len, [row](int64_t t) { return static_cast<double>(row[t]) * row[t]; });
    });
    const double mean = s / count;
    call.out[cc - c.lo] = static_cast<float>(s2 / count - mean * mean);
  }
  return true;
}

// lambda b, c, h, w: 2 dy[c] (x - mean_c) / (n h w), the mean a whole nested sum: the gradient of
// batch_norm_var.
bool batch_norm_var_grad(const TileCall& call, const Attrs&) {  // (dy, x)
  if (call.inputs.size() != 2 || call.vars.size() != 7 || !outputs_first(call, 4) || !nested_full(call, 4)) return false;
  const TileIn &dy = call.inputs[0], &xin = call.inputs[1];
  if (xin.shape.size() != 4 || dy.shape.size() != 1) return false;
  const Span b = call.vars[0], c = call.vars[1], h = call.vars[2], w = call.vars[3];
  const std::vector<Span> box = {all(xin.shape[0]), c, all(xin.shape[2]), all(xin.shape[3])};
  View4 x;
  if (!in_tensor(xin, box) || !view4(xin, box, &x) || !in_tensor(dy, {c}) || !holds(dy, {c})) return false;
  const double count = static_cast<double>(xin.shape[0] * xin.shape[2] * xin.shape[3]);
  std::vector<double> mean(c.size(), 0.0);
  for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
    double s = 0;
    rows_of_channel(x, box[0], cc, box[2], box[3], [&](const float* row, int64_t len) {
      s += sum_of(len, [row](int64_t t) { return static_cast<double>(row[t]); });
    });
    mean[cc - c.lo] = s / count;
  }
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb)
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      const double g = 2.0 * *element(dy, {cc});
      for (int64_t hh = h.lo; hh <= h.hi; ++hh)
        for (int64_t ww = w.lo; ww <= w.hi; ++ww)
          *out++ = static_cast<float>(g * (*x.at(bb, cc, hh, ww) - mean[cc - c.lo]) / count);
    }
  return true;
}

// lambda b, c, h, w: [winner(b, c) == h W + w] dy[b, c], winner the row-major offset torch's
// adaptive_max_pool2d(x, 1) indices name: the first position equal to y[b, c] (Min over i, j), the last
// NaN when y is NaN (Max over q, r); whole-map nested reductions, found once per (b, c).
bool global_max_pool2d_grad(const TileCall& call, const Attrs&) {  // (x, y, dy)
  if (call.inputs.size() != 3 || call.vars.size() != 8 || !outputs_first(call, 4) || !nested_full(call, 4)) return false;
  const TileIn &xin = call.inputs[0], &y = call.inputs[1], &dy = call.inputs[2];
  if (xin.shape.size() != 4 || y.shape.size() != 2 || dy.shape != y.shape) return false;
  const Span b = call.vars[0], c = call.vars[1], h = call.vars[2], w = call.vars[3];
  const int64_t H = xin.shape[2], W = xin.shape[3];
  View4 x;
  if (!in_tensor(xin, {b, c, all(H), all(W)}) || !view4(xin, {b, c, all(H), all(W)}, &x) ||
      !in_tensor(y, {b, c}) || !holds(y, {b, c}) || !holds(dy, {b, c}))
    return false;
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
      const float yv = *element(y, {bb, cc}), dv = *element(dy, {bb, cc});
      const bool nan = std::isnan(yv);
      int64_t winner = -1;
      for (int64_t e = 0; e < H * W && (nan || winner < 0); ++e) {
        const float xv = *x.at(bb, cc, e / W, e % W);
        if (nan ? std::isnan(xv) : xv == yv) winner = e;
      }
      for (int64_t hh = h.lo; hh <= h.hi; ++hh)
        for (int64_t ww = w.lo; ww <= w.hi; ++ww)
          *out++ = static_cast<float>(winner == hh * W + ww) * dv;  // 0 * Inf is NaN, as in the description
    }
  }
  return true;
}

// lambda c: Sum(n, y, z: x[n, c, y, z]) / (n h w): batch norm's channel mean, partial over n, y, z.
bool batch_norm_mean(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 1 || call.inputs[0].shape.size() != 4) return false;
  const auto& s = call.inputs[0].shape;
  return sum_into(call, {1, 0, 2, 3}, 1.0 / static_cast<double>(s[0] * s[2] * s[3]));
}

// Sums that are bias gradients: lambda co: Sum(b, y, x: dy[b, co, y, x]) and lambda j: Sum(b: x[b, j]).
bool conv2d_bias_grad(const TileCall& call, const Attrs&) { return sum_into(call, {1, 0, 2, 3}, 1.0); }
bool sum_rows(const TileCall& call, const Attrs&) { return sum_into(call, {1, 0}, 1.0); }

namespace {

// The shared shape of the extremum gradients (dy, x, y; lambda i..: ... over a nested k along `axis`):
// the call checked, the block of the output, its rows (the block without the axis), x's strides.
struct ExtremumGrad {
  const TileIn *dy = nullptr, *x = nullptr, *y = nullptr;
  int nd = 0, a = 0;
  std::vector<Span> block, rest;
  std::vector<int64_t> xs;
};

bool extremum_grad_call(const TileCall& call, const Attrs& attrs, ExtremumGrad* e) {
  const int64_t axis = attrs.integer("axis", 0);
  if (!attrs.ok() || call.inputs.size() != 3) return false;
  const TileIn &dy = call.inputs[0], &x = call.inputs[1], &y = call.inputs[2];
  const int nd = static_cast<int>(x.shape.size());
  if (axis < 0 || axis >= nd || !outputs_first(call, nd) || static_cast<int>(call.vars.size()) != nd + 1 ||
      !nested_full(call, nd) || y.shape.size() != static_cast<size_t>(nd - 1) || dy.shape != y.shape)
    return false;
  const int a = static_cast<int>(axis);
  std::vector<Span> block(call.vars.begin(), call.vars.begin() + nd), whole = block, rest = block;
  whole[a] = {0, x.shape[a] - 1};
  rest.erase(rest.begin() + a);
  if (!in_tensor(x, whole) || !holds(x, whole) || !in_tensor(y, rest) || !holds(y, rest) || !holds(dy, rest))
    return false;
  *e = {&dy, &x, &y, nd, a, std::move(block), std::move(rest), region_strides(x)};
  return true;
}

}  // namespace

// lambda i..: (x[i] == y[j]) dy[j] / Sum(k: x[i with k at axis] == y[j]), j = i without `axis`: the
// gradient of reduce_max / reduce_min (y the result) split evenly over the ties. The count is a
// nested reduction over the whole axis; 0 / 0 where y matches nothing (a NaN) is NaN, as there.
bool reduce_extremum_grad(const TileCall& call, const Attrs& attrs) {
  ExtremumGrad e;
  if (!extremum_grad_call(call, attrs, &e)) return false;
  const TileIn &dy = *e.dy, &x = *e.x, &y = *e.y;
  const int nd = e.nd, a = e.a;
  const std::vector<Span>& block = e.block;
  const std::vector<int64_t>& xs = e.xs;
  std::vector<int64_t> idx(nd), at(nd - 1);
  for (int d = 0; d < nd; ++d) idx[d] = block[d].lo;
  float* out = call.out;
  while (true) {
    for (int d = 0, e = 0; d < nd; ++d)
      if (d != a) at[e++] = idx[d];
    const float yv = *element(y, at), dv = *element(dy, at);
    std::vector<int64_t> first = idx;
    first[a] = 0;
    const float* row = element(x, first);
    double count = 0;
    for (int64_t k = 0; k < x.shape[a]; ++k) count += row[k * xs[a]] == yv;
    const float xv = row[idx[a] * xs[a]];
    *out++ = static_cast<float>(static_cast<double>(xv == yv) * dv / count);
    int d = nd - 1;
    while (d >= 0 && idx[d] == block[d].hi) idx[d] = block[d].lo, --d;
    if (d < 0) return true;
    ++idx[d];
  }
}

// lambda i..: dy[j] where i[axis] == Min(k: k where x[i with k at axis] == y[j] or is NaN, else inf), else
// 0; j = i without `axis`: the gradient of torch.max/min(x, dim)'s values (max_dim / min_dim), all of a
// row's dy to the index torch returns (the first extremum, the first NaN), none to the other ties. The
// winner is a nested reduction over the whole axis, found once per row of the block.
bool reduce_first_extremum_grad(const TileCall& call, const Attrs& attrs) {
  ExtremumGrad e;
  if (!extremum_grad_call(call, attrs, &e)) return false;
  const TileIn &dy = *e.dy, &x = *e.x, &y = *e.y;
  const int nd = e.nd, a = e.a;
  const std::vector<Span>& block = e.block;
  const std::vector<Span>& rest = e.rest;
  const std::vector<int64_t>& xs = e.xs;
  // The winner of each row of the block, in row-major order of `rest`.
  std::vector<int64_t> winner;
  std::vector<int64_t> at(nd - 1), first(nd);
  for (int d = 0; d < nd - 1; ++d) at[d] = rest[d].lo;
  while (true) {
    for (int d = 0, e = 0; d < nd; ++d) first[d] = d == a ? 0 : at[e++];
    const float* row = element(x, first);
    const float yv = *element(y, at);
    int64_t w = -1;
    for (int64_t k = 0; k < x.shape[a] && w < 0; ++k)
      if (row[k * xs[a]] == yv || std::isnan(row[k * xs[a]])) w = k;
    winner.push_back(w);
    int d = nd - 2;
    while (d >= 0 && at[d] == rest[d].hi) at[d] = rest[d].lo, --d;
    if (d < 0) break;
    ++at[d];
  }
  std::vector<int64_t> idx(nd), rstride(nd - 1, 1);
  for (int d = nd - 3; d >= 0; --d) rstride[d] = rstride[d + 1] * rest[d + 1].size();
  for (int d = 0; d < nd; ++d) idx[d] = block[d].lo;
  float* out = call.out;
  while (true) {
    int64_t r = 0;
    for (int d = 0, e = 0; d < nd; ++d)
      if (d != a) at[e] = idx[d], r += (idx[d] - rest[e].lo) * rstride[e], ++e;
    *out++ = winner[r] == idx[a] ? *element(dy, at) : 0.0f;
    int d = nd - 1;
    while (d >= 0 && idx[d] == block[d].hi) idx[d] = block[d].lo, --d;
    if (d < 0) return true;
    ++idx[d];
  }
}

// lambda b, c: Sum(h, w: x[b, c, h, w]) / (h w) and Max(h, w: x[b, c, h, w]).
bool global_avg_pool2d(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 1 || call.inputs[0].shape.size() != 4) return false;
  const auto& s = call.inputs[0].shape;
  return sum_into(call, {0, 1, 2, 3}, 1.0 / static_cast<double>(s[2] * s[3]));
}

bool global_max_pool2d(const TileCall& call, const Attrs&) { return extremum_into(call, {0, 1, 2, 3}, true); }

// ----------------------------------------------------------------------------------- batch norm

// lambda b, c, h, w: (x - mean_c) / sqrt(var_c + eps) * gamma[c] + beta[c]; statistics over the
// full (n, h, w) of each channel in the block.
bool batch_norm_train(const TileCall& call, const Attrs& attrs) {
  const double eps = attrs.num("eps", 1e-5);
  if (!attrs.ok() || call.inputs.size() != 3 || call.vars.size() != 13) return false;
  if (!outputs_first(call, 4) || !nested_full(call, 4)) return false;
  const TileIn &xin = call.inputs[0], &gamma = call.inputs[1], &beta = call.inputs[2];
  const Span b = call.vars[0], c = call.vars[1], h = call.vars[2], w = call.vars[3];
  View4 x;
  if (xin.shape.size() != 4 || !view4(xin, {all(xin.shape[0]), c, all(xin.shape[2]), all(xin.shape[3])}, &x)) {
    return false;
  }
  if (gamma.shape.size() != 1 || beta.shape.size() != 1 || !holds(gamma, {c}) || !holds(beta, {c})) return false;
  const float* g = element(gamma, {c.lo});
  const float* bt = element(beta, {c.lo});
  const int64_t nc = c.size(), nh = h.size(), nw = w.size();
  for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
    const Stats st = channel_stats(x, xin.shape, cc, eps);
    const double scale = st.rstd * g[cc - c.lo], shift = bt[cc - c.lo];
    for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
      float* out = call.out + ((bb - b.lo) * nc + (cc - c.lo)) * nh * nw;
      for (int64_t y = h.lo; y <= h.hi; ++y, out += nw) {
        const float* row = x.at(bb, cc, y, w.lo);
        for (int64_t t = 0; t < nw; ++t) out[t] = static_cast<float>((row[t] - st.mean) * scale + shift);
      }
    }
  }
  return true;
}

// dx = gamma rstd (dy - mean(dy) - (x - mean) rstd^2 mean(dy (x - mean))), per channel.
bool batch_norm_grad_input(const TileCall& call, const Attrs& attrs) {
  const double eps = attrs.num("eps", 1e-5);
  if (!attrs.ok() || call.inputs.size() != 3 || call.vars.size() != 19) return false;
  if (!outputs_first(call, 4) || !nested_full(call, 4)) return false;
  const TileIn &dyin = call.inputs[0], &xin = call.inputs[1], &gamma = call.inputs[2];
  const Span b = call.vars[0], c = call.vars[1], h = call.vars[2], w = call.vars[3];
  if (xin.shape.size() != 4 || dyin.shape != xin.shape) return false;
  const std::vector<Span> channels = {all(xin.shape[0]), c, all(xin.shape[2]), all(xin.shape[3])};
  View4 x, dy;
  if (!view4(xin, channels, &x) || !view4(dyin, channels, &dy)) return false;
  if (gamma.shape.size() != 1 || !holds(gamma, {c})) return false;
  const float* g = element(gamma, {c.lo});
  const int64_t nc = c.size(), nh = h.size(), nw = w.size();
  const int64_t N = xin.shape[0], H = xin.shape[2], W = xin.shape[3];
  const double count = static_cast<double>(N * H * W);
  for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
    const Stats st = channel_stats(x, xin.shape, cc, eps);
    double sdy = 0, sdyx = 0;
    for (int64_t a = 0; a < N; ++a) {
      for (int64_t y = 0; y < H; ++y) {
        const float *xr = x.at(a, cc, y, 0), *dr = dy.at(a, cc, y, 0);
        const double mean = st.mean;
        sdy += sum_of(W, [dr](int64_t t) { return static_cast<double>(dr[t]); });
        sdyx += sum_of(W, [=](int64_t t) { return dr[t] * (xr[t] - mean); });
      }
    }
    const double mdy = sdy / count, mdyx = sdyx / count, gr = g[cc - c.lo] * st.rstd;
    const double k = st.rstd * st.rstd * mdyx;
    for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
      float* out = call.out + ((bb - b.lo) * nc + (cc - c.lo)) * nh * nw;
      for (int64_t y = h.lo; y <= h.hi; ++y, out += nw) {
        const float *xr = x.at(bb, cc, y, w.lo), *dr = dy.at(bb, cc, y, w.lo);
        for (int64_t t = 0; t < nw; ++t) out[t] = static_cast<float>(gr * (dr[t] - mdy - (xr[t] - st.mean) * k));
      }
    }
  }
  return true;
}

// dgamma[c] = sum over (p, q, r) of dy (x - mean) / sqrt(var + eps); p, q, r may be a sub-box.
bool batch_norm_grad_gamma(const TileCall& call, const Attrs& attrs) {
  const double eps = attrs.num("eps", 1e-5);
  if (!attrs.ok() || call.inputs.size() != 2 || call.vars.size() != 13) return false;
  if (!outputs_first(call, 1) || !nested_full(call, 4)) {
    return false;
  }
  const TileIn &dyin = call.inputs[0], &xin = call.inputs[1];
  const Span c = call.vars[0], p = call.vars[1], q = call.vars[2], r = call.vars[3];
  if (xin.shape.size() != 4 || dyin.shape != xin.shape) return false;
  View4 x, dy;
  if (!view4(xin, {all(xin.shape[0]), c, all(xin.shape[2]), all(xin.shape[3])}, &x) ||
      !view4(dyin, {p, c, q, r}, &dy)) {
    return false;
  }
  for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
    const Stats st = channel_stats(x, xin.shape, cc, eps);
    double s = 0;
    for (int64_t a = p.lo; a <= p.hi; ++a) {
      for (int64_t y = q.lo; y <= q.hi; ++y) {
        const float *xr = x.at(a, cc, y, r.lo), *dr = dy.at(a, cc, y, r.lo);
        const double mean = st.mean;
        s += sum_of(r.size(), [=](int64_t t) { return dr[t] * (xr[t] - mean); });
      }
    }
    call.out[cc - c.lo] = static_cast<float>(s * st.rstd);
  }
  return true;
}

// lambda c: Sum(p, q, r: dy[p, c, q, r] (x[p, c, q, r] - mean[c])) / sqrt(var[c] + eps): the gamma
// gradient of batch norm with running statistics, partial over p, q, r.
bool batch_norm_inference_grad_gamma(const TileCall& call, const Attrs& attrs) {
  const double eps = attrs.num("eps", 1e-5);
  if (!attrs.ok() || call.inputs.size() != 4 || call.vars.size() != 4 || !outputs_first(call, 1)) return false;
  const TileIn &dyin = call.inputs[0], &xin = call.inputs[1], &mean = call.inputs[2], &var = call.inputs[3];
  const Span c = call.vars[0], p = call.vars[1], q = call.vars[2], r = call.vars[3];
  if (xin.shape.size() != 4 || dyin.shape != xin.shape || mean.shape.size() != 1 || var.shape.size() != 1 ||
      !in_tensor(xin, {p, c, q, r}) || c.hi >= mean.shape[0] || c.hi >= var.shape[0] || !holds(mean, {c}) ||
      !holds(var, {c}))
    return false;
  View4 x, dy;
  if (!view4(xin, {p, c, q, r}, &x) || !view4(dyin, {p, c, q, r}, &dy)) return false;
  for (int64_t cc = c.lo; cc <= c.hi; ++cc) {
    const double mu = *element(mean, {cc});
    double s = 0;
    for (int64_t a = p.lo; a <= p.hi; ++a) {
      for (int64_t y = q.lo; y <= q.hi; ++y) {
        const float *xr = x.at(a, cc, y, r.lo), *dr = dy.at(a, cc, y, r.lo);
        s += sum_of(r.size(), [=](int64_t t) { return static_cast<double>(dr[t]) * (xr[t] - mu); });
      }
    }
    call.out[cc - c.lo] = static_cast<float>(s / std::sqrt(*element(var, {cc}) + eps));
  }
  return true;
}

// ---------------------------------------------------------------------------------------- losses

namespace {

// Sum(r..: term(a[r..], b[r..])) * scale in double, a and b of the same shape and the output one
// element (a scalar, or `lead` leading variables of extent 1): the partial sum over the block of
// r0.. (the loss's mean when scale is 1 / numel).
template <class Term>
bool sum_of_pairs(const TileCall& call, double scale, Term term, int lead = 0) {
  if (call.inputs.size() != 2 || !outputs_first(call, lead)) return false;
  for (int v = 0; v < lead; ++v)
    if (call.extents[v] != 1) return false;
  const TileIn &a = call.inputs[0], &bi = call.inputs[1];
  const int nd = static_cast<int>(a.shape.size());
  if (nd < 1 || static_cast<int>(call.vars.size()) != lead + nd || bi.shape != a.shape) return false;
  std::vector<int> dims(nd);
  for (int d = 0; d < nd; ++d) dims[d] = lead + d;
  std::vector<Span> box = box_of(call, dims);
  if (!in_tensor(a, box) || !holds(a, box) || !holds(bi, box)) return false;
  std::vector<int64_t> ra = region_strides(a), rb = region_strides(bi), corner(nd), idx(nd, 0);
  for (int d = 0; d < nd; ++d) corner[d] = box[d].lo;
  const float *pa = element(a, corner), *pb = element(bi, corner);
  const int64_t len = box[nd - 1].size();
  double s = 0;
  int64_t oa = 0, ob = 0;
  while (true) {
    const float *row_a = pa + oa, *row_b = pb + ob;
    s += sum_of(len, [=](int64_t t) { return term(static_cast<double>(row_a[t]), static_cast<double>(row_b[t])); });
    int d = nd - 1;
    while (true) {
      if (--d < 0) {
        call.out[0] = static_cast<float>(s * scale);
        return true;
      }
      if (++idx[d] < box[d].size()) {
        oa += ra[d];
        ob += rb[d];
        break;
      }
      oa -= ra[d] * (box[d].size() - 1);
      ob -= rb[d] * (box[d].size() - 1);
      idx[d] = 0;
    }
  }
}

double inverse_numel(const TileCall& call) {
  double n = 1;
  if (!call.inputs.empty())
    for (int64_t e : call.inputs[0].shape) n *= static_cast<double>(e);
  return 1.0 / n;
}

double nan_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

}  // namespace

// mean((a - b)^2).
bool mse_loss(const TileCall& call, const Attrs&) {
  return sum_of_pairs(call, inverse_numel(call), [](double a, double b) { return (a - b) * (a - b); });
}

// mean(|a - b|).
bool l1_loss(const TileCall& call, const Attrs&) {
  return sum_of_pairs(call, inverse_numel(call), [](double a, double b) { return std::fabs(a - b); });
}

// mean(0.5 d^2 / beta where |d| < beta, else |d| - beta / 2), d = a - b.
bool smooth_l1_loss(const TileCall& call, const Attrs& attrs) {
  const double beta = attrs.num("beta", 1.0);
  return attrs.ok() && sum_of_pairs(call, inverse_numel(call), [beta](double a, double b) {
    const double d = std::fabs(a - b);
    return d < beta ? 0.5 * d * d / beta : d - 0.5 * beta;
  });
}

// mean(max(x, 0) - x t + log(1 + exp(-|x|))) over logits x and targets t.
bool bce_with_logits(const TileCall& call, const Attrs&) {
  return sum_of_pairs(call, inverse_numel(call), [](double x, double t) {
    return nan_max(x, 0.0) - x * t + std::log(1.0 + std::exp(-std::fabs(x)));
  });
}

// lambda _: Sum(r..: a[r..] b[r..]), a one-element tensor (the gradient of a scale factor).
bool sum_product(const TileCall& call, const Attrs&) {
  return sum_of_pairs(call, 1.0, [](double a, double b) { return a * b; }, 1);
}

// -Sum(b, k: target[b, k] logp[b, k]) / batch with dense targets.
bool nll_loss(const TileCall& call, const Attrs&) {
  if (call.inputs.empty() || call.inputs[0].shape.size() != 2 || call.inputs[0].shape[0] < 1) return false;
  return sum_of_pairs(call, -1.0 / static_cast<double>(call.inputs[0].shape[0]),
                      [](double logp, double target) { return target * logp; });
}

namespace {
/// log-softmax pieces of one full row of logits: its max and log(sum(exp(row - max))).
struct RowSoftmax {
  double max = 0, log_sum = 0;
};
RowSoftmax row_softmax(const float* row, int64_t n) {
  RowSoftmax r;
  r.max = -std::numeric_limits<double>::infinity();
  for (int64_t t = 0; t < n; ++t) r.max = std::max<double>(r.max, row[t]);
  double s = 0;
  for (int64_t t = 0; t < n; ++t) s += std::exp(row[t] - r.max);
  r.log_sum = std::log(s);
  return r;
}
}  // namespace

// -mean_b sum_k target[b, k] log_softmax(logits)[b, k]: partial over the block of (b, k), with
// full rows of logits for the softmax.
bool cross_entropy(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 2 || !call.output_vars.empty() ||
      !nested_full(call, 2)) {
    return false;
  }
  const TileIn &logits = call.inputs[0], &target = call.inputs[1];
  if (logits.shape.size() != 2 || target.shape != logits.shape) return false;
  const Span b = call.vars[0], k = call.vars[1];
  const int64_t nj = logits.shape[1];
  if (!holds(logits, {b, all(nj)}) || !holds(target, {b, k})) return false;
  double s = 0;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    const float* row = element(logits, {bb, 0});
    const float* trow = element(target, {bb, k.lo});
    const RowSoftmax sm = row_softmax(row, nj);
    for (int64_t kk = k.lo; kk <= k.hi; ++kk) s += trow[kk - k.lo] * ((row[kk] - sm.max) - sm.log_sum);
  }
  call.out[0] = static_cast<float>(-s / static_cast<double>(logits.shape[0]));
  return true;
}

// (softmax(logits)[b, k] sum_j target[b, j] - target[b, k]) dy / batch, dy a rank-0 tensor.
bool cross_entropy_backward(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 3 || !outputs_first(call, 2) ||
      !nested_full(call, 2)) {
    return false;
  }
  const TileIn &logits = call.inputs[0], &target = call.inputs[1], &dyin = call.inputs[2];
  if (logits.shape.size() != 2 || target.shape != logits.shape || !dyin.shape.empty()) return false;
  const Span b = call.vars[0], k = call.vars[1];
  const int64_t nj = logits.shape[1];
  if (!holds(logits, {b, all(nj)}) || !holds(target, {b, all(nj)}) || !holds(dyin, {})) return false;
  const double scale = static_cast<double>(dyin.data[0]) / static_cast<double>(logits.shape[0]);
  float* out = call.out;
  for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
    const float* row = element(logits, {bb, 0});
    const float* trow = element(target, {bb, 0});
    const RowSoftmax sm = row_softmax(row, nj);
    double tsum = 0;
    for (int64_t t = 0; t < nj; ++t) tsum += trow[t];
    const double denom = std::exp(sm.log_sum);
    for (int64_t kk = k.lo; kk <= k.hi; ++kk) {
      *out++ = static_cast<float>((std::exp(row[kk] - sm.max) / denom * tsum - trow[kk]) * scale);
    }
  }
  return true;
}


// ----- row-wise ops over the last axis (softmax, log-softmax, layer and RMS norm, their input
// gradients): roles i0..i{r-1} (the output) then the nested reductions over the row, which must be
// whole. A device may hold any block of outputs; it reads the whole rows through them.

namespace {

// The rank r of a row op's output and whether the call has its layout: outputs first, nested
// reductions whole, every input in `rows` holding the whole last-axis rows of the block.
bool row_layout(const TileCall& call, std::initializer_list<int> rows, int* rank) {
  const int r = static_cast<int>(call.output_vars.size());
  if (r < 1 || !outputs_first(call, r) || !nested_full(call, r)) return false;
  std::vector<Span> box;
  for (int d = 0; d < r; ++d) box.push_back(call.vars[d]);
  box[r - 1] = all(call.extents[r - 1]);
  for (int in : rows) {
    if (in >= static_cast<int>(call.inputs.size()) || static_cast<int>(call.inputs[in].shape.size()) != r ||
        call.inputs[in].shape[r - 1] != call.extents[r - 1] || !holds(call.inputs[in], box))
      return false;
  }
  *rank = r;
  return true;
}

// Calls f(rows, out, lo, hi): rows[j] points at the whole last-axis row of input rows_inputs[j]
// for one leading index of the block, out at the block's output row, [lo, hi] the block's columns.
template <class F>
void for_each_row(const TileCall& call, int r, std::initializer_list<int> row_inputs, F&& f) {
  std::vector<int64_t> at(r);
  for (int d = 0; d < r; ++d) at[d] = call.vars[d].lo;
  at[r - 1] = 0;
  const Span cols = call.vars[r - 1];
  std::vector<const float*> rows(row_inputs.size());
  float* out = call.out;
  while (true) {
    size_t j = 0;
    for (int in : row_inputs) rows[j++] = element(call.inputs[in], at);
    f(rows.data(), out, cols.lo, cols.hi);
    out += cols.size();
    int d = r - 2;
    while (d >= 0 && at[d] == call.vars[d].hi) at[d] = call.vars[d].lo, --d;
    if (d < 0) return;
    ++at[d];
  }
}

// A vector input indexed by the last axis (gamma, beta) holding the block's columns.
const float* column_vector(const TileCall& call, int input, int r) {
  const TileIn& v = call.inputs[input];
  if (v.shape.size() != 1 || v.shape[0] != call.extents[r - 1] || !holds(v, {call.vars[r - 1]})) return nullptr;
  return element(v, {call.vars[r - 1].lo}) - call.vars[r - 1].lo;  // indexed by the column
}

// A vector input indexed by the last axis, held whole (gamma of a gradient reads every column).
const float* whole_vector(const TileCall& call, int input, int64_t n) {
  const TileIn& v = call.inputs[input];
  if (v.shape.size() != 1 || v.shape[0] != n || !holds(v, {all(n)})) return nullptr;
  return element(v, {0});
}

// Mean and 1 / sqrt(variance + eps) of a row of n values, summed in double.
void row_stats(const float* x, int64_t n, double eps, double* mu, double* rstd) {
  *mu = sum_of(n, [&](int64_t k) { return static_cast<double>(x[k]); }) / n;
  const double m = *mu;
  *rstd = 1.0 / std::sqrt(sum_of(n, [&](int64_t k) { return (x[k] - m) * (x[k] - m); }) / n + eps);
}

// 1 / sqrt(mean(x^2) + eps) of a row of n values.
double rms_inverse(const float* x, int64_t n, double eps) {
  return 1.0 / std::sqrt(sum_of(n, [&](int64_t k) { return static_cast<double>(x[k]) * x[k]; }) / n + eps);
}

// max over a row, NaN if any element is NaN (as the interpreter's Max).
float row_max(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < n; ++k) {
    if (std::isnan(x[k])) return x[k];
    m = std::max(m, x[k]);
  }
  return m;
}

}  // namespace

namespace {

// exp(row[k] - m) for the row's n elements, once each, in a loop that vectorises (fast::exp), into
// `e` (the call's scratch: row_scratch).
const float* shifted_exps(const float* row, int64_t n, float m, float* e) {
  for (int64_t k = 0; k < n; ++k) e[k] = fast::exp(row[k] - m);
  return e;
}

}  // namespace

bool softmax(const TileCall& call, const Attrs&) {
  int r = 0;
  if (call.inputs.size() != 1 || !row_layout(call, {0}, &r)) return false;
  const int64_t n = call.extents[r - 1];
  Scratch scratch(call);
  float* row = scratch.floats(n);
  for_each_row(call, r, {0}, [&](const float* const* x, float* out, int64_t lo, int64_t hi) {
    const float m = row_max(x[0], n);
    const float* e = shifted_exps(x[0], n, m, row);
    const double z = sum_of(n, [&](int64_t k) { return static_cast<double>(e[k]); });
    const float inv = static_cast<float>(1.0 / z);
    for (int64_t c = lo; c <= hi; ++c) out[c - lo] = e[c] * inv;
  });
  return true;
}

bool log_softmax(const TileCall& call, const Attrs&) {
  int r = 0;
  if (call.inputs.size() != 1 || !row_layout(call, {0}, &r)) return false;
  const int64_t n = call.extents[r - 1];
  Scratch scratch(call);
  float* row = scratch.floats(n);
  for_each_row(call, r, {0}, [&](const float* const* x, float* out, int64_t lo, int64_t hi) {
    const float m = row_max(x[0], n);
    const float* e = shifted_exps(x[0], n, m, row);
    const double lz = std::log(sum_of(n, [&](int64_t k) { return static_cast<double>(e[k]); }));
    for (int64_t c = lo; c <= hi; ++c) out[c - lo] = static_cast<float>(static_cast<double>(x[0][c]) - m - lz);
  });
  return true;
}

bool softmax_grad(const TileCall& call, const Attrs&) {  // (dy, y): y (dy - sum(dy y))
  int r = 0;
  if (call.inputs.size() != 2 || !row_layout(call, {0, 1}, &r)) return false;
  const int64_t n = call.extents[r - 1];
  for_each_row(call, r, {0, 1}, [&](const float* const* p, float* out, int64_t lo, int64_t hi) {
    const double s = sum_of(n, [&](int64_t k) { return static_cast<double>(p[0][k]) * p[1][k]; });
    for (int64_t c = lo; c <= hi; ++c) out[c - lo] = static_cast<float>(p[1][c] * (p[0][c] - s));
  });
  return true;
}

bool log_softmax_grad(const TileCall& call, const Attrs&) {  // (dy, y): dy - exp(y) sum(dy)
  int r = 0;
  if (call.inputs.size() != 2 || !row_layout(call, {0, 1}, &r)) return false;
  const int64_t n = call.extents[r - 1];
  for_each_row(call, r, {0, 1}, [&](const float* const* p, float* out, int64_t lo, int64_t hi) {
    const double s = sum_of(n, [&](int64_t k) { return static_cast<double>(p[0][k]); });
    for (int64_t c = lo; c <= hi; ++c) out[c - lo] = static_cast<float>(p[0][c] - std::exp(static_cast<double>(p[1][c])) * s);
  });
  return true;
}

bool layer_norm(const TileCall& call, const Attrs& attrs) {  // (x, gamma, beta)
  const double eps = attrs.num("eps", 1e-5);
  int r = 0;
  if (!attrs.ok() || call.inputs.size() != 3 || !row_layout(call, {0}, &r)) return false;
  const float *gamma = column_vector(call, 1, r), *beta = column_vector(call, 2, r);
  if (!gamma || !beta) return false;
  const int64_t n = call.extents[r - 1];
  for_each_row(call, r, {0}, [&](const float* const* x, float* out, int64_t lo, int64_t hi) {
    double mu, rstd;
    row_stats(x[0], n, eps, &mu, &rstd);
    for (int64_t c = lo; c <= hi; ++c) out[c - lo] = static_cast<float>((x[0][c] - mu) * rstd * gamma[c] + beta[c]);
  });
  return true;
}

bool layer_norm_grad_input(const TileCall& call, const Attrs& attrs) {  // (dy, x, gamma)
  const double eps = attrs.num("eps", 1e-5);
  int r = 0;
  if (!attrs.ok() || call.inputs.size() != 3 || !row_layout(call, {0, 1}, &r)) return false;
  const int64_t n = call.extents[r - 1];
  const float* gamma = whole_vector(call, 2, n);
  if (!gamma) return false;
  for_each_row(call, r, {0, 1}, [&](const float* const* p, float* out, int64_t lo, int64_t hi) {
    const float *dy = p[0], *x = p[1];
    double mu, rstd;
    row_stats(x, n, eps, &mu, &rstd);
    const double m1 = sum_of(n, [&](int64_t k) { return static_cast<double>(dy[k]) * gamma[k]; }) / n;
    const double m2 = sum_of(n, [&](int64_t k) { return static_cast<double>(dy[k]) * gamma[k] * (x[k] - mu); }) / n;
    for (int64_t c = lo; c <= hi; ++c)
      out[c - lo] = static_cast<float>(rstd * (static_cast<double>(dy[c]) * gamma[c] - m1 - (x[c] - mu) * rstd * rstd * m2));
  });
  return true;
}

bool rms_norm(const TileCall& call, const Attrs& attrs) {  // (x, gamma): x / sqrt(mean(x^2) + eps) gamma
  const double eps = attrs.num("eps", 1e-6);
  int r = 0;
  if (!attrs.ok() || call.inputs.size() != 2 || !row_layout(call, {0}, &r)) return false;
  const float* gamma = column_vector(call, 1, r);
  if (!gamma) return false;
  const int64_t n = call.extents[r - 1];
  for_each_row(call, r, {0}, [&](const float* const* x, float* out, int64_t lo, int64_t hi) {
    const double inv = rms_inverse(x[0], n, eps);
    for (int64_t c = lo; c <= hi; ++c) out[c - lo] = static_cast<float>(x[0][c] * inv * gamma[c]);
  });
  return true;
}

bool rms_norm_grad_input(const TileCall& call, const Attrs& attrs) {  // (dy, x, gamma)
  const double eps = attrs.num("eps", 1e-6);
  int r = 0;
  if (!attrs.ok() || call.inputs.size() != 3 || !row_layout(call, {0, 1}, &r)) return false;
  const int64_t n = call.extents[r - 1];
  const float* gamma = whole_vector(call, 2, n);
  if (!gamma) return false;
  for_each_row(call, r, {0, 1}, [&](const float* const* p, float* out, int64_t lo, int64_t hi) {
    const float *dy = p[0], *x = p[1];
    const double rr = rms_inverse(x, n, eps);
    const double m = sum_of(n, [&](int64_t k) { return static_cast<double>(dy[k]) * gamma[k] * x[k]; }) / n;
    for (int64_t c = lo; c <= hi; ++c)
      out[c - lo] = static_cast<float>(rr * gamma[c] * dy[c] - x[c] * rr * rr * rr * m);
  });
  return true;
}

namespace {

// (dy, x): dgamma[j] = sum over the leading indices r of dy[r, j] (x[r, j] - mu_r) rstd_r (layer norm)
// or dy[r, j] x[r, j] / rms_r (RMS norm). Roles: j, the leading indices (top-level reduction: a
// device may hold a part of them, a partial sum), then the row statistics' variables (whole).
bool norm_grad_gamma(const TileCall& call, double eps, bool rms) {
  if (call.inputs.size() != 2 || !outputs_first(call, 1)) return false;
  const TileIn &dy = call.inputs[0], &x = call.inputs[1];
  const int lead = static_cast<int>(x.shape.size()) - 1;
  if (lead < 1 || dy.shape != x.shape || static_cast<int>(call.vars.size()) < 1 + lead ||
      !nested_full(call, 1 + lead))
    return false;
  const int64_t n = x.shape[lead];
  const Span j = call.vars[0];
  std::vector<Span> rows, cols;
  for (int d = 0; d < lead; ++d) rows.push_back(call.vars[1 + d]);
  std::vector<Span> xbox = rows, dybox = rows;
  xbox.push_back(all(n));
  dybox.push_back(j);
  if (!holds(x, xbox) || !holds(dy, dybox)) return false;
  std::vector<double> acc(j.size(), 0.0);
  std::vector<int64_t> at(lead + 1);
  for (int d = 0; d < lead; ++d) at[d] = rows[d].lo;
  while (true) {
    at[lead] = 0;
    const float* xr = element(x, at);
    at[lead] = j.lo;
    const float* dr = element(dy, at);
    double mu = 0, rstd;
    if (rms) rstd = rms_inverse(xr, n, eps);
    else row_stats(xr, n, eps, &mu, &rstd);
    for (int64_t c = j.lo; c <= j.hi; ++c) acc[c - j.lo] += static_cast<double>(dr[c - j.lo]) * (xr[c] - mu) * rstd;
    int d = lead - 1;
    while (d >= 0 && at[d] == rows[d].hi) at[d] = rows[d].lo, --d;
    if (d < 0) break;
    ++at[d];
  }
  for (int64_t c = 0; c < j.size(); ++c) call.out[c] = static_cast<float>(acc[c]);
  return true;
}

}  // namespace

bool layer_norm_grad_gamma(const TileCall& call, const Attrs& attrs) {
  const double eps = attrs.num("eps", 1e-5);
  return attrs.ok() && norm_grad_gamma(call, eps, false);
}

bool rms_norm_grad_gamma(const TileCall& call, const Attrs& attrs) {
  const double eps = attrs.num("eps", 1e-6);
  return attrs.ok() && norm_grad_gamma(call, eps, true);
}

// ----- scratch sizes

int64_t accumulator_scratch(const TileCall& call, const Attrs&) {
  for (int v : call.output_vars)
    if (v < 0 || static_cast<size_t>(v) >= call.vars.size()) return 0;
  return scratch_piece(output_size(call) * static_cast<int64_t>(sizeof(double)));
}

int64_t row_scratch(const TileCall& call, const Attrs&) {
  // row_layout's conditions that the call alone decides (the rest needs the data).
  const int r = static_cast<int>(call.output_vars.size());
  if (call.inputs.size() != 1 || r < 1 || !outputs_first(call, r)) return 0;
  return scratch_piece(call.extents[r - 1] * static_cast<int64_t>(sizeof(float)));
}

}  // namespace tilewise::kernels::tile

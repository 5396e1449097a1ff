// Element-wise kernels: each output element from the inputs read at the output index, or at a
// subset of its dimensions (a broadcast bias). The block is walked row by row over the last output
// dimension; the per-element function is a lambda inlined into a loop the compiler vectorises when
// every input advances by one element along the row.
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {
namespace {

/// Input `input` read with its dimension d at output dimension at[d].
struct Read {
  int input = 0;
  std::vector<int> at;
};

/// Input `input` read exactly at the output index (all of its dimensions, in order).
Read aligned(const TileCall& call, int input) {
  Read r{input, {}};
  for (size_t d = 0; d < call.output_vars.size(); ++d) r.at.push_back(static_cast<int>(d));
  return r;
}

// The call's variables are its output dimensions, in order (no reduction).
bool pure_map(const TileCall& call, size_t inputs) {
  if (call.inputs.size() != inputs || call.output_vars.size() != call.vars.size()) return false;
  for (size_t p = 0; p < call.output_vars.size(); ++p) {
    if (call.output_vars[p] != static_cast<int>(p)) return false;
  }
  return true;
}

/// Corner pointers and per-output-dimension strides of the reads, checked against the regions.
struct Walk {
  std::vector<const float*> base;
  std::vector<std::vector<int64_t>> stride;  // [read][output dim]
};

bool plan_walk(const TileCall& call, const std::vector<Read>& reads, Walk* w) {
  const size_t rank = call.output_vars.size();
  for (const Read& r : reads) {
    if (r.input < 0 || static_cast<size_t>(r.input) >= call.inputs.size()) return false;
    const TileIn& in = call.inputs[r.input];
    if (in.shape.size() != r.at.size()) return false;
    std::vector<Span> box;
    std::vector<int64_t> corner;
    for (size_t d = 0; d < r.at.size(); ++d) {
      if (r.at[d] < 0 || static_cast<size_t>(r.at[d]) >= rank) return false;
      const Span& s = call.vars[call.output_vars[r.at[d]]];
      if (s.hi >= in.shape[d]) return false;  // element-wise reads never fall in padding
      box.push_back(s);
      corner.push_back(s.lo);
    }
    if (!holds(in, box)) return false;
    std::vector<int64_t> rs = region_strides(in), st(rank, 0);
    for (size_t d = 0; d < r.at.size(); ++d) st[r.at[d]] += rs[d];
    w->base.push_back(element(in, corner));
    w->stride.push_back(std::move(st));
  }
  return true;
}

// Calls row(out, pointers, inner strides, n) for every row of the output block (a rank-0 output is
// one row of one element). `row` is a template argument: no indirect call per row.
template <class Row>
void for_rows(const TileCall& call, const Walk& w, Row&& row) {
  const int rank = static_cast<int>(call.output_vars.size());
  const size_t nr = w.base.size();
  std::vector<const float*> p(w.base);
  std::vector<int64_t> inner(nr, 0);
  const int64_t n = rank == 0 ? 1 : call.vars[call.output_vars[rank - 1]].size();
  for (size_t r = 0; r < nr; ++r) inner[r] = rank == 0 ? 0 : w.stride[r][rank - 1];
  std::vector<int64_t> idx(rank > 0 ? rank - 1 : 0, 0);
  float* out = call.out;
  while (true) {
    row(out, p.data(), inner.data(), n);
    out += n;
    int d = rank - 1;
    while (d > 0) {
      --d;
      int64_t size = call.vars[call.output_vars[d]].size();
      if (++idx[d] < size) {
        for (size_t r = 0; r < nr; ++r) p[r] += w.stride[r][d];
        break;
      }
      for (size_t r = 0; r < nr; ++r) p[r] -= w.stride[r][d] * (size - 1);
      idx[d] = 0;
      if (d == 0) return;
    }
    if (rank <= 1) return;
  }
}

template <class F, size_t... I>
void map_row(float* out, const float* const* p, const int64_t* inner, int64_t n, F& f, std::index_sequence<I...>) {
  bool unit = ((inner[I] == 1) && ... && true);
  if (unit) {
    // Local copies: the compiler then sees the row pointers do not change inside the loop.
    std::array<const float*, sizeof...(I)> q{p[I]...};
    for (int64_t t = 0; t < n; ++t) out[t] = f(q[I][t]...);
  } else {
    for (int64_t t = 0; t < n; ++t) out[t] = f(p[I][t * inner[I]]...);
  }
}

/// out = f(reads...) over the block; false (nothing written) when a region lacks what is read.
template <size_t N, class F>
bool map(const TileCall& call, const std::array<Read, N>& reads, F f) {
  Walk w;
  if (!plan_walk(call, std::vector<Read>(reads.begin(), reads.end()), &w)) return false;
  for_rows(call, w, [&](float* out, const float* const* p, const int64_t* inner, int64_t n) {
    map_row(out, p, inner, n, f, std::make_index_sequence<N>());
  });
  return true;
}

// Every input read at the output index.
template <size_t N, class F>
bool map_aligned(const TileCall& call, F f) {
  if (!pure_map(call, N)) return false;
  std::array<Read, N> reads;
  for (size_t i = 0; i < N; ++i) reads[i] = aligned(call, static_cast<int>(i));
  return map<N>(call, reads, f);
}

}  // namespace

bool identity(const TileCall& call, const Attrs&) {
  return map_aligned<1>(call, [](float x) { return x; });
}

bool neg(const TileCall& call, const Attrs&) {
  return map_aligned<1>(call, [](float x) { return -x; });
}

bool relu(const TileCall& call, const Attrs&) {
  return map_aligned<1>(call, [](float x) { return x > 0.0f ? x : 0.0f; });
}

bool relu_grad(const TileCall& call, const Attrs&) {  // (dy, x)
  return map_aligned<2>(call, [](float dy, float x) { return x > 0.0f ? dy : 0.0f; });
}

bool scale(const TileCall& call, const Attrs& attrs) {
  const float alpha = static_cast<float>(attrs.num("alpha", 1.0)), beta = static_cast<float>(attrs.num("beta", 0.0));
  return attrs.ok() && map_aligned<1>(call, [=](float x) { return alpha * x + beta; });
}

bool add(const TileCall& call, const Attrs&) {
  return map_aligned<2>(call, [](float a, float b) { return a + b; });
}

bool sub(const TileCall& call, const Attrs&) {
  return map_aligned<2>(call, [](float a, float b) { return a - b; });
}

bool mul(const TileCall& call, const Attrs&) {
  return map_aligned<2>(call, [](float a, float b) { return a * b; });
}

bool div(const TileCall& call, const Attrs&) {
  return map_aligned<2>(call, [](float a, float b) { return a / b; });
}

bool axpy(const TileCall& call, const Attrs& attrs) {
  const float alpha = static_cast<float>(attrs.num("alpha", 1.0));
  return attrs.ok() && map_aligned<2>(call, [=](float x, float y) { return alpha * x + y; });
}

bool sgd(const TileCall& call, const Attrs& attrs) {  // (w, g)
  const float lr = static_cast<float>(attrs.num("lr", 0.01)), wd = static_cast<float>(attrs.num("weight_decay", 0.0));
  return attrs.ok() && map_aligned<2>(call, [=](float w, float g) { return w - lr * (g + wd * w); });
}

bool momentum_velocity(const TileCall& call, const Attrs& attrs) {  // (v, g)
  const float mom = static_cast<float>(attrs.num("momentum", 0.9));
  const float keep = static_cast<float>(1.0 - attrs.num("dampening", 0.0));
  return attrs.ok() && map_aligned<2>(call, [=](float v, float g) { return mom * v + keep * g; });
}

bool momentum_weight(const TileCall& call, const Attrs& attrs) {  // (w, v)
  const float lr = static_cast<float>(attrs.num("lr", 0.01));
  return attrs.ok() && map_aligned<2>(call, [=](float w, float v) { return w - lr * v; });
}

// Reads nothing of its input (the seed of a backward pass).
bool fill_like(const TileCall& call, const Attrs& attrs) {
  const float value = static_cast<float>(attrs.num("value", 1.0));
  if (!attrs.ok() || !pure_map(call, 1)) return false;
  std::fill(call.out, call.out + output_size(call), value);
  return true;
}

// add_<n>: the sum of n same-shape inputs, accumulated one input at a time along each row.
bool add_n(const TileCall& call, const Attrs&) {
  const size_t n = call.inputs.size();
  if (n == 0 || !pure_map(call, n)) return false;
  std::vector<Read> reads;
  for (size_t i = 0; i < n; ++i) reads.push_back(aligned(call, static_cast<int>(i)));
  Walk w;
  if (!plan_walk(call, reads, &w)) return false;
  for_rows(call, w, [n](float* out, const float* const* p, const int64_t* inner, int64_t len) {
    for (size_t i = 0; i < n; ++i) {
      const float* x = p[i];
      const int64_t s = inner[i];
      if (i == 0) {
        for (int64_t t = 0; t < len; ++t) out[t] = x[t * s];
      } else if (s == 1) {
        for (int64_t t = 0; t < len; ++t) out[t] += x[t];
      } else {
        for (int64_t t = 0; t < len; ++t) out[t] += x[t * s];
      }
    }
  });
  return true;
}

// ---- broadcasts: the second input indexed by one output dimension.

namespace {
template <class F>
bool broadcast(const TileCall& call, int dim, F f) {
  const int rank = static_cast<int>(call.output_vars.size());
  if (!pure_map(call, 2) || dim < 0 || dim >= rank) return false;
  return map<2>(call, {aligned(call, 0), Read{1, {dim}}}, f);
}
const auto plus = [](float x, float b) { return x + b; };
const auto times = [](float x, float b) { return x * b; };
}  // namespace

bool bias_add(const TileCall& call, const Attrs&) {
  return broadcast(call, static_cast<int>(call.output_vars.size()) - 1, plus);
}
bool bias_add_channel(const TileCall& call, const Attrs&) { return broadcast(call, 1, plus); }
bool add_row(const TileCall& call, const Attrs&) { return vars_are(call, {"i", "j"}) && broadcast(call, 1, plus); }
bool add_col(const TileCall& call, const Attrs&) { return vars_are(call, {"i", "j"}) && broadcast(call, 0, plus); }
bool mul_row(const TileCall& call, const Attrs&) { return vars_are(call, {"i", "j"}) && broadcast(call, 1, times); }
bool mul_col(const TileCall& call, const Attrs&) { return vars_are(call, {"i", "j"}) && broadcast(call, 0, times); }

// 2 (a - b) dy / numel(a), dy a rank-0 tensor.
bool mse_loss_backward(const TileCall& call, const Attrs&) {
  if (!pure_map(call, 3) || !call.inputs[2].shape.empty()) return false;
  double numel = 1;
  for (int64_t e : call.inputs[0].shape) numel *= static_cast<double>(e);
  const float inv = static_cast<float>(1.0 / numel);
  return map<3>(call, {aligned(call, 0), aligned(call, 1), Read{2, {}}},
                [=](float a, float b, float dy) { return 2.0f * (a - b) * dy * inv; });
}

}  // namespace tilewise::kernels::tile

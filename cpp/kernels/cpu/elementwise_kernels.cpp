// Element-wise kernels: each output element from the inputs read at the output index, at a subset
// of its dimensions (a broadcast bias), at a shifted index (an LSTM gate quarter) or at a constant
// one (a time step). The block is walked row by row over the last output dimension, dimensions
// contiguous everywhere merged into longer rows; the per-element function is a lambda inlined into
// a loop the compiler vectorises when every input advances by one element along the row (that loop
// built for AVX-512, AVX2 and baseline x86-64, the CPU's best chosen at run time: simd_map.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/cpu/fast_math.h"
#include "kernels/cpu/simd_map.h"
#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {
namespace {

/// Input `input` read with its dimension d at output index at[d] + offset[d] (offset may be
/// empty: all 0), or at the constant index offset[d] when at[d] is kConstant.
struct Read {
  int input = 0;
  std::vector<int> at;
  std::vector<int64_t> offset;
};
constexpr int kConstant = -1;

/// Input `input` read exactly at the output index (all of its dimensions, in order).
Read aligned(const TileCall& call, int input) {
  Read r{input, {}, {}};
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

/// Corner pointers and per-dimension strides of the reads over the output block's dimensions,
/// with dimensions that are contiguous in the output and in every read merged (an aligned
/// element-wise op on whole rows walks one long row).
struct Walk {
  std::vector<int64_t> size;                 // [dim]
  std::vector<const float*> base;            // [read]
  std::vector<std::vector<int64_t>> stride;  // [read][dim]
};

bool plan_walk(const TileCall& call, const std::vector<Read>& reads, Walk* w) {
  const size_t rank = call.output_vars.size();
  for (int v : call.output_vars) w->size.push_back(call.vars[v].size());
  for (const Read& r : reads) {
    if (r.input < 0 || static_cast<size_t>(r.input) >= call.inputs.size()) return false;
    const TileIn& in = call.inputs[r.input];
    if (in.shape.size() != r.at.size()) return false;
    std::vector<Span> box;
    std::vector<int64_t> corner;
    if (!r.offset.empty() && r.offset.size() != r.at.size()) return false;
    for (size_t d = 0; d < r.at.size(); ++d) {
      const int64_t off = r.offset.empty() ? 0 : r.offset[d];
      if (r.at[d] < kConstant || r.at[d] >= static_cast<int>(rank)) return false;
      Span s{off, off};
      if (r.at[d] != kConstant) {
        const Span& v = call.vars[call.output_vars[r.at[d]]];
        s = {v.lo + off, v.hi + off};
      }
      if (s.lo < 0 || s.hi >= in.shape[d]) return false;  // these reads never fall in padding
      box.push_back(s);
      corner.push_back(s.lo);
    }
    if (!holds(in, box)) return false;
    std::vector<int64_t> rs = region_strides(in), st(rank, 0);
    for (size_t d = 0; d < r.at.size(); ++d) {
      if (r.at[d] != kConstant) st[r.at[d]] += rs[d];
    }
    w->base.push_back(element(in, corner));
    w->stride.push_back(std::move(st));
  }
  // Merge dimension d into d + 1 where every read steps over d as over a full row of d + 1.
  for (int d = static_cast<int>(w->size.size()) - 2; d >= 0; --d) {
    bool merge = true;
    for (const auto& st : w->stride) merge = merge && st[d] == st[d + 1] * w->size[d + 1];
    if (!merge) continue;
    w->size[d + 1] *= w->size[d];
    w->size.erase(w->size.begin() + d);
    for (auto& st : w->stride) st.erase(st.begin() + d);
  }
  return true;
}

// Calls row(out, pointers, inner strides, n) for every row of the output block (a rank-0 output is
// one row of one element). `row` is a template argument: no indirect call per row.
template <class Row>
void for_rows(const TileCall& call, const Walk& w, Row&& row) {
  const int rank = static_cast<int>(w.size.size());
  const size_t nr = w.base.size();
  std::vector<const float*> p(w.base);
  std::vector<int64_t> inner(nr, 0);
  const int64_t n = rank == 0 ? 1 : w.size[rank - 1];
  for (size_t r = 0; r < nr; ++r) inner[r] = rank == 0 ? 0 : w.stride[r][rank - 1];
  std::vector<int64_t> idx(rank > 0 ? rank - 1 : 0, 0);
  float* out = call.out;
  while (true) {
    row(out, p.data(), inner.data(), n);
    out += n;
    int d = rank - 1;
    while (d > 0) {
      --d;
      const int64_t size = w.size[d];
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
    simd::map_row(out, n, f, q[I]...);
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
  // NaN passes through, as in the interpreter's max(x, 0) and torch.relu.
  return map_aligned<1>(call, [](float x) { return x > 0.0f || std::isnan(x) ? x : 0.0f; });
}

bool relu_grad(const TileCall& call, const Attrs&) {  // (dy, x)
  // dy where x is NaN, as torch's threshold_backward (NaN <= 0 is false).
  return map_aligned<2>(call, [](float dy, float x) { return x <= 0.0f ? 0.0f : dy; });
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

// add_<n>: the sum of n same-shape inputs, accumulated one input at a time, block by block.
bool add_n(const TileCall& call, const Attrs&) {
  const size_t n = call.inputs.size();
  if (n == 0 || !pure_map(call, n)) return false;
  std::vector<Read> reads;
  for (size_t i = 0; i < n; ++i) reads.push_back(aligned(call, static_cast<int>(i)));
  Walk w;
  if (!plan_walk(call, reads, &w)) return false;
  for_rows(call, w, [n](float* out, const float* const* p, const int64_t* inner, int64_t len) {
    bool unit = true;
    for (size_t i = 0; i < n; ++i) unit = unit && inner[i] == 1;
    if (unit) {
      // 1 MiB output blocks (about an L2) stay cached while every input is added in, and each input
      // is read in long runs: row-sized runs of 20 interleaved inputs ran at half numpy's speed
      // (add_20 of 4096 x 1024: 34 ms for 4 KiB runs, 15 ms here), the prefetcher losing track.
      constexpr int64_t kBlock = 262144;
      for (int64_t t0 = 0; t0 < len; t0 += kBlock) {
        const int64_t m = std::min(kBlock, len - t0);
        float* o = out + t0;
        const float* x0 = p[0] + t0;
        std::copy(x0, x0 + m, o);
        for (size_t i = 1; i < n; ++i) {
          const float* x = p[i] + t0;
          for (int64_t t = 0; t < m; ++t) o[t] += x[t];
        }
      }
      return;
    }
    for (int64_t t = 0; t < len; ++t) out[t] = p[0][t * inner[0]];
    for (size_t i = 1; i < n; ++i) {
      for (int64_t t = 0; t < len; ++t) out[t] += p[i][t * inner[i]];
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
  return map<2>(call, {aligned(call, 0), Read{1, {dim}, {}}}, f);
}
const auto plus = [](float x, float b) { return x + b; };
const auto times = [](float x, float b) { return x * b; };
}  // namespace

bool bias_add(const TileCall& call, const Attrs&) {
  return broadcast(call, static_cast<int>(call.output_vars.size()) - 1, plus);
}
bool bias_add_channel(const TileCall& call, const Attrs&) { return broadcast(call, 1, plus); }
bool add_row(const TileCall& call, const Attrs&) { return broadcast(call, 1, plus); }
bool add_col(const TileCall& call, const Attrs&) { return broadcast(call, 0, plus); }
bool mul_row(const TileCall& call, const Attrs&) { return broadcast(call, 1, times); }
bool mul_col(const TileCall& call, const Attrs&) { return broadcast(call, 0, times); }

// 2 (a - b) dy / numel(a), dy a rank-0 tensor.
bool mse_loss_backward(const TileCall& call, const Attrs&) {
  if (!pure_map(call, 3) || !call.inputs[2].shape.empty()) return false;
  double numel = 1;
  for (int64_t e : call.inputs[0].shape) numel *= static_cast<double>(e);
  const float inv = static_cast<float>(1.0 / numel);
  return map<3>(call, {aligned(call, 0), aligned(call, 1), Read{2, {}, {}}},
                [=](float a, float b, float dy) { return 2.0f * (a - b) * dy * inv; });
}

namespace {
// f(a, b, dy) over a and b of the output's shape and dy a rank-0 tensor (a loss's gradient).
template <class F>
bool loss_backward(const TileCall& call, F f) {
  if (!pure_map(call, 3) || !call.inputs[2].shape.empty()) return false;
  return map<3>(call, {aligned(call, 0), aligned(call, 1), Read{2, {}, {}}}, f);
}

float numel_of(const TileCall& call) {
  double n = 1;
  for (int64_t e : call.inputs[0].shape) n *= static_cast<double>(e);
  return static_cast<float>(n);
}
}  // namespace

// sign(a - b) dy / numel.
bool l1_loss_backward(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 3) return false;
  const float n = numel_of(call);
  return loss_backward(call, [=](float a, float b, float dy) {
    return (static_cast<float>(a > b) - static_cast<float>(a < b)) * dy / n;
  });
}

// (d / beta where |d| < beta, else sign(d)) dy / numel, d = a - b.
bool smooth_l1_loss_backward(const TileCall& call, const Attrs& attrs) {
  const float beta = static_cast<float>(attrs.num("beta", 1.0));
  if (!attrs.ok() || call.inputs.size() != 3) return false;
  const float n = numel_of(call);
  return loss_backward(call, [=](float a, float b, float dy) {
    const float d = a - b;
    const float g = std::fabs(d) < beta ? d / beta : static_cast<float>(d > 0) - static_cast<float>(d < 0);
    return g * dy / n;
  });
}

// (sigmoid(x) - t) dy / numel.
bool bce_with_logits_backward(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 3) return false;
  const float n = numel_of(call);
  return loss_backward(call, [=](float x, float t, float dy) { return (1.0f / (1.0f + std::exp(-x)) - t) * dy / n; });
}

// -other dy / batch: nll_loss's gradient with respect to either operand, dy a rank-0 tensor.
bool nll_loss_backward(const TileCall& call, const Attrs&) {
  if (!pure_map(call, 2) || !call.inputs[1].shape.empty() || call.inputs[0].shape.size() != 2) return false;
  const float batch = static_cast<float>(call.inputs[0].shape[0]);
  return map<2>(call, {aligned(call, 0), Read{1, {}, {}}}, [=](float o, float dy) { return -o * dy / batch; });
}

// ---- shifted and constant reads: a time step of a sequence, the quarters of LSTM gates.

// x[..., index, ...] along `axis`: that input dimension read at a constant.
bool select(const TileCall& call, const Attrs& attrs) {
  const int64_t axis = attrs.integer("axis", 0), index = attrs.integer("index", 0);
  if (!attrs.ok() || !pure_map(call, 1)) return false;
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  const int ax = static_cast<int>(axis < 0 ? axis + nd : axis);
  if (ax < 0 || ax >= nd || nd != static_cast<int>(call.output_vars.size()) + 1) return false;
  Read r{0, {}, std::vector<int64_t>(nd, 0)};
  for (int d = 0; d < nd; ++d) r.at.push_back(d == ax ? kConstant : (d < ax ? d : d - 1));
  r.offset[ax] = index;
  return map<1>(call, {r}, [](float x) { return x; });
}

namespace {
inline float sigmoid(float x) { return 1.0f / (1.0f + fast::exp(-x)); }

// The LSTM ops' layout: variables b, j over (batch, hidden); `gates` (batch, 4 hidden) holds the
// quarters i, f, g, o; hidden = the second extent of input `hidden_of`.
bool lstm_layout(const TileCall& call, size_t inputs, int gates, int hidden_of, int64_t* hidden) {
  if (!pure_map(call, inputs) || call.vars.size() != 2) return false;
  const TileIn &g = call.inputs[gates], &h = call.inputs[hidden_of];
  if (g.shape.size() != 2 || h.shape.size() != 2) return false;
  *hidden = h.shape[1];
  return g.shape[1] == 4 * *hidden;
}

// gates read at quarter q of the current column (or third q, for the GRU's).
Read quarter(int gates, int64_t q, int64_t hidden) { return Read{gates, {0, 1}, {0, q * hidden}}; }
}  // namespace

// c' = sigmoid(f) c + sigmoid(i) tanh(g).
bool lstm_cell(const TileCall& call, const Attrs&) {  // (gates, c)
  int64_t n = 0;
  if (!lstm_layout(call, 2, 0, 1, &n)) return false;
  return map<4>(call, {quarter(0, 1, n), aligned(call, 1), quarter(0, 0, n), quarter(0, 2, n)},
                [](float f, float c, float i, float g) { return sigmoid(f) * c + sigmoid(i) * fast::tanh(g); });
}

// h' = sigmoid(o) tanh(c').
bool lstm_hidden(const TileCall& call, const Attrs&) {  // (gates, c_new)
  int64_t n = 0;
  if (!lstm_layout(call, 2, 0, 1, &n)) return false;
  return map<2>(call, {quarter(0, 3, n), aligned(call, 1)}, [](float o, float c) { return sigmoid(o) * fast::tanh(c); });
}

// dc = dy sigmoid(f).
bool lstm_cell_grad_c(const TileCall& call, const Attrs&) {  // (dy, gates)
  int64_t n = 0;
  if (!lstm_layout(call, 2, 1, 0, &n)) return false;
  return map<2>(call, {aligned(call, 0), quarter(1, 1, n)}, [](float dy, float f) { return dy * sigmoid(f); });
}

// dc' = dy sigmoid(o) (1 - tanh(c')^2).
bool lstm_hidden_grad_c(const TileCall& call, const Attrs&) {  // (dy, gates, c_new)
  int64_t n = 0;
  if (!lstm_layout(call, 3, 1, 2, &n)) return false;
  return map<3>(call, {aligned(call, 0), quarter(1, 3, n), aligned(call, 2)}, [](float dy, float o, float c) {
    const float t = fast::tanh(c);
    return dy * sigmoid(o) * (1.0f - t * t);
  });
}


// ----- activations, their gradients and the other element-wise ops of tdl_ops: each is the op's
// TDL formula in float32 (NaN and Inf propagate as they do there: max/min of a NaN is NaN, a
// comparison with NaN is false, 0 * Inf is NaN), a few rewritten for accuracy (log1p, expm1).

namespace {
constexpr float kSqrt1_2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;
constexpr float kTwoOverSqrtPi = 1.12837916709551257f;
constexpr float kGeluC = 0.79788456080286536f;  // sqrt(2 / pi)
inline float nan_max(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
inline float nan_min(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
inline float logistic(float x) { return 1.0f / (1.0f + fast::exp(-x)); }
inline float truth(bool b) { return b ? 1.0f : 0.0f; }
}  // namespace

#define TW_UNARY(name, expr) \
  bool name(const TileCall& call, const Attrs&) { return map_aligned<1>(call, [](float x) { return expr; }); }
#define TW_BINARY(name, a, b, expr) \
  bool name(const TileCall& call, const Attrs&) { return map_aligned<2>(call, [](float a, float b) { return expr; }); }

TW_UNARY(exp_, std::exp(x))
TW_UNARY(log_, std::log(x))
TW_UNARY(sqrt_, std::sqrt(x))
TW_UNARY(rsqrt, 1.0f / std::sqrt(x))
TW_UNARY(reciprocal, 1.0f / x)
TW_UNARY(abs_, std::fabs(x))
TW_UNARY(square, x * x)
TW_UNARY(sign, truth(x > 0) - truth(x < 0))
TW_UNARY(erf_, std::erf(x))
TW_UNARY(sigmoid, logistic(x))
TW_UNARY(tanh_, std::tanh(x))
TW_UNARY(silu, x * logistic(x))
TW_UNARY(gelu, x * fast::normal_cdf(x))
TW_UNARY(gelu_tanh, 0.5f * x * (1.0f + fast::tanh(kGeluC * (x + 0.044715f * x * x * x))))
TW_UNARY(softplus, nan_max(x, 0.0f) + std::log1p(std::exp(-std::fabs(x))))
TW_UNARY(relu6, nan_min(nan_max(x, 0.0f), 6.0f))
TW_UNARY(step_count, x + 1.0f)
TW_BINARY(sqrt_grad, dy, y, 0.5f * dy / y)
TW_BINARY(rsqrt_grad, dy, y, -0.5f * dy * y * y * y)
TW_BINARY(reciprocal_grad, dy, y, -dy * y * y)
TW_BINARY(abs_grad, dy, x, dy * (truth(x > 0) - truth(x < 0)))
TW_BINARY(square_grad, dy, x, 2.0f * dy * x)
TW_BINARY(erf_grad, dy, x, dy * kTwoOverSqrtPi * std::exp(-x * x))
TW_BINARY(sigmoid_grad, dy, y, dy * y * (1.0f - y))
TW_BINARY(tanh_grad, dy, y, dy * (1.0f - y * y))
TW_BINARY(relu6_grad, dy, x, x > 0 && x < 6 ? dy : 0.0f)  // 0 at NaN, as torch's vectorised hardtanh_backward
TW_BINARY(softplus_grad, dy, x, dy * logistic(x))
TW_BINARY(maximum, a, b, nan_max(a, b))
TW_BINARY(minimum, a, b, nan_min(a, b))
TW_BINARY(squared_difference, a, b, (a - b) * (a - b))

#undef TW_UNARY
#undef TW_BINARY

bool silu_grad(const TileCall& call, const Attrs&) {  // (dy, x)
  return map_aligned<2>(call, [](float dy, float x) {
    const float s = logistic(x);
    return dy * s * (1.0f + x * (1.0f - s));
  });
}

bool gelu_grad(const TileCall& call, const Attrs&) {  // (dy, x)
  return map_aligned<2>(call, [](float dy, float x) {
    return dy * (fast::normal_cdf(x) + x * fast::exp(-0.5f * x * x) * kInvSqrt2Pi);
  });
}

bool gelu_tanh_grad(const TileCall& call, const Attrs&) {  // (dy, x)
  return map_aligned<2>(call, [](float dy, float x) {
    const float t = fast::tanh(kGeluC * (x + 0.044715f * x * x * x));
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * x * x));
  });
}

bool squared_difference_grad(const TileCall& call, const Attrs&) {  // (dy, a, b)
  return map_aligned<3>(call, [](float dy, float a, float b) { return 2.0f * dy * (a - b); });
}

bool maximum_grad(const TileCall& call, const Attrs&) {  // (dy, a, b)
  return map_aligned<3>(call, [](float dy, float a, float b) { return dy * (truth(a > b) + 0.5f * truth(a == b)); });
}

bool div_grad_divisor(const TileCall& call, const Attrs&) {  // (dy, a, b)
  return map_aligned<3>(call, [](float dy, float a, float b) { return -dy * a / (b * b); });
}

bool where_(const TileCall& call, const Attrs&) {  // (cond, a, b): a where cond != 0 (NaN counts as true)
  return map_aligned<3>(call, [](float c, float a, float b) { return c != 0.0f ? a : b; });
}

bool where_grad(const TileCall& call, const Attrs& attrs) {  // (cond, dy)
  const bool first = attrs.integer("branch", 0) == 0;
  return attrs.ok() && map_aligned<2>(call, [=](float c, float dy) { return (c != 0.0f) == first ? dy : 0.0f; });
}

bool leaky_relu(const TileCall& call, const Attrs& attrs) {
  const float slope = static_cast<float>(attrs.num("slope", 0.01));
  return attrs.ok() && map_aligned<1>(call, [=](float x) { return x > 0 ? x : slope * x; });
}

bool leaky_relu_grad(const TileCall& call, const Attrs& attrs) {  // (dy, x)
  const float slope = static_cast<float>(attrs.num("slope", 0.01));
  return attrs.ok() && map_aligned<2>(call, [=](float dy, float x) { return x > 0 ? dy : slope * dy; });
}

bool elu(const TileCall& call, const Attrs& attrs) {
  const float alpha = static_cast<float>(attrs.num("alpha", 1.0));
  return attrs.ok() && map_aligned<1>(call, [=](float x) { return x > 0 ? x : alpha * std::expm1(x); });
}

bool elu_grad(const TileCall& call, const Attrs& attrs) {  // (dy, x)
  const float alpha = static_cast<float>(attrs.num("alpha", 1.0));
  return attrs.ok() && map_aligned<2>(call, [=](float dy, float x) { return x > 0 ? dy : dy * alpha * std::exp(x); });
}

bool clip(const TileCall& call, const Attrs& attrs) {
  const float lo = static_cast<float>(attrs.num("lo", -1.0)), hi = static_cast<float>(attrs.num("hi", 1.0));
  return attrs.ok() && map_aligned<1>(call, [=](float x) { return nan_min(nan_max(x, lo), hi); });
}

bool clip_grad(const TileCall& call, const Attrs& attrs) {  // (dy, x)
  const float lo = static_cast<float>(attrs.num("lo", -1.0)), hi = static_cast<float>(attrs.num("hi", 1.0));
  return attrs.ok() && map_aligned<2>(call, [=](float dy, float x) { return dy * truth(x >= lo) * truth(x <= hi); });
}

// torch's hardtanh_backward: 0 at and beyond the bounds (clip_grad keeps them, as torch.clamp), 0 at NaN
// (its vectorised kernel's answer; its scalar tail's is dy).
bool hardtanh_grad(const TileCall& call, const Attrs& attrs) {  // (dy, x)
  const float lo = static_cast<float>(attrs.num("lo", -1.0)), hi = static_cast<float>(attrs.num("hi", 1.0));
  return attrs.ok() && map_aligned<2>(call, [=](float dy, float x) { return x > lo && x < hi ? dy : 0.0f; });
}

bool power(const TileCall& call, const Attrs& attrs) {
  const float e = static_cast<float>(attrs.num("exponent", 2.0));
  return attrs.ok() && map_aligned<1>(call, [=](float x) { return std::pow(x, e); });
}

bool power_grad(const TileCall& call, const Attrs& attrs) {  // (dy, x)
  const float e = static_cast<float>(attrs.num("exponent", 2.0));
  return attrs.ok() && map_aligned<2>(call, [=](float dy, float x) { return dy * e * std::pow(x, e - 1.0f); });
}

bool dropout(const TileCall& call, const Attrs& attrs) {  // (x, mask)
  const double p = attrs.num("p", 0.5);
  const float keep = static_cast<float>(1.0 / (1.0 - p));
  return attrs.ok() && p < 1.0 && map_aligned<2>(call, [=](float x, float m) { return x * m * keep; });
}

bool adam_m(const TileCall& call, const Attrs& attrs) {  // (m, g)
  const double b = attrs.num("beta1", 0.9);
  const float keep = static_cast<float>(b), take = static_cast<float>(1.0 - b);
  return attrs.ok() && map_aligned<2>(call, [=](float m, float g) { return keep * m + take * g; });
}

bool adam_v(const TileCall& call, const Attrs& attrs) {  // (v, g)
  const double b = attrs.num("beta2", 0.999);
  const float keep = static_cast<float>(b), take = static_cast<float>(1.0 - b);
  return attrs.ok() && map_aligned<2>(call, [=](float v, float g) { return keep * v + take * g * g; });
}

bool rmsprop_sq(const TileCall& call, const Attrs& attrs) {  // (s, g)
  const double a = attrs.num("alpha", 0.99);
  const float keep = static_cast<float>(a), take = static_cast<float>(1.0 - a);
  return attrs.ok() && map_aligned<2>(call, [=](float s, float g) { return keep * s + take * g * g; });
}

bool rmsprop_weight(const TileCall& call, const Attrs& attrs) {  // (w, g, s)
  const float lr = static_cast<float>(attrs.num("lr", 0.01)), eps = static_cast<float>(attrs.num("eps", 1e-8));
  return attrs.ok() && map_aligned<3>(call, [=](float w, float g, float s) { return w - lr * g / (std::sqrt(s) + eps); });
}

bool mse_loss_grad(const TileCall& call, const Attrs&) {  // (a, b): 2 (a - b) / numel
  if (call.inputs.size() != 2) return false;
  int64_t n = 1;
  for (int64_t d : call.inputs[0].shape) n *= d;
  const float scale = static_cast<float>(2.0 / static_cast<double>(n));
  return map_aligned<2>(call, [=](float a, float b) { return scale * (a - b); });
}

// (w, m, v, t): Adam's update with the bias corrections of step t = t[0], computed once per call
// in double as the description does (1 / (1 - exp(t log beta)); 1 for beta = 0).
bool adam_weight(const TileCall& call, const Attrs& attrs) {
  const double lr = attrs.num("lr", 1e-3), b1 = attrs.num("beta1", 0.9), b2 = attrs.num("beta2", 0.999);
  const double eps = attrs.num("eps", 1e-8), wd = attrs.num("weight_decay", 0.0);
  if (!attrs.ok() || !pure_map(call, 4)) return false;
  const TileIn& t = call.inputs[3];
  if (t.shape.size() != 1 || !holds(t, {{0, 0}})) return false;
  const double step = *element(t, {0});
  auto correction = [&](double beta) { return beta == 0.0 ? 1.0 : 1.0 / (1.0 - std::exp(step * std::log(beta))); };
  const float c1 = static_cast<float>(correction(b1)), c2 = static_cast<float>(correction(b2));
  const float flr = static_cast<float>(lr), feps = static_cast<float>(eps), fwd = static_cast<float>(wd);
  // t is read once above: the loop reads w, m, v at unit stride and vectorises (a stride-0 fourth
  // read made every row take the strided path, 8x slower than the moments' updates).
  std::array<Read, 3> reads = {aligned(call, 0), aligned(call, 1), aligned(call, 2)};
  return map<3>(call, reads, [=](float w, float m, float v) {
    return w - flr * (m * c1 / (std::sqrt(v * c2) + feps) + fwd * w);
  });
}

// ----- LSTM gate gradients: out (batch, 4 hidden), one formula per quarter [i | f | g | o] of the
// columns, each reading dy and the state at the column's offset inside its quarter (the
// description reads outside the tensors there, which the interpreter takes as 0: those terms vanish).

namespace {

// Calls f(b, column range [lo, hi] of quarter q) for the block's rows and its parts in each quarter.
template <class F>
void by_quarter(const TileCall& call, int64_t n, F&& f) {
  const Span b = call.vars[0], j = call.vars[1];
  for (int64_t q = 0; q < 4; ++q) {
    const int64_t lo = std::max(j.lo, q * n), hi = std::min(j.hi, q * n + n - 1);
    if (lo <= hi) f(b, q, lo, hi);
  }
}

bool gate_grad_layout(const TileCall& call, int gates, int64_t* n) {
  if (call.inputs.size() != 3 || call.vars.size() != 2 || call.output_vars != std::vector<int>{0, 1}) return false;
  const TileIn& g = call.inputs[gates];
  if (g.shape.size() != 2 || call.inputs[0].shape.size() != 2 || g.shape[1] % 4 != 0) return false;
  *n = g.shape[1] / 4;
  return call.inputs[0].shape[1] == *n && call.inputs[2].shape.size() == 2 && call.inputs[2].shape[1] == *n;
}

}  // namespace

// (dy, gates, c): [dy tanh(g) si' | dy c sf' | dy si (1 - tanh(g)^2) | 0].
bool lstm_cell_grad_gates(const TileCall& call, const Attrs&) {
  int64_t n = 0;
  if (!gate_grad_layout(call, 1, &n)) return false;
  const TileIn &dy = call.inputs[0], &gates = call.inputs[1], &c = call.inputs[2];
  bool ok = true;
  by_quarter(call, n, [&](Span b, int64_t q, int64_t lo, int64_t hi) {
    if (q == 3) return;
    const int64_t k = q * n;  // dy and c at column j - k
    ok = ok && holds(dy, {b, {lo - k, hi - k}}) && holds(gates, {b, {lo, hi}});
    if (q == 0) ok = ok && holds(gates, {b, {lo + 2 * n, hi + 2 * n}});
    if (q == 1) ok = ok && holds(c, {b, {lo - n, hi - n}});
    if (q == 2) ok = ok && holds(gates, {b, {lo - 2 * n, hi - 2 * n}});
  });
  if (!ok) return false;
  const int64_t width = call.vars[1].size();
  by_quarter(call, n, [&](Span b, int64_t q, int64_t lo, int64_t hi) {
    for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
      float* out = call.out + (bb - b.lo) * width + (lo - call.vars[1].lo);
      if (q == 3) {
        std::fill(out, out + (hi - lo + 1), 0.0f);
        continue;
      }
      // Row pointers found once per row (element() per column dominated the op): each quarter's
      // loop is then a plain map over contiguous columns that vectorises.
      const int64_t w = hi - lo + 1;
      const float* d = element(dy, {bb, lo - q * n});
      const float* s = element(gates, {bb, lo});
      if (q == 0) {
        auto f = [](float d, float s, float g) {
          const float si = sigmoid(s);
          return d * fast::tanh(g) * si * (1.0f - si);
        };
        simd::map_row(out, w, f, d, s, element(gates, {bb, lo + 2 * n}));
      } else if (q == 1) {
        auto f = [](float d, float s, float cc) {
          const float sf = sigmoid(s);
          return d * cc * sf * (1.0f - sf);
        };
        simd::map_row(out, w, f, d, s, element(c, {bb, lo - n}));
      } else {
        auto f = [](float d, float s, float i) {
          const float th = fast::tanh(s);
          return d * sigmoid(i) * (1.0f - th * th);
        };
        simd::map_row(out, w, f, d, s, element(gates, {bb, lo - 2 * n}));
      }
    }
  });
  return true;
}

// (dy, gates, c_new): [0 | 0 | 0 | dy tanh(c') so'].
bool lstm_hidden_grad_gates(const TileCall& call, const Attrs&) {
  int64_t n = 0;
  if (!gate_grad_layout(call, 1, &n)) return false;
  const TileIn &dy = call.inputs[0], &gates = call.inputs[1], &cn = call.inputs[2];
  bool ok = true;
  by_quarter(call, n, [&](Span b, int64_t q, int64_t lo, int64_t hi) {
    if (q == 3) ok = ok && holds(dy, {b, {lo - 3 * n, hi - 3 * n}}) && holds(cn, {b, {lo - 3 * n, hi - 3 * n}}) &&
                     holds(gates, {b, {lo, hi}});
  });
  if (!ok) return false;
  const int64_t width = call.vars[1].size();
  by_quarter(call, n, [&](Span b, int64_t q, int64_t lo, int64_t hi) {
    for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
      float* out = call.out + (bb - b.lo) * width + (lo - call.vars[1].lo);
      if (q != 3) {
        std::fill(out, out + (hi - lo + 1), 0.0f);
        continue;
      }
      auto f = [](float d, float c, float o) {
        const float so = sigmoid(o);
        return d * fast::tanh(c) * so * (1.0f - so);
      };
      simd::map_row(out, hi - lo + 1, f, element(dy, {bb, lo - 3 * n}), element(cn, {bb, lo - 3 * n}),
                    element(gates, {bb, lo}));
    }
  });
  return true;
}

// ----- broadcasts: inputs right-aligned against the output (PyTorch's rule), their axes listed in
// an attribute read at index 0; size-1 axes inserted or dropped; GRU gates by thirds.

namespace {

// The axes of a rank-`nd` input listed in attribute `key` (negative counting from the end), or false.
bool axes_of(const Attrs& attrs, const std::string& key, int nd, std::vector<bool>* axes) {
  axes->assign(nd, false);
  for (int64_t a : attrs.ints(key)) {
    if (a < -nd || a >= nd) return false;
    (*axes)[a < 0 ? a + nd : a] = true;
  }
  return attrs.ok();
}

// Input `input` right-aligned against the output, its axes in attribute `key` read at 0. False when
// the input has more axes than the output or the attribute is not a list of its axes.
bool right_aligned(const TileCall& call, int input, const Attrs& attrs, const std::string& key, Read* r) {
  const int nd = static_cast<int>(call.inputs[input].shape.size());
  const int off = static_cast<int>(call.output_vars.size()) - nd;
  std::vector<bool> bcast;
  if (off < 0 || !axes_of(attrs, key, nd, &bcast)) return false;
  *r = Read{input, {}, {}};
  for (int d = 0; d < nd; ++d) r->at.push_back(bcast[d] ? kConstant : off + d);
  return true;
}

// out = f(a, b) with a and b broadcast against each other (a_bcast, b_bcast: their axes read at 0).
template <class F>
bool broadcast_binary(const TileCall& call, const Attrs& attrs, F f) {
  Read a, b;
  if (!pure_map(call, 2) || !right_aligned(call, 0, attrs, "a_bcast", &a) ||
      !right_aligned(call, 1, attrs, "b_bcast", &b))
    return false;
  return map<2>(call, {a, b}, f);
}

// The input read at the output index with output dimension `axis` left out (a size-1 axis inserted
// there, or the axis a reduction removed).
Read skipping(const TileCall& call, int axis) {
  Read r{0, {}, {}};
  for (int d = 0; d < static_cast<int>(call.output_vars.size()); ++d)
    if (d != axis) r.at.push_back(d);
  return r;
}

// The output axis named by attribute "axis" of an output of rank `rank` (negative counting from the end).
bool output_axis(const Attrs& attrs, int rank, int* axis) {
  const int64_t a = attrs.integer("axis", 0);
  if (!attrs.ok() || a < -rank || a >= rank) return false;
  *axis = static_cast<int>(a < 0 ? a + rank : a);
  return true;
}

}  // namespace

bool broadcast_add(const TileCall& call, const Attrs& attrs) {
  return broadcast_binary(call, attrs, [](float a, float b) { return a + b; });
}
bool broadcast_sub(const TileCall& call, const Attrs& attrs) {
  return broadcast_binary(call, attrs, [](float a, float b) { return a - b; });
}
bool broadcast_mul(const TileCall& call, const Attrs& attrs) {
  return broadcast_binary(call, attrs, [](float a, float b) { return a * b; });
}
bool broadcast_div(const TileCall& call, const Attrs& attrs) {
  return broadcast_binary(call, attrs, [](float a, float b) { return a / b; });
}
bool broadcast_maximum(const TileCall& call, const Attrs& attrs) { return broadcast_binary(call, attrs, nan_max); }
bool broadcast_minimum(const TileCall& call, const Attrs& attrs) { return broadcast_binary(call, attrs, nan_min); }

// x broadcast to the output's shape, right-aligned, its axes in `bcast` read at 0 (PyTorch expand).
bool expand(const TileCall& call, const Attrs& attrs) {
  Read x;
  if (!pure_map(call, 1) || !right_aligned(call, 0, attrs, "bcast", &x)) return false;
  return map<1>(call, {x}, [](float v) { return v; });
}

// x repeated along the output axes `new_axes` (default: the leading ones); x has the others, in order.
bool broadcast_to(const TileCall& call, const Attrs& attrs) {
  if (!pure_map(call, 1)) return false;
  const int rank = static_cast<int>(call.output_vars.size());
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  std::vector<bool> fresh;
  if (nd > rank || !axes_of(attrs, "new_axes", rank, &fresh)) return false;
  if (attrs.ints("new_axes").empty())
    for (int d = 0; d < rank - nd; ++d) fresh[d] = true;
  Read x{0, {}, {}};
  for (int d = 0; d < rank; ++d)
    if (!fresh[d]) x.at.push_back(d);
  if (static_cast<int>(x.at.size()) != nd) return false;
  return map<1>(call, {x}, [](float v) { return v; });
}

// x + y, y broadcast over x's leading axes.
bool add_broadcast(const TileCall& call, const Attrs&) {
  if (!pure_map(call, 2)) return false;
  const int rank = static_cast<int>(call.output_vars.size()), nd = static_cast<int>(call.inputs[1].shape.size());
  if (nd > rank) return false;
  Read y{1, {}, {}};
  for (int d = rank - nd; d < rank; ++d) y.at.push_back(d);
  return map<2>(call, {aligned(call, 0), y}, [](float a, float b) { return a + b; });
}

// value where mask != 0 (NaN counts as true, as in where), else x; mask broadcast as in expand.
bool masked_fill(const TileCall& call, const Attrs& attrs) {
  const float value = static_cast<float>(attrs.num("value", 0.0));
  Read mask;
  if (!attrs.ok() || !pure_map(call, 2) || !right_aligned(call, 1, attrs, "mask_bcast", &mask)) return false;
  return map<2>(call, {aligned(call, 0), mask}, [=](float x, float m) { return m != 0.0f ? value : x; });
}

// x without its size-1 axis `axis`: that axis read at 0.
bool squeeze(const TileCall& call, const Attrs& attrs) {
  if (!pure_map(call, 1)) return false;
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  int ax = 0;
  if (nd != static_cast<int>(call.output_vars.size()) + 1 || !output_axis(attrs, nd, &ax)) return false;
  Read r{0, {}, {}};
  for (int d = 0; d < nd; ++d) r.at.push_back(d == ax ? kConstant : (d < ax ? d : d - 1));
  return map<1>(call, {r}, [](float v) { return v; });
}

// x with a size-1 axis inserted at `axis`.
bool unsqueeze(const TileCall& call, const Attrs& attrs) {
  const int rank = static_cast<int>(call.output_vars.size());
  int ax = 0;
  if (!pure_map(call, 1) || !output_axis(attrs, rank, &ax) ||
      static_cast<int>(call.inputs[0].shape.size()) != rank - 1)
    return false;
  return map<1>(call, {skipping(call, ax)}, [](float v) { return v; });
}

// dy / size repeated along the new output axis `axis` (the gradient of reduce_mean).
bool reduce_mean_grad(const TileCall& call, const Attrs& attrs) {
  const int rank = static_cast<int>(call.output_vars.size());
  const int64_t axis = attrs.integer("axis", 0);
  const double size = attrs.num("size", 1.0);
  if (!attrs.ok() || !pure_map(call, 1) || axis < 0 || axis >= rank || size <= 0 ||
      static_cast<int>(call.inputs[0].shape.size()) != rank - 1)
    return false;
  const float n = static_cast<float>(size);
  return map<1>(call, {skipping(call, static_cast<int>(axis))}, [=](float dy) { return dy / n; });
}

// dy[b, c] / (in_h in_w) at every (h, w): the gradient of global_avg_pool2d.
bool global_avg_pool2d_grad(const TileCall& call, const Attrs& attrs) {
  const double area = attrs.num("in_h", 1.0) * attrs.num("in_w", 1.0);
  if (!attrs.ok() || !pure_map(call, 1) || call.output_vars.size() != 4 || area <= 0) return false;
  const float n = static_cast<float>(area);
  return map<1>(call, {Read{0, {0, 1}, {}}}, [=](float dy) { return dy / n; });
}

// x * s[0], s a one-element tensor.
bool mul_scalar_tensor(const TileCall& call, const Attrs&) {
  if (!pure_map(call, 2) || call.inputs[1].shape.size() != 1) return false;
  return map<2>(call, {aligned(call, 0), Read{1, {kConstant}, {0}}}, [](float x, float s) { return x * s; });
}

// dy[j] exp(x[i] - y[j]), j = i without `axis`: the gradient of logsumexp (y its result).
bool logsumexp_grad(const TileCall& call, const Attrs& attrs) {  // (dy, x, y)
  const int rank = static_cast<int>(call.output_vars.size());
  int ax = 0;
  if (!pure_map(call, 3) || !output_axis(attrs, rank, &ax)) return false;
  Read dy = skipping(call, ax), y = skipping(call, ax);
  y.input = 2;
  return map<3>(call, {dy, aligned(call, 1), y}, [](float d, float x, float m) { return d * std::exp(x - m); });
}

// dy[c] / (n h w) over x's shape (x gives only the shape): the gradient of batch_norm_mean.
bool batch_norm_mean_grad(const TileCall& call, const Attrs&) {  // (dy, x)
  if (!pure_map(call, 2) || call.output_vars.size() != 4 || call.inputs[1].shape.size() != 4) return false;
  const auto& s = call.inputs[1].shape;
  const float n = static_cast<float>(static_cast<double>(s[0] * s[2] * s[3]));
  return map<1>(call, {Read{0, {1}, {}}}, [=](float dy) { return dy / n; });
}

// (1 - momentum) running + momentum stat: batch norm's running mean and variance.
bool running_stat_update(const TileCall& call, const Attrs& attrs) {
  const double m = attrs.num("momentum", 0.1);
  const float keep = static_cast<float>(1.0 - m), take = static_cast<float>(m);
  return attrs.ok() && map_aligned<2>(call, [=](float r, float s) { return keep * r + take * s; });
}

// (x - mean[c]) / sqrt(var[c] + eps) gamma[c] + beta[c] over NCHW, with running statistics.
bool batch_norm_inference(const TileCall& call, const Attrs& attrs) {  // (x, mean, var, gamma, beta)
  const float eps = static_cast<float>(attrs.num("eps", 1e-5));
  if (!attrs.ok() || !pure_map(call, 5) || call.output_vars.size() != 4) return false;
  const Read m{1, {1}, {}}, v{2, {1}, {}}, g{3, {1}, {}}, b{4, {1}, {}};
  return map<5>(call, {aligned(call, 0), m, v, g, b}, [=](float x, float mu, float var, float gamma, float beta) {
    return (x - mu) / std::sqrt(var + eps) * gamma + beta;
  });
}

// dy gamma[c] / sqrt(var[c] + eps).
bool batch_norm_inference_grad_input(const TileCall& call, const Attrs& attrs) {  // (dy, var, gamma)
  const float eps = static_cast<float>(attrs.num("eps", 1e-5));
  if (!attrs.ok() || !pure_map(call, 3) || call.output_vars.size() != 4) return false;
  return map<3>(call, {aligned(call, 0), Read{1, {1}, {}}, Read{2, {1}, {}}},
                [=](float dy, float var, float gamma) { return dy * gamma / std::sqrt(var + eps); });
}

// ----- the GRU cell (torch.nn.GRU, gates r | z | n): gi, gh (batch, 3 hidden), h (batch, hidden).

namespace {

// Variables b, j over (batch, hidden) of a map whose inputs `gi` and `gi + 1` hold the gates of
// `hidden` = the second extent of input `hidden_of`.
bool gru_layout(const TileCall& call, size_t inputs, int gi, int hidden_of, int64_t* hidden) {
  if (!pure_map(call, inputs) || call.vars.size() != 2) return false;
  const TileIn &a = call.inputs[gi], &b = call.inputs[gi + 1], &h = call.inputs[hidden_of];
  if (a.shape.size() != 2 || b.shape.size() != 2 || h.shape.size() != 2) return false;
  *hidden = h.shape[1];
  return a.shape[1] == 3 * *hidden && b.shape[1] == 3 * *hidden;
}

// The gates at one column from gi and gh at thirds r, z, n: r, z and the new state n.
struct GruGates {
  float r, z, n;
  GruGates(float gir, float ghr, float giz, float ghz, float gin, float ghn)
      : r(sigmoid(gir + ghr)), z(sigmoid(giz + ghz)), n(fast::tanh(gin + r * ghn)) {}  // vectorises, as the LSTM's
};

}  // namespace

// h' = (1 - z) n + z h.
bool gru_cell(const TileCall& call, const Attrs&) {  // (gi, gh, h)
  int64_t n = 0;
  if (!gru_layout(call, 3, 0, 2, &n)) return false;
  const std::array<Read, 7> reads = {quarter(0, 0, n), quarter(1, 0, n), quarter(0, 1, n), quarter(1, 1, n),
                                     quarter(0, 2, n), quarter(1, 2, n), aligned(call, 2)};
  return map<7>(call, reads, [](float gir, float ghr, float giz, float ghz, float gin, float ghn, float h) {
    const GruGates g(gir, ghr, giz, ghz, gin, ghn);
    return (1.0f - g.z) * g.n + g.z * h;
  });
}

// dh = dy z.
bool gru_cell_grad_h(const TileCall& call, const Attrs&) {  // (dy, gi, gh)
  int64_t n = 0;
  if (!gru_layout(call, 3, 1, 0, &n)) return false;
  return map<3>(call, {aligned(call, 0), quarter(1, 1, n), quarter(2, 1, n)},
                [](float dy, float giz, float ghz) { return dy * sigmoid(giz + ghz); });
}

namespace {

// d gi (times_r false) or d gh (true), (batch, 3 hidden) by thirds of the columns, each a formula
// of dy, h and the gates at the column's offset k inside its third:
// [dn ghn r (1 - r) | dy (h - n) z (1 - z) | dn (r)] with dn = dy (1 - z) (1 - n^2). The description
// reads outside the tensors for the other terms, which the interpreter takes as 0: those vanish.
bool gru_gate_grads(const TileCall& call, bool times_r) {  // (dy, gi, gh, h)
  if (call.inputs.size() != 4 || call.vars.size() != 2 || call.output_vars != std::vector<int>{0, 1}) return false;
  const TileIn &dy = call.inputs[0], &gi = call.inputs[1], &gh = call.inputs[2], &h = call.inputs[3];
  if (dy.shape.size() != 2 || gi.shape.size() != 2 || gh.shape != gi.shape || h.shape != dy.shape) return false;
  const int64_t n = dy.shape[1];
  if (gi.shape[1] != 3 * n) return false;
  const Span b = call.vars[0], j = call.vars[1];
  auto thirds = [&](auto&& f) {  // f(third, k range) for the block's parts in each third
    for (int64_t q = 0; q < 3; ++q) {
      const int64_t lo = std::max(j.lo, q * n), hi = std::min(j.hi, q * n + n - 1);
      if (lo <= hi) f(q, Span{lo - q * n, hi - q * n});
    }
  };
  bool ok = true;
  thirds([&](int64_t q, Span k) {
    for (int64_t t = 0; t < 3; ++t)
      ok = ok && holds(gi, {b, {k.lo + t * n, k.hi + t * n}}) && holds(gh, {b, {k.lo + t * n, k.hi + t * n}});
    ok = ok && holds(dy, {b, k}) && (q != 1 || holds(h, {b, k}));
  });
  if (!ok) return false;
  const int64_t width = j.size();
  thirds([&](int64_t q, Span k) {
    for (int64_t bb = b.lo; bb <= b.hi; ++bb) {
      float* out = call.out + (bb - b.lo) * width + (k.lo + q * n - j.lo);
      const float* d = element(dy, {bb, k.lo});
      const float* x = element(gi, {bb, k.lo});
      const float* y = element(gh, {bb, k.lo});
      const float* hh = q == 1 ? element(h, {bb, k.lo}) : nullptr;
      // One loop per third, without branches inside: each is a plain map that vectorises.
      const int64_t w = k.size();
      const float *x1 = x + n, *y1 = y + n, *x2 = x + 2 * n, *y2 = y + 2 * n;
      if (q == 0) {
        auto f = [](float d, float x, float y, float x1, float y1, float x2, float y2) {
          const GruGates g(x, y, x1, y1, x2, y2);
          return d * (1.0f - g.z) * (1.0f - g.n * g.n) * y2 * g.r * (1.0f - g.r);
        };
        simd::map_row(out, w, f, d, x, y, x1, y1, x2, y2);
      } else if (q == 1) {
        auto f = [](float d, float x, float y, float x1, float y1, float x2, float y2, float hh) {
          const GruGates g(x, y, x1, y1, x2, y2);
          return d * (hh - g.n) * g.z * (1.0f - g.z);
        };
        simd::map_row(out, w, f, d, x, y, x1, y1, x2, y2, hh);
      } else {
        auto f = [times_r](float d, float x, float y, float x1, float y1, float x2, float y2) {
          const GruGates g(x, y, x1, y1, x2, y2);
          const float dn = d * (1.0f - g.z) * (1.0f - g.n * g.n);
          return times_r ? dn * g.r : dn;
        };
        simd::map_row(out, w, f, d, x, y, x1, y1, x2, y2);
      }
    }
  });
  return true;
}

}  // namespace

bool gru_cell_grad_gi(const TileCall& call, const Attrs&) { return gru_gate_grads(call, false); }
bool gru_cell_grad_gh(const TileCall& call, const Attrs&) { return gru_gate_grads(call, true); }

}  // namespace tilewise::kernels::tile

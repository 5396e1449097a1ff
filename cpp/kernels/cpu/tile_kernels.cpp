// run_native: checks a TileCall, then dispatches on the op type through one table (one kernel per
// op kind, as the analyses' tables in cpp/tdl do). The kernels live in gemm_kernels.cpp,
// elementwise_kernels.cpp, reduction_kernels.cpp, pooling_kernels.cpp, layout_kernels.cpp,
// embedding_kernels.cpp and conv_kernels.cpp.
#include "kernels/cpu/tile_kernels.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels {
namespace tile {

// ------------------------------------------------------------------------------------- attributes

double Attrs::num(const std::string& key, double fallback) const {
  const OpAttrs::Value* v = parsed_.find(key);
  if (!v) return fallback;
  if (!v->numeric || v->list || v->nums.size() != 1) {
    ok_ = false;
    return fallback;
  }
  return v->nums[0];
}

int64_t Attrs::integer(const std::string& key, int64_t fallback) const {
  double v = num(key, static_cast<double>(fallback));
  if (v != std::floor(v) || std::fabs(v) > 1e15) {
    ok_ = false;
    return fallback;
  }
  return static_cast<int64_t>(v);
}

std::vector<int64_t> Attrs::ints(const std::string& key) const {
  const OpAttrs::Value* v = parsed_.find(key);
  std::vector<int64_t> out;
  if (!v) return out;
  if (!v->numeric || v->inner != 0) {
    ok_ = false;
    return out;
  }
  for (double x : v->nums) {
    if (x != std::floor(x) || std::fabs(x) > 1e15) {
      ok_ = false;
      return {};
    }
    out.push_back(static_cast<int64_t>(x));
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> Attrs::pairs(const std::string& key) const {
  const OpAttrs::Value* v = parsed_.find(key);
  std::vector<std::pair<int64_t, int64_t>> out;
  if (!v) return out;
  if (!v->numeric || !v->list || (v->inner != 2 && !v->nums.empty())) {
    ok_ = false;
    return out;
  }
  for (size_t i = 0; i + 1 < v->nums.size(); i += 2) {
    const double a = v->nums[i], b = v->nums[i + 1];
    if (a != std::floor(a) || b != std::floor(b) || std::fabs(a) > 1e15 || std::fabs(b) > 1e15) {
      ok_ = false;
      return {};
    }
    out.emplace_back(static_cast<int64_t>(a), static_cast<int64_t>(b));
  }
  return out;
}

// ---------------------------------------------------------------------------------------- helpers

bool full_range(const TileCall& call, int first, int last) {
  for (int v = first; v < last; ++v) {
    if (call.vars[v].lo != 0 || call.vars[v].hi != call.extents[v] - 1) return false;
  }
  return true;
}

std::vector<int64_t> region_strides(const TileIn& in) {
  std::vector<int64_t> s(in.region.size(), 1);
  for (int d = static_cast<int>(in.region.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * in.region[d + 1].size();
  return s;
}

namespace {
// 1: the region holds the box's in-tensor elements, 2: the box reads none, 0: neither.
int coverage(const TileIn& in, const std::vector<Span>& want) {
  if (in.region.size() != in.shape.size() || want.size() != in.shape.size()) return 0;
  bool any = true;  // does the box read any in-tensor element?
  for (size_t d = 0; d < want.size(); ++d) {
    int64_t lo = std::max<int64_t>(want[d].lo, 0), hi = std::min<int64_t>(want[d].hi, in.shape[d] - 1);
    if (lo > hi) any = false;
  }
  if (!any) return 2;
  for (size_t d = 0; d < want.size(); ++d) {
    int64_t lo = std::max<int64_t>(want[d].lo, 0), hi = std::min<int64_t>(want[d].hi, in.shape[d] - 1);
    if (in.region[d].lo > lo || in.region[d].hi < hi) return 0;
  }
  return 1;
}

std::atomic<int64_t> heap_scratch_total{0};
thread_local int64_t heap_scratch_thread = 0;
}  // namespace

bool covers(const TileIn& in, const std::vector<Span>& want) { return coverage(in, want) != 0; }

bool holds(const TileIn& in, const std::vector<Span>& want) {
  const int c = coverage(in, want);
  if (c != 1) return c == 2;
  return in.dtype == DType::kFloat32 ? in.data != nullptr : in.raw != nullptr;
}

void* Scratch::take(int64_t bytes) {
  const int64_t piece = scratch_piece(std::max<int64_t>(bytes, 0));
  if (piece <= left_) {
    void* p = next_;
    next_ += piece, left_ -= piece;
    return p;
  }
  // No room (an unplanned call): the heap, counted. Later pieces come from the heap too, so the
  // planned buffer is never split across a piece.
  left_ = 0;
  heap_.emplace_back(new std::byte[static_cast<size_t>(std::max<int64_t>(piece, 16))]);
  heap_scratch_total.fetch_add(piece, std::memory_order_relaxed);
  heap_scratch_thread += piece;
  return heap_.back().get();
}

std::vector<Span> box_of(const TileCall& call, const std::vector<int>& dim_vars) {
  std::vector<Span> box;
  box.reserve(dim_vars.size());
  for (int v : dim_vars) box.push_back(call.vars[v]);
  return box;
}

const float* element(const TileIn& in, const std::vector<int64_t>& at) {
  int64_t off = 0;
  for (size_t d = 0; d < at.size(); ++d) off = off * in.region[d].size() + (at[d] - in.region[d].lo);
  return in.data + off;
}

bool view4(const TileIn& in, const std::vector<Span>& box, View4* v) {
  if (in.shape.size() != 4 || !holds(in, box)) return false;
  std::vector<int64_t> rs = region_strides(in);
  v->data = in.data;
  for (int d = 0; d < 4; ++d) {
    v->lo[d] = in.region[d].lo;
    v->st[d] = rs[d];
  }
  return true;
}

bool outputs_first(const TileCall& call, int count) {
  if (static_cast<int>(call.output_vars.size()) != count) return false;
  for (int p = 0; p < count; ++p) {
    if (call.output_vars[p] != p) return false;
  }
  return true;
}

int64_t output_size(const TileCall& call) {
  int64_t n = 1;
  for (int v : call.output_vars) n *= call.vars[v].size();
  return n;
}

std::vector<int64_t> output_strides(const TileCall& call) {
  std::vector<int64_t> s(call.vars.size(), 0);
  int64_t st = 1;
  for (int p = static_cast<int>(call.output_vars.size()) - 1; p >= 0; --p) {
    s[call.output_vars[p]] = st;
    st *= call.vars[call.output_vars[p]].size();
  }
  return s;
}

bool fits_blas(std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes) {
    if (s < 0 || s > std::numeric_limits<int>::max()) return false;
  }
  return true;
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceil_div(int64_t a, int64_t b) { return -floor_div(-a, b); }

Span Window::positions(Span range, int64_t k, int64_t lo, int64_t hi) const {
  return {std::max(range.lo, ceil_div(lo + p - d * k, s)), std::min(range.hi, floor_div(hi + p - d * k, s))};
}

namespace {
void include(Span* box, int64_t lo, int64_t hi) {
  if (box->size() == 0) {
    *box = {lo, hi};
  } else {
    box->lo = std::min(box->lo, lo);
    box->hi = std::max(box->hi, hi);
  }
}
}  // namespace

Span Window::reads(Span o, Span k, int64_t n) const {
  Span box;
  for (int64_t kk = k.lo; kk <= k.hi; ++kk) {
    Span os = positions(o, kk, 0, n - 1);
    if (os.size() > 0) include(&box, in(os.lo, kk), in(os.hi, kk));
  }
  return box;
}

Span Window::readers(Span in_range, Span k, int64_t n_out) const {
  Span box;
  for (int64_t kk = k.lo; kk <= k.hi; ++kk) {
    Span os = positions({0, n_out - 1}, kk, in_range.lo, in_range.hi);
    if (os.size() > 0) include(&box, os.lo, os.hi);
  }
  return box;
}

Span Window::offsets_reaching(Span in_range, Span k, int64_t n_out) const {
  Span box;
  for (int64_t kk = k.lo; kk <= k.hi; ++kk) {
    if (positions({0, n_out - 1}, kk, in_range.lo, in_range.hi).size() > 0) include(&box, kk, kk);
  }
  return box;
}

}  // namespace tile

// ------------------------------------------------------------------------------------------- table

namespace {

using tile::Kernel;

struct Entry {
  Kernel fn;
  std::vector<std::string> roles;
  std::string kind;  ///< how the simulator prices it (kernel_kind)
};

// One entry per native kernel, found by the name an op declares (`@tw.op(kernel=...)`), with the
// roles of its variables in the order the kernel reads them ('*': zero or more variables).
const std::unordered_map<std::string, Entry>& kernel_table() {
  static const std::vector<std::string> any = {"i*"};
  static const std::unordered_map<std::string, Entry> table = {
      // products (gemm_kernels.cpp)
      {"matmul", {tile::matmul, {"i", "j", "k"}, "gemm"}},
      {"matmul_tn", {tile::matmul_tn, {"i", "j", "k"}, "gemm"}},
      {"matmul_nt", {tile::matmul_nt, {"i", "j", "k"}, "gemm"}},
      {"matmul_tt", {tile::matmul_tt, {"i", "j", "k"}, "gemm"}},
      {"batch_matmul", {tile::batch_matmul, {"n", "i", "j", "k"}, "gemm"}},
      {"batch_matmul_nt", {tile::batch_matmul_nt, {"n", "i", "j", "k"}, "gemm"}},
      {"batch_matmul_tn", {tile::batch_matmul_tn, {"n", "i", "j", "k"}, "gemm"}},
      {"linear", {tile::linear, {"i*", "k"}, "gemm"}},
      {"linear_nobias", {tile::linear_nobias, {"i*", "k"}, "gemm"}},
      {"linear_grad_input", {tile::linear_grad_input, {"i*", "j"}, "gemm"}},
      {"linear_grad_weight", {tile::linear_grad_weight, {"j", "k", "r*"}, "gemm"}},
      {"matvec", {tile::matvec, {"i", "k"}, "gemm"}},
      {"vecmat", {tile::vecmat, {"j", "i"}, "gemm"}},
      {"outer", {tile::outer, {"i", "j"}, "gemm"}},
      {"lstm_gates", {tile::lstm_gates, {"b", "j", "k", "k'"}, "gemm"}},
      {"rnn_tanh_cell", {tile::rnn_tanh_cell, {"i", "j", "k", "k'"}, "gemm"}},
      {"bmatmul", {tile::bmatmul, {"i*", "k"}, "gemm"}},
      {"bmatmul_nt", {tile::bmatmul_nt, {"i*", "k"}, "gemm"}},
      {"bmatmul_tn", {tile::bmatmul_tn, {"i*", "k"}, "gemm"}},
      {"matmul_nd", {tile::matmul_nd, {"i*", "k"}, "gemm"}},
      // element-wise (elementwise_kernels.cpp)
      {"identity", {tile::identity, any, "elementwise"}},
      {"neg", {tile::neg, any, "elementwise"}},
      {"relu", {tile::relu, any, "elementwise"}},
      {"relu_grad", {tile::relu_grad, any, "elementwise"}},
      {"scale", {tile::scale, any, "elementwise"}},
      {"add", {tile::add, any, "elementwise"}},
      {"sub", {tile::sub, any, "elementwise"}},
      {"mul", {tile::mul, any, "elementwise"}},
      {"div", {tile::div, any, "elementwise"}},
      {"axpy", {tile::axpy, any, "elementwise"}},
      {"sgd", {tile::sgd, any, "elementwise"}},
      {"momentum_velocity", {tile::momentum_velocity, any, "elementwise"}},
      {"momentum_weight", {tile::momentum_weight, any, "elementwise"}},
      {"fill_like", {tile::fill_like, any, "elementwise"}},
      {"add_n", {tile::add_n, any, "elementwise"}},
      {"bias_add", {tile::bias_add, any, "elementwise"}},
      {"bias_add_channel", {tile::bias_add_channel, any, "elementwise"}},
      {"add_row", {tile::add_row, {"i", "j"}, "elementwise"}},
      {"add_col", {tile::add_col, {"i", "j"}, "elementwise"}},
      {"mul_row", {tile::mul_row, {"i", "j"}, "elementwise"}},
      {"mul_col", {tile::mul_col, {"i", "j"}, "elementwise"}},
      {"mse_loss_backward", {tile::mse_loss_backward, any, "elementwise"}},
      {"running_stat_update", {tile::running_stat_update, any, "elementwise"}},
      {"logsumexp_grad", {tile::logsumexp_grad, any, "elementwise"}},
      {"batch_norm_mean_grad", {tile::batch_norm_mean_grad, {"b", "c", "h", "w"}, "norm"}},
      {"l1_loss_backward", {tile::l1_loss_backward, any, "elementwise"}},
      {"smooth_l1_loss_backward", {tile::smooth_l1_loss_backward, any, "elementwise"}},
      {"bce_with_logits_backward", {tile::bce_with_logits_backward, any, "elementwise"}},
      {"nll_loss_backward", {tile::nll_loss_backward, {"b", "k"}, "elementwise"}},
      {"select", {tile::select, any, "elementwise"}},
      {"lstm_cell", {tile::lstm_cell, {"b", "j"}, "elementwise"}},
      {"lstm_hidden", {tile::lstm_hidden, {"b", "j"}, "elementwise"}},
      {"lstm_cell_grad_c", {tile::lstm_cell_grad_c, {"b", "j"}, "elementwise"}},
      {"lstm_hidden_grad_c", {tile::lstm_hidden_grad_c, {"b", "j"}, "elementwise"}},
      {"lstm_cell_grad_gates", {tile::lstm_cell_grad_gates, {"b", "j"}, "elementwise"}},
      {"lstm_hidden_grad_gates", {tile::lstm_hidden_grad_gates, {"b", "j"}, "elementwise"}},
      {"gru_cell", {tile::gru_cell, {"b", "j"}, "elementwise"}},
      {"gru_cell_grad_gi", {tile::gru_cell_grad_gi, {"b", "j"}, "elementwise"}},
      {"gru_cell_grad_gh", {tile::gru_cell_grad_gh, {"b", "j"}, "elementwise"}},
      {"gru_cell_grad_h", {tile::gru_cell_grad_h, {"b", "j"}, "elementwise"}},
      // broadcasts and size-1 axes (elementwise_kernels.cpp)
      {"broadcast_add", {tile::broadcast_add, any, "elementwise"}},
      {"broadcast_sub", {tile::broadcast_sub, any, "elementwise"}},
      {"broadcast_mul", {tile::broadcast_mul, any, "elementwise"}},
      {"broadcast_div", {tile::broadcast_div, any, "elementwise"}},
      {"broadcast_maximum", {tile::broadcast_maximum, any, "elementwise"}},
      {"broadcast_minimum", {tile::broadcast_minimum, any, "elementwise"}},
      {"expand", {tile::expand, any, "layout"}},
      {"broadcast_to", {tile::broadcast_to, any, "layout"}},
      {"add_broadcast", {tile::add_broadcast, any, "elementwise"}},
      {"masked_fill", {tile::masked_fill, any, "elementwise"}},
      {"squeeze", {tile::squeeze, any, "layout"}},
      {"unsqueeze", {tile::unsqueeze, any, "layout"}},
      {"reduce_mean_grad", {tile::reduce_mean_grad, any, "elementwise"}},
      {"global_avg_pool2d_grad", {tile::global_avg_pool2d_grad, {"b", "c", "h", "w"}, "elementwise"}},
      {"mul_scalar_tensor", {tile::mul_scalar_tensor, any, "elementwise"}},
      {"batch_norm_inference", {tile::batch_norm_inference, {"b", "c", "h", "w"}, "norm"}},
      {"batch_norm_inference_grad_input", {tile::batch_norm_inference_grad_input, {"b", "c", "h", "w"}, "norm"}},
      // activations, their gradients, optimizer and other maps (elementwise_kernels.cpp)
      {"exp", {tile::exp_, any, "elementwise"}},
      {"log", {tile::log_, any, "elementwise"}},
      {"sqrt", {tile::sqrt_, any, "elementwise"}},
      {"rsqrt", {tile::rsqrt, any, "elementwise"}},
      {"reciprocal", {tile::reciprocal, any, "elementwise"}},
      {"abs", {tile::abs_, any, "elementwise"}},
      {"square", {tile::square, any, "elementwise"}},
      {"sign", {tile::sign, any, "elementwise"}},
      {"erf", {tile::erf_, any, "elementwise"}},
      {"sigmoid", {tile::sigmoid, any, "elementwise"}},
      {"tanh", {tile::tanh_, any, "elementwise"}},
      {"silu", {tile::silu, any, "elementwise"}},
      {"gelu", {tile::gelu, any, "elementwise"}},
      {"gelu_tanh", {tile::gelu_tanh, any, "elementwise"}},
      {"softplus", {tile::softplus, any, "elementwise"}},
      {"relu6", {tile::relu6, any, "elementwise"}},
      {"step_count", {tile::step_count, any, "elementwise"}},
      {"sqrt_grad", {tile::sqrt_grad, any, "elementwise"}},
      {"rsqrt_grad", {tile::rsqrt_grad, any, "elementwise"}},
      {"reciprocal_grad", {tile::reciprocal_grad, any, "elementwise"}},
      {"abs_grad", {tile::abs_grad, any, "elementwise"}},
      {"square_grad", {tile::square_grad, any, "elementwise"}},
      {"erf_grad", {tile::erf_grad, any, "elementwise"}},
      {"sigmoid_grad", {tile::sigmoid_grad, any, "elementwise"}},
      {"tanh_grad", {tile::tanh_grad, any, "elementwise"}},
      {"relu6_grad", {tile::relu6_grad, any, "elementwise"}},
      {"softplus_grad", {tile::softplus_grad, any, "elementwise"}},
      {"maximum", {tile::maximum, any, "elementwise"}},
      {"minimum", {tile::minimum, any, "elementwise"}},
      {"squared_difference", {tile::squared_difference, any, "elementwise"}},
      {"silu_grad", {tile::silu_grad, any, "elementwise"}},
      {"gelu_grad", {tile::gelu_grad, any, "elementwise"}},
      {"gelu_tanh_grad", {tile::gelu_tanh_grad, any, "elementwise"}},
      {"squared_difference_grad", {tile::squared_difference_grad, any, "elementwise"}},
      {"maximum_grad", {tile::maximum_grad, any, "elementwise"}},
      {"div_grad_divisor", {tile::div_grad_divisor, any, "elementwise"}},
      {"where", {tile::where_, any, "elementwise"}},
      {"where_grad", {tile::where_grad, any, "elementwise"}},
      {"leaky_relu", {tile::leaky_relu, any, "elementwise"}},
      {"leaky_relu_grad", {tile::leaky_relu_grad, any, "elementwise"}},
      {"elu", {tile::elu, any, "elementwise"}},
      {"elu_grad", {tile::elu_grad, any, "elementwise"}},
      {"clip", {tile::clip, any, "elementwise"}},
      {"clip_grad", {tile::clip_grad, any, "elementwise"}},
      {"hardtanh_grad", {tile::hardtanh_grad, any, "elementwise"}},
      {"power", {tile::power, any, "elementwise"}},
      {"power_grad", {tile::power_grad, any, "elementwise"}},
      {"dropout", {tile::dropout, any, "elementwise"}},
      {"adam_m", {tile::adam_m, any, "elementwise"}},
      {"adam_v", {tile::adam_v, any, "elementwise"}},
      {"rmsprop_sq", {tile::rmsprop_sq, any, "elementwise"}},
      {"rmsprop_weight", {tile::rmsprop_weight, any, "elementwise"}},
      {"mse_loss_grad", {tile::mse_loss_grad, any, "elementwise"}},
      {"adam_weight", {tile::adam_weight, any, "elementwise"}},
      // reductions, normalisation, pooling, losses (reduction_kernels.cpp)
      {"sum_axes", {tile::sum_axes, {"v*"}, "reduction"}},
      {"sum_to", {tile::sum_to, {"v*"}, "reduction"}},
      {"sum_leading", {tile::sum_leading, {"v*"}, "reduction"}},
      {"reduce_mean", {tile::reduce_mean, {"v*"}, "reduction"}},
      {"reduce_sum", {tile::reduce_sum, {"v*"}, "reduction"}},
      {"reduce_max", {tile::reduce_max, {"v*"}, "reduction"}},
      {"reduce_min", {tile::reduce_min, {"v*"}, "reduction"}},
      {"cumsum", {tile::cumsum, {"i", "j", "k"}, "reduction"}},
      {"cumsum_grad", {tile::cumsum_grad, {"i", "j", "k"}, "reduction"}},
      {"logsumexp", {tile::logsumexp, {"v*"}, "reduction"}},
      {"argmax", {tile::argmax, {"v*"}, "reduction"}},
      {"argmin", {tile::argmin, {"v*"}, "reduction"}},
      {"reduce_var", {tile::reduce_var, {"v*"}, "reduction"}},
      {"reduce_var_grad", {tile::reduce_var_grad, {"v*"}, "reduction"}},
      {"reduce_prod", {tile::reduce_prod, {"v*"}, "reduction"}},
      {"reduce_prod_grad", {tile::reduce_prod_grad, {"v*"}, "reduction"}},
      {"batch_norm_var", {tile::batch_norm_var, {"c", "m", "y", "z", "n", "y'", "z'"}, "norm"}},
      {"batch_norm_var_grad", {tile::batch_norm_var_grad, {"b", "c", "h", "w", "n", "y", "z"}, "norm"}},
      {"cross_entropy_grad", {tile::cross_entropy_grad, {"b", "k", "j", "j'"}, "reduction"}},
      {"batch_norm_mean", {tile::batch_norm_mean, {"c", "n", "y", "z"}, "norm"}},
      {"global_max_pool2d_grad",
       {tile::global_max_pool2d_grad, {"b", "c", "h", "w", "i", "j", "q", "r"}, "reduction"}},
      {"sum_product", {tile::sum_product, {"v*"}, "reduction"}},
      {"global_avg_pool2d", {tile::global_avg_pool2d, {"b", "c", "h", "w"}, "reduction"}},
      {"global_max_pool2d", {tile::global_max_pool2d, {"b", "c", "h", "w"}, "reduction"}},
      {"conv2d_bias_grad", {tile::conv2d_bias_grad, {"co", "b", "y", "x"}, "reduction"}},
      {"sum_rows", {tile::sum_rows, {"j", "b"}, "reduction"}},
      {"reduce_extremum_grad", {tile::reduce_extremum_grad, {"i*", "k"}, "reduction"}},
      {"reduce_first_extremum_grad", {tile::reduce_first_extremum_grad, {"i*", "k"}, "reduction"}},
      {"batch_norm_inference_grad_gamma", {tile::batch_norm_inference_grad_gamma, {"c", "p", "q", "r"}, "norm"}},
      {"max_pool1d", {tile::max_pool1d, {"b", "c", "i", "k"}, "reduction"}},
      {"max_pool1d_grad", {tile::max_pool1d_grad, {"b", "c", "i", "u", "q"}, "reduction"}},
      {"upsample_nearest2d_grad", {tile::upsample_nearest2d_grad, {"b", "c", "y", "x", "i", "j"}, "reduction"}},
      {"upsample_nearest2d_hw_grad", {tile::upsample_nearest2d_hw_grad, {"b", "c", "y", "x", "i", "j"}, "reduction"}},
      {"max_pool2d", {tile::max_pool2d, {"b", "c", "y", "x", "i", "j"}, "reduction"}},
      {"max_pool2d_grad", {tile::max_pool2d_grad, {"b", "c", "h", "w", "i", "j", "u", "v", "q", "r"}, "reduction"}},
      {"avg_pool2d", {tile::avg_pool2d, {"b", "c", "y", "x", "i", "j"}, "reduction"}},
      {"avg_pool2d_grad", {tile::avg_pool2d_grad, {"b", "c", "h", "w", "i", "j"}, "reduction"}},
      {"adaptive_avg_pool2d", {tile::adaptive_avg_pool2d, {"b", "c", "y", "x", "i", "j"}, "reduction"}},
      {"adaptive_avg_pool2d_grad", {tile::adaptive_avg_pool2d_grad, {"b", "c", "y", "x"}, "reduction"}},
      {"batch_norm_train", {tile::batch_norm_train, {"b", "c", "h", "w", "s*"}, "norm"}},
      {"batch_norm_grad_input", {tile::batch_norm_grad_input, {"b", "c", "h", "w", "s*"}, "norm"}},
      {"batch_norm_grad_gamma",
       {tile::batch_norm_grad_gamma, {"c", "p", "q", "r", "n", "y", "z", "m", "y'", "z'", "n'", "y''", "z''"}, "norm"}},
      {"mse_loss", {tile::mse_loss, {"r*"}, "reduction"}},
      {"l1_loss", {tile::l1_loss, {"r*"}, "reduction"}},
      {"smooth_l1_loss", {tile::smooth_l1_loss, {"r*"}, "reduction"}},
      {"bce_with_logits", {tile::bce_with_logits, {"r*"}, "reduction"}},
      {"nll_loss", {tile::nll_loss, {"b", "k"}, "reduction"}},
      {"cross_entropy", {tile::cross_entropy, {"b", "k", "j", "j'"}, "reduction"}},
      {"cross_entropy_backward", {tile::cross_entropy_backward, {"b", "k", "j", "j'", "j''"}, "reduction"}},
      // row-wise over the last axis (reduction_kernels.cpp) and layouts (layout_kernels.cpp)
      {"softmax", {tile::softmax, {"i*", "k", "k'"}, "norm"}},
      {"log_softmax", {tile::log_softmax, {"i*", "k", "k'"}, "norm"}},
      {"softmax_grad", {tile::softmax_grad, {"i*", "k"}, "norm"}},
      {"log_softmax_grad", {tile::log_softmax_grad, {"i*", "k"}, "norm"}},
      {"layer_norm", {tile::layer_norm, {"i*", "k", "k'"}, "norm"}},
      {"layer_norm_grad_input", {tile::layer_norm_grad_input, {"v*"}, "norm"}},
      {"layer_norm_grad_gamma", {tile::layer_norm_grad_gamma, {"j", "v*"}, "norm"}},
      {"rms_norm_grad_gamma", {tile::rms_norm_grad_gamma, {"j", "v*"}, "norm"}},
      {"rms_norm", {tile::rms_norm, {"i*", "k"}, "norm"}},
      {"rms_norm_grad_input", {tile::rms_norm_grad_input, {"v*"}, "norm"}},
      {"split_heads", {tile::split_heads, {"n", "s", "d"}, "layout"}},
      {"merge_heads", {tile::merge_heads, {"b", "s", "c"}, "layout"}},
      {"permute", {tile::permute, {"i*"}, "layout"}},
      {"transpose", {tile::transpose, {"i", "j"}, "layout"}},
      {"split", {tile::split, {"i*"}, "layout"}},
      {"flip", {tile::flip, {"i*"}, "layout"}},
      {"batch_diagonal", {tile::batch_diagonal, {"b", "i"}, "layout"}},
      {"batch_diagonal_grad", {tile::batch_diagonal_grad, {"b", "i", "j"}, "layout"}},
      {"reshape", {tile::reshape, {"i*"}, "layout"}},
      {"concat", {tile::concat, {"i*"}, "layout"}},
      {"stack", {tile::stack, {"i*"}, "layout"}},
      {"unselect", {tile::unselect, {"i*"}, "layout"}},
      {"slice_axis", {tile::slice_axis, {"i*"}, "layout"}},
      {"slice_axis_grad", {tile::slice_axis_grad, {"i*"}, "layout"}},
      {"pad", {tile::pad, {"i*"}, "layout"}},
      {"unpad", {tile::unpad, {"i*"}, "layout"}},
      {"upsample_nearest2d", {tile::upsample_nearest2d, {"b", "c", "y", "x"}, "layout"}},
      {"upsample_nearest2d_hw", {tile::upsample_nearest2d_hw, {"b", "c", "y", "x"}, "layout"}},
      // lookups (embedding_kernels.cpp)
      {"embedding", {tile::embedding, {"p*", "d"}, "embedding"}},
      {"embedding_grad", {tile::embedding_grad, {"v", "d", "p*"}, "embedding"}},
      {"one_hot", {tile::one_hot, {"i*"}, "embedding"}},
      // convolutions (conv_kernels.cpp)
      {"conv2d", {tile::conv2d, {"b", "co", "y", "x", "ci", "dy", "dx"}, "conv"}},
      {"conv2d_backward_data", {tile::conv2d_backward_data, {"b", "ci", "h", "w", "co", "kh", "kw"}, "conv"}},
      {"conv2d_backward_filter", {tile::conv2d_backward_filter, {"co", "ci", "kh", "kw", "b", "y", "x"}, "conv"}},
      {"depthwise_conv2d", {tile::depthwise_conv2d, {"b", "c", "y", "x", "dy", "dx"}, "conv"}},
      {"conv1d", {tile::conv1d, {"b", "co", "x", "ci", "dx"}, "conv"}},
      {"conv1d_backward_data", {tile::conv1d_backward_data, {"b", "ci", "x", "co", "k"}, "conv"}},
      {"conv1d_backward_filter", {tile::conv1d_backward_filter, {"co", "ci", "k", "b", "x"}, "conv"}},
      {"depthwise_conv2d_backward_data", {tile::depthwise_conv2d_backward_data, {"b", "c", "h", "w", "kh", "kw"}, "conv"}},
      {"depthwise_conv2d_backward_filter",
       {tile::depthwise_conv2d_backward_filter, {"c", "one", "kh", "kw", "b", "y", "x"}, "conv"}},
  };
  return table;
}

// The kernels that take scratch (beyond a few fixed-size values), with their sizes.
const std::unordered_map<std::string, tile::ScratchSize>& scratch_table() {
  static const std::unordered_map<std::string, tile::ScratchSize> table = {
      {"conv2d", tile::conv2d_scratch},
      {"conv2d_backward_data", tile::conv2d_backward_data_scratch},
      {"conv2d_backward_filter", tile::conv2d_backward_filter_scratch},
      {"sum_axes", tile::accumulator_scratch},
      {"sum_to", tile::accumulator_scratch},
      {"sum_leading", tile::accumulator_scratch},
      {"reduce_mean", tile::accumulator_scratch},
      {"reduce_sum", tile::accumulator_scratch},
      {"reduce_max", tile::accumulator_scratch},
      {"reduce_min", tile::accumulator_scratch},
      {"reduce_prod", tile::accumulator_scratch},
      {"batch_norm_mean", tile::accumulator_scratch},
      {"conv2d_bias_grad", tile::accumulator_scratch},
      {"sum_rows", tile::accumulator_scratch},
      {"global_avg_pool2d", tile::accumulator_scratch},
      {"global_max_pool2d", tile::accumulator_scratch},
      {"softmax", tile::row_scratch},
      {"log_softmax", tile::row_scratch},
      {"embedding", tile::lookup_scratch},
  };
  return table;
}

// The call's own consistency: every kernel relies on it, so a malformed call is declined here.
bool well_formed(const TileCall& call) {
  size_t nv = call.vars.size();
  if (call.var_names.size() != nv || call.extents.size() != nv || call.out == nullptr) return false;
  for (size_t v = 0; v < nv; ++v) {
    if (call.vars[v].lo < 0 || call.vars[v].lo > call.vars[v].hi || call.vars[v].hi >= call.extents[v]) return false;
  }
  if (call.output_shape.size() != call.output_vars.size()) return false;
  std::vector<bool> seen(nv, false);
  for (size_t p = 0; p < call.output_vars.size(); ++p) {
    int v = call.output_vars[p];
    if (v < 0 || static_cast<size_t>(v) >= nv || seen[v] || call.output_shape[p] != call.extents[v]) return false;
    seen[v] = true;
  }
  for (const TileIn& in : call.inputs) {
    if (in.region.size() != in.shape.size()) return false;
    bool empty = false;
    for (size_t d = 0; d < in.region.size(); ++d) {
      const Span& r = in.region[d];
      if (r.size() == 0) empty = true;
      else if (r.lo < 0 || r.hi >= in.shape[d]) return false;
    }
    // A rank-0 input the op does not read (fill_like's seed) has no buffer: its region cannot say it
    // is empty. Kernels check what they read with holds(), which requires the buffer.
    if (!empty && !in.shape.empty() && (in.dtype == DType::kFloat32 ? in.data == nullptr : in.raw == nullptr))
      return false;
  }
  return true;
}

}  // namespace

DType dtype_of(const std::string& name) {
  for (DType t : {DType::kFloat32, DType::kInt64, DType::kInt32, DType::kBool})
    if (name == dtype_name(t)) return t;
  throw std::invalid_argument("the runtime holds float32, int64, int32 and bool tensors, not " + name);
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kBool: return "bool";
  }
  return "?";
}

int64_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kInt64: return 8;
    case DType::kInt32: return 4;
    case DType::kBool: return 1;
  }
  return 0;
}

bool reads_integers(const std::string& kernel) {
  return kernel == "embedding" || kernel == "embedding_grad" || kernel == "one_hot";
}

bool run_native(const TileCall& call) {
  if (call.kernel.empty()) return false;
  const auto& table = kernel_table();
  auto it = table.find(call.kernel);
  if (it == table.end() || !roles_fit(it->second.roles, call.vars.size()) || !well_formed(call)) return false;
  if (!reads_integers(call.kernel))
    for (const TileIn& in : call.inputs)
      if (in.dtype != DType::kFloat32) return false;
  tile::Attrs attrs(call.attrs);
  if (!attrs.ok()) return false;
  try {
    return it->second.fn(call, attrs);
  } catch (const std::invalid_argument&) {
    // kernels::gemm refused its arguments: kernels check sizes first (fits_blas), so this is a
    // last resort; what was written is overwritten by the fallback.
    return false;
  }
}

int64_t scratch_bytes(const TileCall& call) {
  const auto& table = scratch_table();
  auto it = table.find(call.kernel);
  if (it == table.end() || !roles_fit(kernel_table().at(call.kernel).roles, call.vars.size())) return 0;
  tile::Attrs attrs(call.attrs);
  if (!attrs.ok()) return 0;
  return std::max<int64_t>(it->second(call, attrs), 0);
}

int64_t heap_scratch_bytes() { return tile::heap_scratch_total.load(std::memory_order_relaxed); }
int64_t heap_scratch_bytes_this_thread() { return tile::heap_scratch_thread; }

std::vector<KernelInfo> native_kernels() {
  std::vector<KernelInfo> out;
  for (const auto& [name, entry] : kernel_table()) out.push_back({name, entry.roles, entry.kind});
  std::sort(out.begin(), out.end(), [](const KernelInfo& a, const KernelInfo& b) { return a.name < b.name; });
  return out;
}

std::string kernel_kind(const std::string& kernel) {
  const auto& table = kernel_table();
  auto it = table.find(kernel);
  return it == table.end() ? std::string() : it->second.kind;
}

bool roles_fit(const std::vector<std::string>& roles, size_t count) {
  const bool variadic = std::any_of(roles.begin(), roles.end(), [](const std::string& r) {
    return !r.empty() && r.back() == '*';
  });
  return variadic ? count + 1 >= roles.size() : count == roles.size();
}

void bind_roles(TileCall& call, const std::vector<int>& role_vars) {
  const size_t n = call.vars.size();
  if (role_vars.empty()) return;
  std::vector<int> position(n, -1);  // description variable -> its position in role order
  if (role_vars.size() != n || call.var_names.size() != n || call.extents.size() != n)
    throw std::invalid_argument("bind_roles: the role order must name every variable once");
  for (size_t r = 0; r < n; ++r) {
    const int v = role_vars[r];
    if (v < 0 || static_cast<size_t>(v) >= n || position[v] >= 0)
      throw std::invalid_argument("bind_roles: the role order must name every variable once");
    position[v] = static_cast<int>(r);
  }
  TileCall permuted = call;
  for (size_t r = 0; r < n; ++r) {
    permuted.var_names[r] = call.var_names[role_vars[r]];
    permuted.extents[r] = call.extents[role_vars[r]];
    permuted.vars[r] = call.vars[role_vars[r]];
  }
  for (int& v : permuted.output_vars) v = position[v];
  call = std::move(permuted);
}

}  // namespace tilewise::kernels

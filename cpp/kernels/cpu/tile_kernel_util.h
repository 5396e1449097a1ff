// Shared pieces of the native tile kernels (tile_kernels.h): the attribute reader (op_attrs.h), views of an
// input's region, and the kernel signature the dispatch table (tile_kernels.cpp) lists. Internal to
// cpp/kernels/cpu; nothing outside includes it.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/tile_kernels.h"

namespace tilewise::kernels::tile {

/// Reads a call's parsed attributes for one kernel run. Reading an attribute that is not of the
/// asked form (not one number, not an integer, not a list of integers) sets ok() false, and the
/// kernel declines; the flag lives here, per run, so the prepared call stays untouched.
class Attrs {
 public:
  explicit Attrs(const OpAttrs& parsed) : parsed_(parsed), ok_(parsed.ok()) {}
  bool ok() const { return ok_; }
  /// A number attribute, or `fallback` when absent. Sets ok() false when it is not one number.
  double num(const std::string& key, double fallback) const;
  /// An integer attribute (a number with no fraction), or `fallback` when absent.
  int64_t integer(const std::string& key, int64_t fallback) const;
  /// A list of integers (a lone integer counts as a one-element list); empty when absent. Sets ok()
  /// false when it is something else.
  std::vector<int64_t> ints(const std::string& key) const;
  /// A list of integer pairs ([[1, 2], [0, 3]]; [] is none); empty when absent. Sets ok() false
  /// when it is something else.
  std::vector<std::pair<int64_t, int64_t>> pairs(const std::string& key) const;

 private:
  const OpAttrs& parsed_;
  mutable bool ok_;
};

/// A kernel: computes the call and returns true, or returns false having written nothing.
using Kernel = bool (*)(const TileCall& call, const Attrs& attrs);
/// A kernel's scratch bytes for a call (scratch_bytes in tile_kernels.h), from shapes alone.
using ScratchSize = int64_t (*)(const TileCall& call, const Attrs& attrs);

/// Bytes a piece of `bytes` takes from a call's scratch: pieces are 16-byte aligned (SIMD loads), so
/// a kernel's scratch size is the sum of its pieces' scratch_piece.
constexpr int64_t scratch_piece(int64_t bytes) { return (bytes + 15) / 16 * 16; }

/// A kernel's scratch for one call: pieces taken in turn from the call's scratch buffer, and from the
/// heap only when it has no room left (counted by heap_scratch_bytes; a planned call never does).
class Scratch {
 public:
  explicit Scratch(const TileCall& call)
      : next_(call.scratch), left_(call.scratch ? call.scratch_size : 0) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* floats(int64_t n) { return static_cast<float*>(take(n * static_cast<int64_t>(sizeof(float)))); }
  double* doubles(int64_t n) { return static_cast<double*>(take(n * static_cast<int64_t>(sizeof(double)))); }
  int64_t* ints(int64_t n) { return static_cast<int64_t*>(take(n * static_cast<int64_t>(sizeof(int64_t)))); }
  /// `bytes` bytes (16-byte aligned), uninitialised, valid until the Scratch goes.
  void* take(int64_t bytes);

 private:
  std::byte* next_;
  int64_t left_;
  std::vector<std::unique_ptr<std::byte[]>> heap_;
};

/// Whether `in`'s region holds every in-tensor element of the box `want` (holds() without looking
/// at the data: what scratch sizes decide from).
bool covers(const TileIn& in, const std::vector<Span>& want);

/// Whether every variable in [first, last) covers its full extent (a nested reduction, which no
/// kernel computes partially).
bool full_range(const TileCall& call, int first, int last);

/// Row-major strides of an input's region buffer, in elements.
std::vector<int64_t> region_strides(const TileIn& in);

/// Whether `in`'s region holds every element of the box `want` that lies inside the tensor (reads
/// outside the tensor are padding and need no storage). Also checks the region's rank and data.
bool holds(const TileIn& in, const std::vector<Span>& want);

/// The box an input reads when input dimension d is indexed by variable dim_vars[d] alone.
std::vector<Span> box_of(const TileCall& call, const std::vector<int>& dim_vars);

/// Pointer to the element at full-tensor coordinates `at` (inside the region) of `in`.
const float* element(const TileIn& in, const std::vector<int64_t>& at);

/// A rank-4 input's region addressed by full-tensor coordinates.
struct View4 {
  const float* data = nullptr;
  int64_t lo[4] = {0, 0, 0, 0};
  int64_t st[4] = {0, 0, 0, 1};
  const float* at(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return data + (a - lo[0]) * st[0] + (b - lo[1]) * st[1] + (c - lo[2]) * st[2] + (d - lo[3]) * st[3];
  }
};

/// A rank-4 input holding the box as a View4; false (decline) otherwise.
bool view4(const TileIn& in, const std::vector<Span>& box, View4* v);

/// Whether the first `count` variables are the output's axes, in order (the rest are reductions).
bool outputs_first(const TileCall& call, int count);

/// Whether every size fits the BLAS integer range, so kernels::gemm cannot refuse it after a kernel
/// has started writing.
bool fits_blas(std::initializer_list<int64_t> sizes);

/// Elements of the output tile (product of the output variables' range sizes).
int64_t output_size(const TileCall& call);

/// Strides of the output tile per variable (0 for variables that do not index the output).
std::vector<int64_t> output_strides(const TileCall& call);

/// floor(a / b) and ceil(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b);
int64_t ceil_div(int64_t a, int64_t b);

/// A sliding window's index s * o + d * k - p (convolution, pooling).
struct Window {
  int64_t s = 1, p = 0, d = 1;  ///< stride, padding, dilation
  /// Input coordinate read by output position o at kernel offset k.
  int64_t in(int64_t o, int64_t k) const { return s * o + d * k - p; }
  /// The positions o of `range` whose coordinate in(o, k) lies in [lo, hi].
  Span positions(Span range, int64_t k, int64_t lo, int64_t hi) const;
  /// Bounding box of the coordinates in [0, n) read over o in `o` and k in `k`: exactly the rows
  /// a region must hold (a strided window need not read the rows between).
  Span reads(Span o, Span k, int64_t n) const;
  /// Bounding box of the positions o in [0, n_out) that read a coordinate in `in` for some k in `k`.
  Span readers(Span in, Span k, int64_t n_out) const;
  /// Bounding box of the offsets k in `k` through which some position in [0, n_out) reads `in`.
  Span offsets_reaching(Span in, Span k, int64_t n_out) const;
};

// ---- kernel entry points, grouped by file; the dispatch table in tile_kernels.cpp lists them.

// gemm_kernels.cpp: products through kernels::gemm.
bool matmul(const TileCall&, const Attrs&);
bool matmul_tn(const TileCall&, const Attrs&);
bool matmul_nt(const TileCall&, const Attrs&);
bool matmul_tt(const TileCall&, const Attrs&);
bool batch_matmul(const TileCall&, const Attrs&);
bool batch_matmul_nt(const TileCall&, const Attrs&);
bool batch_matmul_tn(const TileCall&, const Attrs&);
bool linear(const TileCall&, const Attrs&);
bool linear_nobias(const TileCall&, const Attrs&);
bool linear_grad_input(const TileCall&, const Attrs&);
bool linear_grad_weight(const TileCall&, const Attrs&);
bool matvec(const TileCall&, const Attrs&);
bool vecmat(const TileCall&, const Attrs&);
bool outer(const TileCall&, const Attrs&);
bool lstm_gates(const TileCall&, const Attrs&);
bool bmatmul(const TileCall&, const Attrs&);
bool bmatmul_nt(const TileCall&, const Attrs&);
bool bmatmul_tn(const TileCall&, const Attrs&);
bool matmul_nd(const TileCall&, const Attrs&);
bool rnn_tanh_cell(const TileCall&, const Attrs&);

// elementwise_kernels.cpp: one output element from the inputs at (about) the same index.
bool identity(const TileCall&, const Attrs&);
bool neg(const TileCall&, const Attrs&);
bool relu(const TileCall&, const Attrs&);
bool relu_grad(const TileCall&, const Attrs&);
bool scale(const TileCall&, const Attrs&);
bool add(const TileCall&, const Attrs&);
bool sub(const TileCall&, const Attrs&);
bool mul(const TileCall&, const Attrs&);
bool div(const TileCall&, const Attrs&);
bool axpy(const TileCall&, const Attrs&);
bool sgd(const TileCall&, const Attrs&);
bool momentum_velocity(const TileCall&, const Attrs&);
bool momentum_weight(const TileCall&, const Attrs&);
bool fill_like(const TileCall&, const Attrs&);
bool add_n(const TileCall&, const Attrs&);  // add_<n>: the arity is the number of inputs
bool bias_add(const TileCall&, const Attrs&);
bool bias_add_channel(const TileCall&, const Attrs&);
bool add_row(const TileCall&, const Attrs&);
bool add_col(const TileCall&, const Attrs&);
bool mul_row(const TileCall&, const Attrs&);
bool mul_col(const TileCall&, const Attrs&);
bool mse_loss_backward(const TileCall&, const Attrs&);
bool l1_loss_backward(const TileCall&, const Attrs&);
bool smooth_l1_loss_backward(const TileCall&, const Attrs&);
bool bce_with_logits_backward(const TileCall&, const Attrs&);
bool nll_loss_backward(const TileCall&, const Attrs&);
bool select(const TileCall&, const Attrs&);
bool lstm_cell(const TileCall&, const Attrs&);
bool lstm_hidden(const TileCall&, const Attrs&);
bool lstm_cell_grad_c(const TileCall&, const Attrs&);
bool lstm_hidden_grad_c(const TileCall&, const Attrs&);

// elementwise_kernels.cpp, continued: activations, their gradients, optimizer and other maps.
bool exp_(const TileCall&, const Attrs&);
bool log_(const TileCall&, const Attrs&);
bool sqrt_(const TileCall&, const Attrs&);
bool rsqrt(const TileCall&, const Attrs&);
bool reciprocal(const TileCall&, const Attrs&);
bool abs_(const TileCall&, const Attrs&);
bool square(const TileCall&, const Attrs&);
bool sign(const TileCall&, const Attrs&);
bool erf_(const TileCall&, const Attrs&);
bool sigmoid(const TileCall&, const Attrs&);
bool tanh_(const TileCall&, const Attrs&);
bool silu(const TileCall&, const Attrs&);
bool gelu(const TileCall&, const Attrs&);
bool gelu_tanh(const TileCall&, const Attrs&);
bool softplus(const TileCall&, const Attrs&);
bool relu6(const TileCall&, const Attrs&);
bool step_count(const TileCall&, const Attrs&);
bool sqrt_grad(const TileCall&, const Attrs&);
bool rsqrt_grad(const TileCall&, const Attrs&);
bool reciprocal_grad(const TileCall&, const Attrs&);
bool abs_grad(const TileCall&, const Attrs&);
bool square_grad(const TileCall&, const Attrs&);
bool erf_grad(const TileCall&, const Attrs&);
bool sigmoid_grad(const TileCall&, const Attrs&);
bool tanh_grad(const TileCall&, const Attrs&);
bool relu6_grad(const TileCall&, const Attrs&);
bool softplus_grad(const TileCall&, const Attrs&);
bool maximum(const TileCall&, const Attrs&);
bool minimum(const TileCall&, const Attrs&);
bool squared_difference(const TileCall&, const Attrs&);
bool silu_grad(const TileCall&, const Attrs&);
bool gelu_grad(const TileCall&, const Attrs&);
bool gelu_tanh_grad(const TileCall&, const Attrs&);
bool squared_difference_grad(const TileCall&, const Attrs&);
bool maximum_grad(const TileCall&, const Attrs&);
bool div_grad_divisor(const TileCall&, const Attrs&);
bool where_(const TileCall&, const Attrs&);
bool where_grad(const TileCall&, const Attrs&);
bool leaky_relu(const TileCall&, const Attrs&);
bool leaky_relu_grad(const TileCall&, const Attrs&);
bool elu(const TileCall&, const Attrs&);
bool elu_grad(const TileCall&, const Attrs&);
bool clip(const TileCall&, const Attrs&);
bool clip_grad(const TileCall&, const Attrs&);
bool hardtanh_grad(const TileCall&, const Attrs&);
bool power(const TileCall&, const Attrs&);
bool power_grad(const TileCall&, const Attrs&);
bool dropout(const TileCall&, const Attrs&);
bool adam_m(const TileCall&, const Attrs&);
bool adam_v(const TileCall&, const Attrs&);
bool rmsprop_sq(const TileCall&, const Attrs&);
bool rmsprop_weight(const TileCall&, const Attrs&);
bool mse_loss_grad(const TileCall&, const Attrs&);
bool adam_weight(const TileCall&, const Attrs&);

bool lstm_cell_grad_gates(const TileCall&, const Attrs&);
bool lstm_hidden_grad_gates(const TileCall&, const Attrs&);

// elementwise_kernels.cpp, continued: broadcasts, size-1 axes and the GRU cell.
bool broadcast_add(const TileCall&, const Attrs&);
bool broadcast_sub(const TileCall&, const Attrs&);
bool broadcast_mul(const TileCall&, const Attrs&);
bool broadcast_div(const TileCall&, const Attrs&);
bool broadcast_maximum(const TileCall&, const Attrs&);
bool broadcast_minimum(const TileCall&, const Attrs&);
bool expand(const TileCall&, const Attrs&);
bool broadcast_to(const TileCall&, const Attrs&);
bool add_broadcast(const TileCall&, const Attrs&);
bool masked_fill(const TileCall&, const Attrs&);
bool squeeze(const TileCall&, const Attrs&);
bool unsqueeze(const TileCall&, const Attrs&);
bool reduce_mean_grad(const TileCall&, const Attrs&);
bool global_avg_pool2d_grad(const TileCall&, const Attrs&);
bool mul_scalar_tensor(const TileCall&, const Attrs&);
bool running_stat_update(const TileCall&, const Attrs&);
bool logsumexp_grad(const TileCall&, const Attrs&);
bool batch_norm_mean_grad(const TileCall&, const Attrs&);
bool batch_norm_inference(const TileCall&, const Attrs&);
bool batch_norm_inference_grad_input(const TileCall&, const Attrs&);
bool gru_cell(const TileCall&, const Attrs&);
bool gru_cell_grad_gi(const TileCall&, const Attrs&);
bool gru_cell_grad_gh(const TileCall&, const Attrs&);
bool gru_cell_grad_h(const TileCall&, const Attrs&);

// reduction_kernels.cpp: reductions, normalisation and losses.
bool sum_axes(const TileCall&, const Attrs&);
bool sum_to(const TileCall&, const Attrs&);
bool sum_leading(const TileCall&, const Attrs&);
bool reduce_mean(const TileCall&, const Attrs&);
bool reduce_sum(const TileCall&, const Attrs&);
bool reduce_max(const TileCall&, const Attrs&);
bool reduce_min(const TileCall&, const Attrs&);
bool cumsum(const TileCall&, const Attrs&);
bool cumsum_grad(const TileCall&, const Attrs&);
bool logsumexp(const TileCall&, const Attrs&);
bool argmax(const TileCall&, const Attrs&);
bool argmin(const TileCall&, const Attrs&);
bool reduce_var(const TileCall&, const Attrs&);
bool reduce_var_grad(const TileCall&, const Attrs&);
bool reduce_prod(const TileCall&, const Attrs&);
bool reduce_prod_grad(const TileCall&, const Attrs&);
bool batch_norm_var(const TileCall&, const Attrs&);
bool batch_norm_var_grad(const TileCall&, const Attrs&);
bool cross_entropy_grad(const TileCall&, const Attrs&);
bool batch_norm_mean(const TileCall&, const Attrs&);
bool global_max_pool2d_grad(const TileCall&, const Attrs&);
bool sum_product(const TileCall&, const Attrs&);
bool global_avg_pool2d(const TileCall&, const Attrs&);
bool global_max_pool2d(const TileCall&, const Attrs&);
bool conv2d_bias_grad(const TileCall&, const Attrs&);
bool sum_rows(const TileCall&, const Attrs&);
bool reduce_extremum_grad(const TileCall&, const Attrs&);
bool reduce_first_extremum_grad(const TileCall&, const Attrs&);
bool batch_norm_inference_grad_gamma(const TileCall&, const Attrs&);
bool batch_norm_train(const TileCall&, const Attrs&);
bool batch_norm_grad_input(const TileCall&, const Attrs&);
bool batch_norm_grad_gamma(const TileCall&, const Attrs&);
bool mse_loss(const TileCall&, const Attrs&);
bool l1_loss(const TileCall&, const Attrs&);
bool smooth_l1_loss(const TileCall&, const Attrs&);
bool bce_with_logits(const TileCall&, const Attrs&);
bool nll_loss(const TileCall&, const Attrs&);
bool cross_entropy(const TileCall&, const Attrs&);
bool cross_entropy_backward(const TileCall&, const Attrs&);

// pooling_kernels.cpp: windows over NCHW maps and 1-D max pooling.
bool max_pool2d(const TileCall&, const Attrs&);
bool max_pool2d_grad(const TileCall&, const Attrs&);
bool avg_pool2d(const TileCall&, const Attrs&);
bool avg_pool2d_grad(const TileCall&, const Attrs&);
bool adaptive_avg_pool2d(const TileCall&, const Attrs&);
bool adaptive_avg_pool2d_grad(const TileCall&, const Attrs&);
bool upsample_nearest2d_grad(const TileCall&, const Attrs&);
bool upsample_nearest2d_hw_grad(const TileCall&, const Attrs&);
bool max_pool1d(const TileCall&, const Attrs&);
bool max_pool1d_grad(const TileCall&, const Attrs&);

// embedding_kernels.cpp: lookups by id and their table gradients.
bool embedding(const TileCall&, const Attrs&);
bool embedding_grad(const TileCall&, const Attrs&);
bool one_hot(const TileCall&, const Attrs&);

// reduction_kernels.cpp, continued: row-wise ops over the last axis.
bool softmax(const TileCall&, const Attrs&);
bool log_softmax(const TileCall&, const Attrs&);
bool softmax_grad(const TileCall&, const Attrs&);
bool log_softmax_grad(const TileCall&, const Attrs&);
bool layer_norm(const TileCall&, const Attrs&);
bool layer_norm_grad_input(const TileCall&, const Attrs&);
bool layer_norm_grad_gamma(const TileCall&, const Attrs&);
bool rms_norm_grad_gamma(const TileCall&, const Attrs&);
bool rms_norm(const TileCall&, const Attrs&);
bool rms_norm_grad_input(const TileCall&, const Attrs&);

// layout_kernels.cpp: elements moved, not computed.
bool split_heads(const TileCall&, const Attrs&);
bool merge_heads(const TileCall&, const Attrs&);
bool permute(const TileCall&, const Attrs&);
bool transpose(const TileCall&, const Attrs&);
bool split(const TileCall&, const Attrs&);
bool flip(const TileCall&, const Attrs&);
bool batch_diagonal(const TileCall&, const Attrs&);
bool batch_diagonal_grad(const TileCall&, const Attrs&);
bool reshape(const TileCall&, const Attrs&);
bool concat(const TileCall&, const Attrs&);  // concat_<n>
bool stack(const TileCall&, const Attrs&);   // stack_<n>
bool unselect(const TileCall&, const Attrs&);
bool slice_axis(const TileCall&, const Attrs&);
bool slice_axis_grad(const TileCall&, const Attrs&);
bool pad(const TileCall&, const Attrs&);
bool unpad(const TileCall&, const Attrs&);
bool upsample_nearest2d(const TileCall&, const Attrs&);
bool upsample_nearest2d_hw(const TileCall&, const Attrs&);

// conv_kernels.cpp: convolutions by im2col / col2im and GEMM.
bool conv2d(const TileCall&, const Attrs&);
bool conv2d_backward_data(const TileCall&, const Attrs&);
bool conv2d_backward_filter(const TileCall&, const Attrs&);
bool depthwise_conv2d(const TileCall&, const Attrs&);
bool depthwise_conv2d_backward_data(const TileCall&, const Attrs&);
bool depthwise_conv2d_backward_filter(const TileCall&, const Attrs&);
bool conv1d(const TileCall&, const Attrs&);
bool conv1d_backward_data(const TileCall&, const Attrs&);
bool conv1d_backward_filter(const TileCall&, const Attrs&);

// Scratch sizes (ScratchSize) of the kernels that take scratch beyond a few fixed-size values.
int64_t conv2d_scratch(const TileCall&, const Attrs&);                  // im2col, packed filters
int64_t conv2d_backward_data_scratch(const TileCall&, const Attrs&);    // col matrix, packed blocks
int64_t conv2d_backward_filter_scratch(const TileCall&, const Attrs&);  // im2col, packed dy
int64_t accumulator_scratch(const TileCall&, const Attrs&);             // one double per output element
int64_t row_scratch(const TileCall&, const Attrs&);                     // one float row (softmax)
int64_t lookup_scratch(const TileCall&, const Attrs&);                  // one row index per id (embedding)

}  // namespace tilewise::kernels::tile

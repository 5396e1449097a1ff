// The parts of kernel selection (kernel_select.cpp: geometry, GEMMs, convolutions, reductions, row
// ops, the table; select_maps.cpp, select_layouts.cpp, select_gathers.cpp: the families added later)
// share these types and helpers. Internal to the CUDA stage: users include kernel_select.h.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "exec/cuda/kernel_select.h"
#include "kernels/cpu/gemm_contraction.h"

namespace tilewise::exec::cuda::select {

using kernels::DType;
using kernels::Span;
using kernels::TileCall;
using kernels::TileIn;
constexpr int kNone = kernels::kNoGemmVar;  // a GEMM dimension no variable plays (size 1)
constexpr int kMaxGemmCalls = 4096;  // calls one instruction may issue (loops enumerated on the host)
struct Attr {
  const kernels::OpAttrs& a;
  bool ok = true;
  double num(const char* key, double fallback) {
    const auto* v = a.find(key);
    if (!v) return fallback;
    if (!v->numeric || v->list || v->nums.size() != 1) ok = false;
    return ok ? v->nums[0] : fallback;
  }
  long long integer(const char* key, long long fallback) {
    const double x = num(key, static_cast<double>(fallback));
    if (x != static_cast<double>(static_cast<long long>(x))) ok = false;
    return static_cast<long long>(x);
  }
  std::vector<long long> ints(const char* key) {
    std::vector<long long> out;
    const auto* v = a.find(key);
    if (!v) return out;
    if (!v->numeric || v->inner != 0) ok = false;
    for (double x : v->nums) out.push_back(static_cast<long long>(x));
    return out;
  }
};

using kernels::blas_layout;
using kernels::Contraction;
using Layout = kernels::BlasLayout;
using Operand = kernels::GemmOperand;
/// A map over the output block: out = fn(reads); each read is (input or kOutput, dims: per input
/// dimension the output position that indexes it, kNone for a fixed index 0).
struct Read {
  int input = 0;
  std::vector<int> at;  ///< per input dimension: output position, or kNone (index 0)
  std::vector<long long> shift = {};  ///< per input dimension: added to the index (kNone: the index); empty: 0
};

using Builder = std::function<std::string(const TileCall&, Attr&, std::vector<Step>*)>;
struct ConvAttrs {
  long long s = 1, p = 0, d = 1;
};

using ConvBuilder = std::string (*)(const TileCall&, const ConvAttrs&, const ConvAttrs&, std::vector<Step>*);
/// How a row op reads an input: whole last-axis rows of the block's leading indices, only the
/// block's columns of those rows, a vector indexed by the column (the block's columns, or whole),
/// or a scalar.
enum class RowIn { kRows, kBlockCols, kVector, kWholeVector, kScalar };

struct RowShape {
  std::vector<int> lead;  ///< the variables of the leading dimensions
  int col = 0;            ///< the column variable
  long long n = 1;        ///< the row length (the last axis' extent)
};

enum class RowThreads { kPerRow, kOne, kPerColumn };

struct HeadAttrs {
  long long heads = 1, dh = 1, piece = 0, pieces = 1;
};

using Params = std::function<std::vector<float>(Attr&)>;

// kernel_select.cpp: geometry of the call's buffers, GEMMs, convolutions, reductions, row ops, batch norm, pooling, layouts, embeddings
std::vector<long long> region_strides(const TileIn& in);
std::vector<long long> output_strides(const TileCall& call);
long long output_size(const TileCall& call);
bool outputs_are(const TileCall& call, std::vector<int> vars);
bool outputs_first(const TileCall& call, int r);
bool all_float(const TileCall& call);
bool view(const TileCall& call, int input, const std::vector<int>& dims, long long* base,
          std::vector<long long>* strides, const std::vector<long long>& fixed = {});
long long size_of(const TileCall& call, int v);
long long at(const std::vector<long long>& s, int v);
std::string add_gemms(const TileCall& call, const Contraction& c, bool accumulate, std::vector<Step>* steps);
std::string add_map(const TileCall& call, MapFn fn, std::vector<float> p, const std::vector<Read>& reads,
                    std::vector<Step>* steps);
std::string add_map_box(const TileCall& call, const std::vector<Span>& box, MapFn fn, std::vector<float> p,
                        const std::vector<Read>& reads, std::vector<Step>* steps);
std::string zero_fill(const TileCall& call, std::vector<Step>* steps);
std::vector<Span> output_box(const TileCall& call);
Read aligned(const TileCall& call, int input);
bool pure_map(const TileCall& call, size_t inputs);
std::string aligned_map(const TileCall& call, size_t n, MapFn fn, std::vector<float> p, std::vector<Step>* steps);
std::string bias_fill(const TileCall& call, const std::vector<int>& biases, int pos, std::vector<Step>* steps);
bool full(const TileCall& call, int v);
std::string mat(const TileCall& call, std::vector<int> a, std::vector<int> b, std::vector<Step>* s);
std::string batch_mat(const TileCall& call, std::vector<int> a, std::vector<int> b, std::vector<Step>* s);
std::string batched(const TileCall& call, std::vector<int> a_tail, std::vector<int> b_tail, bool b_batched,
                    std::vector<Step>* s);
bool linear_like(const TileCall& call, Contraction* c, int* r_out);
std::string linear(const TileCall& call, bool bias, std::vector<Step>* s);
std::string linear_grad_input(const TileCall& call, std::vector<Step>* s);
std::string linear_grad_weight(const TileCall& call, std::vector<Step>* s);
std::string two_gemms(const TileCall& call, const std::vector<int>& biases, std::vector<Step>* s);
bool conv_attrs(Attr& a, ConvAttrs* c);
Span rows_read(Span o, Span k, const ConvAttrs& g, long long size);
std::string window(Span o, long long kk, long long size, const ConvAttrs& g, Span held, long long* first,
                   long long* rows, long long* pad);
bool tensor4(const TileCall& call, int input, const long long lo[4], const long long size[4], long long* offset,
             long long stride[4]);
std::string packed_filter(const TileCall& call, int input, Span co, Span ci, ConvCall* c);
std::string conv2d_geom(const TileCall& call, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* steps);
std::string conv2d_backward_data_geom(const TileCall& call, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* steps);
std::string conv2d_backward_filter_geom(const TileCall& call, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* steps);
std::string conv_any(const TileCall& call, ConvBuilder build, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* steps);
std::string conv_2d(const TileCall& call, Attr& a, ConvBuilder build, std::vector<Step>* steps);
std::string conv_1d(const TileCall& call, Attr& a, ConvBuilder build, std::vector<Step>* steps);
std::string reduce(const TileCall& call, const std::vector<int>& dim_var, ReduceFn fn, double scale,
                   std::vector<Step>* steps, PairTerm term = PairTerm::kNone);
bool along_axis(const TileCall& call, Attr& a, std::vector<int>* dim_var, long long* extent);
std::string axis_reduce(const TileCall& call, Attr& a, ReduceFn fn, bool mean, std::vector<Step>* s);
std::string sum_axes(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string sum_to(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string sum_leading(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string pair_loss(const TileCall& call, PairTerm term, double scale, int lead, std::vector<Step>* s);
double inverse_numel(const TileCall& call);
std::string row_read(const TileCall& call, int input, RowIn kind, const RowShape& g, RowArgs* a);
std::string add_row(const TileCall& call, RowFn fn, const RowShape& g, const std::vector<RowIn>& ins, double eps,
                    double scale, RowThreads threads, std::vector<Step>* steps);
bool nested_full(const TileCall& call, int from);
std::string row_op(const TileCall& call, Attr& a, RowFn fn, const std::vector<RowIn>& ins, double eps_default,
                   std::vector<Step>* s);
std::string cross_entropy(const TileCall& call, bool backward, std::vector<Step>* s);
std::string norm_grad_gamma(const TileCall& call, Attr& a, bool rms, std::vector<Step>* s);
Builder row(RowFn fn, std::vector<RowIn> ins, double eps_default = 0);
Read shifted(int input, long long col_shift);
bool lstm_layout(const TileCall& call, size_t inputs, int gates, int hidden_of, long long* hidden);
std::string lstm_map(const TileCall& call, const char* kernel, std::vector<Step>* s);
std::string lstm_gate_grad(const TileCall& call, bool hidden, std::vector<Step>* s);
bool in_order(const TileCall& call, size_t inputs);
bool axis_attr(Attr& a, int rank, int* axis, bool negative = true);
Read without_axis(const TileCall& call, int input, int ax);
std::vector<Span> slab(const TileCall& call, int ax, long long t);
std::string select_op(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string stack_op(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string unselect_op(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string slice_op(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s);
bool head_attrs(Attr& a, HeadAttrs* h);
bool rank3(const TileCall& call);
std::string split_heads(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string merge_heads(const TileCall& call, Attr& a, std::vector<Step>* s);
bool nchw(const TileCall& call, int input, const std::vector<Span>& need, long long* base, long long stride[4]);
bool channel_vector(const TileCall& call, int input, Span c, long long* base);
std::string batch_norm(const TileCall& call, Attr& a, ChannelFn fn, std::vector<Step>* s);
bool gather_input(const TileCall& call, int input, const std::vector<Span>& need, GatherArgs* g, int slot);
Span window_reads(Span o, long long klo, long long khi, long long s, long long p, long long n);
void block_of(const TileCall& call, int count, GatherArgs* g);
std::string max_pool2d(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s);
std::string window_sum(const TileCall& call, long long kh, long long kw, double scale, bool grad, std::vector<Step>* s);
Builder adaptive_avg(bool grad);
std::string reshape_op(const TileCall& call, std::vector<Step>* s);
std::string ids_read(const TileCall& call, int input, const std::vector<int>& pos, RowArgs* a);
std::string embedding(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s);
Builder unary(MapFn fn);
Builder binary(MapFn fn);
Builder broadcast(int dim_from_end, MapFn fn, bool from_end);
std::string typed_reads(const TileCall& call, std::vector<Step>* steps);

// select_maps.cpp: the element-wise families
Params none();
Params attr(const char* key, double fallback);
Params attrs2(const char* k0, double f0, const char* k1, double f1);
Builder aligned_with(size_t n, MapFn fn, Params params);
double numel(const TileIn& in);
Builder loss_backward(MapFn fn, Params params);
bool axes_of(Attr& a, const char* key, int nd, std::vector<bool>* axes);
bool right_aligned(const TileCall& call, int input, Attr& a, const char* key, Read* r);
Builder broadcast_binary(MapFn fn);
Read skipping(const TileCall& call, int input, int axis);
std::string adam_weight(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string masked_fill(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string expand_op(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string broadcast_to(const TileCall& call, Attr& a, std::vector<Step>* s);
bool output_axis(Attr& a, int rank, int* axis);
std::string squeeze_op(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string unsqueeze_op(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string reduce_mean_grad(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string logsumexp_grad(const TileCall& call, Attr& a, std::vector<Step>* s);
std::string batch_norm_inference(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s);

// select_layouts.cpp: strided box copies, permutations
std::string strided_copy(const TileCall& call, int input, const std::vector<long long>& out_lo,
                         const std::vector<long long>& out_step, const std::vector<long long>& x_lo,
                         const std::vector<long long>& x_step, const std::vector<long long>& size,
                         std::vector<Step>* steps);
std::vector<long long> block_lo(const TileCall& call);
std::vector<long long> block_size(const TileCall& call);
std::string strided_read(const TileCall& call, int ax, long long start, long long step, std::vector<Step>* s);
std::string concat_op(const TileCall& call, Attr& a, std::vector<Step>* s);
bool pads_before(Attr& a, size_t rank, std::vector<long long>* before);
std::string pad_op(const TileCall& call, Attr& a, bool un, std::vector<Step>* s);
std::string slice_grad(const TileCall& call, int ax, long long start, long long step, std::vector<Step>* s);
std::string permute_op(const TileCall& call, const std::vector<long long>& perm, std::vector<Step>* s);
std::string batch_diagonal_grad(const TileCall& call, std::vector<Step>* s);

// select_gathers.cpp: whole-row ops, pooling, one-hot, batch norm statistics, the GRU, depthwise and direct convolutions
bool gather_slot(const TileCall& call, int input, const std::vector<int>& dim_of, const std::vector<Span>& need,
                 Step* step, int slot);
Step gather_step(const TileCall& call, GatherFn fn, int out_dims);
Span all_of(long long n);
bool signed_axis(Attr& a, int nd, long long fallback, int* axis);
std::string axis_row(const TileCall& call, Attr& a, GatherFn fn, std::vector<Step>* s);
std::string axis_row_grad(const TileCall& call, Attr& a, GatherFn fn, std::vector<Step>* s);
std::string cumsum_op(const TileCall& call, bool suffix, std::vector<Step>* s);
std::string cross_entropy_grad(const TileCall& call, std::vector<Step>* s);
std::string global_max_pool2d_grad(const TileCall& call, std::vector<Step>* s);
std::string one_hot(const TileCall& call, std::vector<Step>* s);
std::string avg_pool2d(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s);
std::string max_pool1d(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s);
std::string channel_stats(const TileCall& call, Attr& a, ChannelFn fn, std::vector<Step>* s);
bool gru_layout(const TileCall& call, size_t inputs, int gi, int hidden_of, long long* hidden);
std::vector<Read> gru_gates(int gi, long long n, long long shift);
std::string gru_cell(const TileCall& call, std::vector<Step>* s);
std::string gru_gate_grads(const TileCall& call, bool times_r, std::vector<Step>* s);
std::string depthwise(const TileCall& call, Attr& a, GatherFn fn, std::vector<Step>* s);
std::string conv_direct(const TileCall& call, GatherFn fn, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* s);

}  // namespace tilewise::exec::cuda::select

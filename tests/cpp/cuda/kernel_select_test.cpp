// Kernel selection of the CUDA backend, host only: the cuBLAS parameters derived for row-major
// operands held in larger regions (offsets, leading dimensions, transpositions), the cuDNN
// descriptors of strided and padded convolutions, and the device functors of the element-wise and
// reduction kernels, each run by the host reference (host_reference.h) and compared with the CPU
// kernel (kernels::run_native) on the same call with random data.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "exec/cuda/host_reference.h"
#include "exec/cuda/kernel_select.h"
#include "kernels/cpu/tile_kernels.h"

namespace tilewise::exec::cuda {
namespace {

using kernels::Span;
using kernels::TileCall;

struct Call {
  TileCall call;
  std::vector<std::vector<float>> data;
};

// vars: extents and the block's ranges; inputs: (shape, region) per input.
Call make(const std::string& kernel, std::vector<int64_t> extents, std::vector<Span> vars, std::vector<int> outputs,
          std::vector<std::pair<std::vector<int64_t>, std::vector<Span>>> inputs, const std::string& attrs = "",
          uint64_t seed = 1) {
  Call c;
  c.call.type = c.call.kernel = kernel;
  c.call.attrs = kernels::OpAttrs::parse(attrs);
  for (size_t v = 0; v < extents.size(); ++v) c.call.var_names.push_back("v" + std::to_string(v));
  c.call.extents = extents;
  c.call.vars = vars;
  c.call.output_vars = outputs;
  for (int v : outputs) c.call.output_shape.push_back(extents[v]);
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::uniform_real_distribution<float> u(-1, 1);
  c.data.resize(inputs.size());
  for (size_t j = 0; j < inputs.size(); ++j) {
    kernels::TileIn in;
    in.shape = inputs[j].first;
    in.region = inputs[j].second;
    int64_t n = 1;
    for (const Span& s : in.region) n *= s.size();
    c.data[j].resize(static_cast<size_t>(n));
    for (float& x : c.data[j]) x = u(rng);
    in.data = c.data[j].data();
    c.call.inputs.push_back(in);
  }
  return c;
}

// max |cuda - cpu| / max |cpu| over the block; -1 when the CPU kernel declines or nothing is selected.
double compare(Call& c, std::string* library = nullptr) {
  const Selection s = select_kernel(c.call);
  EXPECT_TRUE(s.ok()) << s.why_not;
  if (!s.ok()) return -1;
  if (library) *library = s.library;
  int64_t n = 1;
  for (int v : c.call.output_vars) n *= c.call.vars[v].size();
  std::vector<float> cpu(n), gpu(n, NAN);
  c.call.out = cpu.data();
  EXPECT_TRUE(kernels::run_native(c.call)) << c.call.kernel;
  c.call.out = gpu.data();
  run_steps_on_host(s.steps, c.call);
  double scale = 0, err = 0;
  for (int64_t i = 0; i < n; ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(cpu[i])));
    if (std::isnan(cpu[i]) && std::isnan(gpu[i])) continue;
    const double e = std::fabs(static_cast<double>(cpu[i]) - gpu[i]);
    err = std::max(err, std::isnan(e) ? INFINITY : e);
  }
  return err / std::max(scale, 1e-30);
}

TEST(CudaKernelSelect, GemmsOnOperandsInsideLargerRegions) {
  // out[i, j] = sum_k A[i, k] B[k, j] for a block i in [2, 6], j in [1, 4], k in [3, 9], with A and B
  // held in regions larger than the block: every operand has an offset and a leading dimension.
  const std::vector<Span> vars = {{2, 6}, {1, 4}, {3, 9}};
  struct Case {
    const char* kernel;
    std::vector<int64_t> a_shape, b_shape;
    std::vector<Span> a_region, b_region;
  };
  const std::vector<Case> cases = {
      {"matmul", {8, 12}, {12, 6}, {{1, 7}, {2, 11}}, {{0, 10}, {0, 5}}},
      {"matmul_tn", {12, 8}, {12, 6}, {{2, 11}, {1, 7}}, {{0, 10}, {0, 5}}},
      {"matmul_nt", {8, 12}, {6, 12}, {{1, 7}, {2, 11}}, {{0, 5}, {0, 10}}},
      {"matmul_tt", {12, 8}, {6, 12}, {{2, 11}, {1, 7}}, {{0, 5}, {0, 10}}},
  };
  for (const Case& k : cases) {
    Call c = make(k.kernel, {8, 6, 12}, vars, {0, 1}, {{k.a_shape, k.a_region}, {k.b_shape, k.b_region}});
    std::string lib;
    EXPECT_LT(compare(c, &lib), 1e-6) << k.kernel;
    EXPECT_EQ(lib, "cublas");
  }
}

TEST(CudaKernelSelect, BatchedGemmIsOneStridedBatchedCall) {
  // batch_matmul_nt (n, i, j, k): out[n, i, j] = sum_k a[n, i, k] b[n, j, k], the batch cuBLAS's.
  Call c = make("batch_matmul_nt", {4, 5, 6, 7}, {{1, 3}, {0, 4}, {0, 5}, {0, 6}}, {0, 1, 2},
                {{{4, 5, 7}, {{0, 3}, {0, 4}, {0, 6}}}, {{4, 6, 7}, {{1, 3}, {0, 5}, {0, 6}}}});
  const Selection s = select_kernel(c.call);
  ASSERT_TRUE(s.ok()) << s.why_not;
  ASSERT_EQ(s.steps.size(), 1u);
  const GemmCall& g = s.steps[0].gemm;
  // Row-major C (5 x 6) = A B^T is column-major C^T = B A^T: cuBLAS's A is b read transposed.
  EXPECT_TRUE(g.transa);
  EXPECT_FALSE(g.transb);
  EXPECT_EQ(g.m, 6);
  EXPECT_EQ(g.n, 5);
  EXPECT_EQ(g.k, 7);
  EXPECT_EQ(g.lda, 7);
  EXPECT_EQ(g.ldb, 7);
  EXPECT_EQ(g.ldc, 6);
  EXPECT_EQ(g.batch, 3);
  EXPECT_EQ(g.stride_a, 6 * 7);
  EXPECT_EQ(g.stride_b, 5 * 7);
  EXPECT_EQ(g.stride_c, 5 * 6);
  EXPECT_EQ(g.a_offset, 0);       // b's region starts at the block's n = 1
  EXPECT_EQ(g.b_offset, 5 * 7);   // a's region starts at n = 0
  EXPECT_LT(compare(c), 1e-6);
}

TEST(CudaKernelSelect, LinearWithBiasAndPartialLinearGradWeight) {
  // linear (i0, i1, k): x[i0, i1, k] W[i1', k] + b: the bias written first, the GEMM accumulates.
  Call lin = make("linear", {3, 4, 5}, {{0, 2}, {0, 3}, {0, 4}}, {0, 1},
                  {{{3, 5}, {{0, 2}, {0, 4}}}, {{4, 5}, {{0, 3}, {0, 4}}}, {{4}, {{0, 3}}}});
  EXPECT_LT(compare(lin), 1e-6);
  // linear_grad_weight (j, k, r0, r1) over a split first reduction variable: a reducing loop.
  Call gw = make("linear_grad_weight", {4, 5, 6, 3}, {{0, 3}, {0, 4}, {2, 4}, {0, 2}}, {0, 1},
                 {{{6, 3, 4}, {{2, 4}, {0, 2}, {0, 3}}}, {{6, 3, 5}, {{2, 4}, {0, 2}, {0, 4}}}});
  EXPECT_LT(compare(gw), 1e-6);
}

TEST(CudaKernelSelect, ConvolutionsAsCudnnDescriptors) {
  // (b, co, y, x, ci, dy, dx) on 2 x 3 x 9 x 7 data, 4 filters of 3 x 3, stride 2, padding 1: the last
  // row is never read, so the bottom pads less than the top (cuDNN's floor takes it).
  for (const char* attrs : {R"({"stride": 2, "padding": 1})", R"({"stride": 1, "padding": 1, "dilation": 2})"}) {
    const bool strided = std::string(attrs).find("\"stride\": 2") != std::string::npos;
    const int64_t ho = strided ? 5 : 7, wo = strided ? 4 : 5;
    Call f = make("conv2d", {2, 4, ho, wo, 3, 3, 3}, {{0, 1}, {1, 3}, {0, ho - 1}, {0, wo - 1}, {0, 2}, {0, 2}, {0, 2}},
                  {0, 1, 2, 3}, {{{2, 3, 9, 7}, {{0, 1}, {0, 2}, {0, 8}, {0, 6}}}, {{4, 3, 3, 3}, {{0, 3}, {0, 2}, {0, 2}, {0, 2}}}},
                  attrs);
    std::string lib;
    EXPECT_LT(compare(f, &lib), 1e-6) << attrs;
    EXPECT_EQ(lib, "cudnn");
    Call bd = make("conv2d_backward_data", {2, 3, 9, 7, 4, 3, 3},
                   {{0, 1}, {0, 2}, {0, 8}, {0, 6}, {0, 3}, {0, 2}, {0, 2}}, {0, 1, 2, 3},
                   {{{2, 4, ho, wo}, {{0, 1}, {0, 3}, {0, ho - 1}, {0, wo - 1}}}, {{4, 3, 3, 3}, {{0, 3}, {0, 2}, {0, 2}, {0, 2}}}},
                   attrs);
    EXPECT_LT(compare(bd), 1e-6) << attrs;
    // The filter gradient over half the batch (a data-parallel partial sum).
    Call bf = make("conv2d_backward_filter", {4, 3, 3, 3, 2, ho, wo},
                   {{0, 3}, {0, 2}, {0, 2}, {0, 2}, {1, 1}, {0, ho - 1}, {0, wo - 1}}, {0, 1, 2, 3},
                   {{{2, 3, 9, 7}, {{1, 1}, {0, 2}, {0, 8}, {0, 6}}}, {{2, 4, ho, wo}, {{1, 1}, {0, 3}, {0, ho - 1}, {0, wo - 1}}}},
                   attrs);
    EXPECT_LT(compare(bf), 1e-6) << attrs;
  }
}

TEST(CudaKernelSelect, EveryMapFunctorMatchesTheCpuKernel) {
  // A 3 x 4 block at (1, 2) of 5 x 7 tensors, each input in a region larger than the block.
  const std::vector<std::pair<const char*, int>> maps = {
      {"identity", 1}, {"neg", 1}, {"relu", 1}, {"relu_grad", 2}, {"add", 2}, {"sub", 2}, {"mul", 2}, {"div", 2},
      {"exp", 1}, {"log", 1}, {"sqrt", 1}, {"rsqrt", 1}, {"reciprocal", 1}, {"abs", 1}, {"square", 1},
      {"sigmoid", 1}, {"tanh", 1}, {"silu", 1}, {"gelu", 1}, {"gelu_tanh", 1}, {"sqrt_grad", 2},
      {"rsqrt_grad", 2}, {"reciprocal_grad", 2}, {"square_grad", 2}, {"sigmoid_grad", 2}, {"tanh_grad", 2},
      {"silu_grad", 2}, {"gelu_grad", 2}, {"maximum", 2}, {"minimum", 2}, {"squared_difference", 2},
      {"scale", 1}, {"axpy", 2}, {"sgd", 2}, {"momentum_velocity", 2}, {"momentum_weight", 2}, {"adam_m", 2},
      {"adam_v", 2}, {"dropout", 2}, {"fill_like", 1}, {"add_n", 2}, {"add_n", 3}, {"add_n", 6}};
  const std::string attrs = R"({"alpha": 0.5, "beta": 0.25, "lr": 0.1, "weight_decay": 0.01, "p": 0.2, "value": 3})";
  for (const auto& [name, n] : maps) {
    std::vector<std::pair<std::vector<int64_t>, std::vector<Span>>> inputs(n, {{5, 7}, {{0, 4}, {1, 6}}});
    Call c = make(name, {5, 7}, {{1, 3}, {2, 5}}, {0, 1}, inputs, attrs);
    std::string lib;
    const double e = compare(c, &lib);
    EXPECT_GE(e, 0) << name;
    EXPECT_LT(e, 1e-5) << name;
    EXPECT_EQ(lib, "kernel") << name;
  }
  // Broadcasts: bias_add along the last axis, mul_col along the first.
  Call b = make("bias_add", {5, 7}, {{1, 3}, {2, 5}}, {0, 1}, {{{5, 7}, {{0, 4}, {0, 6}}}, {{7}, {{1, 6}}}});
  EXPECT_LT(compare(b), 1e-6);
  Call m = make("mul_col", {5, 7}, {{1, 3}, {2, 5}}, {0, 1}, {{{5, 7}, {{1, 3}, {2, 5}}}, {{5}, {{0, 4}}}});
  EXPECT_LT(compare(m), 1e-6);
}

TEST(CudaKernelSelect, ReductionsMatchTheCpuKernel) {
  // sum_axes over axis 1 of a (4, 6, 5) tensor: vars (i0, i1) kept, r summed; a split reduction.
  Call s = make("sum_axes", {4, 5, 6}, {{1, 3}, {0, 4}, {2, 5}}, {0, 1}, {{{4, 6, 5}, {{0, 3}, {1, 5}, {0, 4}}}},
                R"({"axes": [1]})");
  EXPECT_LT(compare(s), 1e-6);
  for (const char* k : {"reduce_mean", "reduce_max", "reduce_min", "reduce_sum"}) {
    Call r = make(k, {4, 6, 5}, {{0, 3}, {0, 5}, {0, 4}}, {0, 1}, {{{4, 5, 6}, {{0, 3}, {0, 4}, {0, 5}}}},
                  R"({"axis": 1})");
    EXPECT_LT(compare(r), 1e-6) << k;
  }
}

// Row ops on a block of rows and columns whose inputs sit in larger regions: x's rows whole in a
// region of more rows, gamma/beta holding only some columns (base before the region's start).
TEST(CudaKernelSelect, RowOpsOnSplitColumnsInLargerRegions) {
  const std::vector<Span> block = {{1, 2}, {2, 4}, {0, 5}};
  Call ln = make("layer_norm", {4, 6, 6}, block, {0, 1},
                 {{{4, 6}, {{0, 3}, {0, 5}}}, {{6}, {{1, 5}}}, {{6}, {{2, 4}}}}, R"({"eps": 0.001})");
  EXPECT_LT(compare(ln), 1e-6);
  Call sm = make("softmax", {4, 6, 6}, block, {0, 1}, {{{4, 6}, {{1, 3}, {0, 5}}}});
  EXPECT_LT(compare(sm), 1e-6);
  for (const char* k : {"softmax_grad", "log_softmax_grad"}) {
    Call g = make(k, {4, 6}, {{1, 2}, {2, 4}}, {0, 1}, {{{4, 6}, {{0, 3}, {0, 5}}}, {{4, 6}, {{1, 2}, {0, 5}}}});
    EXPECT_LT(compare(g), 1e-6) << k;
  }
  Call gi = make("layer_norm_grad_input", {4, 6}, {{1, 2}, {2, 4}}, {0, 1},
                 {{{4, 6}, {{0, 3}, {0, 5}}}, {{4, 6}, {{1, 2}, {0, 5}}}, {{6}, {{0, 5}}}});
  EXPECT_LT(compare(gi), 1e-6);
  // gamma's gradient: j split, the rows a partial sum over b {1, 2} of 4; dy holds only the columns.
  Call gg = make("layer_norm_grad_gamma", {6, 4, 6, 6}, {{2, 4}, {1, 2}, {0, 5}, {0, 5}}, {0},
                 {{{4, 6}, {{1, 2}, {2, 4}}}, {{4, 6}, {{0, 3}, {0, 5}}}});
  EXPECT_LT(compare(gg), 1e-6);
}

TEST(CudaKernelSelect, CrossEntropyOnASplitBlock) {
  // b {1, 3}, k {2, 4}: the logits' rows whole, the targets only the block's columns.
  Call ce = make("cross_entropy", {4, 6, 6, 6}, {{1, 3}, {2, 4}, {0, 5}, {0, 5}}, {},
                 {{{4, 6}, {{0, 3}, {0, 5}}}, {{4, 6}, {{1, 3}, {2, 4}}}});
  EXPECT_LT(compare(ce), 1e-6);
  Call bw = make("cross_entropy_backward", {4, 6, 6, 6, 6}, {{1, 3}, {2, 4}, {0, 5}, {0, 5}, {0, 5}}, {0, 1},
                 {{{4, 6}, {{0, 3}, {0, 5}}}, {{4, 6}, {{1, 3}, {0, 5}}}, {{}, {}}});
  EXPECT_LT(compare(bw), 1e-6);
}

TEST(CudaKernelSelect, BatchNormOnSplitChannels) {
  // (b, c, h, w) then 9 statistics variables (whole); channels {1, 2} of 4, a corner of h and w.
  std::vector<int64_t> ext = {2, 4, 3, 3};
  std::vector<Span> vars = {{1, 1}, {1, 2}, {0, 2}, {1, 2}};
  for (int v = 0; v < 9; ++v) ext.push_back(1), vars.push_back({0, 0});
  const std::vector<Span> x_region = {{0, 1}, {0, 3}, {0, 2}, {0, 2}};
  Call tr = make("batch_norm_train", ext, vars, {0, 1, 2, 3}, {{{2, 4, 3, 3}, x_region}, {{4}, {{1, 2}}}, {{4}, {{0, 3}}}});
  EXPECT_LT(compare(tr), 1e-6);
  std::vector<int64_t> ext19 = ext;
  std::vector<Span> vars19 = vars;
  for (int v = 0; v < 6; ++v) ext19.push_back(1), vars19.push_back({0, 0});
  Call gi = make("batch_norm_grad_input", ext19, vars19, {0, 1, 2, 3},
                 {{{2, 4, 3, 3}, {{0, 1}, {1, 2}, {0, 2}, {0, 2}}}, {{2, 4, 3, 3}, x_region}, {{4}, {{0, 3}}}});
  EXPECT_LT(compare(gi), 1e-6);
  // gamma's gradient: c {1, 2}, a partial sum over the box (p, q, r) = ({1}, {0, 1}, {1, 2}).
  std::vector<Span> gv = {{1, 2}, {1, 1}, {0, 1}, {1, 2}};
  std::vector<int64_t> ge = {4, 2, 3, 3};
  for (int v = 0; v < 9; ++v) ge.push_back(1), gv.push_back({0, 0});
  Call gg = make("batch_norm_grad_gamma", ge, gv, {0}, {{{2, 4, 3, 3}, {{1, 1}, {1, 2}, {0, 1}, {1, 2}}}, {{2, 4, 3, 3}, x_region}});
  EXPECT_LT(compare(gg), 1e-6);
}

TEST(CudaKernelSelect, MaxPoolGradientRoutesTiesAsTheCpu) {
  // k 3, stride 2, padding 1 over 5 x 5: y from the CPU's max_pool2d on tied values, so windows
  // share maxima; the gradient's block is rows {1, 3} and window offsets i {0, 1} (a partial sum).
  const std::string attrs = R"({"kernel": 3, "stride": 2, "padding": 1})";
  Call fwd = make("max_pool2d", {1, 2, 3, 3, 3, 3}, {{0, 0}, {0, 1}, {0, 2}, {0, 2}, {0, 2}, {0, 2}}, {0, 1, 2, 3},
                  {{{1, 2, 5, 5}, {{0, 0}, {0, 1}, {0, 4}, {0, 4}}}}, attrs);
  for (size_t t = 0; t < fwd.data[0].size(); ++t) fwd.data[0][t] = static_cast<float>((t * 7) % 3);  // ties
  EXPECT_LT(compare(fwd), 1e-7);
  std::vector<float> y(18);
  fwd.call.out = y.data();
  ASSERT_TRUE(kernels::run_native(fwd.call));
  Call g = make("max_pool2d_grad", {1, 2, 5, 5, 3, 3, 3, 3, 3, 3},
                {{0, 0}, {0, 1}, {1, 3}, {0, 4}, {0, 1}, {0, 2}, {0, 2}, {0, 2}, {0, 2}, {0, 2}}, {0, 1, 2, 3},
                {{{1, 2, 5, 5}, {{0, 0}, {0, 1}, {0, 4}, {0, 4}}}, {{1, 2, 3, 3}, {{0, 0}, {0, 1}, {0, 2}, {0, 2}}},
                 {{1, 2, 3, 3}, {{0, 0}, {0, 1}, {0, 2}, {0, 2}}}},
                attrs);
  g.data[0] = fwd.data[0];
  g.data[1] = y;
  g.call.inputs[0].data = g.data[0].data();
  g.call.inputs[1].data = g.data[1].data();
  EXPECT_LT(compare(g), 1e-7);
}

TEST(CudaKernelSelect, AdaptiveAveragePoolingAndItsGradient) {
  // 7 x 7 windows over 14 x 14 (ResNet's last pool at 224): a block of rows, offsets i {2, 5} partial.
  const std::string attrs = R"({"kernel_h": 7, "kernel_w": 7})";
  Call f = make("adaptive_avg_pool2d", {2, 3, 2, 2, 7, 7}, {{0, 1}, {1, 2}, {1, 1}, {0, 1}, {2, 5}, {0, 6}}, {0, 1, 2, 3},
                {{{2, 3, 14, 14}, {{0, 1}, {0, 2}, {7, 13}, {0, 13}}}}, attrs);
  EXPECT_LT(compare(f), 1e-6);
  Call g = make("adaptive_avg_pool2d_grad", {2, 3, 14, 14}, {{1, 1}, {0, 2}, {3, 12}, {5, 13}}, {0, 1, 2, 3},
                {{{2, 3, 2, 2}, {{0, 1}, {0, 2}, {0, 1}, {0, 1}}}}, attrs);
  EXPECT_LT(compare(g), 1e-7);
}

TEST(CudaKernelSelect, LstmGateGradientsOverABlockAcrossQuarters) {
  // hidden 3: the block's columns {2, 8} meet quarters i, f and g; dy and c read at shifted columns.
  for (const char* k : {"lstm_cell_grad_gates", "lstm_hidden_grad_gates"}) {
    Call c = make(k, {3, 12}, {{0, 2}, {2, 8}}, {0, 1},
                  {{{3, 3}, {{0, 2}, {0, 2}}}, {{3, 12}, {{0, 2}, {0, 11}}}, {{3, 3}, {{0, 2}, {0, 2}}}});
    EXPECT_LT(compare(c), 1e-6) << k;
  }
  Call cell = make("lstm_cell", {3, 3}, {{1, 2}, {0, 2}}, {0, 1}, {{{3, 12}, {{0, 2}, {0, 11}}}, {{3, 3}, {{1, 2}, {0, 2}}}});
  EXPECT_LT(compare(cell), 1e-6);
}

TEST(CudaKernelSelect, HeadLayoutsAcrossAPieceBoundary) {
  // merge_heads piece 1 of 2 (heads 2, dim_head 3): columns {4, 10} start in piece 0 (zeros).
  const std::string attrs = R"({"heads": 2, "dim_head": 3, "piece": 1, "pieces": 2})";
  Call m = make("merge_heads", {2, 2, 12}, {{1, 1}, {0, 1}, {4, 10}}, {0, 1, 2}, {{{4, 2, 3}, {{2, 3}, {0, 1}, {0, 2}}}}, attrs);
  EXPECT_LT(compare(m), 1e-7);
  Call s = make("split_heads", {4, 2, 3}, {{1, 3}, {0, 1}, {1, 2}}, {0, 1, 2}, {{{2, 2, 12}, {{0, 1}, {0, 1}, {0, 11}}}}, attrs);
  EXPECT_LT(compare(s), 1e-7);
}

TEST(CudaKernelSelect, EmbeddingOverInt64IdsWithSplitRowsAndPadding) {
  // ids (2, 3) int64 with repeats, the padding id 2 and ids outside the gradient's rows {1, 3}.
  std::vector<int64_t> ids = {1, 3, 2, 1, 0, 3};
  Call f = make("embedding", {2, 3, 4}, {{0, 1}, {1, 2}, {1, 3}}, {0, 1, 2}, {{{5, 4}, {{0, 4}, {0, 3}}}, {{2, 3}, {{0, 1}, {0, 2}}}});
  f.call.inputs[1].dtype = kernels::DType::kInt64, f.call.inputs[1].data = nullptr, f.call.inputs[1].raw = ids.data();
  EXPECT_LT(compare(f), 1e-7);
  Call g = make("embedding_grad", {5, 4, 2, 3}, {{1, 3}, {1, 2}, {0, 1}, {0, 2}}, {0, 1},
                {{{2, 3}, {{0, 1}, {0, 2}}}, {{2, 3, 4}, {{0, 1}, {0, 2}, {0, 3}}}}, R"({"padding_idx": 2})");
  g.call.inputs[0].dtype = kernels::DType::kInt64, g.call.inputs[0].data = nullptr, g.call.inputs[0].raw = ids.data();
  EXPECT_LT(compare(g), 1e-7);
  // float32 ids (whole numbers) are read as such; bool ids are refused, naming what would do.
  std::vector<float> float_ids(ids.begin(), ids.end());
  g.call.inputs[0].dtype = kernels::DType::kFloat32, g.call.inputs[0].data = float_ids.data(), g.call.inputs[0].raw = float_ids.data();
  EXPECT_LT(compare(g), 1e-7);
  g.call.inputs[0].dtype = kernels::DType::kBool;
  EXPECT_NE(select_kernel(g.call).why_not.find("int64 or float32"), std::string::npos);
}

TEST(CudaKernelSelect, WhatHasNoCudaKernelIsNamed) {
  Call c = make("upsample_nearest2d", {1, 1, 4, 4}, {{0, 0}, {0, 0}, {0, 3}, {0, 3}}, {0, 1, 2, 3},
                {{{1, 1, 2, 2}, {{0, 0}, {0, 0}, {0, 1}, {0, 1}}}});
  EXPECT_LT(compare(c), 1e-7);  // every CPU kernel has a translation now
  c.call.kernel = "no_such_kernel";
  const Selection s = select_kernel(c.call);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.why_not.find("no_such_kernel"), std::string::npos) << s.why_not;
  EXPECT_NE(s.why_not.find("no CUDA implementation"), std::string::npos) << s.why_not;
  c.call.kernel = "";
  EXPECT_NE(select_kernel(c.call).why_not.find("no native kernel"), std::string::npos);
}

}  // namespace
}  // namespace tilewise::exec::cuda

// The per-element math of the CUDA backend's own kernels, written once as __host__ __device__ code:
// kernels.cu runs it on the GPU (one thread per output element), host_reference.cpp runs the very
// same functions on the CPU, and the host tests compare that with the CPU kernels. So the index
// arithmetic and formulas a GPU will run are checked on machines without one; what is left
// unchecked is only the launch itself (grid, streams, memory).
//
// Plain structs of fixed size: they are passed by value as kernel arguments.
#pragma once
#include <math.h>

#if defined(__CUDACC__)
#define TW_HD __host__ __device__ inline
#else
#define TW_HD inline
#endif

namespace tilewise::exec::cuda {

constexpr int kMaxDims = 8;   ///< output dimensions of a map or reduction (after merging)
constexpr int kMaxReads = 8;  ///< inputs one map reads (the GRU's gate gradients: 8)

/// The element-wise functions (one per CPU kernel formula they reproduce; see kernel_select.cpp).
/// `p` holds the op's float attributes in the order each case names.
enum class MapFn : int {
  kCopy, kNeg, kRelu, kReluGrad, kScale /*alpha, beta*/, kAdd, kSub, kMul, kDiv, kAxpy /*alpha*/,
  kSgd /*lr, wd*/, kMomentumVelocity /*momentum, 1 - dampening*/, kMomentumWeight /*lr*/, kFill /*value*/,
  kExp, kLog, kSqrt, kRsqrt, kReciprocal, kAbs, kSquare, kSigmoid, kTanh, kSilu, kGelu, kGeluTanh,
  kSqrtGrad, kRsqrtGrad, kReciprocalGrad, kSquareGrad, kSigmoidGrad, kTanhGrad, kSiluGrad, kGeluGrad,
  kMaximum, kMinimum, kSquaredDifference, kDropout /*1 / (1 - p)*/, kAdamM /*beta1, 1 - beta1*/,
  kAdamV /*beta2, 1 - beta2*/, kMseLossBackward /*1 / numel*/, kTanhOf /*tanh(a): an epilogue*/,
  kAdd3, kAdd4,
  // the LSTM cell (gates read at their quarter's columns; sigmoid and tanh as the CPU's, libm's here)
  kLstmCell /*(f, c, i, g): s(f) c + s(i) tanh(g)*/, kLstmHidden /*(o, c): s(o) tanh(c)*/,
  kMulSigmoid /*(dy, f): dy s(f)*/, kLstmGradTanhSig /*(d, s, t): d tanh(t) s(s) (1 - s(s))*/,
  kLstmGradMulSig /*(d, s, c): d c s(s) (1 - s(s))*/, kLstmGradSigTanh /*(d, s, i): d s(i) (1 - tanh(s)^2)*/,
  // activations and their gradients ((dy, x) for a gradient unless said), elementwise_kernels.cpp's formulas
  kSign, kErf, kSoftplus, kRelu6, kLeakyRelu /*slope*/, kElu /*alpha*/, kClip /*lo, hi*/, kPower /*exponent*/,
  kAbsGrad, kErfGrad, kRelu6Grad, kSoftplusGrad, kLeakyReluGrad /*slope*/, kEluGrad /*alpha*/, kClipGrad /*lo, hi*/,
  kHardtanhGrad /*lo, hi*/, kPowerGrad /*exponent*/, kGeluTanhGrad,
  // (dy, a, b) gradients, selections and scaled maps
  kSquaredDifferenceGrad, kMaximumGrad, kDivGradDivisor, kWhere /*(cond, a, b)*/, kWhereGrad /*(cond, dy); first*/,
  kMaskedFill /*(x, mask); value*/, kDivBy /*a / p0*/, kScaledDifference /*p0 (a - b)*/,
  // the losses' gradients: (a, b, dy) with dy a scalar; nll: (other, dy)
  kL1LossBackward /*numel*/, kSmoothL1LossBackward /*beta, numel*/, kBceWithLogitsBackward /*numel*/,
  kNllLossBackward /*batch*/,
  // optimizers: rmsprop's weight (w, g, s; lr, eps); Adam's weight (w, m, v, t; lr, eps, wd; q: beta1, beta2)
  kRmspropWeight, kAdamWeight,
  // batch norm with running statistics: (x, mean, var, gamma, beta; eps) and its input gradient (dy, var, gamma; eps)
  kBatchNormInference, kBatchNormInferenceGradInput,
  // logsumexp's gradient (dy, x, y): dy exp(x - y)
  kExpDifferenceTimes,
  // the GRU cell (gates r | z | n by thirds; G = the six gate reads gir, ghr, giz, ghz, gin, ghn):
  // (G, h): (1 - z) n + z h; (dy, giz, ghz): dy z; the gate gradients (dy, G[, h]) per third,
  // r: dn ghn r (1 - r), z: dy (h - n) z (1 - z), n: dn (times r when p0), dn = dy (1 - z) (1 - n^2)
  kGruCell, kGruGradH, kGruGradR, kGruGradZ, kGruGradN,
};

/// The element type of a read: float32, or an integer or bool operand (a mask, a label) that a float
/// op reads as float32, as the CPU runtime's float32 copies hold it (torch's promotion).
enum class ReadType : int { kFloat32, kInt64, kInt32, kBool };

/// Element `off` of a buffer of type `type`, as the float the op computes with.
TW_HD float tw_load(const float* p, int type, long long off) {
  switch (static_cast<ReadType>(type)) {
    case ReadType::kFloat32: return p[off];
    case ReadType::kInt64: return static_cast<float>(static_cast<double>(reinterpret_cast<const long long*>(p)[off]));
    case ReadType::kInt32: return static_cast<float>(static_cast<double>(reinterpret_cast<const int*>(p)[off]));
    case ReadType::kBool: return reinterpret_cast<const unsigned char*>(p)[off] != 0 ? 1.0f : 0.0f;
  }
  return NAN;
}

/// out[i] = fn(reads...) over an output block of `dims` dimensions (row-major, sizes `size`); read r
/// is at base[r] + sum_d idx[d] * stride[r][d] of its buffer (stride 0: broadcast along d).
struct MapArgs {
  int fn = 0;
  int dims = 0;
  int reads = 0;
  float p[4] = {0, 0, 0, 0};
  double q[2] = {0, 0};  ///< attributes kept in double where the CPU computes with them in double (Adam's betas)
  long long size[kMaxDims] = {};
  long long base[kMaxReads] = {};
  long long stride[kMaxReads][kMaxDims] = {};
  long long elements = 0;
  /// Where element i is written: out[i] (out_strided 0), or out_base + sum_d idx[d] out_stride[d]
  /// (a box inside the block: one quarter of the LSTM gates, a slab of a stack).
  int out_strided = 0;
  long long out_base = 0;
  long long out_stride[kMaxDims] = {};
  int type[kMaxReads] = {};  ///< per read: ReadType
};

/// The output offset of flat element `i` of a map.
TW_HD long long map_out_offset(const MapArgs& a, long long i) {
  if (!a.out_strided) return i;
  long long off = a.out_base;
  for (int d = a.dims - 1; d >= 0; --d) {
    off += (i % a.size[d]) * a.out_stride[d];
    i /= a.size[d];
  }
  return off;
}

/// The offsets of flat output element `i` in each read (one thread's index arithmetic).
TW_HD void map_offsets(const MapArgs& a, long long i, long long* off) {
  for (int r = 0; r < a.reads; ++r) off[r] = a.base[r];
  for (int d = a.dims - 1; d >= 0; --d) {
    const long long idx = i % a.size[d];
    i /= a.size[d];
    for (int r = 0; r < a.reads; ++r) off[r] += idx * a.stride[r][d];
  }
}

TW_HD float tw_logistic(float x) { return 1.0f / (1.0f + expf(-x)); }
TW_HD float tw_nan_max(float a, float b) { return a != a || b != b ? NAN : (a > b ? a : b); }
TW_HD float tw_nan_min(float a, float b) { return a != a || b != b ? NAN : (a < b ? a : b); }
TW_HD float tw_truth(bool b) { return b ? 1.0f : 0.0f; }

/// Adam's bias correction 1 / (1 - beta^t), in double as adam_weight's (1 for beta = 0).
TW_HD double tw_adam_correction(double beta, double step) { return beta == 0.0 ? 1.0 : 1.0 / (1.0 - exp(step * log(beta))); }

/// The formula of `fn` on the values read (v[0..reads)), float32 as the CPU kernels compute it.
TW_HD float map_apply(int fn, const float* p, const double* q, const float* v) {
  const float a = v[0], b = v[1], c = v[2];
  constexpr float kInvSqrt2Pi = 0.39894228040143268f, kSqrt1_2 = 0.70710678118654752f;
  constexpr float kGeluC = 0.79788456080286536f;
  switch (static_cast<MapFn>(fn)) {
    case MapFn::kCopy: return a;
    case MapFn::kNeg: return -a;
    case MapFn::kRelu: return a > 0.0f || a != a ? a : 0.0f;
    case MapFn::kReluGrad: return b <= 0.0f ? 0.0f : a;  // (dy, x); dy at NaN, as torch
    case MapFn::kScale: return p[0] * a + p[1];
    case MapFn::kAdd: return a + b;
    case MapFn::kSub: return a - b;
    case MapFn::kMul: return a * b;
    case MapFn::kDiv: return a / b;
    case MapFn::kAxpy: return p[0] * a + b;
    case MapFn::kSgd: return a - p[0] * (b + p[1] * a);  // (w, g)
    case MapFn::kMomentumVelocity: return p[0] * a + p[1] * b;
    case MapFn::kMomentumWeight: return a - p[0] * b;
    case MapFn::kFill: return p[0];
    case MapFn::kExp: return expf(a);
    case MapFn::kLog: return logf(a);
    case MapFn::kSqrt: return sqrtf(a);
    case MapFn::kRsqrt: return 1.0f / sqrtf(a);
    case MapFn::kReciprocal: return 1.0f / a;
    case MapFn::kAbs: return fabsf(a);
    case MapFn::kSquare: return a * a;
    case MapFn::kSigmoid: return tw_logistic(a);
    case MapFn::kTanh:
    case MapFn::kTanhOf: return tanhf(a);
    case MapFn::kSilu: return a * tw_logistic(a);
    case MapFn::kGelu: return a * 0.5f * erfcf(-a * kSqrt1_2);
    case MapFn::kGeluTanh: return 0.5f * a * (1.0f + tanhf(kGeluC * (a + 0.044715f * a * a * a)));
    case MapFn::kSqrtGrad: return 0.5f * a / b;
    case MapFn::kRsqrtGrad: return -0.5f * a * b * b * b;
    case MapFn::kReciprocalGrad: return -a * b * b;
    case MapFn::kSquareGrad: return 2.0f * a * b;
    case MapFn::kSigmoidGrad: return a * b * (1.0f - b);
    case MapFn::kTanhGrad: return a * (1.0f - b * b);
    case MapFn::kSiluGrad: {
      const float s = tw_logistic(b);
      return a * s * (1.0f + b * (1.0f - s));
    }
    case MapFn::kGeluGrad: return a * (0.5f * erfcf(-b * kSqrt1_2) + b * expf(-0.5f * b * b) * kInvSqrt2Pi);
    case MapFn::kMaximum: return tw_nan_max(a, b);
    case MapFn::kMinimum: return tw_nan_min(a, b);
    case MapFn::kSquaredDifference: return (a - b) * (a - b);
    case MapFn::kDropout: return a * b * p[0];
    case MapFn::kAdamM: return p[0] * a + p[1] * b;
    case MapFn::kAdamV: return p[0] * a + p[1] * b * b;
    case MapFn::kMseLossBackward: return 2.0f * (a - b) * c * p[0];  // (a, b, dy)
    case MapFn::kAdd3: return a + b + c;
    case MapFn::kAdd4: return a + b + c + v[3];
    case MapFn::kLstmCell: return tw_logistic(a) * b + tw_logistic(c) * tanhf(v[3]);
    case MapFn::kLstmHidden: return tw_logistic(a) * tanhf(b);
    case MapFn::kMulSigmoid: return a * tw_logistic(b);
    case MapFn::kLstmGradTanhSig: {
      const float s = tw_logistic(b);
      return a * tanhf(c) * s * (1.0f - s);
    }
    case MapFn::kLstmGradMulSig: {
      const float s = tw_logistic(b);
      return a * c * s * (1.0f - s);
    }
    case MapFn::kLstmGradSigTanh: {
      const float t = tanhf(b);
      return a * tw_logistic(c) * (1.0f - t * t);
    }
    case MapFn::kSign: return tw_truth(a > 0) - tw_truth(a < 0);
    case MapFn::kErf: return erff(a);
    case MapFn::kSoftplus: return tw_nan_max(a, 0.0f) + log1pf(expf(-fabsf(a)));
    case MapFn::kRelu6: return tw_nan_min(tw_nan_max(a, 0.0f), 6.0f);
    case MapFn::kLeakyRelu: return a > 0 ? a : p[0] * a;
    case MapFn::kElu: return a > 0 ? a : p[0] * expm1f(a);
    case MapFn::kClip: return tw_nan_min(tw_nan_max(a, p[0]), p[1]);
    case MapFn::kPower: return powf(a, p[0]);
    case MapFn::kAbsGrad: return a * (tw_truth(b > 0) - tw_truth(b < 0));
    case MapFn::kErfGrad: return a * 1.12837916709551257f * expf(-b * b);
    case MapFn::kRelu6Grad: return b > 0 && b < 6 ? a : 0.0f;
    case MapFn::kSoftplusGrad: return a * tw_logistic(b);
    case MapFn::kLeakyReluGrad: return b > 0 ? a : p[0] * a;
    case MapFn::kEluGrad: return b > 0 ? a : a * p[0] * expf(b);
    case MapFn::kClipGrad: return a * tw_truth(b >= p[0]) * tw_truth(b <= p[1]);
    case MapFn::kHardtanhGrad: return b > p[0] && b < p[1] ? a : 0.0f;
    case MapFn::kPowerGrad: return a * p[0] * powf(b, p[0] - 1.0f);
    case MapFn::kGeluTanhGrad: {
      const float t = tanhf(kGeluC * (b + 0.044715f * b * b * b));
      return a * (0.5f * (1.0f + t) + 0.5f * b * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * b * b));
    }
    case MapFn::kSquaredDifferenceGrad: return 2.0f * a * (b - c);
    case MapFn::kMaximumGrad: return a * (tw_truth(b > c) + 0.5f * tw_truth(b == c));
    case MapFn::kDivGradDivisor: return -a * b / (c * c);
    case MapFn::kWhere: return a != 0.0f ? b : c;
    case MapFn::kWhereGrad: return (a != 0.0f) == (p[0] != 0.0f) ? b : 0.0f;
    case MapFn::kMaskedFill: return b != 0.0f ? p[0] : a;
    case MapFn::kDivBy: return a / p[0];
    case MapFn::kScaledDifference: return p[0] * (a - b);
    case MapFn::kL1LossBackward: return (tw_truth(a > b) - tw_truth(a < b)) * c / p[0];
    case MapFn::kSmoothL1LossBackward: {
      const float d = a - b;
      const float g = fabsf(d) < p[0] ? d / p[0] : tw_truth(d > 0) - tw_truth(d < 0);
      return g * c / p[1];
    }
    case MapFn::kBceWithLogitsBackward: return (1.0f / (1.0f + expf(-a)) - b) * c / p[0];
    case MapFn::kNllLossBackward: return -a * b / p[0];
    case MapFn::kRmspropWeight: return a - p[0] * b / (sqrtf(c) + p[1]);
    case MapFn::kAdamWeight: {  // the corrections from the step count v[3], as adam_weight computes them once
      const double step = v[3];
      const float c1 = static_cast<float>(tw_adam_correction(q[0], step));
      const float c2 = static_cast<float>(tw_adam_correction(q[1], step));
      return a - p[0] * (b * c1 / (sqrtf(c * c2) + p[1]) + p[2] * a);
    }
    case MapFn::kBatchNormInference: return (a - b) / sqrtf(c + p[0]) * v[3] + v[4];
    case MapFn::kBatchNormInferenceGradInput: return a * c / sqrtf(b + p[0]);
    case MapFn::kExpDifferenceTimes: return a * expf(b - c);
    case MapFn::kGruCell: {
      const float r = tw_logistic(a + b), z = tw_logistic(c + v[3]), n = tanhf(v[4] + r * v[5]);
      return (1.0f - z) * n + z * v[6];
    }
    case MapFn::kGruGradH: return a * tw_logistic(b + c);
    case MapFn::kGruGradR:
    case MapFn::kGruGradZ:
    case MapFn::kGruGradN: {  // a = dy, then the six gate reads (and h for z)
      const float r = tw_logistic(b + c), z = tw_logistic(v[3] + v[4]), n = tanhf(v[5] + r * v[6]);
      const float dn = a * (1.0f - z) * (1.0f - n * n);
      if (static_cast<MapFn>(fn) == MapFn::kGruGradR) return a * (1.0f - z) * (1.0f - n * n) * v[6] * r * (1.0f - r);
      if (static_cast<MapFn>(fn) == MapFn::kGruGradZ) return a * (v[7] - n) * z * (1.0f - z);
      return p[0] != 0.0f ? dn * r : dn;
    }
  }
  return NAN;
}

/// One map element: reads through map_offsets, applies the formula (a GPU thread's whole work).
/// `in[r]` is read r's buffer.
TW_HD float map_element(const MapArgs& a, const float* const* in, long long i) {
  long long off[kMaxReads];
  float v[kMaxReads] = {};
  map_offsets(a, i, off);
  for (int r = 0; r < a.reads; ++r) v[r] = tw_load(in[r], a.type[r], off[r]);
  return map_apply(a.fn, a.p, a.q, v);
}

/// How a reduction folds.
enum class ReduceFn : int { kSum, kMax, kMin, kProd /*a product in double, as reduce_prod's fold*/ };

/// out[o] = scale * fold over the reduced variables of x[...]: `keep` output dimensions (sizes
/// keep_size, row-major in the output) and `fold` reduced dimensions (sizes fold_size); x's offset
/// is base + sum idx * stride over both. Sums accumulate in double, as the CPU kernels do.
struct ReduceArgs {
  int fn = 0;
  int keep = 0, fold = 0;
  double scale = 1.0;
  long long base = 0;
  long long keep_size[kMaxDims] = {}, keep_stride[kMaxDims] = {};
  long long fold_size[kMaxDims] = {}, fold_stride[kMaxDims] = {};
  long long outputs = 1, folded = 1;
  /// A second input y folded pairwise with x (the losses): term(x, y) is summed instead of x.
  int term = 0;  ///< PairTerm
  long long base2 = 0, keep_stride2[kMaxDims] = {}, fold_stride2[kMaxDims] = {};
  double param = 0;  ///< the pair term's parameter (smooth L1's beta)
  /// split > 1: two phases, so that no thread folds a long range alone (a loss's one output over a
  /// whole batch): split partials per output, each over a contiguous chunk of the folded range, into
  /// a double scratch (reduce_partial_element), then each output folds its partials
  /// (reduce_combine_element).
  long long split = 1;
};

/// What a paired reduction sums (mse_loss, l1_loss, sum_product, nll_loss), in double as the CPU.
enum class PairTerm : int { kNone, kSquaredDifference, kAbsDifference, kProduct, kBceWithLogits, kSmoothL1 /*beta: ReduceArgs::param*/ };

TW_HD double pair_term(int term, double x, double y, double param) {
  switch (static_cast<PairTerm>(term)) {
    case PairTerm::kNone: return x;
    case PairTerm::kSquaredDifference: return (x - y) * (x - y);
    case PairTerm::kAbsDifference: return fabs(x - y);
    case PairTerm::kProduct: return x * y;
    case PairTerm::kSmoothL1: {
      const double d = fabs(x - y);
      return d < param ? 0.5 * d * d / param : d - 0.5 * param;
    }
    case PairTerm::kBceWithLogits: {  // x logits, y targets; max NaN-propagating as nan_max
      const double relu = x != x ? x : (x > 0.0 ? x : 0.0);
      return relu - x * y + log(1.0 + exp(-fabs(x)));
    }
  }
  return NAN;
}

/// A reduction's starting value and one fold step (sums and products in double; Max and Min: NaN wins
/// and stays), shared by the one-phase fold and the split one's two phases.
TW_HD double reduce_identity(const ReduceArgs& a) {
  if (a.fn == static_cast<int>(ReduceFn::kSum)) return 0.0;
  if (a.fn == static_cast<int>(ReduceFn::kProd)) return 1.0;
  return a.fn == static_cast<int>(ReduceFn::kMax) ? -INFINITY : INFINITY;
}

TW_HD double reduce_step(const ReduceArgs& a, double acc, double v) {
  if (a.fn == static_cast<int>(ReduceFn::kSum)) return acc + v;
  if (a.fn == static_cast<int>(ReduceFn::kProd)) return acc * v;
  return v != v || (a.fn == static_cast<int>(ReduceFn::kMax) ? v > acc : v < acc) ? v : acc;
}

/// Output `o`'s fold over the folded positions [j0, j1), in double (unscaled).
TW_HD double reduce_range(const ReduceArgs& a, const float* x, const float* y, long long o, long long j0, long long j1) {
  long long at = a.base, at2 = a.base2;
  for (int d = a.keep - 1; d >= 0; --d) {
    const long long idx = o % a.keep_size[d];
    at += idx * a.keep_stride[d], at2 += idx * a.keep_stride2[d];
    o /= a.keep_size[d];
  }
  const bool pair = a.term != static_cast<int>(PairTerm::kNone);
  double acc = reduce_identity(a);
  for (long long j = j0; j < j1; ++j) {
    long long off = at, off2 = at2, t = j;
    for (int d = a.fold - 1; d >= 0; --d) {
      const long long idx = t % a.fold_size[d];
      off += idx * a.fold_stride[d], off2 += idx * a.fold_stride2[d];
      t /= a.fold_size[d];
    }
    acc = reduce_step(a, acc, pair ? pair_term(a.term, x[off], y[off2], a.param) : static_cast<double>(x[off]));
  }
  return acc;
}

/// The scale of a sum (a mean, a loss's 1 / numel), as a float.
TW_HD float reduce_finish(const ReduceArgs& a, double acc) {
  return static_cast<float>(a.fn == static_cast<int>(ReduceFn::kSum) ? acc * a.scale : acc);
}

/// Output element `o` of a reduction: one GPU thread folds its whole row (split reductions below take
/// long rows in two phases). `y`: the second input of a paired reduction (term != kNone), else unread.
TW_HD float reduce_element(const ReduceArgs& a, const float* x, const float* y, long long o) {
  return reduce_finish(a, reduce_range(a, x, y, o, 0, a.folded));
}

/// Phase 1 of a split reduction: partial `q` (output q / split, chunk q % split), in double.
TW_HD double reduce_partial_element(const ReduceArgs& a, const float* x, const float* y, long long q) {
  const long long chunk = (a.folded + a.split - 1) / a.split, j0 = (q % a.split) * chunk;
  return reduce_range(a, x, y, q / a.split, j0, j0 + chunk < a.folded ? j0 + chunk : a.folded);
}

/// Phase 2 of a split reduction: output `o` from its `split` partials.
TW_HD float reduce_combine_element(const ReduceArgs& a, const double* partials, long long o) {
  double acc = reduce_identity(a);
  for (long long c = 0; c < a.split; ++c) acc = reduce_step(a, acc, partials[o * a.split + c]);
  return reduce_finish(a, acc);
}

/// The doubles of scratch a split reduction's two phases pass between them (0: one phase).
TW_HD long long reduce_scratch_doubles(const ReduceArgs& a) { return a.split > 1 ? a.outputs * a.split : 0; }

// ---- row kernels: softmax, log-softmax, layer/RMS norm and their gradients, cross-entropy --------

/// The row functions (reduction_kernels.cpp's row ops, formula for formula). Inputs per fn:
/// softmax, log_softmax (x); softmax_grad, log_softmax_grad (dy, y); layer_norm (x, gamma, beta);
/// layer_norm_grad_input (dy, x, gamma); rms_norm (x, gamma); rms_norm_grad_input (dy, x, gamma);
/// cross_entropy (logits, target), one thread summing every row; cross_entropy_backward (logits,
/// target, dy scalar); layer/rms_norm_grad_gamma (dy, x), one thread per column summing every row.
enum class RowFn : int {
  kSoftmax, kLogSoftmax, kSoftmaxGrad, kLogSoftmaxGrad, kLayerNorm, kLayerNormGradInput, kRmsNorm,
  kRmsNormGradInput, kCrossEntropy, kCrossEntropyBackward, kLayerNormGradGamma, kRmsNormGradGamma,
  kEmbedding /*(table, ids): one thread per position*/, kEmbeddingGrad /*(ids, dy): one thread per column*/,
};

/// A row op over a block: `rows` rows (leading dimensions lead_size, row-major) of `n` columns
/// each, of which the block's columns [col_lo, col_lo + cols) are written, row after row. Input
/// r's element (row idx, column c) is at base[r] + sum_d idx[d] * stride[r][d] + c (base: column
/// 0, which may lie before the region when only the block's columns are held; stride 0 for a
/// vector indexed by column, or a scalar, read at base).
struct RowArgs {
  int fn = 0;
  int lead = 0;
  int inputs = 0;
  double eps = 0, scale = 1;
  long long n = 1, col_lo = 0, cols = 1, rows = 1;
  long long lead_size[kMaxDims] = {};
  long long base[kMaxReads] = {};
  long long stride[kMaxReads][kMaxDims] = {};
  long long threads = 1;  ///< rows; 1 for cross_entropy; cols for the gamma gradients
  /// Embedding: the table's rows (ids outside [0, table_rows) give NaN rows and are reported in an
  /// IdError, which the executors turn into the CPU's InvalidInput); the gradient's block of table rows
  /// [v_lo, v_hi] and the padding id (-1: none). Ids are int64, read through the float pointer.
  long long table_rows = 0, v_lo = 0, v_hi = -1, padding = -1;
  int ids_float = 0;  ///< the ids are float32 (whole numbers) instead of int64
  /// cross_entropy and the norms' gamma gradients in two phases: row_stage_thread, one thread per
  /// row, writes `stage_width` doubles per row into a scratch (the row's loss term; its mean and
  /// 1 / std), then row_thread reads them (a thread no longer walks every row, or every row per column).
  int staged = 0;
  int stage_width = 0;
};

/// Input r's element offset of row t's column 0 (or of position t, for an ids input).
TW_HD long long row_offset(const RowArgs& a, int r, long long t) {
  long long off = a.base[r];
  for (int d = a.lead - 1; d >= 0; --d) {
    off += (t % a.lead_size[d]) * a.stride[r][d];
    t /= a.lead_size[d];
  }
  return off;
}

/// Input r's pointer at column 0 of row t.
TW_HD const float* row_ptr(const RowArgs& a, const float* const* in, int r, long long t) {
  return in[r] + row_offset(a, r, t);
}

TW_HD long long row_id(const RowArgs& a, const float* const* in, int r, long long t) {
  if (!a.ids_float) return reinterpret_cast<const long long*>(in[r])[row_offset(a, r, t)];
  const float v = in[r][row_offset(a, r, t)];  // float32 ids: whole and non-negative, else -1 (as id_at)
  return !(v >= 0.0f) || v != floorf(v) || v >= 9.2e18f ? -1 : static_cast<long long>(v);
}

/// Mean and 1 / sqrt(variance + eps) of n values (double, as row_stats).
TW_HD void row_moments(const float* x, long long n, double eps, double* mu, double* rstd) {
  double s = 0;
  for (long long k = 0; k < n; ++k) s += x[k];
  const double m = s / n;
  double v = 0;
  for (long long k = 0; k < n; ++k) v += (x[k] - m) * (x[k] - m);
  *mu = m;
  *rstd = 1.0 / sqrt(v / n + eps);
}

TW_HD double row_rms_inverse(const float* x, long long n, double eps) {
  double s = 0;
  for (long long k = 0; k < n; ++k) s += static_cast<double>(x[k]) * x[k];
  return 1.0 / sqrt(s / n + eps);
}

/// max and log(sum(exp(x - max))) of a row in double, the max skipping NaN (cross_entropy's row_softmax).
TW_HD void row_log_sum_exp(const float* x, long long n, double* mx, double* log_sum) {
  double m = -INFINITY;
  for (long long k = 0; k < n; ++k)
    if (m < x[k]) m = x[k];
  double s = 0;
  for (long long k = 0; k < n; ++k) s += exp(x[k] - m);
  *mx = m;
  *log_sum = log(s);
}

/// The doubles of scratch a staged row op's phases pass between them (0: not staged).
TW_HD long long row_scratch_doubles(const RowArgs& a) { return a.staged ? a.rows * a.stage_width : 0; }

/// Phase 1 of a staged row op, thread `r` for row r: cross_entropy's sum over the block's columns of
/// target * log_softmax (one double), a norm's row mean and 1 / std (two doubles; RMS: 0 and 1 / rms).
TW_HD void row_stage_thread(const RowArgs& a, const float* const* in, double* stage, long long r) {
  const long long n = a.n, lo = a.col_lo, hi = a.col_lo + a.cols;
  const float* x = row_ptr(a, in, a.fn == static_cast<int>(RowFn::kCrossEntropy) ? 0 : 1, r);
  if (static_cast<RowFn>(a.fn) == RowFn::kCrossEntropy) {
    const float* tg = row_ptr(a, in, 1, r);
    double mx, ls, s = 0;
    row_log_sum_exp(x, n, &mx, &ls);
    for (long long c = lo; c < hi; ++c) s += tg[c] * ((x[c] - mx) - ls);
    stage[r] = s;
    return;
  }
  double mu = 0, rstd;
  if (static_cast<RowFn>(a.fn) == RowFn::kRmsNormGradGamma) rstd = row_rms_inverse(x, n, a.eps);
  else row_moments(x, n, a.eps, &mu, &rstd);
  stage[2 * r] = mu, stage[2 * r + 1] = rstd;
}

/// The first id outside its table that an embedding lookup met, written by the thread that met it
/// (the first to claim `set` on a GPU): `tag` names the launch (the executor's instruction), `id` the
/// id, `position` its flat index among the block's positions. Zeroed: nothing met.
struct IdError {
  int set = 0;
  long long tag = 0, id = 0, position = 0, table_rows = 0;
};

TW_HD void report_bad_id(IdError* e, long long tag, long long id, long long position, long long table_rows) {
  if (!e) return;
#ifdef __CUDA_ARCH__
  if (atomicCAS(&e->set, 0, 1) != 0) return;
#else
  if (e->set) return;
  e->set = 1;
#endif
  e->tag = tag, e->id = id, e->position = position, e->table_rows = table_rows;
}

/// One thread of a row op: thread `t` writes its outputs into `out` (the block, row-major). `stage`:
/// phase 1's doubles for a staged op (a.staged), else unread. `error`: where an embedding reports an id
/// outside its table (with `tag`); null: not reported.
TW_HD void row_thread(const RowArgs& a, const float* const* in, float* out, long long t, const double* stage = nullptr,
                      IdError* error = nullptr, long long tag = 0) {
  const long long n = a.n, lo = a.col_lo, hi = a.col_lo + a.cols;
  float* o = out + t * a.cols - lo;  // indexed by column
  switch (static_cast<RowFn>(a.fn)) {
    case RowFn::kSoftmax:
    case RowFn::kLogSoftmax: {
      const float* x = row_ptr(a, in, 0, t);
      float m = -INFINITY;  // NaN if any is NaN (row_max)
      for (long long k = 0; k < n; ++k) {
        if (x[k] != x[k]) { m = x[k]; break; }
        m = x[k] > m ? x[k] : m;
      }
      double z = 0;
      for (long long k = 0; k < n; ++k) z += static_cast<double>(expf(x[k] - m));
      if (static_cast<RowFn>(a.fn) == RowFn::kSoftmax) {
        const float inv = static_cast<float>(1.0 / z);
        for (long long c = lo; c < hi; ++c) o[c] = expf(x[c] - m) * inv;
      } else {
        const double lz = log(z);
        for (long long c = lo; c < hi; ++c) o[c] = static_cast<float>(static_cast<double>(x[c]) - m - lz);
      }
      return;
    }
    case RowFn::kSoftmaxGrad:
    case RowFn::kLogSoftmaxGrad: {
      const float *dy = row_ptr(a, in, 0, t), *y = row_ptr(a, in, 1, t);
      const bool soft = static_cast<RowFn>(a.fn) == RowFn::kSoftmaxGrad;
      double s = 0;
      for (long long k = 0; k < n; ++k) s += soft ? static_cast<double>(dy[k]) * y[k] : static_cast<double>(dy[k]);
      for (long long c = lo; c < hi; ++c)
        o[c] = soft ? static_cast<float>(y[c] * (dy[c] - s)) : static_cast<float>(dy[c] - exp(static_cast<double>(y[c])) * s);
      return;
    }
    case RowFn::kLayerNorm:
    case RowFn::kRmsNorm: {
      const float *x = row_ptr(a, in, 0, t), *gamma = row_ptr(a, in, 1, 0);
      if (static_cast<RowFn>(a.fn) == RowFn::kLayerNorm) {
        const float* beta = row_ptr(a, in, 2, 0);
        double mu, rstd;
        row_moments(x, n, a.eps, &mu, &rstd);
        for (long long c = lo; c < hi; ++c) o[c] = static_cast<float>((x[c] - mu) * rstd * gamma[c] + beta[c]);
      } else {
        const double inv = row_rms_inverse(x, n, a.eps);
        for (long long c = lo; c < hi; ++c) o[c] = static_cast<float>(x[c] * inv * gamma[c]);
      }
      return;
    }
    case RowFn::kLayerNormGradInput:
    case RowFn::kRmsNormGradInput: {
      const float *dy = row_ptr(a, in, 0, t), *x = row_ptr(a, in, 1, t), *gamma = row_ptr(a, in, 2, 0);
      if (static_cast<RowFn>(a.fn) == RowFn::kLayerNormGradInput) {
        double mu, rstd, m1 = 0, m2 = 0;
        row_moments(x, n, a.eps, &mu, &rstd);
        for (long long k = 0; k < n; ++k) m1 += static_cast<double>(dy[k]) * gamma[k];
        for (long long k = 0; k < n; ++k) m2 += static_cast<double>(dy[k]) * gamma[k] * (x[k] - mu);
        m1 /= n, m2 /= n;
        for (long long c = lo; c < hi; ++c)
          o[c] = static_cast<float>(rstd * (static_cast<double>(dy[c]) * gamma[c] - m1 - (x[c] - mu) * rstd * rstd * m2));
      } else {
        const double rr = row_rms_inverse(x, n, a.eps);
        double m = 0;
        for (long long k = 0; k < n; ++k) m += static_cast<double>(dy[k]) * gamma[k] * x[k];
        m /= n;
        for (long long c = lo; c < hi; ++c) o[c] = static_cast<float>(rr * gamma[c] * dy[c] - x[c] * rr * rr * rr * m);
      }
      return;
    }
    case RowFn::kCrossEntropy: {  // one thread: -sum over rows and block columns of target * log_softmax
      double s = 0;
      if (a.staged) {  // the rows' terms from phase 1
        for (long long r = 0; r < a.rows; ++r) s += stage[r];
        out[0] = static_cast<float>(-s * a.scale);
        return;
      }
      for (long long r = 0; r < a.rows; ++r) {
        const float *x = row_ptr(a, in, 0, r), *tg = row_ptr(a, in, 1, r);
        double mx, ls;
        row_log_sum_exp(x, n, &mx, &ls);
        for (long long c = lo; c < hi; ++c) s += tg[c] * ((x[c] - mx) - ls);
      }
      out[0] = static_cast<float>(-s * a.scale);
      return;
    }
    case RowFn::kCrossEntropyBackward: {  // scale: 1 / batch
      const float *x = row_ptr(a, in, 0, t), *tg = row_ptr(a, in, 1, t);
      const double scale = static_cast<double>(row_ptr(a, in, 2, 0)[0]) * a.scale;
      double mx, ls, tsum = 0;
      row_log_sum_exp(x, n, &mx, &ls);
      for (long long k = 0; k < n; ++k) tsum += tg[k];
      const double denom = exp(ls);
      for (long long c = lo; c < hi; ++c) o[c] = static_cast<float>((exp(x[c] - mx) / denom * tsum - tg[c]) * scale);
      return;
    }
    case RowFn::kEmbedding: {  // table row id's block columns (table: base at row 0, column 0; stride[0][0] its row stride)
      const long long id = row_id(a, in, 1, t);
      const bool ok = id >= 0 && id < a.table_rows;
      if (!ok) report_bad_id(error, tag, id, t, a.table_rows);
      const float* row = in[0] + a.base[0] + (ok ? id : 0) * a.stride[0][0];
      for (long long c = lo; c < hi; ++c) o[c] = ok ? row[c] : NAN;
      return;
    }
    case RowFn::kEmbeddingGrad: {  // column lo + t of the block's table rows, summed over positions in order
      const long long c = lo + t;
      for (long long r = 0; r < a.rows; ++r) {
        const long long id = row_id(a, in, 0, r);
        if (id < a.v_lo || id > a.v_hi || id == a.padding) continue;
        out[(id - a.v_lo) * a.cols + t] += row_ptr(a, in, 1, r)[c];
      }
      return;
    }
    case RowFn::kLayerNormGradGamma:
    case RowFn::kRmsNormGradGamma: {  // thread t: column col_lo + t, summed over every row
      const long long c = lo + t;
      const bool rms = static_cast<RowFn>(a.fn) == RowFn::kRmsNormGradGamma;
      double acc = 0;
      for (long long r = 0; r < a.rows; ++r) {
        const float *dy = row_ptr(a, in, 0, r), *x = row_ptr(a, in, 1, r);
        double mu = 0, rstd;
        if (a.staged) mu = stage[2 * r], rstd = stage[2 * r + 1];
        else if (rms) rstd = row_rms_inverse(x, n, a.eps);
        else row_moments(x, n, a.eps, &mu, &rstd);
        acc += static_cast<double>(dy[c]) * (x[c] - mu) * rstd;
      }
      out[t] = static_cast<float>(acc);
      return;
    }
  }
}

// ---- batch norm (training statistics): one thread per channel of the block --------------------

enum class ChannelFn : int {
  kBatchNormTrain, kBatchNormGradInput, kBatchNormGradGamma,
  kBatchNormVar /*out[t]: the channel's biased variance*/,
  kBatchNormVarGrad /*(dy vector at gamma_in, x): 2 dy[c] (x - mean) / count over the block box*/,
  kBatchNormInferenceGradGamma /*(dy, x, mean at gamma_in, var at beta_in): partial over the box*/,
};

/// Batch norm over NCHW with statistics over the whole (N, H, W) of each channel (the CPU kernels'
/// channel_stats: E[x], E[x^2] - E[x]^2 in double), for channels c_lo .. c_lo + cs - 1: train and
/// grad_input write the block box (b, c, h, w) row-major, grad_gamma out[t] summing dy (x - mean)
/// over the box (b, h, w) (a partial sum when split). Inputs: x at x_in, dy at dy_in, gamma at
/// gamma_in, beta at beta_in (-1: unused); x's and dy's element (n, c, h, w) is at
/// base + n s0 + c s1 + h s2 + w s3 (base: (0, 0, 0, 0), possibly outside the held region),
/// gamma's and beta's channel c at vbase + c.
struct ChannelArgs {
  int fn = 0;
  int x_in = -1, dy_in = -1, gamma_in = -1, beta_in = -1;
  double eps = 1e-5;
  long long N = 1, H = 1, W = 1;
  long long c_lo = 0, cs = 1, b_lo = 0, bs = 1, h_lo = 0, hs = 1, w_lo = 0, ws = 1;
  long long x_base = 0, x_stride[4] = {0, 0, 0, 0}, dy_base = 0, dy_stride[4] = {0, 0, 0, 0};
  long long gamma_base = 0, beta_base = 0;
  long long chunks = 1;  ///< phase 1's chunks per channel (channel_chunks of the elements walked)
};

// The statistics in three phases, so that a GPU spreads a channel's N*H*W elements over threads
// (one thread per channel walked them all: a batch's activations are tens of thousands per channel):
//   1. channel_partial_thread, one thread per (channel, chunk): over its chunk of the channel's whole
//      (N, H, W), sum x, x^2, and for grad_input dy and dy*x; over the block box (b, h, w), dy and
//      dy*x for the gamma gradients (inference: the block only, where x is held);
//   2. channel_combine_thread, one thread per channel: its chunks added in order; var and the gamma
//      gradients written to out[t], the others' coefficients to the stage;
//   3. channel_apply_element, one thread per element of the block (train, grad_input, var_grad).
// dy*(x - mean) sums are taken as sum(dy x) - mean sum(dy), in double.
constexpr int kChannelPartial = 6, kChannelCoef = 4;

TW_HD long long channel_chunks(long long elements) {
  const long long chunks = elements / 256;
  return chunks < 1 ? 1 : chunks > 1024 ? 1024 : chunks;
}

/// Doubles of stage the three phases use: per channel, its chunks' partial sums and its coefficients.
TW_HD long long channel_scratch_doubles(const ChannelArgs& a) {
  return a.cs * (a.chunks * kChannelPartial + kChannelCoef);
}

/// Whether phase 3 runs (the op writes the block's elements, not one value per channel).
TW_HD bool channel_writes_elements(const ChannelArgs& a) {
  const auto fn = static_cast<ChannelFn>(a.fn);
  return fn == ChannelFn::kBatchNormTrain || fn == ChannelFn::kBatchNormGradInput || fn == ChannelFn::kBatchNormVarGrad;
}

TW_HD long long channel_elements(const ChannelArgs& a) { return a.bs * a.cs * a.hs * a.ws; }

TW_HD void channel_partial_thread(const ChannelArgs& a, const float* const* in, double* stage, long long q) {
  const long long t = q / a.chunks, j = q % a.chunks, c = a.c_lo + t;
  const auto fn = static_cast<ChannelFn>(a.fn);
  const float* x = in[a.x_in] + a.x_base + c * a.x_stride[1];
  const float* dy = a.dy_in >= 0 ? in[a.dy_in] + a.dy_base + c * a.dy_stride[1] : nullptr;
  const bool inference = fn == ChannelFn::kBatchNormInferenceGradGamma;
  const bool full_dy = fn == ChannelFn::kBatchNormGradInput;
  const bool block_dy = fn == ChannelFn::kBatchNormGradGamma || inference;
  // The elements walked: the whole (N, H, W), or for inference the block (x is held there only).
  const long long n0 = inference ? a.b_lo : 0, nn = inference ? a.bs : a.N;
  const long long h0 = inference ? a.h_lo : 0, nh = inference ? a.hs : a.H;
  const long long w0 = inference ? a.w_lo : 0, nw = inference ? a.ws : a.W;
  const long long len = nn * nh * nw, lo = j * len / a.chunks, hi = (j + 1) * len / a.chunks;
  double s = 0, s2 = 0, sd = 0, sdx = 0, bd = 0, bdx = 0;
  for (long long i = lo; i < hi; ++i) {
    const long long n = n0 + i / (nh * nw), h = h0 + (i / nw) % nh, w = w0 + i % nw;
    const double v = x[n * a.x_stride[0] + h * a.x_stride[2] + w * a.x_stride[3]];
    s += v, s2 += v * v;
    if (full_dy) {
      const double d = dy[n * a.dy_stride[0] + h * a.dy_stride[2] + w * a.dy_stride[3]];
      sd += d, sdx += d * v;
    }
    if (block_dy && n >= a.b_lo && n < a.b_lo + a.bs && h >= a.h_lo && h < a.h_lo + a.hs && w >= a.w_lo &&
        w < a.w_lo + a.ws) {
      const double d = dy[n * a.dy_stride[0] + h * a.dy_stride[2] + w * a.dy_stride[3]];
      bd += d, bdx += d * v;
    }
  }
  double* p = stage + q * kChannelPartial;
  p[0] = s, p[1] = s2, p[2] = sd, p[3] = sdx, p[4] = bd, p[5] = bdx;
}

/// sum of dy (x - m) over channel c's block box (or its whole (N, H, W)), element by element as the
/// CPU kernel adds it: where an input is not finite, sum(dy x) - m sum(dy) gives another NaN or
/// infinity than the CPU's, so the combine walks the channel again (once, for that channel only).
TW_HD double channel_dy_x_minus(const ChannelArgs& a, const float* const* in, long long c, double m, bool block) {
  const float* x = in[a.x_in] + a.x_base + c * a.x_stride[1];
  const float* dy = in[a.dy_in] + a.dy_base + c * a.dy_stride[1];
  double acc = 0;
  for (long long n = block ? a.b_lo : 0; n < (block ? a.b_lo + a.bs : a.N); ++n)
    for (long long h = block ? a.h_lo : 0; h < (block ? a.h_lo + a.hs : a.H); ++h)
      for (long long w = block ? a.w_lo : 0; w < (block ? a.w_lo + a.ws : a.W); ++w)
        acc += dy[n * a.dy_stride[0] + h * a.dy_stride[2] + w * a.dy_stride[3]] *
               (x[n * a.x_stride[0] + h * a.x_stride[2] + w * a.x_stride[3]] - m);
  return acc;
}

TW_HD void channel_combine_thread(const ChannelArgs& a, const float* const* in, double* stage, float* out, long long t) {
  const long long c = a.c_lo + t;
  const auto fn = static_cast<ChannelFn>(a.fn);
  double sum[kChannelPartial] = {0, 0, 0, 0, 0, 0};
  for (long long j = 0; j < a.chunks; ++j)
    for (int k = 0; k < kChannelPartial; ++k) sum[k] += stage[(t * a.chunks + j) * kChannelPartial + k];
  const double s = sum[0], s2 = sum[1], sd = sum[2], sdx = sum[3], bd = sum[4], bdx = sum[5];
  if (fn == ChannelFn::kBatchNormInferenceGradGamma) {  // running statistics given
    const double mu = in[a.gamma_in][a.gamma_base + c];
    double acc = bdx - mu * bd;
    if (!isfinite(acc)) acc = channel_dy_x_minus(a, in, c, mu, true);
    out[t] = static_cast<float>(acc / sqrt(in[a.beta_in][a.beta_base + c] + a.eps));
    return;
  }
  const double count = static_cast<double>(a.N * a.H * a.W), mean = s / count;
  double* coef = stage + a.cs * a.chunks * kChannelPartial + t * kChannelCoef;
  if (fn == ChannelFn::kBatchNormVar) {
    out[t] = static_cast<float>(s2 / count - mean * mean);
    return;
  }
  if (fn == ChannelFn::kBatchNormVarGrad) {
    coef[0] = mean, coef[1] = 2.0 * in[a.gamma_in][a.gamma_base + c], coef[2] = count;
    return;
  }
  const double rstd = 1.0 / sqrt(s2 / count - mean * mean + a.eps);
  if (fn == ChannelFn::kBatchNormGradGamma) {
    double acc = bdx - mean * bd;
    if (!isfinite(acc)) acc = channel_dy_x_minus(a, in, c, mean, true);
    out[t] = static_cast<float>(acc * rstd);
    return;
  }
  const double scale = rstd * in[a.gamma_in][a.gamma_base + c];
  coef[0] = mean, coef[1] = scale;
  if (fn == ChannelFn::kBatchNormTrain) {
    coef[2] = in[a.beta_in][a.beta_base + c];
  } else {  // grad_input
    double dyx = sdx - mean * sd;
    if (!isfinite(dyx)) dyx = channel_dy_x_minus(a, in, c, mean, false);
    coef[2] = sd / count;                    // mean of dy
    coef[3] = rstd * rstd * (dyx / count);  // E[dy (x - mean)] / var
  }
}

/// Element e of the block, row-major (b, c, h, w) as the output holds it.
TW_HD void channel_apply_element(const ChannelArgs& a, const float* const* in, const double* stage, float* out,
                                 long long e) {
  const long long w = a.w_lo + e % a.ws, h = a.h_lo + (e / a.ws) % a.hs, t = (e / (a.ws * a.hs)) % a.cs;
  const long long n = a.b_lo + e / (a.ws * a.hs * a.cs), c = a.c_lo + t;
  const double* coef = stage + a.cs * a.chunks * kChannelPartial + t * kChannelCoef;
  const float xv = in[a.x_in][a.x_base + c * a.x_stride[1] + n * a.x_stride[0] + h * a.x_stride[2] + w * a.x_stride[3]];
  const double mean = coef[0];
  switch (static_cast<ChannelFn>(a.fn)) {
    case ChannelFn::kBatchNormTrain: out[e] = static_cast<float>((xv - mean) * coef[1] + coef[2]); return;
    case ChannelFn::kBatchNormVarGrad: out[e] = static_cast<float>(coef[1] * (xv - mean) / coef[2]); return;
    case ChannelFn::kBatchNormGradInput: {
      const float dv = in[a.dy_in][a.dy_base + c * a.dy_stride[1] + n * a.dy_stride[0] + h * a.dy_stride[2] +
                                   w * a.dy_stride[3]];
      out[e] = static_cast<float>(coef[1] * (dv - coef[2] - (xv - mean) * coef[3]));
      return;
    }
    default: return;
  }
}

// ---- gathers: max pooling and its gradient, row-major reshape (one thread per output element) -----

enum class GatherFn : int {
  kMaxPool2d, kMaxPool2dGrad, kReshape, kWindowSum, kWindowSumGrad,
  // average pooling with padding counted (count_include_pad) and its gradient; 1-D max pooling and its gradient
  kAvgPool2d, kAvgPool2dGrad, kMaxPool1d, kMaxPool1dGrad,
  // whole-row ops along one axis of x (slot 0): the row of output element idx starts at x's offset
  // base[0] + sum idx[d] stride[0][d] (the axis' own stride 0) and steps by row_stride, row_n long
  kLogSumExp, kArgMax, kArgMin /*partial over [i_lo, i_hi]*/, kReduceVar /*partial over [i_lo, i_hi]*/,
  kReduceVarGrad /*dy in slot 1*/, kReduceProdGrad /*dy in slot 1*/, kExtremumGrad /*y, dy in slots 1, 2*/,
  kFirstExtremumGrad /*y, dy in slots 1, 2*/, kCumsum, kCumsumGrad /*over [i_lo, i_hi], the position idx[1]*/,
  kCrossEntropyGrad /*target in slot 1; scale: the batch*/, kGlobalMaxPool2dGrad /*y, dy in slots 1, 2; H W: the map*/,
  kOneHot /*ids in slot 0 (int64 when k = 1, else float32), the class idx[dims - 1]*/,
  // depthwise convolutions (stride s, padding p, dilation d; a padded read is 0 times the filter):
  // forward (x, filters) and data gradient (dy, filters) partial over [i_lo, i_hi] x [j_lo, j_hi];
  // filter gradient (x, dy) over the rows [b_lo, b_hi] x [i_lo, i_hi] x [j_lo, j_hi] of dy
  kDepthwiseConv, kDepthwiseConvGradData, kDepthwiseConvGradFilter,
  // direct convolutions, where cuDNN's descriptors cannot express the call (a split data gradient, a
  // split filter sum, an asymmetric halo): rows by (rs, rp, rd), columns by (s, p, d); the reduction's
  // three ranges [b_lo, b_hi] x [i_lo, i_hi] x [j_lo, j_hi]: forward (x, w) over (ci, kh, kw), data
  // gradient (dy, w) over (co, kh, kw), filter gradient (x, dy) over (b, y, x)
  kConvDirect, kConvDirectGradData, kConvDirectGradFilter,
};

/// max_pool2d (x) and max_pool2d_grad (x, y, dy) over NCHW, window k, stride s, padding p, the
/// window offsets i in [i_lo, i_hi], j in [j_lo, j_hi] (a partial range when split); and reshape
/// (x): output element at flat position f of the output tensor is x's at flat position f; window
/// sums (adaptive_avg_pool2d, the nearest-upsampling gradients: kh = k, kw = s, no padding, times
/// scale) and adaptive_avg_pool2d_grad (dy[b, c, y / kh, z / kw] scale, 0 past dy).
/// Output block: dims `dims` of sizes size (row-major), starting at lo in the output tensor.
/// Input r's element (idx..) is at base[r] + sum idx[d] stride[r][d] (base: the all-zero index).
struct GatherArgs {
  int fn = 0;
  int dims = 0;
  long long k = 1, s = 1, p = 0, H = 1, W = 1, OH = 1, OW = 1;
  long long i_lo = 0, i_hi = 0, j_lo = 0, j_hi = 0;
  long long lo[kMaxDims] = {}, size[kMaxDims] = {};
  long long out_shape[kMaxDims] = {};  ///< reshape: the output tensor's shape
  int x_dims = 0;
  long long x_shape[kMaxDims] = {};    ///< reshape: x's shape
  long long base[3] = {0, 0, 0};
  long long stride[3][kMaxDims] = {};
  long long elements = 0;
  double scale = 1;
  long long row_n = 0, row_stride = 0;  ///< whole-row ops: the axis' extent and x's stride along it
  int axis = -1;                        ///< whole-row gradients: the output position of the axis
  long long d = 1, b_lo = 0, b_hi = -1;  ///< depthwise convolutions: dilation, the batch rows summed
  int type0 = 0;  ///< reshape: slot 0's ReadType (other gathers read float32)
  long long rs = 1, rp = 0, rd = 1;  ///< direct convolutions: the row axis' stride, padding, dilation
};

TW_HD double tw_sticky_max(double m, double v) { return v != v || v > m ? v : m; }  // NaN wins and stays
TW_HD double tw_sticky_min(double m, double v) { return v != v || v < m ? v : m; }

/// Slot r's element for output index idx (the all-zero-based offset with the slot's strides).
TW_HD long long gather_offset(const GatherArgs& a, int r, const long long* idx) {
  long long off = a.base[r];
  for (int d = 0; d < a.dims; ++d) off += idx[d] * a.stride[r][d];
  return off;
}

/// The whole-row functions (reduction_kernels.cpp's formulas, in double where they are).
TW_HD float axis_row_element(const GatherArgs& a, const float* const* in, const long long* idx) {
  const float* row = in[0] + gather_offset(a, 0, idx);
  const long long n = a.row_n, st = a.row_stride;
  switch (static_cast<GatherFn>(a.fn)) {
    case GatherFn::kLogSumExp: {
      double m = -INFINITY, s = 0;
      for (long long t = 0; t < n; ++t) m = tw_sticky_max(m, row[t * st]);
      for (long long t = 0; t < n; ++t) s += exp(row[t * st] - m);
      return static_cast<float>(m + log(s));
    }
    case GatherFn::kArgMax:
    case GatherFn::kArgMin: {
      const bool mx = static_cast<GatherFn>(a.fn) == GatherFn::kArgMax;
      double m = mx ? -INFINITY : INFINITY;
      for (long long t = 0; t < n; ++t) m = mx ? tw_sticky_max(m, row[t * st]) : tw_sticky_min(m, row[t * st]);
      for (long long t = a.i_lo; t <= a.i_hi; ++t)
        if (row[t * st] == m || row[t * st] != row[t * st]) return static_cast<float>(t);
      return INFINITY;
    }
    case GatherFn::kReduceVar: {
      double mu = 0, s = 0;
      for (long long t = 0; t < n; ++t) mu += row[t * st];
      mu /= static_cast<double>(n);
      for (long long t = a.i_lo; t <= a.i_hi; ++t) s += (row[t * st] - mu) * (row[t * st] - mu);
      return static_cast<float>(s / static_cast<double>(n));
    }
    case GatherFn::kReduceVarGrad: {
      const double g = in[1][gather_offset(a, 1, idx)];
      double mu = 0;
      for (long long t = 0; t < n; ++t) mu += row[t * st];
      mu /= static_cast<double>(n);
      return static_cast<float>(2.0 * g * (row[idx[a.axis] * st] - mu) / static_cast<double>(n));
    }
    case GatherFn::kReduceProdGrad: {  // a prefix times a suffix product, no division (exact with zeros)
      const double g = in[1][gather_offset(a, 1, idx)];
      const long long pos = idx[a.axis];
      double prefix = 1.0, suffix = 1.0;
      for (long long t = n - 1; t > pos; --t) suffix *= row[t * st];
      for (long long t = 0; t < pos; ++t) prefix *= row[t * st];
      return static_cast<float>(g * (prefix * suffix));
    }
    case GatherFn::kExtremumGrad: {  // dy split evenly over the ties with y
      const float yv = in[1][gather_offset(a, 1, idx)], dv = in[2][gather_offset(a, 2, idx)];
      double count = 0;
      for (long long t = 0; t < n; ++t) count += row[t * st] == yv;
      const float xv = row[idx[a.axis] * st];
      return static_cast<float>(static_cast<double>(xv == yv) * dv / count);
    }
    case GatherFn::kFirstExtremumGrad: {  // all of dy to the first tie (the first NaN)
      const float yv = in[1][gather_offset(a, 1, idx)];
      long long w = -1;
      for (long long t = 0; t < n && w < 0; ++t)
        if (row[t * st] == yv || row[t * st] != row[t * st]) w = t;
      return w == idx[a.axis] ? in[2][gather_offset(a, 2, idx)] : 0.0f;
    }
    case GatherFn::kCumsum:
    case GatherFn::kCumsumGrad: {  // running sums over [i_lo, i_hi] up to (or down to) the position
      const long long j = idx[1];
      double acc = 0;
      if (static_cast<GatherFn>(a.fn) == GatherFn::kCumsum) {
        for (long long t = a.i_lo; t <= (j < a.i_hi ? j : a.i_hi); ++t) acc += row[t * st];
      } else {
        for (long long t = a.i_hi; t >= (j > a.i_lo ? j : a.i_lo); --t) acc += row[t * st];
      }
      return static_cast<float>(acc);
    }
    case GatherFn::kCrossEntropyGrad: {
      double m = -INFINITY, s = 0;
      for (long long t = 0; t < n; ++t) m = tw_sticky_max(m, row[t * st]);
      for (long long t = 0; t < n; ++t) s += exp(row[t * st] - m);
      const float target = in[1][gather_offset(a, 1, idx)];
      return static_cast<float>((exp(row[idx[a.axis] * st] - m) / s - target) / a.scale);
    }
    default: return NAN;
  }
}

TW_HD long long tw_floor_div(long long a, long long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// The winner of window (b, c, o1, o2) as max_pool2d_grad picks it (the first in-bounds input equal
/// to y, the last NaN when y is NaN): its offsets (u, v), or u = -1.
TW_HD void pool_winner(const GatherArgs& a, const float* x, float yv, long long bc, long long o1, long long o2,
                       long long* wu, long long* wv) {
  const bool nan = yv != yv;
  *wu = -1, *wv = -1;
  for (long long u = 0; u < a.k && (nan || *wu < 0); ++u) {
    const long long hh = a.s * o1 + u - a.p;
    if (hh < 0 || hh >= a.H) continue;
    for (long long v = 0; v < a.k && (nan || *wu < 0); ++v) {
      const long long ww = a.s * o2 + v - a.p;
      if (ww < 0 || ww >= a.W) continue;
      const float xv = x[bc + hh * a.stride[0][2] + ww * a.stride[0][3]];
      if (nan ? xv != xv : xv == yv) *wu = u, *wv = v;
    }
  }
}

TW_HD float gather_element(const GatherArgs& a, const float* const* in, long long e) {
  long long idx[kMaxDims];
  for (int d = a.dims - 1; d >= 0; --d) idx[d] = a.lo[d] + e % a.size[d], e /= a.size[d];
  switch (static_cast<GatherFn>(a.fn)) {
    case GatherFn::kMaxPool2d: {
      const float* x = in[0] + a.base[0] + idx[0] * a.stride[0][0] + idx[1] * a.stride[0][1];
      const float outside = a.p > 0 ? -INFINITY : 0.0f;
      float m = -INFINITY;
      for (long long ii = a.i_lo; ii <= a.i_hi; ++ii) {
        const long long h = a.s * idx[2] + ii - a.p;
        for (long long jj = a.j_lo; jj <= a.j_hi; ++jj) {
          const long long w = a.s * idx[3] + jj - a.p;
          const float val = (h >= 0 && h < a.H && w >= 0 && w < a.W) ? x[h * a.stride[0][2] + w * a.stride[0][3]] : outside;
          m = (val > m || val != val) && m == m ? val : m;  // NaN wins
        }
      }
      return m;
    }
    case GatherFn::kMaxPool2dGrad: {  // the windows through which this input gets dy, in the CPU's order
      const long long hh = idx[2], ww = idx[3];
      const long long bx = a.base[0] + idx[0] * a.stride[0][0] + idx[1] * a.stride[0][1];
      const long long by = a.base[1] + idx[0] * a.stride[1][0] + idx[1] * a.stride[1][1];
      const long long bd = a.base[2] + idx[0] * a.stride[2][0] + idx[1] * a.stride[2][1];
      long long o1a = tw_floor_div(hh + a.p - a.i_hi + a.s - 1, a.s), o1b = tw_floor_div(hh + a.p - a.i_lo, a.s);
      long long o2a = tw_floor_div(ww + a.p - a.j_hi + a.s - 1, a.s), o2b = tw_floor_div(ww + a.p - a.j_lo, a.s);
      o1a = o1a < 0 ? 0 : o1a, o2a = o2a < 0 ? 0 : o2a;
      o1b = o1b > a.OH - 1 ? a.OH - 1 : o1b, o2b = o2b > a.OW - 1 ? a.OW - 1 : o2b;
      float acc = 0.0f;
      for (long long o1 = o1a; o1 <= o1b; ++o1)
        for (long long o2 = o2a; o2 <= o2b; ++o2) {
          long long wu, wv;
          pool_winner(a, in[0], in[1][by + o1 * a.stride[1][2] + o2 * a.stride[1][3]], bx, o1, o2, &wu, &wv);
          if (wu < a.i_lo || wu > a.i_hi || wv < a.j_lo || wv > a.j_hi) continue;
          if (a.s * o1 + wu - a.p != hh || a.s * o2 + wv - a.p != ww) continue;
          acc += in[2][bd + o1 * a.stride[2][2] + o2 * a.stride[2][3]];
        }
      return acc;
    }
    case GatherFn::kWindowSum: {
      const float* x = in[0] + a.base[0] + idx[0] * a.stride[0][0] + idx[1] * a.stride[0][1];
      double acc = 0;
      for (long long ii = a.i_lo; ii <= a.i_hi; ++ii) {
        const long long hh = a.k * idx[2] + ii;
        if (hh >= a.H) continue;
        const long long w0 = a.s * idx[3] + a.j_lo, w1 = a.s * idx[3] + a.j_hi < a.W - 1 ? a.s * idx[3] + a.j_hi : a.W - 1;
        for (long long w = w0; w <= w1; ++w) acc += x[hh * a.stride[0][2] + w * a.stride[0][3]];
      }
      return static_cast<float>(acc * a.scale);
    }
    case GatherFn::kWindowSumGrad: {
      const long long oy = idx[2] / a.k, oz = idx[3] / a.s;
      if (oy >= a.OH || oz >= a.OW) return 0.0f;
      return in[0][a.base[0] + idx[0] * a.stride[0][0] + idx[1] * a.stride[0][1] + oy * a.stride[0][2] +
                   oz * a.stride[0][3]] * static_cast<float>(a.scale);
    }
    case GatherFn::kAvgPool2d: {  // padded positions count as 0; partial over [i_lo, i_hi] x [j_lo, j_hi]
      const float* x = in[0] + a.base[0] + idx[0] * a.stride[0][0] + idx[1] * a.stride[0][1];
      double acc = 0;
      for (long long ii = a.i_lo; ii <= a.i_hi; ++ii) {
        const long long h = a.s * idx[2] + ii - a.p;
        if (h < 0 || h >= a.H) continue;
        for (long long jj = a.j_lo; jj <= a.j_hi; ++jj) {
          const long long w = a.s * idx[3] + jj - a.p;
          if (w >= 0 && w < a.W) acc += x[h * a.stride[0][2] + w * a.stride[0][3]];
        }
      }
      return static_cast<float>(acc * a.scale);
    }
    case GatherFn::kAvgPool2dGrad: {  // each window's dy spread evenly over it
      const float* dy = in[0] + a.base[0] + idx[0] * a.stride[0][0] + idx[1] * a.stride[0][1];
      double acc = 0;
      for (long long ii = a.i_lo; ii <= a.i_hi; ++ii) {
        const long long th = idx[2] + a.p - ii;
        if (th < 0 || th % a.s != 0 || th / a.s >= a.OH) continue;
        for (long long jj = a.j_lo; jj <= a.j_hi; ++jj) {
          const long long tw = idx[3] + a.p - jj;
          if (tw < 0 || tw % a.s != 0 || tw / a.s >= a.OW) continue;
          acc += dy[(th / a.s) * a.stride[0][2] + (tw / a.s) * a.stride[0][3]];
        }
      }
      return static_cast<float>(acc * a.scale);
    }
    case GatherFn::kMaxPool1d: {  // windows of k, partial over [j_lo, j_hi]; NaN wins and stays
      const float* x = in[0] + a.base[0] + idx[0] * a.stride[0][0] + idx[1] * a.stride[0][1];
      float m = -INFINITY;
      for (long long t = a.j_lo; t <= a.j_hi; ++t) {
        const float v = x[(a.k * idx[2] + t) * a.stride[0][2]];
        m = v != v || v > m ? v : m;
      }
      return m;
    }
    case GatherFn::kMaxPool1dGrad: {  // x, y, dy; the window's first input equal to y (the last NaN)
      const long long o = idx[2] / a.k;
      if (o >= a.OW) return 0.0f;
      const long long bc[3] = {idx[0], idx[1], 0};
      const float* xw = in[0] + gather_offset(a, 0, bc) + a.k * o * a.stride[0][2];
      const float yv = in[1][gather_offset(a, 1, bc) + o * a.stride[1][2]];
      const bool nan = yv != yv;
      long long winner = -1;
      for (long long u = 0; u < a.k && (nan || winner < 0); ++u)
        if (nan ? xw[u * a.stride[0][2]] != xw[u * a.stride[0][2]] : xw[u * a.stride[0][2]] == yv) winner = u;
      return tw_truth(winner == idx[2] - a.k * o) * in[2][gather_offset(a, 2, bc) + o * a.stride[2][2]];
    }
    case GatherFn::kGlobalMaxPool2dGrad: {  // the winner torch's indices name: the first equal, the last NaN
      const long long bc[4] = {idx[0], idx[1], 0, 0};
      const float* x = in[0] + gather_offset(a, 0, bc);
      const float yv = in[1][gather_offset(a, 1, bc)], dv = in[2][gather_offset(a, 2, bc)];
      const bool nan = yv != yv;
      long long winner = -1;
      for (long long e = 0; e < a.H * a.W && (nan || winner < 0); ++e) {
        const float xv = x[(e / a.W) * a.stride[0][2] + (e % a.W) * a.stride[0][3]];
        if (nan ? xv != xv : xv == yv) winner = e;
      }
      return tw_truth(winner == idx[2] * a.W + idx[3]) * dv;
    }
    case GatherFn::kOneHot: {
      const long long off = gather_offset(a, 0, idx);
      const double id = a.k == 1 ? static_cast<double>(reinterpret_cast<const long long*>(in[0])[off]) : in[0][off];
      return id == static_cast<double>(idx[a.dims - 1]) ? 1.0f : 0.0f;
    }
    case GatherFn::kDepthwiseConv:
    case GatherFn::kDepthwiseConvGradData: {  // slot 0 x (or dy) and slot 1 the filters, each by their own dims
      const bool fwd = static_cast<GatherFn>(a.fn) == GatherFn::kDepthwiseConv;
      const float* x = in[0] + a.base[0] + idx[0] * a.stride[0][0] + idx[1] * a.stride[0][1];
      const float* f = in[1] + a.base[1] + idx[1] * a.stride[1][0];
      double acc = 0;
      for (long long i = a.i_lo; i <= a.i_hi; ++i) {
        const long long th = fwd ? a.s * idx[2] + a.d * i - a.p : idx[2] + a.p - a.d * i;
        if (!fwd && (th < 0 || th % a.s != 0 || th / a.s >= a.OH)) continue;  // reads outside dy are 0
        for (long long j = a.j_lo; j <= a.j_hi; ++j) {
          const long long tw = fwd ? a.s * idx[3] + a.d * j - a.p : idx[3] + a.p - a.d * j;
          const float w = f[i * a.stride[1][2] + j * a.stride[1][3]];
          if (fwd) {
            const float v = th >= 0 && th < a.H && tw >= 0 && tw < a.W ? x[th * a.stride[0][2] + tw * a.stride[0][3]] : 0.0f;
            acc += static_cast<double>(v) * w;
          } else if (tw >= 0 && tw % a.s == 0 && tw / a.s < a.OW) {
            acc += static_cast<double>(x[(th / a.s) * a.stride[0][2] + (tw / a.s) * a.stride[0][3]]) * w;
          }
        }
      }
      return static_cast<float>(acc);
    }
    case GatherFn::kDepthwiseConvGradFilter: {  // output (c, 0, i, j); slot 0 x, slot 1 dy (b, c, h, w dims)
      const long long c = idx[0], i = idx[2], j = idx[3];
      double acc = 0;
      for (long long b = a.b_lo; b <= a.b_hi; ++b) {
        const float* x = in[0] + a.base[0] + b * a.stride[0][0] + c * a.stride[0][1];
        const float* dy = in[1] + a.base[1] + b * a.stride[1][0] + c * a.stride[1][1];
        for (long long y = a.i_lo; y <= a.i_hi; ++y) {
          const long long hh = a.s * y + a.d * i - a.p;
          for (long long xx = a.j_lo; xx <= a.j_hi; ++xx) {
            const long long ww = a.s * xx + a.d * j - a.p;
            const float v = hh >= 0 && hh < a.H && ww >= 0 && ww < a.W ? x[hh * a.stride[0][2] + ww * a.stride[0][3]] : 0.0f;
            acc += static_cast<double>(dy[y * a.stride[1][2] + xx * a.stride[1][3]]) * v;
          }
        }
      }
      return static_cast<float>(acc);
    }
    case GatherFn::kConvDirect: {  // out (b, co, y, x); slot 0 x (b, ci, h, w), slot 1 w (co, ci, kh, kw)
      double acc = 0;
      for (long long ci = a.b_lo; ci <= a.b_hi; ++ci) {
        const float* x = in[0] + a.base[0] + idx[0] * a.stride[0][0] + ci * a.stride[0][1];
        const float* w = in[1] + a.base[1] + idx[1] * a.stride[1][0] + ci * a.stride[1][1];
        for (long long i = a.i_lo; i <= a.i_hi; ++i) {
          const long long h = a.rs * idx[2] + a.rd * i - a.rp;
          for (long long j = a.j_lo; j <= a.j_hi; ++j) {
            const long long c = a.s * idx[3] + a.d * j - a.p;
            const float v = h >= 0 && h < a.H && c >= 0 && c < a.W ? x[h * a.stride[0][2] + c * a.stride[0][3]] : 0.0f;
            acc += static_cast<double>(v) * w[i * a.stride[1][2] + j * a.stride[1][3]];
          }
        }
      }
      return static_cast<float>(acc);
    }
    case GatherFn::kConvDirectGradData: {  // out (b, ci, h, w); slot 0 dy (b, co, y, x), slot 1 w (co, ci, kh, kw)
      double acc = 0;
      for (long long co = a.b_lo; co <= a.b_hi; ++co) {
        const float* dy = in[0] + a.base[0] + idx[0] * a.stride[0][0] + co * a.stride[0][1];
        const float* w = in[1] + a.base[1] + co * a.stride[1][0] + idx[1] * a.stride[1][1];
        for (long long i = a.i_lo; i <= a.i_hi; ++i) {
          const long long th = idx[2] + a.rp - a.rd * i;
          if (th < 0 || th % a.rs != 0 || th / a.rs >= a.OH) continue;  // reads outside dy are 0
          for (long long j = a.j_lo; j <= a.j_hi; ++j) {
            const long long tw = idx[3] + a.p - a.d * j;
            if (tw < 0 || tw % a.s != 0 || tw / a.s >= a.OW) continue;
            acc += static_cast<double>(dy[(th / a.rs) * a.stride[0][2] + (tw / a.s) * a.stride[0][3]]) *
                   w[i * a.stride[1][2] + j * a.stride[1][3]];
          }
        }
      }
      return static_cast<float>(acc);
    }
    case GatherFn::kConvDirectGradFilter: {  // out (co, ci, kh, kw); slot 0 x (b, ci, h, w), slot 1 dy (b, co, y, x)
      double acc = 0;
      for (long long b = a.b_lo; b <= a.b_hi; ++b) {
        const float* x = in[0] + a.base[0] + b * a.stride[0][0] + idx[1] * a.stride[0][1];
        const float* dy = in[1] + a.base[1] + b * a.stride[1][0] + idx[0] * a.stride[1][1];
        for (long long y = a.i_lo; y <= a.i_hi; ++y) {
          const long long h = a.rs * y + a.rd * idx[2] - a.rp;
          for (long long xx = a.j_lo; xx <= a.j_hi; ++xx) {
            const long long c = a.s * xx + a.d * idx[3] - a.p;
            const float v = h >= 0 && h < a.H && c >= 0 && c < a.W ? x[h * a.stride[0][2] + c * a.stride[0][3]] : 0.0f;
            acc += static_cast<double>(dy[y * a.stride[1][2] + xx * a.stride[1][3]]) * v;
          }
        }
      }
      return static_cast<float>(acc);
    }
    case GatherFn::kLogSumExp:
    case GatherFn::kArgMax:
    case GatherFn::kArgMin:
    case GatherFn::kReduceVar:
    case GatherFn::kReduceVarGrad:
    case GatherFn::kReduceProdGrad:
    case GatherFn::kExtremumGrad:
    case GatherFn::kFirstExtremumGrad:
    case GatherFn::kCumsum:
    case GatherFn::kCumsumGrad:
    case GatherFn::kCrossEntropyGrad: return axis_row_element(a, in, idx);
    case GatherFn::kReshape: {
      long long flat = 0;
      for (int d = 0; d < a.dims; ++d) flat = flat * a.out_shape[d] + idx[d];
      long long off = a.base[0];
      for (int d = a.x_dims - 1; d >= 0; --d) off += (flat % a.x_shape[d]) * a.stride[0][d], flat /= a.x_shape[d];
      return tw_load(in[0], a.type0, off);
    }
  }
  return NAN;
}

}  // namespace tilewise::exec::cuda

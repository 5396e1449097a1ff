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
constexpr int kMaxReads = 4;  ///< inputs one map reads

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
};

/// out[i] = fn(reads...) over an output block of `dims` dimensions (row-major, sizes `size`); read r
/// is at base[r] + sum_d idx[d] * stride[r][d] of its buffer (stride 0: broadcast along d).
struct MapArgs {
  int fn = 0;
  int dims = 0;
  int reads = 0;
  float p[4] = {0, 0, 0, 0};
  long long size[kMaxDims] = {};
  long long base[kMaxReads] = {};
  long long stride[kMaxReads][kMaxDims] = {};
  long long elements = 0;
};

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

/// The formula of `fn` on the values read (v[0..reads)), float32 as the CPU kernels compute it.
TW_HD float map_apply(int fn, const float* p, const float* v) {
  const float a = v[0], b = v[1], c = v[2];
  constexpr float kInvSqrt2Pi = 0.39894228040143268f, kSqrt1_2 = 0.70710678118654752f;
  constexpr float kGeluC = 0.79788456080286536f;
  switch (static_cast<MapFn>(fn)) {
    case MapFn::kCopy: return a;
    case MapFn::kNeg: return -a;
    case MapFn::kRelu: return a > 0.0f || a != a ? a : 0.0f;
    case MapFn::kReluGrad: return b > 0.0f ? a : 0.0f;  // (dy, x)
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
  }
  return NAN;
}

/// One map element: reads through map_offsets, applies the formula (a GPU thread's whole work).
/// `in[r]` is read r's buffer.
TW_HD float map_element(const MapArgs& a, const float* const* in, long long i) {
  long long off[kMaxReads];
  float v[kMaxReads] = {0, 0, 0, 0};
  map_offsets(a, i, off);
  for (int r = 0; r < a.reads; ++r) v[r] = in[r][off[r]];
  return map_apply(a.fn, a.p, v);
}

/// How a reduction folds.
enum class ReduceFn : int { kSum, kMax, kMin };

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
};

/// Output element `o` of a reduction: one GPU thread folds its whole row (fine for the bias and
/// loss sums of a step; a tree reduction is the next step for long rows).
TW_HD float reduce_element(const ReduceArgs& a, const float* x, long long o) {
  long long at = a.base;
  for (int d = a.keep - 1; d >= 0; --d) {
    at += (o % a.keep_size[d]) * a.keep_stride[d];
    o /= a.keep_size[d];
  }
  double acc = a.fn == static_cast<int>(ReduceFn::kSum) ? 0.0 : (a.fn == static_cast<int>(ReduceFn::kMax) ? -INFINITY : INFINITY);
  for (long long j = 0; j < a.folded; ++j) {
    long long off = at, t = j;
    for (int d = a.fold - 1; d >= 0; --d) {
      off += (t % a.fold_size[d]) * a.fold_stride[d];
      t /= a.fold_size[d];
    }
    const double v = x[off];
    if (a.fn == static_cast<int>(ReduceFn::kSum)) acc += v;
    else if (v != v || (a.fn == static_cast<int>(ReduceFn::kMax) ? v > acc : v < acc)) acc = v;
  }
  return static_cast<float>(a.fn == static_cast<int>(ReduceFn::kSum) ? acc * a.scale : acc);
}

}  // namespace tilewise::exec::cuda

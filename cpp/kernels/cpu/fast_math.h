// Float32 exp, tanh and the normal CDF written so that element-wise loops vectorise: libm's expf,
// tanhf and erff are calls the compiler cannot vectorise, and GELU, SiLU, softmax and the LSTM
// gates spent most of their time in them (ViT-B's GELU gradient: 18 ns per element). Branch-free
// (both sides computed, then selected) with NaN, +-Inf and overflow as libm gives them, so the
// kernels' non-finite results do not change. Accuracy: exp and tanh within a few float ulps, the
// normal CDF within 3e-6 relative for x > -4 (Numerical Recipes' erfc; 4e-5 deep in the lower tail),
// checked in tests/cpp/fast_math_test.cpp.
// Internal to cpp/kernels/cpu.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace tilewise::kernels::fast {

// Inlined into the kernels' loops whatever the inliner's budget: a call left in the loop body stops
// it vectorising (GELU's gradient, with two of these, was not inlined).
#define TW_FAST_INLINE inline __attribute__((always_inline))

/// 2^n for an integer-valued n in [-126, 127].
TW_FAST_INLINE float pow2(float n) {
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

/// exp(x) for x in [-87.34, 88] (Cephes' range reduction and polynomial; 2^n stays a normal float).
TW_FAST_INLINE float exp_core(float x) {
  x = std::min(std::max(x, -87.3365f), 88.0f);
  float n = x * 1.44269504f;
  n = (n + 12582912.0f) - 12582912.0f;  // round to the nearest integer (|n| < 2^22)
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return (p * r * r + r + 1.0f) * pow2(n);
}

/// exp(x): NaN for NaN, +Inf past float's range, 0 below it (libm gives denormals down to -103.97;
/// these flush to 0).
TW_FAST_INLINE float exp(float x) {
  const bool nan = x != x;
  const bool big = x > 88.0f;                    // exp(x / 2)^2 overflows where exp(x) does
  const float e = exp_core(nan ? 0.0f : big ? 0.5f * x : x);
  const float y = big ? e * e : e;
  return nan ? x : x < -87.3365f ? 0.0f : y;
}

/// tanh(x): an odd polynomial near 0 (Cephes), 1 - 2 / (exp(2|x|) + 1) elsewhere.
TW_FAST_INLINE float tanh(float x) {
  const float a = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float large = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  const float y = a < 0.625f ? small : std::copysign(large, x);
  return x != x ? x : y;
}

/// erfc(a) for a >= 0 (Numerical Recipes' Chebyshev fit: relative error < 1.2e-7).
TW_FAST_INLINE float erfc_nonneg(float a) {
  const float t = 1.0f / (1.0f + 0.5f * a);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * exp(p - a * a);
}

/// The standard normal CDF, 0.5 (1 + erf(x / sqrt 2)), accurate relative to itself on both sides
/// (no 1 + erf cancellation for negative x).
TW_FAST_INLINE float normal_cdf(float x) {
  const float half = 0.5f * erfc_nonneg(std::fabs(x) * 0.70710678f);
  const float y = x < 0.0f ? half : 1.0f - half;
  return x != x ? x : y;
}

#undef TW_FAST_INLINE

}  // namespace tilewise::kernels::fast

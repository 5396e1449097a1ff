// The vectorisable exp, tanh and normal CDF of the element-wise kernels against libm (double), over
// dense sweeps and the special values: NaN, +-Inf, overflow and underflow as libm gives them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/fast_math.h"

namespace tilewise::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Relative error of `got` against the double `want` (absolute below `floor`).
double error(float got, double want, double floor = 1e-30) {
  return std::fabs(static_cast<double>(got) - want) / std::max(std::fabs(want), floor);
}

std::vector<float> sweep(float lo, float hi, int n) {
  std::vector<float> xs;
  for (int i = 0; i <= n; ++i) xs.push_back(lo + (hi - lo) * static_cast<float>(i) / static_cast<float>(n));
  return xs;
}

TEST(FastMath, ExpWithinFourUlpsAndSpecialsAsLibm) {
  double worst = 0;
  for (float x : sweep(-87.3f, 88.7f, 200000)) worst = std::max(worst, error(fast::exp(x), std::exp(double{x})));
  EXPECT_LT(worst, 4.8e-7);  // 4 float ulps
  EXPECT_TRUE(std::isnan(fast::exp(kNaN)));
  EXPECT_EQ(fast::exp(kInf), kInf);
  EXPECT_EQ(fast::exp(-kInf), 0.0f);
  EXPECT_EQ(fast::exp(89.0f), kInf);       // past float's range
  EXPECT_EQ(fast::exp(1000.0f), kInf);
  EXPECT_EQ(fast::exp(-1000.0f), 0.0f);
  EXPECT_EQ(fast::exp(0.0f), 1.0f);
  EXPECT_LT(fast::exp(-88.0f), 1.2e-38f);  // libm's denormals flush to 0 here
}

TEST(FastMath, TanhWithinFourUlpsAndSpecialsAsLibm) {
  double worst = 0;
  for (float x : sweep(-12.0f, 12.0f, 200000)) worst = std::max(worst, error(fast::tanh(x), std::tanh(double{x})));
  for (float x : sweep(-1e-3f, 1e-3f, 2000)) worst = std::max(worst, error(fast::tanh(x), std::tanh(double{x})));
  EXPECT_LT(worst, 4.8e-7);
  EXPECT_TRUE(std::isnan(fast::tanh(kNaN)));
  EXPECT_EQ(fast::tanh(kInf), 1.0f);
  EXPECT_EQ(fast::tanh(-kInf), -1.0f);
  EXPECT_EQ(fast::tanh(0.0f), 0.0f);
}

TEST(FastMath, NormalCdfRelativeOnBothTails) {
  double body = 0, tail = 0;
  for (float x : sweep(-12.0f, 12.0f, 200000)) {
    const double want = 0.5 * std::erfc(-double{x} / std::sqrt(2.0));
    double& worst = x > -4.0f ? body : tail;
    worst = std::max(worst, error(fast::normal_cdf(x), want));
  }
  EXPECT_LT(body, 3e-6);  // about 25 float ulps near x = -4 (erfc of a rounded x / sqrt 2)
  // Relative even at 1e-33 (where 1 + erf would be 0): x^2 / 2 in float carries ~1e-7 of the
  // exponent's ~70, so about 1e-5 of the value there.
  EXPECT_LT(tail, 4e-5);
  EXPECT_TRUE(std::isnan(fast::normal_cdf(kNaN)));
  EXPECT_EQ(fast::normal_cdf(kInf), 1.0f);
  EXPECT_EQ(fast::normal_cdf(-kInf), 0.0f);
}

}  // namespace
}  // namespace tilewise::kernels

// tilewise::kernels::gemm against a naive triple loop (the oracle), for several shapes, every
// transpose combination, padded leading dimensions, alpha/beta, and both precisions.
#include "kernels/cpu/blas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/build_info.h"

namespace tilewise::kernels {
namespace {

struct Shape {
  int64_t m, n, k;
};

// Row-major element (i, j) of a matrix stored with leading dimension ld, transposed or not.
template <typename T>
T at(const std::vector<T>& x, bool trans, int64_t ld, int64_t i, int64_t j) {
  return trans ? x[j * ld + i] : x[i * ld + j];
}

template <typename T>
std::vector<T> random_matrix(int64_t rows, int64_t ld, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> x(static_cast<size_t>(std::max<int64_t>(rows * ld, 1)));
  for (auto& v : x) v = static_cast<T>(dist(rng));
  return x;
}

template <typename T>
void check_against_naive(bool trans_a, bool trans_b, Shape s, int64_t pad, T alpha, T beta) {
  std::mt19937 rng(static_cast<unsigned>(s.m * 131 + s.n * 17 + s.k + pad + trans_a * 2 + trans_b));
  // Stored shapes, with `pad` extra columns so that ld > the minimum is exercised.
  const int64_t a_rows = trans_a ? s.k : s.m, a_cols = trans_a ? s.m : s.k;
  const int64_t b_rows = trans_b ? s.n : s.k, b_cols = trans_b ? s.k : s.n;
  const int64_t lda = std::max<int64_t>(1, a_cols + pad);
  const int64_t ldb = std::max<int64_t>(1, b_cols + pad);
  const int64_t ldc = std::max<int64_t>(1, s.n + pad);
  const auto a = random_matrix<T>(a_rows, lda, rng);
  const auto b = random_matrix<T>(b_rows, ldb, rng);
  auto c = random_matrix<T>(s.m, ldc, rng);
  auto expected = c;
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      long double acc = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        acc += static_cast<long double>(at(a, trans_a, lda, i, p)) * at(b, trans_b, ldb, p, j);
      }
      const long double old = beta == T(0) ? 0 : static_cast<long double>(beta) * c[i * ldc + j];
      expected[i * ldc + j] = static_cast<T>(alpha * acc + old);
    }
  }

  gemm(trans_a, trans_b, s.m, s.n, s.k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);

  // Each product term is at most 1 in magnitude; rounding grows with k.
  const double eps = std::numeric_limits<T>::epsilon();
  const double tol = 4.0 * eps * (static_cast<double>(s.k) + 2.0) * (std::abs(alpha) + std::abs(beta) + 1);
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t idx = static_cast<size_t>(i * ldc + j);
      if (j < s.n) {
        ASSERT_NEAR(c[idx], expected[idx], tol)
            << "at (" << i << ", " << j << ") m=" << s.m << " n=" << s.n << " k=" << s.k
            << " trans_a=" << trans_a << " trans_b=" << trans_b << " pad=" << pad;
      } else {
        // Padding columns of C are not part of the matrix and must stay untouched.
        ASSERT_EQ(c[idx], expected[idx]) << "padding of C written at (" << i << ", " << j << ")";
      }
    }
  }
}

const Shape kShapes[] = {{1, 1, 1},   {3, 5, 7},   {7, 3, 5},    {17, 13, 29}, {64, 64, 64},
                         {33, 1, 65}, {1, 40, 9},  {100, 37, 1}, {5, 4, 0},    {0, 3, 4},
                         {3, 0, 4},   {128, 96, 200}};

using GemmCase = std::tuple<bool, bool, int64_t>;  // trans_a, trans_b, padding of leading dims

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTest, FloatMatchesNaiveLoop) {
  const auto [ta, tb, pad] = GetParam();
  for (const Shape& s : kShapes) {
    check_against_naive<float>(ta, tb, s, pad, 1.0f, 0.0f);
    check_against_naive<float>(ta, tb, s, pad, -0.5f, 1.5f);
  }
}

TEST_P(GemmTest, DoubleMatchesNaiveLoop) {
  const auto [ta, tb, pad] = GetParam();
  for (const Shape& s : kShapes) {
    check_against_naive<double>(ta, tb, s, pad, 1.0, 0.0);
    check_against_naive<double>(ta, tb, s, pad, 2.0, -1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values<int64_t>(0, 3)),
                         [](const ::testing::TestParamInfo<GemmCase>& info) {
                           return std::string(std::get<0>(info.param) ? "At" : "A") +
                                  (std::get<1>(info.param) ? "_Bt" : "_B") + "_pad" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST(Gemm, BetaZeroIgnoresNaNInC) {
  const std::vector<double> a = {1, 2, 3, 4}, b = {5, 6, 7, 8};
  std::vector<double> c(4, std::numeric_limits<double>::quiet_NaN());
  gemm(false, false, 2, 2, 2, 1.0, a.data(), 2, b.data(), 2, 0.0, c.data(), 2);
  EXPECT_EQ(c, (std::vector<double>{19, 22, 43, 50}));
}

TEST(Gemm, EmptyInnerDimensionScalesC) {
  std::vector<float> c = {1, 2, 3, 4};
  gemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1, 1.5f, 2}));
}

// Runs f, expects std::invalid_argument whose message contains `needle`.
template <typename F>
void expect_invalid(F f, const std::string& needle) {
  try {
    f();
    FAIL() << "no exception; expected one mentioning '" << needle << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Gemm, RejectsBadArguments) {
  std::vector<float> a(12), b(12), c(12);
  expect_invalid([&] { gemm(false, false, -1, 2, 2, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2); },
                 "m = -1 is negative");
  expect_invalid([&] { gemm(false, false, 2, 2, -3, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2); },
                 "k = -3 is negative");
  // A is 3x4 (not transposed): lda must be >= 4.
  expect_invalid([&] { gemm(false, false, 3, 2, 4, 1.f, a.data(), 3, b.data(), 2, 0.f, c.data(), 2); },
                 "lda = 3");
  // A transposed is stored 4x3: lda >= 3 is enough, 2 is not.
  EXPECT_NO_THROW(gemm(true, false, 3, 2, 4, 1.f, a.data(), 3, b.data(), 2, 0.f, c.data(), 2));
  expect_invalid([&] { gemm(true, false, 3, 2, 4, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2); },
                 "lda = 2");
  expect_invalid([&] { gemm(false, true, 2, 3, 2, 1.f, a.data(), 2, b.data(), 1, 0.f, c.data(), 3); },
                 "ldb = 1");
  expect_invalid([&] { gemm(false, false, 2, 3, 2, 1.f, a.data(), 2, b.data(), 3, 0.f, c.data(), 2); },
                 "ldc = 2");
  expect_invalid([&] { gemm(false, false, 2, 2, 2, 1.f, nullptr, 2, b.data(), 2, 0.f, c.data(), 2); },
                 "A is null");
  std::vector<double> ad(4), bd(4);
  expect_invalid([&] { gemm(false, false, 2, 2, 2, 1.0, ad.data(), 2, bd.data(), 2, 0.0, nullptr, 2); },
                 "C is null");
  const int64_t huge = int64_t{1} << 31;
  expect_invalid([&] { gemm(false, false, huge, 1, 1, 1.0, ad.data(), 1, bd.data(), 1, 0.0, nullptr, 1); },
                 "exceeds the BLAS integer range");
}

TEST(Blas, ReportsItself) {
  EXPECT_FALSE(blas_name().empty());
  EXPECT_NE(blas_name(), "none");
  EXPECT_GE(blas_threads(), 1);
}

TEST(BuildInfo, DescribesThisBuild) {
  const BuildInfo info = build_info();
  EXPECT_EQ(info.version, TILEWISE_VERSION);
  EXPECT_EQ(info.blas, blas_name());
  EXPECT_GE(info.blas_threads, 1);
  EXPECT_FALSE(info.compiler.empty());
  EXPECT_FALSE(info.build_type.empty());
  EXPECT_EQ(info.openmp, info.openmp_max_threads > 0);
  if (!info.mpi) EXPECT_TRUE(info.mpi_version.empty());
  if (!info.cuda) EXPECT_TRUE(info.cuda_version.empty());
}

}  // namespace
}  // namespace tilewise::kernels

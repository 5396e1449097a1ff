// kernels::small_gemm (the unpacked few-row products) against a naive loop: every tile edge (rows
// 1..32, columns and k off the 4 x 4 and 6 x 64 tiles and the 16-lane vectors), padded leading
// dimensions, alpha and beta, and the non-finite values BLAS semantics ask for. Skipped where the
// CPU lacks AVX-512 (small_gemm then declines and gemm() keeps the BLAS).
#include "kernels/cpu/small_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/blas.h"

namespace tilewise::kernels {
namespace {

struct Case {
  bool trans_b;
  int64_t m, n, k, pad;
  float alpha, beta;
};

void check(const Case& t) {
  std::mt19937 rng(static_cast<unsigned>(t.m * 7919 + t.n * 131 + t.k * 17 + t.pad + t.trans_b));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t lda = t.k + t.pad, ldb = (t.trans_b ? t.k : t.n) + t.pad, ldc = t.n + t.pad;
  std::vector<float> a(static_cast<size_t>(t.m * lda + 1)), b(static_cast<size_t>((t.trans_b ? t.n : t.k) * ldb + 1));
  std::vector<float> c(static_cast<size_t>(t.m * ldc));
  for (auto* v : {&a, &b, &c})
    for (float& x : *v) x = dist(rng);
  std::vector<float> expected = c;
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < t.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < t.k; ++p) acc += double{a[i * lda + p]} * (t.trans_b ? b[j * ldb + p] : b[p * ldb + j]);
      expected[i * ldc + j] = static_cast<float>(t.alpha * acc + (t.beta == 0.0f ? 0.0 : t.beta * c[i * ldc + j]));
    }
  }
  ASSERT_TRUE(small_gemm(false, t.trans_b, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta, c.data(),
                         ldc));
  const double tol = 4.0 * std::numeric_limits<float>::epsilon() * (t.k + 2.0) * (std::abs(t.alpha) + 2.0);
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(i * ldc + j);
      if (j < t.n) {
        ASSERT_NEAR(c[at], expected[at], tol) << "(" << i << ", " << j << ") m=" << t.m << " n=" << t.n << " k=" << t.k
                                              << " trans_b=" << t.trans_b << " pad=" << t.pad;
      } else {
        ASSERT_EQ(c[at], expected[at]) << "padding of C written at (" << i << ", " << j << ")";
      }
    }
  }
}

TEST(SmallGemm, MatchesNaiveLoopAtEveryTileEdge) {
  if (!small_gemm_available()) GTEST_SKIP() << "no AVX-512 here: gemm() uses the BLAS";
  for (bool tb : {false, true}) {
    for (int64_t m : {1, 3, 4, 5, 6, 7, 16, 17, 32}) {
      for (int64_t n : {1, 5, 16, 17, 63, 64, 100}) {
        for (int64_t k : {0, 1, 15, 16, 17, 130}) {
          check({tb, m, n, k, 0, 1.0f, 0.0f});
          check({tb, m, n, k, 3, -0.5f, 1.5f});
        }
      }
    }
  }
}

TEST(SmallGemm, MatchesNaiveLoopAtRecurrentShapes) {
  if (!small_gemm_available()) GTEST_SKIP() << "no AVX-512 here: gemm() uses the BLAS";
  check({true, 16, 2048, 512, 0, 1.0f, 1.0f});   // an LSTM's h projection onto its bias
  check({false, 16, 512, 2048, 0, 1.0f, 0.0f});  // its data gradient
}

TEST(SmallGemm, DeclinesWhatItDoesNotCompute) {
  std::vector<float> a(64 * 64, 1.0f), b(64 * 64, 1.0f), c(64 * 64, 7.0f);
  EXPECT_FALSE(small_gemm(true, false, 4, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4));
  const int64_t m = kSmallGemmMaxRows + 1;
  EXPECT_FALSE(small_gemm(false, false, m, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4));
  EXPECT_EQ(c[0], 7.0f);  // nothing written
}

TEST(SmallGemm, NonFiniteValuesAsBlas) {
  if (!small_gemm_available()) GTEST_SKIP() << "no AVX-512 here: gemm() uses the BLAS";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (bool tb : {false, true}) {
    const int64_t m = 5, n = 20, k = 33;
    std::vector<float> a(m * k, 1.0f), b(k * n, 1.0f), c(m * n, nan);
    a[1 * k + 3] = nan;  // row 1 of the product: NaN
    a[2 * k + 4] = inf;  // row 2: Inf, except where B holds 0 there (0 * Inf = NaN)
    if (tb) {
      b[7 * k + 4] = 0.0f;
    } else {
      b[4 * n + 7] = 0.0f;
    }
    ASSERT_TRUE(small_gemm(false, tb, m, n, k, 1.0f, a.data(), k, b.data(), tb ? k : n, 0.0f, c.data(), n));
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_EQ(c[0 * n + j], static_cast<float>(j == 7 ? k - 1 : k)) << "beta 0: the NaNs in C must not propagate";
      EXPECT_TRUE(std::isnan(c[1 * n + j]));
      if (j == 7) {
        EXPECT_TRUE(std::isnan(c[2 * n + j]));
      } else {
        EXPECT_EQ(c[2 * n + j], inf);
      }
    }
  }
}

TEST(SmallGemm, GemmRoutesFewRowsThroughIt) {
  // Through gemm(), with the BLAS on one thread as the runtime sets it: the same answer whichever
  // path a CPU takes.
  const int blas_before = blas_threads();
  set_blas_threads(1);
  const int64_t m = 16, n = 96, k = 128;
  std::vector<float> a(m * k), b(n * k), c(m * n, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2.0f;
  gemm(false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;  // small integers: exact in any order
      for (int64_t p = 0; p < k; ++p) acc += a[i * k + p] * b[j * k + p];
      EXPECT_EQ(c[i * n + j], acc) << i << ", " << j;
    }
  }
  set_blas_threads(blas_before);
}

}  // namespace
}  // namespace tilewise::kernels

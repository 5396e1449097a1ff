// Differential test of the two domains of the interval analysis: for random affine
// accesses and splits that divide the extents, the symbolic bounds evaluated at the concrete
// extents equal the concrete interval (tinygrad fuzz_symbolic style).
#include <gtest/gtest.h>

#include <random>

#include "tdl/region_analysis.h"
#include "tdl/strategy.h"

namespace tilewise::tdl {
namespace {

TEST(SymbolicVsConcrete, RandomAffineIndices) {
  std::mt19937 rng(12345);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 2000; ++trial) {
    const int n_vars = uni(1, 4);
    const int parts = uni(1, 4);
    std::vector<int64_t> extents(n_vars);
    for (auto& e : extents) e = parts * uni(1, 5);  // divisible: symbolic splits are exact
    // A random linear index over the variables.
    IndexExpr idx = index_const(uni(-5, 5));
    for (int v = 0; v < n_vars; ++v)
      if (uni(0, 2)) idx = index_add(idx, index_scale(index_var(v), uni(-3, 3)));
    const int split = uni(-1, n_vars - 1);  // -1: no split
    for (int w = 0; w < parts; ++w) {
      std::vector<Range> conc(n_vars);
      std::vector<Interval<Affine>> sym(n_vars);
      for (int v = 0; v < n_vars; ++v) {
        Affine x = Affine::symbol(Symbol::var(v));
        conc[v] = {0, extents[v] - 1};
        sym[v] = {Affine(0), x + Affine(-1)};
        if (v == split) {
          conc[v] = split_range(extents[v], parts, w);
          sym[v] = {x * Rational(w, parts), x * Rational(w + 1, parts) + Affine(-1)};
        }
      }
      Range c = eval_range(idx, conc, {});
      Interval<Affine> s = eval_symbolic(idx, sym);
      ASSERT_EQ(s.lo.evaluate(extents, {}), Rational(c.lo)) << "trial " << trial;
      ASSERT_EQ(s.hi.evaluate(extents, {}), Rational(c.hi)) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace tilewise::tdl

#include <gtest/gtest.h>

#include "tdl/affine.h"
#include "tdl/errors.h"
#include "tdl/index_expr.h"
#include "tdl/rational.h"

namespace tilewise::tdl {
namespace {

TEST(Rational, NormalizesAndFloors) {
  Rational r(6, -4);
  EXPECT_EQ(r.num, -3);
  EXPECT_EQ(r.den, 2);
  EXPECT_EQ(r.floor(), -2);
  EXPECT_EQ(Rational(7, 2).floor(), 3);
  EXPECT_EQ((Rational(1, 2) + Rational(1, 3)).str(), "5/6");
}

TEST(IndexExpr, AffineFormsStayCanonical) {
  // x + x - x is x: canonical forms keep interval analysis exact.
  IndexExpr x = index_var(0);
  IndexExpr e = index_sub(index_add(x, x), x);
  ASSERT_TRUE(is_linear(e));
  EXPECT_EQ(e->linear.coeff(Symbol::var(0)), 1);
  EXPECT_TRUE(index_sub(x, x)->linear.is_constant());
}

TEST(IndexExpr, FloorDivAndModFollowPython) {
  Names names{{"i"}, {}};
  IndexExpr e = index_floordiv(index_sub(index_var(0), index_const(3)), 2);
  int64_t i = 0;
  EXPECT_EQ(eval_index(e, &i, {}), -2);  // (0 - 3) // 2 == -2
  IndexExpr m = index_mod(index_sub(index_var(0), index_const(3)), 2);
  EXPECT_EQ(eval_index(m, &i, {}), 1);  // -3 % 2 == 1
  EXPECT_EQ(to_string(e, names), "(i - 3)//2");
  EXPECT_THROW(index_floordiv(index_var(0), 0), TDLError);
  EXPECT_THROW(index_mod(index_var(0), -1), TDLError);
}

TEST(IndexExpr, ConstantsFoldThroughNonLinearParts) {
  IndexExpr e = index_add(index_add(index_floordiv(index_var(0), 2), index_const(1)), index_const(2));
  ASSERT_EQ(e->kind, IndexNode::kAdd);
  EXPECT_EQ(e->b->linear.constant, 3);
}

TEST(Affine, PrintsLikeTofu) {
  Names names{{"b"}, {}};
  Affine half = Affine::symbol(Symbol::var(0), Rational(1, 2)) + Affine(-1);
  EXPECT_EQ(half.str(names), "X_b/2 - 1");
  EXPECT_TRUE(provably_le(Affine(0), Affine::symbol(Symbol::var(0))));
  EXPECT_FALSE(provably_le(Affine::symbol(Symbol::var(0)), Affine(3)));
}

}  // namespace
}  // namespace tilewise::tdl

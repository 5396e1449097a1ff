#include <gtest/gtest.h>

#include "tdl/errors.h"
#include "tdl/region_analysis.h"
#include "tdl/strategy.h"
#include "tdl_fixtures.h"

namespace tilewise::tdl {
namespace {

TEST(Regions, ShiftTwoNeedsTofusRanges) {
  OpDesc op = testing::shift_two();
  std::vector<Shape> shapes = {{12}};
  auto r0 = input_regions(op, {{0, 4}}, shapes);
  auto r1 = input_regions(op, {{5, 9}}, shapes);
  EXPECT_EQ(r0[0].dims[0], (Range{2, 6}));
  EXPECT_EQ(r1[0].dims[0], (Range{7, 11}));
}

TEST(Regions, ClipFindsTheLastElementActuallyRead) {
  // A[3*i - 1], i in [0, 3], |A| = 8: touches -1, 2, 5, 8; in bounds only 2 and 5.
  OpDesc op;
  op.name = "strided";
  op.inputs = {{"A", 1}};
  op.vars = {{"i", true, {}}};
  op.output_vars = {0};
  op.body = make_access(0, {index_sub(index_scale(index_var(0), 3), index_const(1))});
  validate(op);
  auto r = input_regions(op, {{0, 3}}, {{8}});
  EXPECT_EQ(r[0].dims[0], (Range{2, 5}));
  // Entirely out of bounds reads nothing.
  auto none = input_regions(op, {{3, 3}}, {{8}});
  EXPECT_TRUE(none[0].empty());
}

TEST(Regions, HolesInTwoVariableForms) {
  // A[x + 10*y], x in [0,1], y in [0,3], |A| = 16: reads 0,1,10,11 in bounds (20, 21, ... out).
  OpDesc op;
  op.name = "holes";
  op.inputs = {{"A", 1}};
  op.vars = {{"x", true, {}}, {"y", true, {}}};
  op.output_vars = {0, 1};
  op.body = make_access(0, {index_add(index_var(0), index_scale(index_var(1), 10))});
  validate(op);
  auto r = input_regions(op, {{0, 1}, {0, 3}}, {{16}});
  EXPECT_EQ(r[0].dims[0], (Range{0, 11}));
}

TEST(Regions, EmptyIterationSpaceReadsNothing) {
  OpDesc op = testing::conv1d();
  auto r = input_regions(op, {{0, -1}, {0, 31}, {0, 31}, {0, 15}, {0, 2}}, {{8, 16, 34}, {16, 32, 3}});
  EXPECT_TRUE(r[0].empty());
  EXPECT_TRUE(r[1].empty());
}

TEST(Extents, InferredFromAccessesStartingAtZero) {
  OpDesc op = testing::conv1d();
  auto ext = infer_extents(op, {{8, 16, 34}, {16, 32, 3}});
  EXPECT_EQ(ext, (std::vector<int64_t>{8, 32, 32, 16, 3}));
  EXPECT_EQ(infer_output_shape(op, {{8, 16, 34}, {16, 32, 3}}), (Shape{8, 32, 32}));
}

TEST(Extents, ErrorsNameTheProblem) {
  OpDesc op = testing::conv1d();
  EXPECT_THROW(infer_extents(op, {{8, 16, 34}, {15, 32, 3}}), ShapeError);  // ci: 16 vs 15
  EXPECT_THROW(infer_extents(op, {{8, 16, 34}}), ShapeError);
  EXPECT_THROW(infer_extents(op, {{8, 16}, {16, 32, 3}}), ShapeError);
  try {
    infer_output_shape(testing::shift_two(), {{12}});
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("shift_two"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("out=("), std::string::npos);
  }
}

TEST(Validate, RejectsVariablesOutOfScope) {
  OpDesc op;
  op.name = "leak";
  op.inputs = {{"A", 1}};
  op.vars = {{"i", true, {}}, {"k", false, {}}};
  op.output_vars = {0};
  // Sum(k: A[k]) + A[k]: the second k is outside its reduction.
  Expr sum = make_reduce(Reducer::kSum, {1}, make_access(0, {index_var(1)}));
  op.body = make_binary(BinaryOp::kAdd, sum, make_access(0, {index_var(1)}));
  EXPECT_THROW(validate(op), TDLError);
}

TEST(Validate, RejectsWrongRank) {
  OpDesc op = testing::shift_two();
  op.inputs[0].rank = 2;
  EXPECT_THROW(validate(op), TDLError);
}

TEST(Strategies, Conv1dHasTofusFive) {
  OpDesc op = testing::conv1d();
  auto s = enumerate_strategies(op);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].kind, StrategyKind::kOutput);
  EXPECT_EQ(s[3].kind, StrategyKind::kReduce);
  EXPECT_EQ(s[3].var, 3);
  EXPECT_EQ(s[4].var, 4);
  EXPECT_EQ(s[5].kind, StrategyKind::kReplicate);
}

TEST(Strategies, ReduceNeedsTheReductionOnTop) {
  // Sum(k: A[i, k]) + 1 cannot be split along k: each partial would add 1.
  OpDesc op;
  op.name = "sum_plus_one";
  op.inputs = {{"A", 2}};
  op.vars = {{"i", true, {}}, {"k", false, {}}};
  op.output_vars = {0};
  Expr sum = make_reduce(Reducer::kSum, {1}, make_access(0, {index_var(0), index_var(1)}));
  op.body = make_binary(BinaryOp::kAdd, sum, make_const(1));
  validate(op);
  EXPECT_TRUE(reducible_vars(op).empty());
  // ... but Sum(...) / 4 can (a mean).
  op.body = make_binary(BinaryOp::kDiv, sum, make_const(4));
  EXPECT_EQ(reducible_vars(op).size(), 1u);
}

TEST(Strategies, SplitRangeIsArraySplit) {
  EXPECT_EQ(split_range(8, 3, 0), (Range{0, 2}));
  EXPECT_EQ(split_range(8, 3, 1), (Range{3, 5}));
  EXPECT_EQ(split_range(8, 3, 2), (Range{6, 7}));
  EXPECT_TRUE(split_range(1, 2, 1).empty());
}

TEST(Strategies, SymbolicBatchSplit) {
  OpDesc op = testing::conv1d();
  SymbolicStrategy s = symbolic(op, {StrategyKind::kOutput, 0, Reducer::kSum}, 2);
  Names n = op.names();
  EXPECT_EQ(s.input_regions[0][0][0].str(n), "[0, X_b/2 - 1]");
  EXPECT_EQ(s.input_regions[0][1][0].str(n), "[X_b/2, X_b - 1]");
  EXPECT_EQ(s.input_regions[0][0][2].str(n), "[0, X_x + X_dx - 2]");
}

}  // namespace
}  // namespace tilewise::tdl

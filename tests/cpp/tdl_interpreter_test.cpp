#include <gtest/gtest.h>

#include "tdl/interpreter.h"
#include "tdl_fixtures.h"

namespace tilewise::tdl {
namespace {

TEST(Interpreter, Conv1dMatchesLoops) {
  OpDesc op = testing::conv1d();
  Shape ds = {2, 3, 7}, fs = {3, 4, 2};
  std::vector<double> data(2 * 3 * 7), filters(3 * 4 * 2);
  for (size_t i = 0; i < data.size(); ++i) data[i] = 0.5 * static_cast<double>(i % 11) - 2;
  for (size_t i = 0; i < filters.size(); ++i) filters[i] = 0.25 * static_cast<double>(i % 7) - 1;
  auto ext = infer_extents(op, {ds, fs});
  std::vector<double> out(2 * 4 * 6);
  interpret(op, {{data.data(), ds}, {filters.data(), fs}}, ext, out.data(), nullptr, 2);
  for (int b = 0; b < 2; ++b)
    for (int co = 0; co < 4; ++co)
      for (int x = 0; x < 6; ++x) {
        double want = 0;
        for (int ci = 0; ci < 3; ++ci)
          for (int dx = 0; dx < 2; ++dx) want += data[(b * 3 + ci) * 7 + x + dx] * filters[(ci * 4 + co) * 2 + dx];
        EXPECT_DOUBLE_EQ(out[(b * 4 + co) * 6 + x], want);
      }
}

TEST(Interpreter, OutOfBoundsReadsZero) {
  OpDesc op = testing::shift_two();
  std::vector<double> a = {1, 2, 3, 4};
  std::vector<double> out(4);
  interpret(op, {{a.data(), {4}}}, {4}, out.data(), nullptr, 1);
  EXPECT_EQ(out, (std::vector<double>{3, 4, 0, 0}));
}

TEST(Interpreter, MaxReductionStartsFromMinusInfinity) {
  OpDesc op;
  op.name = "rowmax";
  op.inputs = {{"A", 2}};
  op.vars = {{"i", true, {}}, {"k", false, {}}};
  op.output_vars = {0};
  op.body = make_reduce(Reducer::kMax, {1}, make_access(0, {index_var(0), index_var(1)}));
  validate(op);
  std::vector<double> a = {-5, -3, -4, -9, -1, -2};
  std::vector<double> out(2);
  interpret(op, {{a.data(), {2, 3}}}, {2, 3}, out.data(), nullptr, 1);
  EXPECT_EQ(out, (std::vector<double>{-3, -1}));
}

}  // namespace
}  // namespace tilewise::tdl

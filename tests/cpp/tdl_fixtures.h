// Hand-built TDL descriptions shared by the C++ tests (the Python tracer builds the same).
#pragma once
#include "tdl/op_desc.h"

namespace tilewise::tdl::testing {

/// conv1d (Tofu Fig. 3): lambda b, co, x: Sum(ci, dx: data[b, ci, x + dx] * filters[ci, co, dx]).
/// Variables: b=0, co=1, x=2, ci=3, dx=4. Inputs: data=0, filters=1.
inline OpDesc conv1d() {
  OpDesc op;
  op.name = "conv1d";
  op.inputs = {{"data", 3}, {"filters", 3}};
  op.vars = {{"b", true, {}}, {"co", true, {}}, {"x", true, {}}, {"ci", false, {}}, {"dx", false, {}}};
  op.output_vars = {0, 1, 2};
  auto v = [](int i) { return index_var(i); };
  Expr data = make_access(0, {v(0), v(3), index_add(v(2), v(4))});
  Expr filters = make_access(1, {v(3), v(1), v(4)});
  op.body = make_reduce(Reducer::kSum, {3, 4}, make_binary(BinaryOp::kMul, data, filters));
  validate(op);
  return op;
}

/// shift_two (Tofu §4.2): lambda i: A[i + 2].
inline OpDesc shift_two() {
  OpDesc op;
  op.name = "shift_two";
  op.inputs = {{"A", 1}};
  op.vars = {{"i", true, {}}};
  op.output_vars = {0};
  op.body = make_access(0, {index_add(index_var(0), index_const(2))});
  validate(op);
  return op;
}

}  // namespace tilewise::tdl::testing

// libFuzzer harness: TDL descriptions as @tw.op bodies would make them (any arity, ranks, variables,
// non-affine and huge indices, deep expressions, reductions nested or not), then everything the
// core does with a description: validation, shape and extent inference, strategies and their
// regions, the cost model's work, and the interpreter on small shapes. Each input must end in a
// result or a typed error (TDLError, ShapeError); anything else, a crash or a sanitizer report is a
// finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_bytes.h"
#include "tdl/errors.h"
#include "tdl/interpreter.h"
#include "tdl/op_cost.h"
#include "tdl/op_desc.h"
#include "tdl/region_analysis.h"
#include "tdl/strategy.h"

using namespace tilewise;
using namespace tilewise::tdl;

namespace {

fuzz::Outcomes outcomes("tdl_desc_fuzzer");

struct Builder {
  fuzz::Bytes& in;
  const OpDesc& op;
  int reduction_vars_used = 0;

  IndexExpr index(int depth) {
    const int n = static_cast<int>(op.vars.size());
    switch (depth <= 0 ? in.pick(2) : in.pick(8)) {
      case 0: return index_var(in.pick(n + 1) - (in.flag() ? 0 : 0));  // may name one past the end
      case 1: return index_const(in.edge());
      case 2: return index_extent(in.pick(static_cast<int>(op.inputs.size()) + 1), in.pick(5));
      case 3: return index_add(index(depth - 1), index(depth - 1));
      case 4: return index_sub(index(depth - 1), index(depth - 1));
      case 5: return index_scale(index(depth - 1), in.edge());
      case 6: return index_floordiv(index(depth - 1), in.edge());
      default: return index_mod(index(depth - 1), in.edge());
    }
  }

  Expr access(int depth) {
    const int t = in.pick(static_cast<int>(op.inputs.size()) + 1);  // one past the end: invalid
    const int rank = t < static_cast<int>(op.inputs.size()) && !in.flag() ? op.inputs[t].rank : in.pick(5);
    std::vector<IndexExpr> idx;
    for (int d = 0; d < rank; ++d) idx.push_back(index(std::min(depth, 2)));
    return make_access(t, std::move(idx));
  }

  Expr expr(int depth) {
    if (depth <= 0) return in.flag() ? access(0) : make_const(static_cast<double>(in.edge()));
    switch (in.pick(9)) {
      case 0: return make_const(static_cast<double>(in.edge()));
      case 1:
      case 2: return access(depth);
      case 3: return make_index_value(index(2));
      case 4: return make_unary(static_cast<UnaryOp>(in.pick(9)), expr(depth - 1), static_cast<double>(in.edge()));
      case 5: return make_binary(static_cast<BinaryOp>(in.pick(12)), expr(depth - 1), expr(depth - 1));
      case 6: return make_select(expr(depth - 1), expr(depth - 1), expr(depth - 1));
      case 7: {  // a reduction over some variables (output ones too: invalid)
        std::vector<int> vars;
        const int k = 1 + in.pick(2);
        for (int i = 0; i < k; ++i) vars.push_back(in.pick(static_cast<int>(op.vars.size())));
        return make_reduce(static_cast<Reducer>(in.pick(4)), std::move(vars), expr(depth - 1));
      }
      default: {  // a long chain (a traced sum of many terms): recursion depth
        const int length = 1 + in.u8() * 64 * (in.u8() % 4);
        Expr e = access(1);
        for (int i = 0; i < length; ++i) e = make_binary(BinaryOp::kAdd, e, make_const(1.0));
        return e;
      }
    }
  }
};

OpDesc build(fuzz::Bytes& in) {
  OpDesc op;
  op.name = "fuzzed";
  const int inputs = 1 + in.pick(3);
  for (int t = 0; t < inputs; ++t) op.inputs.push_back({"in" + std::to_string(t), in.pick(6) - 1});
  const int vars = 1 + in.pick(6);
  for (int v = 0; v < vars; ++v) {
    VarDecl d{"v" + std::to_string(v), in.pick(3) != 0, std::nullopt};
    if (in.pick(8) == 0) d.extent = in.flag() ? index_const(in.edge()) : index_extent(in.pick(inputs), in.pick(4));
    op.vars.push_back(std::move(d));
  }
  for (int v = 0; v < vars; ++v)
    if (op.vars[v].output) op.output_vars.push_back(v);
  if (in.pick(8) == 0 && !op.output_vars.empty()) std::swap(op.output_vars.front(), op.output_vars.back());
  Builder b{in, op};
  op.body = b.expr(1 + in.pick(4));
  return op;
}

void run(const OpDesc& op, fuzz::Bytes& in) {
  std::vector<Shape> shapes;
  for (const auto& t : op.inputs) {
    Shape s;
    for (int d = 0; d < std::max(t.rank, 0); ++d) s.push_back(in.extent());
    shapes.push_back(std::move(s));
  }
  check_input_shapes(op, shapes);
  const Shape out = infer_output_shape(op, shapes);
  const std::vector<int64_t> extents = infer_extents(op, shapes);
  op_work(op, extents, shapes);
  std::vector<Range> whole;
  for (int64_t e : extents) whole.push_back({0, e - 1});
  input_regions(op, whole, shapes);
  const auto strategies = enumerate_strategies(op);
  for (size_t i = 0; i < strategies.size() && i < 6; ++i) {
    concretize(op, strategies[i], 2 + in.pick(3), extents, shapes);
    symbolic(op, strategies[i], 2);
  }
  // The interpreter on small cases only (its cost is the product of the extents).
  double work = 1;
  for (int64_t e : extents) work *= static_cast<double>(std::max<int64_t>(e, 1));
  for (const auto& s : shapes) {
    double elements = 1;
    for (int64_t e : s) elements *= static_cast<double>(e);
    work = std::max(work, elements);
  }
  int64_t nodes = 0;
  visit_nodes(op.body, [&](const ExprNode&) { ++nodes; });
  if (work > 4096 || work * static_cast<double>(nodes) > 200000) return;  // a fuzz input runs in milliseconds
  std::vector<std::vector<double>> data;
  std::vector<ArrayView> views;
  // Elements of a shape: 0 when a dimension is (its other dimensions may be huge: no product then).
  auto volume = [](const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (int64_t e : s)
      if (e <= 0) return int64_t{0};
    for (int64_t e : s) n *= e;  // at most `work` (4096) when no dimension is 0
    return n;
  };
  for (const auto& s : shapes) data.emplace_back(static_cast<size_t>(volume(s)), 0.5);
  for (size_t t = 0; t < shapes.size(); ++t) views.push_back({data[t].data(), shapes[t]});
  std::vector<double> result(static_cast<size_t>(std::max<int64_t>(volume(out), 1)));
  interpret(op, views, extents, result.data(), nullptr, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Bytes in(data, size);
  OpDesc op;
  try {
    op = build(in);  // the builders refuse some pieces already (a floor division by 0)
    validate(op);
  } catch (const TDLError&) {
    outcomes.count("invalid description (TDLError)");
    return 0;
  }
  try {
    run(op, in);
    outcomes.count("analysed");
  } catch (const ShapeError&) {
    outcomes.count("ShapeError");
  } catch (const TDLError&) {
    outcomes.count("TDLError after validation");
  }
  return 0;
}

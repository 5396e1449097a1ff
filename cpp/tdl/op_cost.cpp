#include "tdl/op_cost.h"

namespace tilewise::tdl {

namespace {
OpWork work_of(const Expr& e, const std::vector<int64_t>& extents, const std::vector<Shape>& shapes) {
  OpWork w;
  for (const auto& c : e->operands) {
    OpWork cw = work_of(c, extents, shapes);
    w.flops_per_element += cw.flops_per_element;
    w.reads_per_element += cw.reads_per_element;
  }
  switch (e->kind) {
    case ExprNode::kAccess: w.reads_per_element += 1; break;
    case ExprNode::kUnary:
    case ExprNode::kBinary:
    case ExprNode::kSelect: w.flops_per_element += 1; break;
    case ExprNode::kReduce: {
      double n = 1;
      for (int v : e->reduce_vars) n *= static_cast<double>(extents[v]);
      w.flops_per_element = (w.flops_per_element + 1) * n;
      w.reads_per_element *= n;
      break;
    }
    case ExprNode::kOpaque:
      for (const auto& a : e->slices) {
        double n = 1;
        for (size_t d = 0; d < a.dims.size(); ++d)
          if (!a.dims[d]) n *= static_cast<double>(shapes[a.tensor][d]);
        w.reads_per_element += n;
      }
      break;
    default: break;
  }
  return w;
}
}  // namespace

OpWork op_work(const OpDesc& op, const std::vector<int64_t>& extents, const std::vector<Shape>& shapes) {
  return work_of(op.body, extents, shapes);
}

}  // namespace tilewise::tdl

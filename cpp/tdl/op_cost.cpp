#include "tdl/op_cost.h"

#include <set>

#include "tdl/free_vars.h"

namespace tilewise::tdl {

namespace {

// How often each node is evaluated in total, as the interpreter does it: a reduction is
// recomputed only when an enclosing variable (output or reduction) it depends on changes, so
// a row's mean is computed once per row, not once per element of the row.
struct Counter {
  const std::vector<int64_t>& extents;
  const std::vector<Shape>& shapes;
  std::unordered_map<const ExprNode*, std::vector<int>> free_vars;
  OpWork work;

  double extent_product(const std::vector<int>& vars) const {
    double n = 1;
    for (int v : vars) n *= static_cast<double>(extents[v]);
    return n;
  }

  // `count`: total evaluations of e; `bound`: output variables and those of enclosing reductions.
  void visit(const Expr& e, double count, const std::set<int>& bound) {
    switch (e->kind) {
      case ExprNode::kAccess: work.reads_per_element += count; break;
      case ExprNode::kUnary:
      case ExprNode::kBinary:
      case ExprNode::kSelect: work.flops_per_element += count; break;
      case ExprNode::kOpaque:
        for (const auto& a : e->slices) {
          double n = 1;
          for (size_t d = 0; d < a.dims.size(); ++d)
            if (!a.dims[d]) n *= static_cast<double>(shapes[a.tensor][d]);
          work.reads_per_element += count * n;
        }
        break;
      default: break;
    }
    if (e->kind == ExprNode::kReduce) {
      double iterations = extent_product(e->reduce_vars);
      work.flops_per_element += count * iterations;  // one combine per reduced element
      std::set<int> inner = bound;
      inner.insert(e->reduce_vars.begin(), e->reduce_vars.end());
      for (const auto& c : e->operands) visit_child(c, count * iterations, inner);
      return;
    }
    for (const auto& c : e->operands) visit_child(c, count, bound);
  }

  void visit_child(const Expr& c, double count, const std::set<int>& bound) {
    if (c->kind != ExprNode::kReduce) return visit(c, count, bound);
    // Cached: evaluated once per value of the enclosing reduction variables it reads.
    std::vector<int> varying;
    for (int v : free_vars.at(c.get()))
      if (bound.count(v)) varying.push_back(v);
    visit(c, extent_product(varying), bound);
  }
};

}  // namespace

OpWork op_work(const OpDesc& op, const std::vector<int64_t>& extents, const std::vector<Shape>& shapes) {
  Counter c{extents, shapes, reduce_free_vars(op.body), {}};
  std::set<int> outputs(op.output_vars.begin(), op.output_vars.end());
  double elements = c.extent_product(op.output_vars);
  c.visit_child(op.body, elements, outputs);
  if (elements > 0) {
    c.work.flops_per_element /= elements;
    c.work.reads_per_element /= elements;
  }
  return c.work;
}

}  // namespace tilewise::tdl

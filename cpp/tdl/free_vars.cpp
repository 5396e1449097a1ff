#include "tdl/free_vars.h"

#include <algorithm>
#include <set>

namespace tilewise::tdl {

namespace {
std::set<int> collect(const Expr& e, std::unordered_map<const ExprNode*, std::vector<int>>& out) {
  std::set<int> vars;
  auto add_index = [&](const IndexExpr& i) {
    std::vector<int> vs;
    collect_vars(i, vs);
    vars.insert(vs.begin(), vs.end());
  };
  for (const auto& i : e->indices) add_index(i);
  for (const auto& a : e->slices)
    for (const auto& d : a.dims)
      if (d) add_index(*d);
  for (const auto& c : e->operands) {
    auto sub = collect(c, out);
    vars.insert(sub.begin(), sub.end());
  }
  if (e->kind == ExprNode::kReduce) {
    for (int v : e->reduce_vars) vars.erase(v);
    out[e.get()] = std::vector<int>(vars.begin(), vars.end());
  }
  return vars;
}
}  // namespace

std::unordered_map<const ExprNode*, std::vector<int>> reduce_free_vars(const Expr& body) {
  std::unordered_map<const ExprNode*, std::vector<int>> out;
  collect(body, out);
  return out;
}

}  // namespace tilewise::tdl

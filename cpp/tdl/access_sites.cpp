#include "tdl/access_sites.h"

namespace tilewise::tdl {

std::vector<AccessSite> collect_access_sites(const Expr& body) {
  std::vector<AccessSite> sites;
  visit_nodes(body, [&](const ExprNode& n) {
    if (n.kind == ExprNode::kAccess) {
      AccessSite s{n.tensor, {}, &n};
      for (const auto& i : n.indices) s.dims.emplace_back(i);
      sites.push_back(std::move(s));
    } else if (n.kind == ExprNode::kOpaque) {
      for (const auto& a : n.slices) sites.push_back({a.tensor, a.dims, &n});
    }
  });
  return sites;
}

}  // namespace tilewise::tdl

// Variables a sub-expression depends on from outside it: a reduction whose free variables do
// not change across an enclosing loop need not be recomputed (the mean inside a variance).
#pragma once
#include <unordered_map>
#include <vector>

#include "tdl/expr.h"

namespace tilewise::tdl {

/// For every Reduce node under `body`, its free variables (sorted): those its sub-tree reads
/// but does not bind itself.
std::unordered_map<const ExprNode*, std::vector<int>> reduce_free_vars(const Expr& body);

}  // namespace tilewise::tdl

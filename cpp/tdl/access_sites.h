// Every place an op reads an input: element accesses and the slices of opaque functions.
#pragma once
#include <optional>
#include <vector>

#include "tdl/expr.h"

namespace tilewise::tdl {

/// One read: tensor, and per dimension the index (nullopt = the whole dimension).
struct AccessSite {
  int tensor = 0;
  std::vector<std::optional<IndexExpr>> dims;
  const ExprNode* node = nullptr;  ///< the access or opaque node, for messages
};

std::vector<AccessSite> collect_access_sites(const Expr& body);

}  // namespace tilewise::tdl

// Value expressions of TDL (Tofu §4.1): constants, tensor element accesses, arithmetic and
// math functions, reductions over new index variables, and opaque functions over slices.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tdl/index_expr.h"

namespace tilewise::tdl {

enum class UnaryOp { kNeg, kExp, kLog, kTanh, kSigmoid, kSqrt, kAbs, kErf, kPow };
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kMax, kMin, kLt, kLe, kGt, kGe, kEq, kNe };
enum class Reducer { kSum, kMax, kMin, kProd };

const char* name_of(UnaryOp op);
const char* name_of(BinaryOp op);
const char* name_of(Reducer r);
/// The reducer's identity: Sum 0, Prod 1, Max -inf, Min +inf.
double identity_of(Reducer r);

/// One argument of an opaque function: a tensor with some dimensions fixed by an index
/// and the others taken whole (`batch_mat[b, :, :]`).
struct SliceArg {
  int tensor = 0;
  std::vector<std::optional<IndexExpr>> dims;  ///< nullopt = the whole dimension
};

struct ExprNode;
/// Immutable shared handle to a value expression.
using Expr = std::shared_ptr<const ExprNode>;

/// One node; which fields are meaningful depends on kind.
struct ExprNode {
  enum Kind { kConst, kAccess, kIndexValue, kUnary, kBinary, kSelect, kReduce, kOpaque };
  Kind kind = kConst;
  double value = 0;                  ///< kConst; exponent of kPow
  int tensor = -1;                   ///< kAccess
  std::vector<IndexExpr> indices;    ///< kAccess; kIndexValue (one); kOpaque result indices
  UnaryOp unary = UnaryOp::kNeg;     ///< kUnary
  BinaryOp binary = BinaryOp::kAdd;  ///< kBinary
  Reducer reducer = Reducer::kSum;   ///< kReduce
  std::vector<int> reduce_vars;      ///< kReduce: variables it binds
  std::vector<Expr> operands;        ///< kUnary (1), kBinary (2), kSelect (cond, a, b), kReduce (body)
  int opaque = -1;                   ///< kOpaque: id of the opaque function in the op
  std::vector<SliceArg> slices;      ///< kOpaque arguments
  std::vector<IndexExpr> result_extents;  ///< kOpaque: extents of its result (in tensor extents)
  int depth = 1;                     ///< nodes on the longest path to a leaf (bounded by kMaxExprDepth)
};

// The factories of nodes with operands throw TDLError when the result would be deeper than
// tdl::kMaxExprDepth (limits.h): every analysis walks expressions recursively.
Expr make_const(double v);
Expr make_access(int tensor, std::vector<IndexExpr> indices);
Expr make_index_value(IndexExpr index);
Expr make_unary(UnaryOp op, Expr a, double exponent = 0);
Expr make_binary(BinaryOp op, Expr a, Expr b);
Expr make_select(Expr cond, Expr a, Expr b);
Expr make_reduce(Reducer r, std::vector<int> vars, Expr body);
Expr make_opaque(int opaque, std::vector<SliceArg> args, std::vector<IndexExpr> result_indices,
                 std::vector<IndexExpr> result_extents);

/// Readable form, e.g. `Sum(ci, dx: data[b, ci, x + dx] * filters[ci, co, dx])`.
std::string to_string(const Expr& e, const Names& names, const std::vector<std::string>& opaque_names = {});

/// Calls f on every node, parents before children.
template <class F>
void visit_nodes(const Expr& e, F&& f) {
  f(*e);
  for (const auto& c : e->operands) visit_nodes(c, f);
}

}  // namespace tilewise::tdl

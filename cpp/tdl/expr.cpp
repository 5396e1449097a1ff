#include "tdl/expr.h"

#include <algorithm>
#include <limits>

#include "tdl/limits.h"

namespace tilewise::tdl {

const char* name_of(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kLog: return "log";
    case UnaryOp::kTanh: return "tanh";
    case UnaryOp::kSigmoid: return "sigmoid";
    case UnaryOp::kSqrt: return "sqrt";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kErf: return "erf";
    case UnaryOp::kPow: return "pow";
  }
  return "?";
}

const char* name_of(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "+";
    case BinaryOp::kSub: return "-";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kMax: return "max";
    case BinaryOp::kMin: return "min";
    case BinaryOp::kLt: return "<";
    case BinaryOp::kLe: return "<=";
    case BinaryOp::kGt: return ">";
    case BinaryOp::kGe: return ">=";
    case BinaryOp::kEq: return "==";
    case BinaryOp::kNe: return "!=";
  }
  return "?";
}

const char* name_of(Reducer r) {
  switch (r) {
    case Reducer::kSum: return "Sum";
    case Reducer::kMax: return "Max";
    case Reducer::kMin: return "Min";
    case Reducer::kProd: return "Prod";
  }
  return "?";
}

double identity_of(Reducer r) {
  switch (r) {
    case Reducer::kSum: return 0.0;
    case Reducer::kProd: return 1.0;
    case Reducer::kMax: return -std::numeric_limits<double>::infinity();
    case Reducer::kMin: return std::numeric_limits<double>::infinity();
  }
  return 0.0;
}

namespace {
std::shared_ptr<ExprNode> node(ExprNode::Kind k) {
  auto n = std::make_shared<ExprNode>();
  n->kind = k;
  return n;
}
// Sets n's depth from its operands; TDLError past kMaxExprDepth, before anything recurses.
void set_depth(ExprNode& n) {
  int d = 0;
  for (const auto& c : n.operands) d = std::max(d, c->depth);
  n.depth = d + 1;
  if (n.depth > kMaxExprDepth)
    throw TDLError("the description's body is too deep: more than " + std::to_string(kMaxExprDepth) +
                   " nested operations (e.g. a chain of additions); use a reduction (tw.Sum) or split the op");
}
}  // namespace

Expr make_const(double v) {
  auto n = node(ExprNode::kConst);
  n->value = v;
  return n;
}
Expr make_access(int tensor, std::vector<IndexExpr> indices) {
  auto n = node(ExprNode::kAccess);
  n->tensor = tensor;
  n->indices = std::move(indices);
  return n;
}
Expr make_index_value(IndexExpr index) {
  auto n = node(ExprNode::kIndexValue);
  n->indices = {std::move(index)};
  return n;
}
Expr make_unary(UnaryOp op, Expr a, double exponent) {
  auto n = node(ExprNode::kUnary);
  n->unary = op;
  n->value = exponent;
  n->operands = {std::move(a)};
  set_depth(*n);
  return n;
}
Expr make_binary(BinaryOp op, Expr a, Expr b) {
  auto n = node(ExprNode::kBinary);
  n->binary = op;
  n->operands = {std::move(a), std::move(b)};
  set_depth(*n);
  return n;
}
Expr make_select(Expr cond, Expr a, Expr b) {
  auto n = node(ExprNode::kSelect);
  n->operands = {std::move(cond), std::move(a), std::move(b)};
  set_depth(*n);
  return n;
}
Expr make_reduce(Reducer r, std::vector<int> vars, Expr body) {
  auto n = node(ExprNode::kReduce);
  n->reducer = r;
  n->reduce_vars = std::move(vars);
  n->operands = {std::move(body)};
  set_depth(*n);
  return n;
}
Expr make_opaque(int opaque, std::vector<SliceArg> args, std::vector<IndexExpr> result_indices,
                 std::vector<IndexExpr> result_extents) {
  auto n = node(ExprNode::kOpaque);
  n->result_extents = std::move(result_extents);
  n->opaque = opaque;
  n->slices = std::move(args);
  n->indices = std::move(result_indices);
  return n;
}

namespace {
std::string join_indices(const std::vector<IndexExpr>& idx, const Names& names) {
  std::string s;
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + to_string(idx[i], names);
  return s;
}
std::string tensor_name(int t, const Names& names) {
  return t < static_cast<int>(names.tensors.size()) ? names.tensors[t] : "t" + std::to_string(t);
}
}  // namespace

std::string to_string(const Expr& e, const Names& names, const std::vector<std::string>& opaque_names) {
  switch (e->kind) {
    case ExprNode::kConst: {
      std::string s = std::to_string(e->value);
      s.erase(s.find_last_not_of('0') + 1);
      if (!s.empty() && s.back() == '.') s.pop_back();
      return s;
    }
    case ExprNode::kAccess: return tensor_name(e->tensor, names) + "[" + join_indices(e->indices, names) + "]";
    case ExprNode::kIndexValue: return "index_value(" + to_string(e->indices[0], names) + ")";
    case ExprNode::kUnary:
      if (e->unary == UnaryOp::kNeg) return "-(" + to_string(e->operands[0], names, opaque_names) + ")";
      if (e->unary == UnaryOp::kPow)
        return "(" + to_string(e->operands[0], names, opaque_names) + ")**" + to_string(make_const(e->value), names);
      return std::string(name_of(e->unary)) + "(" + to_string(e->operands[0], names, opaque_names) + ")";
    case ExprNode::kBinary: {
      std::string a = to_string(e->operands[0], names, opaque_names);
      std::string b = to_string(e->operands[1], names, opaque_names);
      if (e->binary == BinaryOp::kMax || e->binary == BinaryOp::kMin)
        return std::string(name_of(e->binary)) + "(" + a + ", " + b + ")";
      return "(" + a + " " + name_of(e->binary) + " " + b + ")";
    }
    case ExprNode::kSelect:
      return "where(" + to_string(e->operands[0], names, opaque_names) + ", " +
             to_string(e->operands[1], names, opaque_names) + ", " + to_string(e->operands[2], names, opaque_names) +
             ")";
    case ExprNode::kReduce: {
      std::string vs;
      for (size_t i = 0; i < e->reduce_vars.size(); ++i)
        vs += (i ? ", " : "") + names.symbol(Symbol::var(e->reduce_vars[i]));
      return std::string(name_of(e->reducer)) + "(" + vs + ": " + to_string(e->operands[0], names, opaque_names) + ")";
    }
    case ExprNode::kOpaque: {
      std::string s = e->opaque < static_cast<int>(opaque_names.size()) ? opaque_names[e->opaque] : "opaque";
      s += "(";
      for (size_t i = 0; i < e->slices.size(); ++i) {
        const auto& a = e->slices[i];
        s += (i ? ", " : "") + tensor_name(a.tensor, names) + "[";
        for (size_t d = 0; d < a.dims.size(); ++d) s += (d ? ", " : "") + (a.dims[d] ? to_string(*a.dims[d], names) : ":");
        s += "]";
      }
      return s + ")[" + join_indices(e->indices, names) + "]";
    }
  }
  return "?";
}

}  // namespace tilewise::tdl

// Index expressions of TDL: affine in index variables and tensor extents, plus floor
// division and modulo by positive constants. Built only through the factories below,
// which keep affine parts in canonical linear form so interval analysis stays exact.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tilewise::tdl {

/// A symbol an index may depend on: an index variable, or the extent of a tensor dimension.
struct Symbol {
  enum Kind { kVar = 0, kExtent = 1 };
  Kind kind = kVar;
  int a = 0;  ///< variable id, or tensor id for an extent
  int b = 0;  ///< dimension, for an extent
  static Symbol var(int v) { return {kVar, v, 0}; }
  static Symbol extent(int tensor, int dim) { return {kExtent, tensor, dim}; }
  friend bool operator<(const Symbol& x, const Symbol& y) {
    return x.kind != y.kind ? x.kind < y.kind : x.a != y.a ? x.a < y.a : x.b < y.b;
  }
  friend bool operator==(const Symbol& x, const Symbol& y) { return x.kind == y.kind && x.a == y.a && x.b == y.b; }
};

/// sum(coeff * symbol) + constant, with no zero coefficients.
struct LinearForm {
  std::map<Symbol, int64_t> terms;
  int64_t constant = 0;

  int64_t coeff(const Symbol& s) const;
  bool is_constant() const { return terms.empty(); }
  LinearForm operator+(const LinearForm& o) const;
  LinearForm scaled(int64_t k) const;
  friend bool operator==(const LinearForm& x, const LinearForm& y) {
    return x.constant == y.constant && x.terms == y.terms;
  }
};

struct IndexNode;
/// Immutable shared handle to an index expression.
using IndexExpr = std::shared_ptr<const IndexNode>;

/// One node: Linear (leaf), Add, Scale, FloorDiv or Mod.
struct IndexNode {
  enum Kind { kLinear, kAdd, kScale, kFloorDiv, kMod };
  Kind kind = kLinear;
  LinearForm linear;  ///< kLinear only
  IndexExpr a, b;     ///< operands (b only for kAdd)
  int64_t k = 1;      ///< constant of kScale, kFloorDiv, kMod
};

IndexExpr index_const(int64_t c);
IndexExpr index_var(int var);
IndexExpr index_extent(int tensor, int dim);
IndexExpr index_add(const IndexExpr& a, const IndexExpr& b);
IndexExpr index_sub(const IndexExpr& a, const IndexExpr& b);
IndexExpr index_scale(const IndexExpr& a, int64_t k);
/// Floor division by k > 0 (throws TDLError otherwise).
IndexExpr index_floordiv(const IndexExpr& a, int64_t k);
/// Python-style modulo by k > 0 (throws TDLError otherwise).
IndexExpr index_mod(const IndexExpr& a, int64_t k);

/// Whether the expression is a pure linear form (no floor division or modulo).
bool is_linear(const IndexExpr& e);
/// Every index variable the expression depends on.
void collect_vars(const IndexExpr& e, std::vector<int>& out);
bool uses_var(const IndexExpr& e, int var);

/// Names used when printing: variables by id, tensors by id.
struct Names {
  std::vector<std::string> vars;
  std::vector<std::string> tensors;
  std::string symbol(const Symbol& s) const;
};
std::string to_string(const IndexExpr& e, const Names& names);

/// Concrete value for given variable values and tensor shapes.
int64_t eval_index(const IndexExpr& e, const int64_t* var_values, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace tilewise::tdl

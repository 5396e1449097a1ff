// Affine forms over symbolic extents with rational coefficients: Tofu §4.2's interval bound
// Σ c_i X_i + c, where X_v is the extent of index variable v (or of a tensor dimension).
#pragma once
#include <map>
#include <string>

#include "tdl/index_expr.h"
#include "tdl/rational.h"

namespace tilewise::tdl {

/// Σ coeff * symbol + constant. Symbol::var(v) stands for X_v, the extent of variable v.
struct Affine {
  std::map<Symbol, Rational> coeffs;
  Rational constant;

  Affine() = default;
  Affine(int64_t c) : constant(c) {}  // NOLINT: integers convert implicitly
  static Affine symbol(const Symbol& s, Rational c = 1);

  Affine operator+(const Affine& o) const;
  Affine operator-(const Affine& o) const { return *this + o * Rational(-1); }
  Affine operator*(Rational k) const;
  Affine operator/(Rational k) const { return *this * (Rational(1) / k); }
  friend bool operator==(const Affine& a, const Affine& b) { return a.constant == b.constant && a.coeffs == b.coeffs; }

  /// True when a <= b for every assignment of extents >= 1 (coefficient-wise test).
  friend bool provably_le(const Affine& a, const Affine& b);
  /// Value for concrete extents: var_extents[v] for X_v, shapes for tensor extents.
  Rational evaluate(const std::vector<int64_t>& var_extents, const std::vector<std::vector<int64_t>>& shapes) const;
  /// `X_b/2 - 1`, with X_<name> for variables and tensor.shape[d] for tensor extents.
  std::string str(const Names& names) const;
};

}  // namespace tilewise::tdl

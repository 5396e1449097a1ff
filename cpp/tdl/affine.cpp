#include "tdl/affine.h"

namespace tilewise::tdl {

Affine Affine::symbol(const Symbol& s, Rational c) {
  Affine a;
  if (!c.is_zero()) a.coeffs[s] = c;
  return a;
}

Affine Affine::operator+(const Affine& o) const {
  Affine r = *this;
  r.constant = r.constant + o.constant;
  for (const auto& [s, c] : o.coeffs) {
    Rational v = r.coeffs[s] + c;
    if (v.is_zero()) r.coeffs.erase(s);
    else r.coeffs[s] = v;
  }
  return r;
}

Affine Affine::operator*(Rational k) const {
  Affine r;
  if (k.is_zero()) return r;
  r.constant = constant * k;
  for (const auto& [s, c] : coeffs) r.coeffs[s] = c * k;
  return r;
}

bool provably_le(const Affine& a, const Affine& b) {
  // b - a = Σ d_i X_i + d0 with X_i >= 1: non-negative if every d_i >= 0 and Σ d_i + d0 >= 0.
  Affine d = b - a;
  Rational total = d.constant;
  for (const auto& [s, c] : d.coeffs) {
    if (c < Rational(0)) return false;
    total = total + c;
  }
  return Rational(0) <= total;
}

Rational Affine::evaluate(const std::vector<int64_t>& var_extents, const std::vector<std::vector<int64_t>>& shapes) const {
  Rational v = constant;
  for (const auto& [s, c] : coeffs) v = v + c * Rational(s.kind == Symbol::kVar ? var_extents[s.a] : shapes[s.a][s.b]);
  return v;
}

std::string Affine::str(const Names& names) const {
  std::string out;
  auto term = [&](const Symbol& s, Rational c) {
    std::string name = s.kind == Symbol::kVar ? "X_" + names.symbol(s) : names.symbol(s);
    Rational m = c < Rational(0) ? -c : c;
    std::string body = m.num == 1 ? name : std::to_string(m.num) + "*" + name;
    if (m.den != 1) body += "/" + std::to_string(m.den);
    if (out.empty()) return (c < Rational(0) ? "-" : "") + body;
    return (c < Rational(0) ? " - " : " + ") + body;
  };
  for (const auto& [s, c] : coeffs) out += term(s, c);
  if (out.empty()) return constant.str();
  if (constant.is_zero()) return out;
  return out + (constant < Rational(0) ? " - " + (-constant).str() : " + " + constant.str());
}

}  // namespace tilewise::tdl

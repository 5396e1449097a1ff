#include "tdl/index_expr.h"

#include <algorithm>

#include "tdl/errors.h"

namespace tilewise::tdl {

int64_t LinearForm::coeff(const Symbol& s) const {
  auto it = terms.find(s);
  return it == terms.end() ? 0 : it->second;
}

namespace {
// Index arithmetic that would leave int64 is a typed error where the expression is made (a
// description's constants and coefficients come from user code: x[i * 2**62 * 4]).
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw TDLError("index arithmetic overflows int64: " + std::to_string(a) + " + " + std::to_string(b));
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw TDLError("index arithmetic overflows int64: " + std::to_string(a) + " * " + std::to_string(b));
  return r;
}
}  // namespace

LinearForm LinearForm::operator+(const LinearForm& o) const {
  LinearForm r = *this;
  r.constant = checked_add(r.constant, o.constant);
  for (const auto& [s, c] : o.terms) {
    int64_t& v = r.terms[s];
    v = checked_add(v, c);
    if (v == 0) r.terms.erase(s);
  }
  return r;
}

LinearForm LinearForm::scaled(int64_t k) const {
  LinearForm r;
  if (k == 0) return r;
  r.constant = checked_mul(constant, k);
  for (const auto& [s, c] : terms) r.terms[s] = checked_mul(c, k);
  return r;
}

namespace {
IndexExpr make_linear(LinearForm f) {
  auto n = std::make_shared<IndexNode>();
  n->kind = IndexNode::kLinear;
  n->linear = std::move(f);
  return n;
}
IndexExpr make_node(IndexNode::Kind kind, IndexExpr a, IndexExpr b, int64_t k) {
  auto n = std::make_shared<IndexNode>();
  n->kind = kind;
  n->a = std::move(a);
  n->b = std::move(b);
  n->k = k;
  return n;
}
// k > 0; no intermediate leaves int64 (a may be INT64_MIN).
int64_t floor_div(int64_t a, int64_t k) { return a / k - (a % k < 0 ? 1 : 0); }
int64_t floor_mod(int64_t a, int64_t k) {
  const int64_t r = a % k;
  return r < 0 ? r + k : r;
}
}  // namespace

IndexExpr index_const(int64_t c) {
  LinearForm f;
  f.constant = c;
  return make_linear(f);
}
IndexExpr index_var(int var) {
  LinearForm f;
  f.terms[Symbol::var(var)] = 1;
  return make_linear(f);
}
IndexExpr index_extent(int tensor, int dim) {
  LinearForm f;
  f.terms[Symbol::extent(tensor, dim)] = 1;
  return make_linear(f);
}

IndexExpr index_add(const IndexExpr& a, const IndexExpr& b) {
  if (a->kind == IndexNode::kLinear && b->kind == IndexNode::kLinear) return make_linear(a->linear + b->linear);
  // Keep the linear part on the right so constants fold: (x//2 + 1) + 2 -> x//2 + 3.
  if (a->kind == IndexNode::kLinear) return index_add(b, a);
  if (a->kind == IndexNode::kAdd && a->b->kind == IndexNode::kLinear && b->kind == IndexNode::kLinear)
    return make_node(IndexNode::kAdd, a->a, make_linear(a->b->linear + b->linear), 1);
  return make_node(IndexNode::kAdd, a, b, 1);
}

IndexExpr index_scale(const IndexExpr& a, int64_t k) {
  if (a->kind == IndexNode::kLinear) return make_linear(a->linear.scaled(k));
  if (k == 0) return index_const(0);
  if (k == 1) return a;
  if (a->kind == IndexNode::kAdd) return index_add(index_scale(a->a, k), index_scale(a->b, k));
  if (a->kind == IndexNode::kScale) return index_scale(a->a, checked_mul(a->k, k));
  return make_node(IndexNode::kScale, a, nullptr, k);
}

IndexExpr index_sub(const IndexExpr& a, const IndexExpr& b) { return index_add(a, index_scale(b, -1)); }

IndexExpr index_floordiv(const IndexExpr& a, int64_t k) {
  if (k <= 0) throw TDLError("index floor division needs a positive integer divisor, got " + std::to_string(k));
  if (k == 1) return a;
  if (a->kind == IndexNode::kLinear && a->linear.is_constant()) return index_const(floor_div(a->linear.constant, k));
  return make_node(IndexNode::kFloorDiv, a, nullptr, k);
}

IndexExpr index_mod(const IndexExpr& a, int64_t k) {
  if (k <= 0) throw TDLError("index modulo needs a positive integer divisor, got " + std::to_string(k));
  if (k == 1) return index_const(0);
  if (a->kind == IndexNode::kLinear && a->linear.is_constant()) return index_const(floor_mod(a->linear.constant, k));
  return make_node(IndexNode::kMod, a, nullptr, k);
}

bool is_linear(const IndexExpr& e) { return e->kind == IndexNode::kLinear; }

void collect_vars(const IndexExpr& e, std::vector<int>& out) {
  if (e->kind == IndexNode::kLinear) {
    for (const auto& [s, c] : e->linear.terms)
      if (s.kind == Symbol::kVar && std::find(out.begin(), out.end(), s.a) == out.end()) out.push_back(s.a);
    return;
  }
  collect_vars(e->a, out);
  if (e->b) collect_vars(e->b, out);
}

bool uses_var(const IndexExpr& e, int var) {
  std::vector<int> vs;
  collect_vars(e, vs);
  return std::find(vs.begin(), vs.end(), var) != vs.end();
}

std::string Names::symbol(const Symbol& s) const {
  if (s.kind == Symbol::kVar) return s.a < static_cast<int>(vars.size()) ? vars[s.a] : "v" + std::to_string(s.a);
  std::string t = s.a < static_cast<int>(tensors.size()) ? tensors[s.a] : "t" + std::to_string(s.a);
  return t + ".shape[" + std::to_string(s.b) + "]";
}

std::string to_string(const IndexExpr& e, const Names& names) {
  switch (e->kind) {
    case IndexNode::kLinear: {
      std::string out;
      for (const auto& [s, c] : e->linear.terms) {
        std::string name = names.symbol(s);
        if (out.empty()) {
          out = c == 1 ? name : c == -1 ? "-" + name : std::to_string(c) + "*" + name;
        } else {
          // |c| as unsigned: INT64_MIN has no int64 negation.
          const uint64_t m = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
          out += (c < 0 ? " - " : " + ") + (m == 1 ? name : std::to_string(m) + "*" + name);
        }
      }
      int64_t k = e->linear.constant;
      if (out.empty()) return std::to_string(k);
      if (k > 0) out += " + " + std::to_string(k);
      if (k < 0) out += " - " + std::to_string(0 - static_cast<uint64_t>(k));
      return out;
    }
    case IndexNode::kAdd: return to_string(e->a, names) + " + " + to_string(e->b, names);
    case IndexNode::kScale: return std::to_string(e->k) + "*(" + to_string(e->a, names) + ")";
    case IndexNode::kFloorDiv: return "(" + to_string(e->a, names) + ")//" + std::to_string(e->k);
    case IndexNode::kMod: return "(" + to_string(e->a, names) + ")%" + std::to_string(e->k);
  }
  return "?";
}

int64_t eval_index(const IndexExpr& e, const int64_t* var_values, const std::vector<std::vector<int64_t>>& shapes) {
  switch (e->kind) {
    case IndexNode::kLinear: {
      int64_t v = e->linear.constant;
      for (const auto& [s, c] : e->linear.terms)
        v += c * (s.kind == Symbol::kVar ? var_values[s.a] : shapes[s.a][s.b]);
      return v;
    }
    case IndexNode::kAdd: return eval_index(e->a, var_values, shapes) + eval_index(e->b, var_values, shapes);
    case IndexNode::kScale: return e->k * eval_index(e->a, var_values, shapes);
    case IndexNode::kFloorDiv: return floor_div(eval_index(e->a, var_values, shapes), e->k);
    case IndexNode::kMod: return floor_mod(eval_index(e->a, var_values, shapes), e->k);
  }
  return 0;
}

}  // namespace tilewise::tdl

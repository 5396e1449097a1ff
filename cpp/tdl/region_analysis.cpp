#include "tdl/region_analysis.h"

#include <algorithm>

#include "tdl/access_sites.h"
#include "tdl/errors.h"

namespace tilewise::tdl {

namespace {

int64_t floor_div(int64_t a, int64_t k) { return a >= 0 ? a / k : -((-a + k - 1) / k); }

// The two domains. Each supplies the same operations; eval_interval holds the rules once.
struct ConcreteDomain {
  using Itv = Range;
  const std::vector<Range>& vars;
  const std::vector<Shape>& shapes;
  Itv point(int64_t c) const { return {c, c}; }
  Itv symbol(const Symbol& s) const {
    if (s.kind == Symbol::kVar) return vars[s.a];
    return point(shapes[s.a][s.b]);
  }
  Itv add(const Itv& a, const Itv& b) const { return {a.lo + b.lo, a.hi + b.hi}; }
  Itv scale(const Itv& a, int64_t k) const { return k >= 0 ? Itv{a.lo * k, a.hi * k} : Itv{a.hi * k, a.lo * k}; }
  Itv floordiv(const Itv& a, int64_t k) const { return {floor_div(a.lo, k), floor_div(a.hi, k)}; }
  Itv mod(const Itv& a, int64_t k) const {
    // Exact when the interval does not wrap around a multiple of k.
    if (floor_div(a.lo, k) == floor_div(a.hi, k)) return {a.lo - floor_div(a.lo, k) * k, a.hi - floor_div(a.hi, k) * k};
    return {0, k - 1};
  }
};

struct SymbolicDomain {
  using Itv = Interval<Affine>;
  const std::vector<Interval<Affine>>& vars;
  Itv point(int64_t c) const { return {Affine(c), Affine(c)}; }
  Itv symbol(const Symbol& s) const {
    if (s.kind == Symbol::kVar) return vars[s.a];
    Affine x = Affine::symbol(s);
    return {x, x};
  }
  Itv add(const Itv& a, const Itv& b) const { return {a.lo + b.lo, a.hi + b.hi}; }
  Itv scale(const Itv& a, int64_t k) const {
    return k >= 0 ? Itv{a.lo * Rational(k), a.hi * Rational(k)} : Itv{a.hi * Rational(k), a.lo * Rational(k)};
  }
  Itv floordiv(const Itv& a, int64_t k) const { return {a.lo / Rational(k), a.hi / Rational(k)}; }
  Itv mod(const Itv&, int64_t k) const { return {Affine(0), Affine(k - 1)}; }
};

template <class D>
typename D::Itv eval_interval(const IndexExpr& e, const D& d) {
  switch (e->kind) {
    case IndexNode::kLinear: {
      auto acc = d.point(e->linear.constant);
      for (const auto& [s, c] : e->linear.terms) acc = d.add(acc, d.scale(d.symbol(s), c));
      return acc;
    }
    case IndexNode::kAdd: return d.add(eval_interval(e->a, d), eval_interval(e->b, d));
    case IndexNode::kScale: return d.scale(eval_interval(e->a, d), e->k);
    case IndexNode::kFloorDiv: return d.floordiv(eval_interval(e->a, d), e->k);
    case IndexNode::kMod: return d.mod(eval_interval(e->a, d), e->k);
  }
  TW_ASSERT(false, "unknown index node");
}

// Largest value <= limit of c + Σ a_i x_i over the box x_i in [lo_i, hi_i], by depth-first
// search over the variables, largest |a_i| first. Values of an affine form can have holes
// (2*x + 10*y), so clipping the interval is not enough to know the last element read.
class BoundedMax {
 public:
  struct Term {
    int64_t a, lo, hi;
  };
  BoundedMax(std::vector<Term> terms, int64_t c) : terms_(std::move(terms)), c_(c) {
    std::sort(terms_.begin(), terms_.end(),
              [](const Term& x, const Term& y) { return std::abs(x.a) > std::abs(y.a); });
    suf_min_.assign(terms_.size() + 1, 0);
    suf_max_.assign(terms_.size() + 1, 0);
    for (size_t i = terms_.size(); i-- > 0;) {
      int64_t p = terms_[i].a * terms_[i].lo, q = terms_[i].a * terms_[i].hi;
      suf_min_[i] = suf_min_[i + 1] + std::min(p, q);
      suf_max_[i] = suf_max_[i + 1] + std::max(p, q);
    }
  }
  /// nullopt when no value is <= limit; the interval bound when the search gives up.
  std::optional<int64_t> run(int64_t limit) {
    limit_ = limit;
    found_ = false;
    budget_ = 200000;
    if (c_ + suf_min_[0] > limit) return std::nullopt;
    dfs(0, c_);
    if (budget_ < 0) return std::min(limit, c_ + suf_max_[0]);
    return found_ ? std::optional<int64_t>(best_) : std::nullopt;
  }

 private:
  void dfs(size_t i, int64_t partial) {
    if (--budget_ < 0) return;
    if (partial + suf_min_[i] > limit_) return;
    if (found_ && partial + suf_max_[i] <= best_) return;
    if (partial + suf_max_[i] <= limit_) {
      best_ = partial + suf_max_[i];
      found_ = true;
      return;
    }
    if (i == terms_.size()) return;
    const Term& t = terms_[i];
    int64_t room = limit_ - partial - suf_min_[i + 1];  // a*x must be <= room
    if (t.a > 0) {
      for (int64_t x = std::min(t.hi, floor_div(room, t.a)); x >= t.lo && budget_ >= 0; --x) {
        if (found_ && partial + t.a * x + suf_max_[i + 1] <= best_) break;
        dfs(i + 1, partial + t.a * x);
      }
    } else {
      // a < 0: a*x <= room  <=>  x >= ceil(room / a); the value is largest at the smallest x.
      int64_t first = -floor_div(room, -t.a);
      for (int64_t x = std::max(t.lo, first); x <= t.hi && budget_ >= 0; ++x) {
        if (found_ && partial + t.a * x + suf_max_[i + 1] <= best_) break;
        dfs(i + 1, partial + t.a * x);
      }
    }
  }
  std::vector<Term> terms_;
  int64_t c_;
  std::vector<int64_t> suf_min_, suf_max_;
  int64_t limit_ = 0, best_ = 0, budget_ = 0;
  bool found_ = false;
};

// The in-bounds part [0, extent-1] of what an index expression reads, exactly for linear
// forms and floor division of a linear form; by clipping the interval otherwise.
Range clip_exact(const IndexExpr& e, const Range& raw, int64_t extent, const std::vector<Range>& vars,
                 const std::vector<Shape>& shapes) {
  Range bounds{0, extent - 1};
  if (raw.empty() || (raw.lo >= 0 && raw.hi <= extent - 1)) return raw.intersect(bounds);
  const LinearForm* g = nullptr;
  int64_t k = 1;
  if (e->kind == IndexNode::kLinear) g = &e->linear;
  else if (e->kind == IndexNode::kFloorDiv && e->a->kind == IndexNode::kLinear) g = &e->a->linear, k = e->k;
  if (!g) return raw.intersect(bounds);
  std::vector<BoundedMax::Term> pos, neg;
  int64_t c = g->constant;
  for (const auto& [s, a] : g->terms) {
    if (s.kind == Symbol::kExtent) {
      c += a * shapes[s.a][s.b];
      continue;
    }
    pos.push_back({a, vars[s.a].lo, vars[s.a].hi});
    neg.push_back({-a, vars[s.a].lo, vars[s.a].hi});
  }
  // floor(g/k) in [0, extent-1]  <=>  g in [0, k*extent - 1].
  auto hi = BoundedMax(pos, c).run(k * extent - 1);
  auto neg_lo = BoundedMax(neg, -c).run(0);  // max of -g subject to -g <= 0, i.e. min g >= 0
  if (!hi || !neg_lo) return Range::nothing();
  Range r{floor_div(-*neg_lo, k), floor_div(*hi, k)};
  return r.intersect(bounds);
}

bool any_empty(const IndexExpr& e, const std::vector<Range>& vars) {
  std::vector<int> vs;
  collect_vars(e, vs);
  return std::any_of(vs.begin(), vs.end(), [&](int v) { return vars[v].empty(); });
}

}  // namespace

Range eval_range(const IndexExpr& e, const std::vector<Range>& vars, const std::vector<Shape>& shapes) {
  if (any_empty(e, vars)) return Range::nothing();
  return eval_interval(e, ConcreteDomain{vars, shapes});
}

Interval<Affine> eval_symbolic(const IndexExpr& e, const std::vector<Interval<Affine>>& vars) {
  return eval_interval(e, SymbolicDomain{vars});
}

std::vector<Box> input_regions(const OpDesc& op, const std::vector<Range>& vars, const std::vector<Shape>& shapes) {
  return input_regions(collect_access_sites(op.body), vars, shapes);
}

std::vector<Box> input_regions(const std::vector<AccessSite>& sites, const std::vector<Range>& vars,
                               const std::vector<Shape>& shapes) {
  std::vector<Box> regions;
  for (const auto& s : shapes) regions.push_back(Box::nothing(s.size()));
  // A worker with an empty iteration space reads nothing, whichever variable is empty.
  if (std::any_of(vars.begin(), vars.end(), [](const Range& r) { return r.empty(); })) return regions;
  for (const auto& site : sites) {
    const Shape& shape = shapes[site.tensor];
    Box box{std::vector<Range>(shape.size())};
    for (size_t d = 0; d < shape.size(); ++d) {
      if (!site.dims[d]) {
        box.dims[d] = {0, shape[d] - 1};
        continue;
      }
      Range raw = eval_range(*site.dims[d], vars, shapes);
      box.dims[d] = clip_exact(*site.dims[d], raw, shape[d], vars, shapes);
    }
    regions[site.tensor] = regions[site.tensor].include(box);
  }
  return regions;
}

namespace {
// Adds a candidate bound, dropping any that another provably dominates.
void add_bound(std::vector<Affine>& alts, const Affine& b, bool is_lo) {
  for (const auto& a : alts)
    if (is_lo ? provably_le(a, b) : provably_le(b, a)) return;
  alts.erase(std::remove_if(alts.begin(), alts.end(),
                            [&](const Affine& a) { return is_lo ? provably_le(b, a) : provably_le(a, b); }),
             alts.end());
  alts.push_back(b);
}
std::string join(const std::vector<Affine>& alts, const Names& names, const char* fn) {
  if (alts.size() == 1) return alts[0].str(names);
  std::string s = std::string(fn) + "(";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? ", " : "") + alts[i].str(names);
  return s + ")";
}
}  // namespace

std::string SymbolicRange::str(const Names& names) const {
  return "[" + join(lo, names, "min") + ", " + join(hi, names, "max") + "]";
}

std::vector<std::vector<SymbolicRange>> symbolic_input_regions(const OpDesc& op,
                                                               const std::vector<Interval<Affine>>& vars) {
  std::vector<std::vector<SymbolicRange>> regions(op.inputs.size());
  for (const auto& site : collect_access_sites(op.body)) {
    auto& reg = regions[site.tensor];
    if (reg.empty()) reg.resize(site.dims.size());
    for (size_t d = 0; d < site.dims.size(); ++d) {
      Interval<Affine> itv;
      if (site.dims[d]) {
        itv = eval_symbolic(*site.dims[d], vars);
      } else {
        itv = {Affine(0), Affine::symbol(Symbol::extent(site.tensor, static_cast<int>(d))) + Affine(-1)};
      }
      add_bound(reg[d].lo, itv.lo, true);
      add_bound(reg[d].hi, itv.hi, false);
    }
  }
  return regions;
}

}  // namespace tilewise::tdl

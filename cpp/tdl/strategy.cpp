#include "tdl/strategy.h"

#include <algorithm>

#include "tdl/access_sites.h"
#include "tdl/errors.h"

namespace tilewise::tdl {

const char* name_of(StrategyKind k) {
  switch (k) {
    case StrategyKind::kOutput: return "output";
    case StrategyKind::kReduce: return "reduce";
    case StrategyKind::kReplicate: return "replicate";
  }
  return "?";
}

std::vector<bool> splittable_output_vars(const OpDesc& op) {
  std::vector<bool> ok(op.vars.size(), false);
  for (int v : op.output_vars) ok[v] = true;
  visit_nodes(op.body, [&](const ExprNode& n) {
    if (n.kind != ExprNode::kOpaque) return;
    for (const auto& i : n.indices) {
      std::vector<int> vs;
      collect_vars(i, vs);
      for (int v : vs) ok[v] = false;
    }
  });
  return ok;
}

namespace {

bool contains_reduce(const Expr& e) {
  bool found = false;
  visit_nodes(e, [&](const ExprNode& n) { found |= n.kind == ExprNode::kReduce; });
  return found;
}

// Finds the reduction whose variables can be split, looking through neg and, for Sum,
// multiplication or division by a factor without reductions (linear in the partial sum).
const ExprNode* top_reduce(const Expr& e) {
  if (e->kind == ExprNode::kReduce) return e.get();
  if (e->kind == ExprNode::kUnary && e->unary == UnaryOp::kNeg) {
    const ExprNode* r = top_reduce(e->operands[0]);
    return r && r->reducer == Reducer::kSum ? r : nullptr;
  }
  if (e->kind == ExprNode::kBinary && (e->binary == BinaryOp::kMul || e->binary == BinaryOp::kDiv)) {
    const Expr& a = e->operands[0];
    const Expr& b = e->operands[1];
    if (!contains_reduce(b)) {
      const ExprNode* r = top_reduce(a);
      return r && r->reducer == Reducer::kSum ? r : nullptr;
    }
    if (e->binary == BinaryOp::kMul && !contains_reduce(a)) {
      const ExprNode* r = top_reduce(b);
      return r && r->reducer == Reducer::kSum ? r : nullptr;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<std::pair<int, Reducer>> reducible_vars(const OpDesc& op) {
  std::vector<std::pair<int, Reducer>> out;
  const ExprNode* r = top_reduce(op.body);
  if (!r) return out;
  Reducer kind = r->reducer;
  // Sum(i: Sum(j: ...)) reduces over i and j alike.
  for (const ExprNode* cur = r; cur && cur->kind == ExprNode::kReduce && cur->reducer == kind;
       cur = cur->operands[0].get())
    for (int v : cur->reduce_vars) out.emplace_back(v, kind);
  return out;
}

std::vector<Strategy> enumerate_strategies(const OpDesc& op) {
  std::vector<Strategy> out;
  auto ok = splittable_output_vars(op);
  for (int v : op.output_vars)
    if (ok[v]) out.push_back({StrategyKind::kOutput, v, Reducer::kSum});
  for (auto [v, r] : reducible_vars(op)) out.push_back({StrategyKind::kReduce, v, r});
  out.push_back({StrategyKind::kReplicate, -1, Reducer::kSum});
  return out;
}

Range split_range(int64_t n, int64_t k, int64_t w) {
  int64_t base = n / k, extra = n % k;
  int64_t start = w * base + std::min(w, extra);
  int64_t size = base + (w < extra ? 1 : 0);
  return {start, start + size - 1};
}

ConcreteStrategy concretize(const OpDesc& op, const Strategy& s, int64_t parts, const std::vector<int64_t>& extents,
                            const std::vector<Shape>& shapes) {
  TW_ASSERT(parts >= 1, "parts must be positive");
  ConcreteStrategy cs{s, std::vector<std::vector<Box>>(op.inputs.size()), {}};
  for (int64_t w = 0; w < parts; ++w) {
    std::vector<Range> vars(op.vars.size());
    for (size_t v = 0; v < op.vars.size(); ++v) vars[v] = {0, extents[v] - 1};
    if (s.kind != StrategyKind::kReplicate) vars[s.var] = split_range(extents[s.var], parts, w);
    auto regions = input_regions(op, vars, shapes);
    for (size_t t = 0; t < regions.size(); ++t) cs.input_regions[t].push_back(regions[t]);
    Box out{std::vector<Range>()};
    for (int v : op.output_vars) out.dims.push_back(vars[v]);
    if (s.kind != StrategyKind::kOutput) {
      // Partial (reduce) or redundant (replicate) outputs cover the whole output.
      for (size_t d = 0; d < op.output_vars.size(); ++d) out.dims[d] = {0, extents[op.output_vars[d]] - 1};
    }
    cs.output_regions.push_back(out);
  }
  return cs;
}

SymbolicStrategy symbolic(const OpDesc& op, const Strategy& s, int64_t parts) {
  TW_ASSERT(parts >= 1, "parts must be positive");
  SymbolicStrategy ss{s, std::vector<std::vector<std::vector<SymbolicRange>>>(op.inputs.size()), {}};
  for (int64_t w = 0; w < parts; ++w) {
    std::vector<Interval<Affine>> vars(op.vars.size());
    for (size_t v = 0; v < op.vars.size(); ++v) {
      Affine x = Affine::symbol(Symbol::var(static_cast<int>(v)));
      vars[v] = {Affine(0), x + Affine(-1)};
      if (static_cast<int>(v) == s.var && s.kind != StrategyKind::kReplicate)
        vars[v] = {x * Rational(w, parts), x * Rational(w + 1, parts) + Affine(-1)};
    }
    auto regions = symbolic_input_regions(op, vars);
    for (size_t t = 0; t < regions.size(); ++t) ss.input_regions[t].push_back(regions[t]);
    std::vector<SymbolicRange> out;
    for (int v : op.output_vars) {
      Interval<Affine> itv = vars[v];
      if (s.kind != StrategyKind::kOutput) {
        Affine x = Affine::symbol(Symbol::var(v));
        itv = {Affine(0), x + Affine(-1)};
      }
      out.push_back({{itv.lo}, {itv.hi}});
    }
    ss.output_regions.push_back(out);
  }
  return ss;
}

namespace {
// The access reads exactly the output index: output variable d at dimension d.
bool reads_output_index(const OpDesc& op, const std::vector<IndexExpr>& indices) {
  if (indices.size() != op.output_vars.size()) return false;
  for (size_t d = 0; d < indices.size(); ++d) {
    LinearForm want;
    want.terms[Symbol::var(op.output_vars[d])] = 1;
    if (indices[d]->kind != IndexNode::kLinear || !(indices[d]->linear == want)) return false;
  }
  return true;
}
}  // namespace

std::vector<bool> aligned_inputs(const OpDesc& op) {
  std::vector<int> reads(op.inputs.size(), 0);
  std::vector<bool> aligned(op.inputs.size(), true);
  for (const auto& site : collect_access_sites(op.body)) {
    reads[site.tensor]++;
    if (site.node->kind != ExprNode::kAccess || !reads_output_index(op, site.node->indices))
      aligned[site.tensor] = false;
  }
  for (size_t t = 0; t < aligned.size(); ++t) aligned[t] = aligned[t] && reads[t] > 0;
  return aligned;
}

bool is_elementwise(const OpDesc& op) {
  bool ok = true, any_access = false;
  visit_nodes(op.body, [&](const ExprNode& n) {
    if (n.kind == ExprNode::kReduce || n.kind == ExprNode::kOpaque) ok = false;
    if (n.kind != ExprNode::kAccess) return;
    any_access = true;
    if (n.indices.size() != op.output_vars.size()) {
      ok = false;
      return;
    }
    for (size_t d = 0; d < n.indices.size(); ++d) {
      const IndexExpr& i = n.indices[d];
      LinearForm want;
      want.terms[Symbol::var(op.output_vars[d])] = 1;
      if (i->kind != IndexNode::kLinear || !(i->linear == want)) ok = false;
    }
  });
  return ok && any_access;
}

}  // namespace tilewise::tdl

#include "tdl/op_desc.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "tdl/access_sites.h"
#include "tdl/errors.h"
#include "tdl/limits.h"

namespace tilewise::tdl {

Names OpDesc::names() const {
  Names n;
  for (const auto& v : vars) n.vars.push_back(v.name);
  for (const auto& t : inputs) n.tensors.push_back(t.name);
  return n;
}
std::string OpDesc::str(const Expr& e) const { return to_string(e, names(), opaque_names); }
std::string OpDesc::str(const IndexExpr& e) const { return to_string(e, names()); }
std::string OpDesc::str() const {
  std::string s = "lambda ";
  for (size_t i = 0; i < output_vars.size(); ++i) s += (i ? ", " : "") + vars[output_vars[i]].name;
  return s + ": " + str(body);
}

namespace {

std::string op_prefix(const OpDesc& op) { return "op '" + op.name + "': "; }

// Every tensor extent an index reads (x.shape[d]) names an input that is indexed somewhere (its
// rank known) and one of its dimensions.
void check_extent_symbols(const OpDesc& op, const IndexExpr& idx, const std::string& where) {
  if (!idx) return;
  if (idx->kind == IndexNode::kLinear) {
    for (const auto& [s, c] : idx->linear.terms) {
      if (s.kind != Symbol::kExtent) continue;
      if (s.a < 0 || s.a >= static_cast<int>(op.inputs.size()))
        throw TDLError(op_prefix(op) + "the extent of an unknown tensor is read in " + where);
      const auto& t = op.inputs[s.a];
      if (t.rank < 0 || s.b < 0 || s.b >= t.rank)
        throw TDLError(op_prefix(op) + "dimension " + std::to_string(s.b) + " of '" + t.name + "' is read in " + where +
                       " but '" + t.name + "' " +
                       (t.rank < 0 ? std::string("is never indexed") : "has " + std::to_string(t.rank) + " dimensions"));
    }
    return;
  }
  check_extent_symbols(op, idx->a, where);
  check_extent_symbols(op, idx->b, where);
}

// Scoping: a variable may be used only inside the lambda that binds it.
void check_scopes(const OpDesc& op, const Expr& e, std::set<int>& in_scope, std::map<int, const ExprNode*>& bound_by) {
  auto check_index = [&](const IndexExpr& idx, const Expr& where) {
    check_extent_symbols(op, idx, "`" + op.str(where) + "`");
    std::vector<int> vs;
    collect_vars(idx, vs);
    for (int v : vs) {
      if (v < 0 || v >= static_cast<int>(op.vars.size()))
        throw TDLError(op_prefix(op) + "unknown index variable in `" + op.str(where) + "`");
      if (!in_scope.count(v))
        throw TDLError(op_prefix(op) + "variable `" + op.vars[v].name + "` is used outside the lambda that binds it, in `" +
                       op.str(where) + "`");
    }
  };
  switch (e->kind) {
    case ExprNode::kAccess:
      if (e->tensor < 0 || e->tensor >= static_cast<int>(op.inputs.size()))
        throw TDLError(op_prefix(op) + "unknown tensor in `" + op.str(e) + "`");
      if (op.inputs[e->tensor].rank < 0)  // the tracer declares the rank of every tensor it indexes
        throw TDLError(op_prefix(op) + "tensor '" + op.inputs[e->tensor].name + "' is indexed in `" + op.str(e) +
                       "` but declared as never indexed (rank -1)");
      if (op.inputs[e->tensor].rank != static_cast<int>(e->indices.size()))
        throw TDLError(op_prefix(op) + "tensor '" + op.inputs[e->tensor].name + "' has " +
                       std::to_string(op.inputs[e->tensor].rank) + " dimensions but `" + op.str(e) + "` uses " +
                       std::to_string(e->indices.size()) + " indices");
      for (const auto& i : e->indices) check_index(i, e);
      return;
    case ExprNode::kIndexValue: check_index(e->indices[0], e); return;
    case ExprNode::kOpaque:
      for (const auto& a : e->slices) {
        if (a.tensor < 0 || a.tensor >= static_cast<int>(op.inputs.size()))
          throw TDLError(op_prefix(op) + "unknown tensor in `" + op.str(e) + "`");
        if (op.inputs[a.tensor].rank >= 0 && op.inputs[a.tensor].rank != static_cast<int>(a.dims.size()))
          throw TDLError(op_prefix(op) + "tensor '" + op.inputs[a.tensor].name + "' has " +
                         std::to_string(op.inputs[a.tensor].rank) + " dimensions but `" + op.str(e) + "` slices " +
                         std::to_string(a.dims.size()));
        for (const auto& d : a.dims)
          if (d) check_index(*d, e);
      }
      for (const auto& i : e->indices) check_index(i, e);
      return;
    case ExprNode::kReduce: {
      for (int v : e->reduce_vars) {
        if (v < 0 || v >= static_cast<int>(op.vars.size()) || op.vars[v].output)
          throw TDLError(op_prefix(op) + "reducer binds a variable that is not a reduction variable in `" + op.str(e) + "`");
        // A shared sub-expression (the same reduction used twice) binds its variables once.
        auto [it, fresh] = bound_by.emplace(v, e.get());
        if (!fresh && it->second != e.get())
          throw TDLError(op_prefix(op) + "variable `" + op.vars[v].name + "` is bound by two reducers");
        in_scope.insert(v);
      }
      check_scopes(op, e->operands[0], in_scope, bound_by);
      for (int v : e->reduce_vars) in_scope.erase(v);
      return;
    }
    default:
      for (const auto& c : e->operands) check_scopes(op, c, in_scope, bound_by);
  }
}

}  // namespace

void validate(const OpDesc& op) {
  if (!op.body) throw TDLError(op_prefix(op) + "the description has no body");
  std::set<std::string> names;
  for (const auto& v : op.vars)
    if (!names.insert(v.name).second)
      throw TDLError(op_prefix(op) + "index variable name `" + v.name + "` is used twice; give each lambda argument its own name");
  for (const auto& t : op.inputs)
    if (names.count(t.name)) throw TDLError(op_prefix(op) + "name `" + t.name + "` is both a tensor and an index variable");
  std::set<int> in_scope;
  std::map<int, const ExprNode*> bound_by;
  for (int v : op.output_vars) {
    if (v < 0 || v >= static_cast<int>(op.vars.size()) || !op.vars[v].output)
      throw TDLError(op_prefix(op) + "output variable list names a non-output variable");
    if (!bound_by.emplace(v, nullptr).second) throw TDLError(op_prefix(op) + "output variable bound twice");
    in_scope.insert(v);
  }
  // Explicit extents (extents=...): constants or tensor extents.
  for (const auto& v : op.vars) {
    if (!v.extent) continue;
    const IndexExpr& e = *v.extent;
    std::vector<int> vars;
    if (e) collect_vars(e, vars);
    if (!e || !is_linear(e) || !vars.empty())
      throw TDLError(op_prefix(op) + "the extent of `" + v.name + "` must be a constant or a tensor extent");
    check_extent_symbols(op, e, "the extent of `" + v.name + "`");
  }
  check_scopes(op, op.body, in_scope, bound_by);
  // A reduction variable must be read somewhere, else its range is unknown.
  for (size_t v = 0; v < op.vars.size(); ++v) {
    if (op.vars[v].output || op.vars[v].extent) continue;
    if (!bound_by.count(static_cast<int>(v)))
      throw TDLError(op_prefix(op) + "reduction variable `" + op.vars[v].name + "` is never bound by a reducer");
    bool used = false;
    for (const auto& s : collect_access_sites(op.body))
      for (const auto& d : s.dims)
        if (d && uses_var(*d, static_cast<int>(v))) used = true;
    if (!used)
      throw TDLError(op_prefix(op) + "reduction variable `" + op.vars[v].name +
                     "` is never used to index a tensor, so its range is unknown; pass extents=(...) to the reducer");
  }
  // A kernel's role order names every variable once (the kernels permute by it).
  if (!op.kernel_vars.empty()) {
    std::vector<bool> seen(op.vars.size(), false);
    bool ok = op.kernel_vars.size() == op.vars.size();
    for (int v : op.kernel_vars) {
      if (v < 0 || v >= static_cast<int>(op.vars.size()) || seen[v]) ok = false;
      else seen[v] = true;
    }
    if (!ok) throw TDLError(op_prefix(op) + "kernel '" + op.kernel + "': the role order must name every variable once");
  }
}

void check_input_shapes(const OpDesc& op, const std::vector<Shape>& shapes) {
  if (shapes.size() != op.inputs.size())
    throw ShapeError(op_prefix(op) + "expects " + std::to_string(op.inputs.size()) + " input shapes, got " +
                     std::to_string(shapes.size()));
  for (size_t t = 0; t < shapes.size(); ++t) {
    if (op.inputs[t].rank >= 0 && static_cast<int>(shapes[t].size()) != op.inputs[t].rank)
      throw ShapeError(op_prefix(op) + "input '" + op.inputs[t].name + "' must have " +
                       std::to_string(op.inputs[t].rank) + " dimensions, got shape of rank " +
                       std::to_string(shapes[t].size()));
    for (int64_t d : shapes[t])
      if (d < 0) throw ShapeError(op_prefix(op) + "input '" + op.inputs[t].name + "' has a negative extent");
    // Before any extent arithmetic (inference solves k*D - 1 and the like): no overflow, no endless retry.
    check_shape_size(shapes[t], op_prefix(op) + "input '" + op.inputs[t].name + "'");
  }
}

namespace {

// Tries to solve the extent of the single unknown variable in one access dimension.
// The access must start at index 0 (no padding below) and is taken to end at the last
// element: a*(X-1) + rest_max = k*D - 1 at most (k = floor divisor).
struct Candidate {
  int var;
  int64_t extent;
};
std::optional<Candidate> solve_extent(const IndexExpr& idx, int64_t dim_extent, const std::vector<int64_t>& known,
                                      const std::vector<Shape>& shapes) {
  const LinearForm* g = nullptr;
  int64_t k = 1;
  if (idx->kind == IndexNode::kLinear) {
    g = &idx->linear;
  } else if (idx->kind == IndexNode::kFloorDiv && idx->a->kind == IndexNode::kLinear) {
    g = &idx->a->linear;
    k = idx->k;
  } else {
    return std::nullopt;
  }
  // In 128 bits: coefficients and extents come from the description and the shapes unbounded.
  using W = __int128;
  int unknown = -1;
  W unknown_coeff = 0;
  W min_v = g->constant, rest_max = g->constant;
  for (const auto& [s, c] : g->terms) {
    if (s.kind == Symbol::kExtent) {
      min_v += W(c) * shapes[s.a][s.b];
      rest_max += W(c) * shapes[s.a][s.b];
      continue;
    }
    bool is_known = known[s.a] >= 0;
    if (!is_known) {
      if (unknown >= 0 || c <= 0) return std::nullopt;
      unknown = s.a;
      unknown_coeff = c;
      continue;
    }
    const W span = W(c) * (known[s.a] - 1);
    min_v += std::min<W>(0, span);
    rest_max += std::max<W>(0, span);
  }
  if (unknown < 0 || min_v != 0) return std::nullopt;
  const W top = W(k) * dim_extent - 1 - rest_max;
  if (top < 0) return Candidate{unknown, 0};
  const W extent = top / unknown_coeff + 1;
  // Past kMaxExtent the caller refuses it; clamp so the value stays an int64.
  return Candidate{unknown, static_cast<int64_t>(std::min<W>(extent, W(kMaxExtent) + 1))};
}

// The largest magnitude an index expression reaches (and any constant in it), given every symbol's
// largest value, in long double (no overflow whatever the description's constants).
long double index_bound(const IndexExpr& e, const std::vector<long double>& var_max, const std::vector<Shape>& shapes) {
  if (e->kind == IndexNode::kLinear) {
    long double b = std::fabs(static_cast<long double>(e->linear.constant));
    for (const auto& [s, c] : e->linear.terms) {
      const long double top = s.kind == Symbol::kVar ? var_max[s.a] : static_cast<long double>(shapes[s.a][s.b]);
      b += std::fabs(static_cast<long double>(c)) * std::max<long double>(top, 1);
    }
    return b;
  }
  const long double a = index_bound(e->a, var_max, shapes);
  const long double k = std::fabs(static_cast<long double>(e->k));
  switch (e->kind) {
    case IndexNode::kAdd: return a + index_bound(e->b, var_max, shapes);
    case IndexNode::kScale: return k * std::max<long double>(a, 1);
    default: return std::max(a, k);  // floor division and modulo shrink their operand
  }
}

}  // namespace

void check_index_magnitudes(const OpDesc& op, const std::vector<Shape>& shapes, const std::vector<int64_t>& extents) {
  // Before any inference the variables' extents are unknown: bounded by the largest dimension.
  int64_t largest = 1;
  for (const auto& s : shapes)
    for (int64_t d : s) largest = std::max(largest, d);
  std::vector<long double> var_max(op.vars.size());
  for (size_t v = 0; v < op.vars.size(); ++v)
    var_max[v] = static_cast<long double>(v < extents.size() && extents[v] >= 0 ? extents[v] : largest);
  constexpr long double kLimit = static_cast<long double>(int64_t{1} << 61);
  auto check = [&](const IndexExpr& idx, long double dim) {
    long double b = index_bound(idx, var_max, shapes);
    if (idx->kind == IndexNode::kFloorDiv) b = std::max(b, std::fabs(idx->k * dim));  // regions use k * extent
    if (b > kLimit)
      throw ShapeError(op_prefix(op) + "index `" + op.str(idx) +
                       "` reaches magnitudes past 2^61 for these shapes; indices and their coefficients must stay "
                       "within int64 with room for the analyses");
  };
  // Every index: accesses (with their dimension's extent), index values, opaque results.
  visit_nodes(op.body, [&](const ExprNode& n) {
    for (size_t d = 0; d < n.indices.size(); ++d) {
      const bool access = n.kind == ExprNode::kAccess && n.tensor >= 0 &&
                          static_cast<size_t>(n.tensor) < shapes.size() && d < shapes[n.tensor].size();
      check(n.indices[d], access ? static_cast<long double>(shapes[n.tensor][d]) : 1.0L);
    }
    for (const auto& e : n.result_extents) check(e, 1.0L);
  });
}

std::vector<int64_t> infer_extents(const OpDesc& op, const std::vector<Shape>& shapes, const std::optional<Shape>& out) {
  check_input_shapes(op, shapes);
  check_index_magnitudes(op, shapes, {});
  std::vector<int64_t> ext(op.vars.size(), -1);
  std::vector<bool> fixed(op.vars.size(), false);
  if (out) {
    if (out->size() != op.output_vars.size())
      throw ShapeError(op_prefix(op) + "out has " + std::to_string(out->size()) + " dimensions but the output lambda has " +
                       std::to_string(op.output_vars.size()));
    for (size_t i = 0; i < out->size(); ++i) {
      if ((*out)[i] < 0) throw ShapeError(op_prefix(op) + "out has a negative extent");
      ext[op.output_vars[i]] = (*out)[i];
      fixed[op.output_vars[i]] = true;
    }
  }
  for (size_t v = 0; v < op.vars.size(); ++v) {
    if (!op.vars[v].extent) continue;
    const IndexExpr& e = *op.vars[v].extent;
    if (!is_linear(e) || std::any_of(e->linear.terms.begin(), e->linear.terms.end(),
                                     [](const auto& t) { return t.first.kind == Symbol::kVar; }))
      throw TDLError(op_prefix(op) + "the extent of `" + op.vars[v].name + "` must be a constant or a tensor extent");
    ext[v] = eval_index(e, nullptr, shapes);
    if (ext[v] < 0 || ext[v] > kMaxExtent)
      throw ShapeError(op_prefix(op) + "the extent of `" + op.vars[v].name + "` is " + std::to_string(ext[v]) +
                       "; extents are 0 to 2^40");
    fixed[v] = true;
  }
  // Every dimension an index addresses, with that dimension's extent: tensor accesses and
  // the results of opaque functions.
  struct Addressed {
    IndexExpr idx;
    int64_t extent;
    std::string where;
  };
  std::vector<Addressed> dims;
  for (const auto& s : collect_access_sites(op.body))
    for (size_t d = 0; d < s.dims.size(); ++d)
      if (s.dims[d])
        dims.push_back({*s.dims[d], shapes[s.tensor][d],
                        op.inputs[s.tensor].name + " dimension " + std::to_string(d) + " (`" + op.str(*s.dims[d]) + "`)"});
  visit_nodes(op.body, [&](const ExprNode& n) {
    if (n.kind != ExprNode::kOpaque) return;
    for (size_t d = 0; d < n.indices.size() && d < n.result_extents.size(); ++d)
      dims.push_back({n.indices[d], eval_index(n.result_extents[d], nullptr, shapes),
                      "result dimension " + std::to_string(d) + " of " + op.opaque_names[n.opaque]});
  });
  // Accesses by a lone variable (filters[dx]) decide before windows (data[s*y + dy]): a
  // window need not end on the last element, so it only fills in what nothing else fixes.
  std::stable_sort(dims.begin(), dims.end(), [](const Addressed& x, const Addressed& y) {
    std::vector<int> vx, vy;
    collect_vars(x.idx, vx);
    collect_vars(y.idx, vy);
    return (vx.size() > 1) < (vy.size() > 1);
  });
  std::vector<std::string> source(op.vars.size());  // who determined each variable
  for (bool progress = true; progress;) {
    progress = false;
    for (const auto& a : dims) {
      auto c = solve_extent(a.idx, a.extent, ext, shapes);
      if (!c || ext[c->var] >= 0) continue;
      ext[c->var] = c->extent;
      source[c->var] = a.where;
      progress = true;
      break;  // start again from the lone-variable accesses
    }
  }
  for (size_t v = 0; v < op.vars.size(); ++v) {
    if (ext[v] >= 0) continue;
    if (op.vars[v].output)
      throw ShapeError(op_prefix(op) + "cannot infer the extent of output variable `" + op.vars[v].name +
                       "`: no access indexes a dimension with it starting at 0 (padding or shifts make it ambiguous); "
                       "pass out=(...)");
    throw ShapeError(op_prefix(op) + "cannot infer the extent of reduction variable `" + op.vars[v].name +
                     "`: every access shifts it; pass extents=(...) to the reducer");
  }
  // Every access by a lone variable must agree with the extent chosen (a[i] + b[i] with
  // |a| != |b|). Windows such as `s*y + dy` need not end on the last element, so they are
  // used to infer extents but not to check them.
  for (const auto& a : dims) {
    std::vector<int> vs;
    collect_vars(a.idx, vs);
    if (vs.size() != 1) continue;
    for (int v : vs) {
      if (fixed[v]) continue;
      std::vector<int64_t> masked = ext;
      masked[v] = -1;
      auto c = solve_extent(a.idx, a.extent, masked, shapes);
      if (c && c->var == v && c->extent != ext[v])
        throw ShapeError(op_prefix(op) + "inconsistent extents for `" + op.vars[v].name + "`: " + source[v] + " gives " +
                         std::to_string(ext[v]) + " but " + a.where + " gives " + std::to_string(c->extent));
    }
  }
  for (size_t v = 0; v < ext.size(); ++v)
    if (ext[v] > kMaxExtent)
      throw ShapeError(op_prefix(op) + "variable `" + op.vars[v].name + "` would range over " + std::to_string(ext[v]) +
                       " values; extents may be at most 2^40");
  check_index_magnitudes(op, shapes, ext);
  return ext;
}

Shape infer_output_shape(const OpDesc& op, const std::vector<Shape>& shapes) {
  auto ext = infer_extents(op, shapes);
  Shape out;
  for (int v : op.output_vars) out.push_back(ext[v]);
  return out;
}

}  // namespace tilewise::tdl

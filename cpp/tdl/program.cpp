#include "tdl/program.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "tdl/errors.h"
#include "tdl/free_vars.h"

namespace tilewise::tdl {

namespace {

// a * b for sizes >= 0, INT64_MAX past the range: a tensor with a zero dimension may have others as
// large as 2^40 (nothing of it is ever read, but its volume and strides must not overflow).
int64_t saturating_product(int64_t a, int64_t b) {
  int64_t out = 0;
  if (a == 0 || b == 0) return 0;
  if (__builtin_mul_overflow(a, b, &out)) return INT64_MAX;
  return out;
}

// Largest magnitude an index may reach for the variables' ranges: 2^61. The interpreter evaluates
// indices in int64 (a step times a lane count included), so a description whose index constants or
// coefficients could take it past this is refused when compiled instead of overflowing.
constexpr int64_t kMaxIndex = int64_t{1} << 61;

using Wide = __int128;

}  // namespace

namespace {

class Compiler {
 public:
  Compiler(const OpDesc& op, const std::vector<Shape>& shapes, const std::vector<Range>& ranges,
           const std::vector<Box>& regions)
      : op_(op), free_vars_(reduce_free_vars(op.body)) {
    TW_ASSERT(ranges.size() == op.vars.size(), "one range per variable");
    TW_ASSERT(regions.size() == shapes.size(), "one region per input");
    p_.shapes = shapes;
    p_.regions = regions;
    for (const Range& r : ranges) {
      p_.starts.push_back(r.empty() ? 0 : r.lo);
      p_.extents.push_back(r.size());
    }
    p_.output_vars = op.output_vars;
    int64_t longest = 0;
    for (int v : op.output_vars) longest = std::max(longest, p_.extents[v]);
    const int64_t enough = std::min<int64_t>(longest, 64);
    for (size_t d = op.output_vars.size(); d-- > 0;)
      if (p_.extents[op.output_vars[d]] >= enough) {
        p_.output_batch_var = static_cast<int>(d);
        break;
      }
    for (size_t t = 0; t < shapes.size(); ++t) layouts_.push_back(layout(static_cast<int>(t)));
  }

  Program run() {
    p_.root = value(op_.body);
    return std::move(p_);
  }

 private:
  // How an input's buffer holds its region: per dimension the first index held, the number held
  // and the row-major stride.
  struct Layout {
    std::vector<int64_t> origin, held, strides;
    bool partial = false;
  };

  Layout layout(int t) const {
    const Shape& shape = p_.shapes[t];
    const Box& region = p_.regions[t];
    const std::string name = t < static_cast<int>(op_.inputs.size()) ? op_.inputs[t].name : std::to_string(t);
    if (region.dims.size() != shape.size())
      throw ShapeError("op '" + op_.name + "': the region given for input '" + name + "' has " +
                       std::to_string(region.dims.size()) + " dimensions but the tensor has " +
                       std::to_string(shape.size()));
    const size_t rank = shape.size();
    Layout l{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1), false};
    const bool none = region.empty();
    int64_t held_volume = 1, volume = 1;
    for (size_t d = 0; d < rank; ++d) {
      const Range& r = region.dims[d];
      if (!none && (r.lo < 0 || r.hi >= shape[d]))
        throw ShapeError("op '" + op_.name + "': the region given for input '" + name + "' holds [" +
                         std::to_string(r.lo) + ", " + std::to_string(r.hi) + "] in dimension " + std::to_string(d) +
                         ", outside the tensor's [0, " + std::to_string(shape[d] - 1) + "]");
      l.origin[d] = none ? 0 : r.lo;
      l.held[d] = none ? 0 : r.size();
      held_volume = saturating_product(held_volume, l.held[d]);
      volume = saturating_product(volume, shape[d]);
    }
    if (none) held_volume = 0;  // also for a rank-0 tensor, whose one element is then not held
    for (size_t d = rank; d-- > 1;) l.strides[d - 1] = saturating_product(l.strides[d], l.held[d]);
    l.partial = held_volume != volume;  // the region lies within the tensor: equal sizes, equal boxes
    return l;
  }

  // Terms of a linear form, tensor extents folded into the constant.
  // Terms of a linear form, tensor extents folded into the constant; `shift` is added to the
  // constant. Its bounds over the variables' ranges go to lo/hi (checked against kMaxIndex).
  VarMask linear(const LinearForm& f, int64_t shift, int64_t& constant, int& begin, int& end, Wide& lo, Wide& hi) {
    VarMask deps = 0;
    Wide k = Wide{f.constant} + shift;
    begin = static_cast<int>(p_.terms.size());
    for (const auto& [s, c] : f.terms) {
      if (s.kind == Symbol::kExtent) {
        TW_ASSERT(s.a >= 0 && s.a < static_cast<int>(p_.shapes.size()) && s.b >= 0 &&
                      s.b < static_cast<int>(p_.shapes[s.a].size()),
                  "extent symbol of a known tensor dimension");
        k += Wide{c} * p_.shapes[s.a][s.b];
        check_index(k, k);
      } else {
        TW_ASSERT(s.a >= 0 && s.a < static_cast<int>(p_.extents.size()), "index variable of the op");
        p_.terms.push_back({s.a, c});
        deps |= var_bit(s.a);
      }
    }
    end = static_cast<int>(p_.terms.size());
    lo = hi = k;
    for (int t = begin; t < end; ++t) {
      const IndexTerm& term = p_.terms[t];
      if (p_.extents[term.var] <= 0) continue;  // an empty range: never evaluated
      const Wide a = Wide{term.coeff} * p_.starts[term.var];
      const Wide b = Wide{term.coeff} * (p_.starts[term.var] + p_.extents[term.var] - 1);
      lo += std::min(a, b), hi += std::max(a, b);
      check_index(lo, hi);
    }
    constant = static_cast<int64_t>(k);
    return deps;
  }

  // Refuses an index whose values over the variables' ranges may leave [-kMaxIndex, kMaxIndex].
  void check_index(Wide lo, Wide hi) const {
    if (lo < -Wide{kMaxIndex} || hi > Wide{kMaxIndex})
      throw TDLError("op '" + op_.name + "': an index expression can reach beyond +-2^61 for the variables' "
                     "ranges (its constants or coefficients are too large for any tensor)");
  }

  int index(const IndexExpr& e) {
    IndexCode c;
    c.kind = e->kind;
    c.k = e->k;
    Wide lo = 0, hi = 0;
    if (e->kind == IndexNode::kLinear) {
      c.deps = linear(e->linear, 0, c.constant, c.term_begin, c.term_end, lo, hi);
    } else {
      c.a = index(e->a);
      c.deps = p_.index_codes[c.a].deps;
      const auto [alo, ahi] = code_bounds_[c.a];
      if (e->b) {
        c.b = index(e->b);
        c.deps |= p_.index_codes[c.b].deps;
      }
      switch (c.kind) {
        case IndexNode::kAdd: lo = alo + code_bounds_[c.b].first, hi = ahi + code_bounds_[c.b].second; break;
        case IndexNode::kScale: lo = std::min(alo * c.k, ahi * c.k), hi = std::max(alo * c.k, ahi * c.k); break;
        case IndexNode::kFloorDiv:  // k > 0 (validated): monotone
          lo = floor_div(static_cast<int64_t>(alo), c.k), hi = floor_div(static_cast<int64_t>(ahi), c.k);
          break;
        default:  // kMod by k > 0: the operand itself when it stays in [0, k)
          if (alo >= 0 && ahi < c.k) lo = alo, hi = ahi;
          else lo = 0, hi = c.k - 1;
          break;
      }
    }
    check_index(lo, hi);
    p_.index_codes.push_back(c);
    code_bounds_.push_back({lo, hi});
    return static_cast<int>(p_.index_codes.size()) - 1;
  }

  // code + k, as a new root.
  int shift(int code, int64_t k) {
    IndexCode leaf;
    leaf.constant = k;
    leaf.term_begin = leaf.term_end = static_cast<int>(p_.terms.size());
    p_.index_codes.push_back(leaf);
    code_bounds_.push_back({k, k});
    IndexCode sum;
    sum.kind = IndexNode::kAdd;
    sum.a = code;
    sum.b = static_cast<int>(p_.index_codes.size()) - 1;
    sum.deps = p_.index_codes[code].deps;
    const Wide lo = code_bounds_[code].first + k, hi = code_bounds_[code].second + k;
    check_index(lo, hi);
    p_.index_codes.push_back(sum);
    code_bounds_.push_back({lo, hi});
    return static_cast<int>(p_.index_codes.size()) - 1;
  }

  int access(const ExprNode& n) {
    AccessCode a;
    a.tensor = n.tensor;
    const Shape& shape = p_.shapes.at(n.tensor);
    TW_ASSERT(shape.size() == n.indices.size(), "access rank matches the input");
    const Layout& l = layouts_[n.tensor];
    a.partial = l.partial;
    std::vector<AccessDim> linear_dims, other_dims;
    for (size_t d = 0; d < n.indices.size(); ++d) {
      AccessDim dim;
      dim.extent = l.held[d];
      dim.stride = l.strides[d];
      dim.origin = l.origin[d];
      dim.size = shape[d];
      dim.axis = static_cast<int>(d);
      if (is_linear(n.indices[d])) {
        Wide lo = 0, hi = 0;
        a.deps |= linear(n.indices[d]->linear, -dim.origin, dim.constant, dim.term_begin, dim.term_end, lo, hi);
        linear_dims.push_back(dim);
      } else {
        dim.code = index(n.indices[d]);
        a.deps |= p_.index_codes[dim.code].deps;
        if (dim.origin != 0) dim.code = shift(dim.code, -dim.origin);
        other_dims.push_back(dim);
      }
    }
    if (shape.empty() && l.partial) {
      // A scalar input held nowhere: a dimension of which nothing is held makes reading it go
      // through the check for reads outside the region, which then names it.
      AccessDim dim;
      dim.size = 1;
      linear_dims.push_back(dim);
    }
    a.dim_begin = static_cast<int>(p_.dims.size());
    p_.dims.insert(p_.dims.end(), linear_dims.begin(), linear_dims.end());
    a.linear_end = static_cast<int>(p_.dims.size());
    p_.dims.insert(p_.dims.end(), other_dims.begin(), other_dims.end());
    a.dim_end = static_cast<int>(p_.dims.size());
    p_.accesses.push_back(a);
    return static_cast<int>(p_.accesses.size()) - 1;
  }

  int reduce(const Expr& e, ValueCode& v) {
    ReduceCode r;
    r.reducer = e->reducer;
    r.vars = e->reduce_vars;
    r.free_vars = free_vars_.at(e.get());
    r.batch_level = std::max<int>(0, static_cast<int>(r.vars.size()) - 1);
    while (r.batch_level > 0 && p_.extents[r.vars[r.batch_level]] == 1) --r.batch_level;
    for (int f : r.free_vars) v.deps |= var_bit(f);
    r.counter_begin = p_.num_counters;
    p_.num_counters += static_cast<int>(r.vars.size());
    r.key_begin = p_.num_keys;
    p_.num_keys += static_cast<int>(r.free_vars.size());
    r.body = value(e->operands[0]);
    v.has_opaque = p_.nodes[r.body].has_opaque;
    p_.reduces.push_back(std::move(r));
    return static_cast<int>(p_.reduces.size()) - 1;
  }

  int opaque(const Expr& e, ValueCode& v) {
    OpaqueCode o;
    o.fn = e->opaque;
    for (const auto& a : e->slices) {
      SliceCode s;
      s.tensor = a.tensor;
      TW_ASSERT(p_.shapes.at(a.tensor).size() == a.dims.size(), "slice rank matches the input");
      for (const auto& d : a.dims) {
        s.dims.push_back(d ? index(*d) : -1);
        if (d) v.deps |= p_.index_codes[s.dims.back()].deps;
      }
      o.slices.push_back(std::move(s));
    }
    for (const auto& i : e->indices) {
      o.result_indices.push_back(index(i));
      v.deps |= p_.index_codes[o.result_indices.back()].deps;
    }
    v.has_opaque = true;
    p_.opaques.push_back(std::move(o));
    return static_cast<int>(p_.opaques.size()) - 1;
  }

  // One compiled node per distinct description node: a node shared by several parents (the
  // same Max read inside and outside a Sum in softmax) keeps one reduction cache and one
  // opaque-result cache, as in the description.
  int value(const Expr& e) {
    auto it = ids_.find(e.get());
    if (it != ids_.end()) return it->second;
    ValueCode v;
    v.kind = e->kind;
    v.unary = e->unary;
    v.binary = e->binary;
    v.value = e->value;
    auto child = [&](const Expr& c) {
      int id = value(c);
      v.deps |= p_.nodes[id].deps;
      v.has_opaque |= p_.nodes[id].has_opaque;
      return id;
    };
    switch (e->kind) {
      case ExprNode::kConst: break;
      case ExprNode::kAccess:
        v.aux = access(*e);
        v.deps = p_.accesses[v.aux].deps;
        break;
      case ExprNode::kIndexValue:
        v.aux = index(e->indices[0]);
        v.deps = p_.index_codes[v.aux].deps;
        break;
      case ExprNode::kUnary: v.a = child(e->operands[0]); break;
      case ExprNode::kBinary:
        v.a = child(e->operands[0]);
        v.b = child(e->operands[1]);
        break;
      case ExprNode::kSelect:
        v.a = child(e->operands[0]);
        v.b = child(e->operands[1]);
        v.c = child(e->operands[2]);
        break;
      case ExprNode::kReduce: v.aux = reduce(e, v); break;
      case ExprNode::kOpaque: v.aux = opaque(e, v); break;
    }
    p_.nodes.push_back(v);
    int id = static_cast<int>(p_.nodes.size()) - 1;
    ids_[e.get()] = id;
    return id;
  }

  const OpDesc& op_;
  std::unordered_map<const ExprNode*, std::vector<int>> free_vars_;
  Program p_;
  std::vector<Layout> layouts_;  // per input
  std::unordered_map<const ExprNode*, int> ids_;
  std::vector<std::pair<Wide, Wide>> code_bounds_;  // per index code: its values' bounds over the ranges
};

}  // namespace

Program compile_program(const OpDesc& op, const std::vector<Shape>& shapes, const std::vector<int64_t>& extents) {
  std::vector<Range> ranges;
  for (int64_t e : extents) ranges.push_back({0, e - 1});
  std::vector<Box> regions;
  for (const Shape& s : shapes) regions.push_back(Box::whole(s));
  return Compiler(op, shapes, ranges, regions).run();
}

Program compile_program(const OpDesc& op, const std::vector<Shape>& shapes, const std::vector<Range>& ranges,
                        const std::vector<Box>& regions) {
  return Compiler(op, shapes, ranges, regions).run();
}

}  // namespace tilewise::tdl

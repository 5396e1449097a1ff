#include "tdl/interpreter.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "tdl/errors.h"
#include "tdl/program.h"

namespace tilewise::tdl {

namespace {

// Opaque results shared by all threads, keyed by (node, fixed indices of its slices).
class OpaqueCache {
 public:
  explicit OpaqueCache(const OpaqueCall& call) : call_(call) {}
  std::shared_ptr<const Array> get(int node, int fn, const std::vector<int64_t>& key,
                                   const std::function<std::vector<Array>()>& gather) {
    auto full_key = std::make_pair(node, key);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(full_key);
      if (it != cache_.end()) return it->second;
    }
    auto result = std::make_shared<const Array>(call_(fn, gather()));
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.emplace(std::move(full_key), result).first->second;
  }

 private:
  const OpaqueCall& call_;
  std::mutex mu_;
  std::map<std::pair<int, std::vector<int64_t>>, std::shared_ptr<const Array>> cache_;
};

template <UnaryOp Op>
inline double unary(double a, double p) {
  if constexpr (Op == UnaryOp::kNeg) return -a;
  if constexpr (Op == UnaryOp::kExp) return std::exp(a);
  if constexpr (Op == UnaryOp::kLog) return std::log(a);
  if constexpr (Op == UnaryOp::kTanh) return std::tanh(a);
  if constexpr (Op == UnaryOp::kSigmoid) return 1.0 / (1.0 + std::exp(-a));
  if constexpr (Op == UnaryOp::kSqrt) return std::sqrt(a);
  if constexpr (Op == UnaryOp::kAbs) return std::fabs(a);
  if constexpr (Op == UnaryOp::kErf) return std::erf(a);
  if constexpr (Op == UnaryOp::kPow) return std::pow(a, p);
}

template <BinaryOp Op>
inline double binary(double a, double b) {
  if constexpr (Op == BinaryOp::kAdd) return a + b;
  if constexpr (Op == BinaryOp::kSub) return a - b;
  if constexpr (Op == BinaryOp::kMul) return a * b;
  if constexpr (Op == BinaryOp::kDiv) return a / b;
  if constexpr (Op == BinaryOp::kMax) return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  if constexpr (Op == BinaryOp::kMin) return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  if constexpr (Op == BinaryOp::kLt) return a < b;
  if constexpr (Op == BinaryOp::kLe) return a <= b;
  if constexpr (Op == BinaryOp::kGt) return a > b;
  if constexpr (Op == BinaryOp::kGe) return a >= b;
  if constexpr (Op == BinaryOp::kEq) return a == b;
  if constexpr (Op == BinaryOp::kNe) return a != b;
}

template <Reducer R>
inline double combine(double acc, double v) {
  if constexpr (R == Reducer::kSum) return acc + v;
  if constexpr (R == Reducer::kProd) return acc * v;
  if constexpr (R == Reducer::kMax) return std::isnan(v) || v > acc ? v : acc;
  if constexpr (R == Reducer::kMin) return std::isnan(v) || v < acc ? v : acc;
}

// Calls f with the operator as a compile-time constant, so the loops over lanes hold no switch.
template <class F>
void dispatch(UnaryOp op, F&& f) {
  switch (op) {
    case UnaryOp::kNeg: return f(std::integral_constant<UnaryOp, UnaryOp::kNeg>{});
    case UnaryOp::kExp: return f(std::integral_constant<UnaryOp, UnaryOp::kExp>{});
    case UnaryOp::kLog: return f(std::integral_constant<UnaryOp, UnaryOp::kLog>{});
    case UnaryOp::kTanh: return f(std::integral_constant<UnaryOp, UnaryOp::kTanh>{});
    case UnaryOp::kSigmoid: return f(std::integral_constant<UnaryOp, UnaryOp::kSigmoid>{});
    case UnaryOp::kSqrt: return f(std::integral_constant<UnaryOp, UnaryOp::kSqrt>{});
    case UnaryOp::kAbs: return f(std::integral_constant<UnaryOp, UnaryOp::kAbs>{});
    case UnaryOp::kErf: return f(std::integral_constant<UnaryOp, UnaryOp::kErf>{});
    case UnaryOp::kPow: return f(std::integral_constant<UnaryOp, UnaryOp::kPow>{});
  }
  TW_ASSERT(false, "unknown unary operator");
}
template <class F>
void dispatch(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::kAdd: return f(std::integral_constant<BinaryOp, BinaryOp::kAdd>{});
    case BinaryOp::kSub: return f(std::integral_constant<BinaryOp, BinaryOp::kSub>{});
    case BinaryOp::kMul: return f(std::integral_constant<BinaryOp, BinaryOp::kMul>{});
    case BinaryOp::kDiv: return f(std::integral_constant<BinaryOp, BinaryOp::kDiv>{});
    case BinaryOp::kMax: return f(std::integral_constant<BinaryOp, BinaryOp::kMax>{});
    case BinaryOp::kMin: return f(std::integral_constant<BinaryOp, BinaryOp::kMin>{});
    case BinaryOp::kLt: return f(std::integral_constant<BinaryOp, BinaryOp::kLt>{});
    case BinaryOp::kLe: return f(std::integral_constant<BinaryOp, BinaryOp::kLe>{});
    case BinaryOp::kGt: return f(std::integral_constant<BinaryOp, BinaryOp::kGt>{});
    case BinaryOp::kGe: return f(std::integral_constant<BinaryOp, BinaryOp::kGe>{});
    case BinaryOp::kEq: return f(std::integral_constant<BinaryOp, BinaryOp::kEq>{});
    case BinaryOp::kNe: return f(std::integral_constant<BinaryOp, BinaryOp::kNe>{});
  }
  TW_ASSERT(false, "unknown binary operator");
}
template <class F>
void dispatch(Reducer r, F&& f) {
  switch (r) {
    case Reducer::kSum: return f(std::integral_constant<Reducer, Reducer::kSum>{});
    case Reducer::kProd: return f(std::integral_constant<Reducer, Reducer::kProd>{});
    case Reducer::kMax: return f(std::integral_constant<Reducer, Reducer::kMax>{});
    case Reducer::kMin: return f(std::integral_constant<Reducer, Reducer::kMin>{});
  }
  TW_ASSERT(false, "unknown reducer");
}

// "[1, 2, 7]" and "[0..1, 0..2, 3..5]", for messages.
std::string str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t d = 0; d < v.size(); ++d) s += (d ? ", " : "") + std::to_string(v[d]);
  return s + "]";
}
std::string str(const Box& b) {
  if (b.empty()) return "(nothing)";
  std::string s = "[";
  for (size_t d = 0; d < b.dims.size(); ++d)
    s += (d ? ", " : "") + std::to_string(b.dims[d].lo) + ".." + std::to_string(b.dims[d].hi);
  return s + "]";
}

// Loop values l with 0 <= base + c*l < extent, intersected into [lo, hi).
// Offsets of reads that may fall outside a buffer are summed modulo 2^64: an index out of range
// times a stride may leave int64, but such a read is never made, and for one that is made the
// wrapped sum is the exact offset (the indices themselves are bounded when compiled: kMaxIndex).
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

inline void clip(int64_t base, int64_t c, int64_t extent, int64_t& lo, int64_t& hi) {
  if (c == 0) {
    if (base < 0 || base >= extent) hi = lo;
  } else if (c > 0) {
    lo = std::max(lo, -floor_div(base, c));  // ceil(-base / c)
    hi = std::min(hi, floor_div(extent - 1 - base, c) + 1);
  } else {
    lo = std::max(lo, -floor_div(extent - 1 - base, -c));  // ceil((base - extent + 1) / -c)
    hi = std::min(hi, floor_div(base, -c) + 1);
  }
}

// Lanes per batch: the values of one loop variable evaluated together.
constexpr int64_t kLanes = 256;

// Below this many lanes, a reduction whose batched loop is longer runs lane by lane (measured on
// convolutions and matrix products: from 64 lanes on, all lanes together are as fast or faster,
// even reading the lanes with a large stride).
constexpr int64_t kFewLanes = 64;

// A batch of values: p[0..lanes) or, when uniform, p[0] for every lane.
struct Batch {
  const double* p;
  bool uniform;
};

// Evaluates the program for a range of output elements on one thread.
//
// Values are computed a batch at a time: up to kLanes consecutive values of one variable (an
// output variable, Program::output_batch_var, or the batched loop of a reduction), one node at a
// time over all lanes. Every element still sees the same operations in the same order as a scalar tree walk
// (reductions combine their terms in row-major order of their variables, per element), so
// results are bit-for-bit those of evaluating one element at a time; only the interpretation
// overhead is shared. A sub-expression that does not depend on the batch variable is evaluated
// once, as a scalar, and so is any reduction that does not: through its cache, keyed on its free
// variables, as the op_cost counts assume.
class Evaluator {
 public:
  Evaluator(const Program& p, const OpDesc& op, const std::vector<const double*>& inputs, OpaqueCache& cache)
      : p_(p),
        op_(op),
        inputs_(inputs),
        cache_(cache),
        vars_(p.extents.size(), 0),
        memo_(p.reduces.size()),
        lane_memo_(p.reduces.size()),
        keys_(p.num_keys),
        counters_(p.num_counters),
        last_(p.opaques.size()) {}

  // Output batches [begin, end), numbered row-major over the other output variables and then the
  // batch variable's blocks of kLanes values.
  void run(int64_t begin, int64_t end, double* out) {
    const auto& ov = p_.output_vars;
    if (ov.empty()) {
      if (begin < end) out[0] = eval(p_.root);
      return;
    }
    const int pos = p_.output_batch_var;
    const int v = ov[pos];
    const int64_t n = p_.extents[v];
    const int64_t chunks = (n + kLanes - 1) / kLanes;
    std::vector<int64_t> strides(ov.size(), 1);
    for (size_t d = ov.size(); d-- > 1;) strides[d - 1] = strides[d] * p_.extents[ov[d]];
    const size_t mark = top_;
    double* buf = alloc();
    for (int64_t unit = begin; unit < end; ++unit) {
      int64_t rem = unit / chunks, flat = 0;
      for (size_t d = ov.size(); d-- > 0;) {
        if (static_cast<int>(d) == pos) continue;
        const int64_t i = rem % p_.extents[ov[d]];
        rem /= p_.extents[ov[d]];
        vars_[ov[d]] = p_.starts[ov[d]] + i;
        flat += i * strides[d];
      }
      const int64_t start = unit % chunks * kLanes;
      const int64_t lanes = std::min(kLanes, n - start);
      vars_[v] = p_.starts[v] + start;
      flat += start * strides[pos];
      batch_var_ = v;
      batch_lanes_ = lanes;
      const int64_t stride = strides[pos];
      double* dst = stride == 1 ? out + flat : buf;
      Batch r = batch(p_.root, dst);
      for (int64_t l = 0; l < lanes; ++l) out[flat + l * stride] = r.uniform ? r.p[0] : r.p[l];
    }
    top_ = mark;
  }

 private:
  // ---- one element at a time

  double eval(int id) {
    const ValueCode& n = p_.nodes[id];
    switch (n.kind) {
      case ExprNode::kConst: return n.value;
      case ExprNode::kAccess: return read(n.aux);
      case ExprNode::kIndexValue: return static_cast<double>(eval_index(p_, n.aux, vars_.data()));
      case ExprNode::kUnary: {
        double a = eval(n.a), r = 0;
        dispatch(n.unary, [&](auto op) { r = unary<decltype(op)::value>(a, n.value); });
        return r;
      }
      case ExprNode::kBinary: {
        double a = eval(n.a), b = eval(n.b), r = 0;
        dispatch(n.binary, [&](auto op) { r = binary<decltype(op)::value>(a, b); });
        return r;
      }
      case ExprNode::kSelect: return eval(n.a) != 0.0 ? eval(n.b) : eval(n.c);
      case ExprNode::kReduce: return cached_reduce(n.aux);
      case ExprNode::kOpaque: return opaque(n.aux);
    }
    TW_ASSERT(false, "unknown expression node");
  }

  double read(int id) const {
    const AccessCode& a = p_.accesses[id];
    int64_t off = 0;
    for (int d = a.dim_begin; d < a.dim_end; ++d) {
      const AccessDim& dim = p_.dims[d];
      int64_t i = dim.code < 0 ? eval_linear(p_, dim.constant, dim.term_begin, dim.term_end, vars_.data())
                               : eval_index(p_, dim.code, vars_.data());
      if (i < 0 || i >= dim.extent) {
        if (a.partial && !held_or_outside(a, vars_.data())) not_held(a, vars_.data());
        return 0.0;
      }
      off += i * dim.stride;
    }
    return inputs_[a.tensor][off];
  }

  // ---- reads outside a region held in part: they must be outside the tensor too

  // An access dimension's index counted from the region's origin.
  int64_t region_index(const AccessDim& dim, const int64_t* vars) const {
    return dim.code < 0 ? eval_linear(p_, dim.constant, dim.term_begin, dim.term_end, vars)
                        : eval_index(p_, dim.code, vars);
  }

  // Whether the element read for these variable values is held, or else outside the tensor (a 0).
  [[gnu::cold, gnu::noinline]] bool held_or_outside(const AccessCode& a, const int64_t* vars) const {
    bool in_tensor = true, held = true;
    for (int d = a.dim_begin; d < a.dim_end; ++d) {
      const AccessDim& dim = p_.dims[d];
      const int64_t i = region_index(dim, vars) + dim.origin;
      in_tensor = in_tensor && i >= 0 && i < dim.size;
      held = held && i >= dim.origin && i - dim.origin < dim.extent;
    }
    return held || !in_tensor;
  }

  // For a batch read of an input held in part: throws if a lane reads an element inside the
  // tensor but outside the region. Clipping the lanes to the tensor as to the region keeps the
  // check per batch, not per lane, unless an index floor-divides the batch variable. Separate
  // from batch_read, whose code stays that of reading a whole tensor.
  [[gnu::noinline]] void check_lanes(const AccessCode& a) {
    const int v = batch_var_;
    // Lanes [lo, hi) read inside the region, [tlo, thi) inside the tensor, as far as the linear
    // dimensions and those fixed along the batch variable tell.
    int64_t lo = 0, hi = batch_lanes_, tlo = 0, thi = batch_lanes_;
    for (int d = a.dim_begin; d < a.linear_end; ++d) {
      const AccessDim& dim = p_.dims[d];
      int64_t base = dim.constant, c = 0;
      for (int t = dim.term_begin; t < dim.term_end; ++t) {
        base += p_.terms[t].coeff * vars_[p_.terms[t].var];
        if (p_.terms[t].var == v) c += p_.terms[t].coeff;
      }
      clip(base, c, dim.extent, lo, hi);
      clip(base + dim.origin, c, dim.size, tlo, thi);
    }
    bool varying = false;
    for (int d = a.linear_end; d < a.dim_end; ++d) {
      const AccessDim& dim = p_.dims[d];
      if (p_.index_codes[dim.code].deps & var_bit(v)) {
        varying = true;
        continue;
      }
      const int64_t i = eval_index(p_, dim.code, vars_.data());
      if (i < 0 || i >= dim.extent) hi = lo;
      if (i + dim.origin < 0 || i + dim.origin >= dim.size) thi = tlo;
    }
    if (tlo >= thi) return;
    const int64_t v0 = vars_[v];
    if (!varying) {
      // The region lies within the tensor, so [lo, hi) lies within [tlo, thi).
      if (lo < hi && lo <= tlo && thi <= hi) return;
      vars_[v] = v0 + (lo >= hi || tlo < lo ? tlo : hi);
      not_held(a, vars_.data());
    }
    for (int64_t l = tlo; l < thi; ++l) {
      vars_[v] = v0 + l;
      if (!held_or_outside(a, vars_.data())) not_held(a, vars_.data());
    }
    vars_[v] = v0;
  }

  // The regions come from the region analysis, which includes every element read: an element
  // inside the tensor but outside its region means the caller's region (or the analysis) is
  // wrong, and reading it as 0 would silently give a wrong result.
  [[noreturn, gnu::cold, gnu::noinline]] void not_held(const AccessCode& a, const int64_t* vars) const {
    std::vector<int64_t> idx(p_.shapes[a.tensor].size());
    for (int d = a.dim_begin; d < a.dim_end; ++d) {
      const AccessDim& dim = p_.dims[d];
      if (dim.axis < static_cast<int>(idx.size())) idx[dim.axis] = region_index(dim, vars) + dim.origin;
    }
    const std::string& name = op_.inputs.at(a.tensor).name;
    throw std::logic_error("op '" + op_.name + "': input '" + name + "' is read at " + name + str(idx) +
                           ", inside its shape " + str(p_.shapes[a.tensor]) + " but outside the region held " +
                           str(p_.regions[a.tensor]) +
                           "; the region given must hold every element that the variables' ranges read "
                           "(tdl::input_regions)");
  }

  // A reduction is recomputed only when a variable it depends on changed since its last
  // evaluation: Sum(k: (x[i,k] - mean(i))**2) computes mean(i) once per i, not once per k.
  double cached_reduce(int id) {
    const ReduceCode& r = p_.reduces[id];
    Memo& m = memo_[id];
    int64_t* key = keys_.data() + r.key_begin;
    const size_t nfree = r.free_vars.size();
    if (m.valid) {
      bool hit = true;
      for (size_t k = 0; hit && k < nfree; ++k) hit = key[k] == vars_[r.free_vars[k]];
      if (hit) return m.value;
    }
    // The body binds only its own variables, so the free ones still hold the key afterwards.
    double v = 0;
    dispatch(r.reducer, [&](auto red) { v = reduce<decltype(red)::value>(r); });
    for (size_t k = 0; k < nfree; ++k) key[k] = vars_[r.free_vars[k]];
    m.value = v;
    m.valid = true;
    return v;
  }

  // One element's reduction: loops over the variables before r.batch_level; the body is
  // evaluated in batches along that one and its terms combined in order.
  template <Reducer R>
  double reduce(const ReduceCode& r) {
    double acc = identity_of(R);
    const size_t m = r.vars.size();
    if (m == 0) return combine<R>(acc, eval(r.body));
    for (int v : r.vars)
      if (p_.extents[v] <= 0) return acc;
    const int saved_var = batch_var_;
    const int64_t saved_lanes = batch_lanes_;
    // Own counters, not vars_: a variable listed twice is overwritten by the inner loop.
    int64_t* count = counters_.data() + r.counter_begin;
    const size_t level = r.batch_level;
    for (size_t k = 0; k < m; ++k) {
      count[k] = 0;
      vars_[r.vars[k]] = p_.starts[r.vars[k]];
    }
    const int inner = r.vars[level];
    const int64_t n = p_.extents[inner], first = p_.starts[inner];
    const size_t mark = top_;
    double* buf = alloc();
    while (true) {
      for (int64_t start = 0; start < n; start += kLanes) {
        const int64_t lanes = std::min(kLanes, n - start);
        vars_[inner] = first + start;
        batch_var_ = inner;
        batch_lanes_ = lanes;
        Batch b = batch(r.body, buf);
        if (b.uniform) {
          for (int64_t l = 0; l < lanes; ++l) acc = combine<R>(acc, b.p[0]);
        } else {
          for (int64_t l = 0; l < lanes; ++l) acc = combine<R>(acc, b.p[l]);
        }
      }
      if (!advance(r, count, level)) break;
    }
    top_ = mark;
    batch_var_ = saved_var;
    batch_lanes_ = saved_lanes;
    return acc;
  }

  // Steps the counters of r's first `levels` variables in row-major order and sets those that
  // changed; false after the last combination.
  bool advance(const ReduceCode& r, int64_t* count, size_t levels) {
    size_t k = levels;
    while (k-- > 0) {
      if (++count[k] < p_.extents[r.vars[k]]) break;
      count[k] = 0;
    }
    if (k == static_cast<size_t>(-1)) return false;
    for (size_t j = k; j < levels; ++j) vars_[r.vars[j]] = p_.starts[r.vars[j]] + count[j];
    return true;
  }

  double opaque(int id) {
    const OpaqueCode& o = p_.opaques[id];
    Last& last = last_[id];
    key_.clear();
    for (const auto& a : o.slices)
      for (int d : a.dims)
        if (d >= 0) key_.push_back(eval_index(p_, d, vars_.data()));
    if (!last.result || last.key != key_) {
      last.result = cache_.get(id, o.fn, key_, [&]() { return gather(o); });
      last.key = key_;
    }
    const Array& result = *last.result;
    if (result.shape.size() != o.result_indices.size())
      throw TDLError("op '" + op_.name + "': opaque function '" + op_.opaque_names[o.fn] + "' returned an array of " +
                     std::to_string(result.shape.size()) + " dimensions but is indexed with " +
                     std::to_string(o.result_indices.size()));
    int64_t off = 0;
    for (size_t d = 0; d < o.result_indices.size(); ++d) {
      int64_t i = eval_index(p_, o.result_indices[d], vars_.data());
      if (i < 0 || i >= result.shape[d]) return 0.0;
      off = off * result.shape[d] + i;
    }
    return result.data[off];
  }

  // The argument slices for the current key: fixed dimensions at the key's indices (a fixed
  // index outside the tensor gives zeros), the others whole. A slice must lie in the region held.
  std::vector<Array> gather(const OpaqueCode& o) const {
    std::vector<Array> args;
    size_t k = 0;
    for (const auto& a : o.slices) {
      const Shape& shape = p_.shapes[a.tensor];
      const Box& region = p_.regions[a.tensor];
      const size_t rank = a.dims.size();
      std::vector<int64_t> held(rank, 0), strides(rank, 1);
      for (size_t d = 0; d < rank; ++d) held[d] = region.empty() ? 0 : region.dims[d].size();
      for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * held[d];
      Array arr;
      std::vector<int64_t> fixed(rank, 0);
      // covered: the region holds the slice (whole dimensions in full, as the region lies
      // within the tensor).
      bool inside = true, covered = !region.empty();
      for (size_t d = 0; d < rank; ++d) {
        if (a.dims[d] >= 0) {
          fixed[d] = key_[k++];
          if (fixed[d] < 0 || fixed[d] >= shape[d]) inside = false;
          covered = covered && region.dims[d].lo <= fixed[d] && fixed[d] <= region.dims[d].hi;
        } else {
          arr.shape.push_back(shape[d]);
          covered = covered && region.dims[d].size() == shape[d];
        }
      }
      int64_t total = 1;
      for (int64_t s : arr.shape) total *= s;
      arr.data.assign(total, 0.0);
      if (inside && total > 0 && !covered) not_held(o, a, fixed);
      const double* data = inputs_[a.tensor];
      for (int64_t flat = 0; inside && flat < total; ++flat) {
        int64_t rem = flat, off = 0;
        for (size_t d = rank; d-- > 0;) {
          int64_t i = fixed[d];
          if (a.dims[d] < 0) {
            i = rem % shape[d];
            rem /= shape[d];
          }
          off += (i - region.dims[d].lo) * strides[d];
        }
        arr.data[flat] = data[off];
      }
      args.push_back(std::move(arr));
    }
    return args;
  }

  // An opaque function's argument must be held whole: the interpreter passes it as one array.
  [[noreturn, gnu::cold, gnu::noinline]] void not_held(const OpaqueCode& o, const SliceCode& a,
                                                       const std::vector<int64_t>& fixed) const {
    const std::string& name = op_.inputs.at(a.tensor).name;
    std::string slice = name + "[";
    for (size_t d = 0; d < a.dims.size(); ++d)
      slice += (d ? ", " : "") + (a.dims[d] >= 0 ? std::to_string(fixed[d]) : ":");
    throw std::logic_error("op '" + op_.name + "': opaque function '" + op_.opaque_names.at(o.fn) + "' needs " + slice +
                           "] of shape " + str(p_.shapes[a.tensor]) + ", but the region of '" + name + "' held is " +
                           str(p_.regions[a.tensor]) +
                           "; a region must hold every dimension an opaque function takes whole in full");
  }

  // ---- a batch of lanes: values batch_var_ = vars_[batch_var_] + l for l < batch_lanes_

  // Scratch blocks of kLanes values, used as a stack: each batch call frees what it took.
  double* alloc() {
    if (top_ == blocks_.size()) blocks_.push_back(std::make_unique<double[]>(kLanes));
    return blocks_[top_++].get();
  }

  // The node's values for every lane; written to dst, or returned from elsewhere (a row of an
  // input read in place).
  Batch batch(int id, double* dst) {
    const ValueCode& n = p_.nodes[id];
    if ((n.deps & var_bit(batch_var_)) == 0) {
      dst[0] = eval(id);
      return {dst, true};
    }
    switch (n.kind) {
      case ExprNode::kConst: dst[0] = n.value; return {dst, true};
      case ExprNode::kAccess:
        if (p_.accesses[n.aux].partial) check_lanes(p_.accesses[n.aux]);
        return batch_read(n.aux, dst);
      case ExprNode::kIndexValue: return batch_index(n.aux, dst);
      case ExprNode::kUnary: return batch_unary(n, dst);
      case ExprNode::kBinary: return batch_binary(n, dst);
      case ExprNode::kSelect: return batch_select(n, dst);
      case ExprNode::kReduce: return batch_reduce(id, n.aux, dst);
      case ExprNode::kOpaque: per_lane(id, dst, nullptr, false); return {dst, false};
    }
    TW_ASSERT(false, "unknown expression node");
  }

  // Scalar evaluation lane by lane (of the lanes where cond != 0 equals `want`, if cond given).
  void per_lane(int id, double* dst, const double* cond, bool want) {
    const int v = batch_var_;
    const int64_t v0 = vars_[v], lanes = batch_lanes_;
    for (int64_t l = 0; l < lanes; ++l) {
      if (cond && (cond[l] != 0.0) != want) continue;
      vars_[v] = v0 + l;
      dst[l] = eval(id);
    }
    vars_[v] = v0;
  }

  [[gnu::noinline]] Batch batch_read(int id, double* dst) {
    const AccessCode& a = p_.accesses[id];
    const double* data = inputs_[a.tensor];
    const int v = batch_var_;
    const int64_t lanes = batch_lanes_;
    // Linear dimensions: element offset base + step*l, inside the region held for l in [lo, hi).
    int64_t off = 0, step = 0, lo = 0, hi = lanes;
    for (int d = a.dim_begin; d < a.linear_end; ++d) {
      const AccessDim& dim = p_.dims[d];
      int64_t base = dim.constant, c = 0;
      for (int t = dim.term_begin; t < dim.term_end; ++t) {
        const IndexTerm& term = p_.terms[t];
        base += term.coeff * vars_[term.var];
        if (term.var == v) c += term.coeff;
      }
      off = wrap_add(off, wrap_mul(base, dim.stride));  // exact whenever a lane reads inside (below)
      step = wrap_add(step, wrap_mul(c, dim.stride));
      clip(base, c, dim.extent, lo, hi);
    }
    // Other dimensions: evaluated once unless they depend on the batch variable.
    const VarMask bit = var_bit(v);
    bool varying = false;
    for (int d = a.linear_end; d < a.dim_end && lo < hi; ++d) {
      const AccessDim& dim = p_.dims[d];
      if (p_.index_codes[dim.code].deps & bit) {
        varying = true;
        continue;
      }
      int64_t i = eval_index(p_, dim.code, vars_.data());
      if (i < 0 || i >= dim.extent) hi = lo;
      off = wrap_add(off, wrap_mul(i, dim.stride));
    }
    if (lo >= hi) {
      dst[0] = 0.0;
      return {dst, true};
    }
    if (!varying) {
      if (lo == 0 && hi == lanes) {
        if (step == 1) return {data + off, false};
        if (step == 0) return {data + off, true};
      }
      std::fill(dst, dst + lo, 0.0);
      for (int64_t l = lo; l < hi; ++l) dst[l] = data[wrap_add(off, wrap_mul(l, step))];
      std::fill(dst + hi, dst + lanes, 0.0);
      return {dst, false};
    }
    // Floor division or modulo along the batch variable: evaluated lane by lane.
    const int64_t v0 = vars_[v];
    for (int64_t l = 0; l < lanes; ++l) {
      double x = 0.0;
      if (l >= lo && l < hi) {
        vars_[v] = v0 + l;
        int64_t o = wrap_add(off, wrap_mul(l, step));
        bool inside = true;
        for (int d = a.linear_end; inside && d < a.dim_end; ++d) {
          const AccessDim& dim = p_.dims[d];
          if (!(p_.index_codes[dim.code].deps & bit)) continue;
          int64_t i = eval_index(p_, dim.code, vars_.data());
          inside = i >= 0 && i < dim.extent;
          o = wrap_add(o, wrap_mul(i, dim.stride));
        }
        if (inside) x = data[o];
      }
      dst[l] = x;
    }
    vars_[v] = v0;
    return {dst, false};
  }

  Batch batch_index(int code, double* dst) {
    const IndexCode& c = p_.index_codes[code];
    const int v = batch_var_;
    const int64_t lanes = batch_lanes_;
    if (c.kind == IndexNode::kLinear) {
      int64_t base = c.constant, step = 0;
      for (int t = c.term_begin; t < c.term_end; ++t) {
        base += p_.terms[t].coeff * vars_[p_.terms[t].var];
        if (p_.terms[t].var == v) step += p_.terms[t].coeff;
      }
      for (int64_t l = 0; l < lanes; ++l) dst[l] = static_cast<double>(base + step * l);
      return {dst, false};
    }
    const int64_t v0 = vars_[v];
    for (int64_t l = 0; l < lanes; ++l) {
      vars_[v] = v0 + l;
      dst[l] = static_cast<double>(eval_index(p_, code, vars_.data()));
    }
    vars_[v] = v0;
    return {dst, false};
  }

  Batch batch_unary(const ValueCode& n, double* dst) {
    Batch a = batch(n.a, dst);
    const int64_t lanes = a.uniform ? 1 : batch_lanes_;
    const double* x = a.p;
    const double p = n.value;
    dispatch(n.unary, [&](auto op) {
      for (int64_t l = 0; l < lanes; ++l) dst[l] = unary<decltype(op)::value>(x[l], p);
    });
    return {dst, a.uniform};
  }

  Batch batch_binary(const ValueCode& n, double* dst) {
    const size_t mark = top_;
    Batch a = batch(n.a, dst);
    Batch b = batch(n.b, alloc());
    const int64_t lanes = batch_lanes_;
    const double *x = a.p, *y = b.p;
    dispatch(n.binary, [&](auto op) {
      constexpr BinaryOp Op = decltype(op)::value;
      if (a.uniform && b.uniform) {
        dst[0] = binary<Op>(x[0], y[0]);
      } else if (a.uniform) {
        const double x0 = x[0];  // x may be dst
        for (int64_t l = 0; l < lanes; ++l) dst[l] = binary<Op>(x0, y[l]);
      } else if (b.uniform) {
        const double y0 = y[0];
        for (int64_t l = 0; l < lanes; ++l) dst[l] = binary<Op>(x[l], y0);
      } else {
        for (int64_t l = 0; l < lanes; ++l) dst[l] = binary<Op>(x[l], y[l]);
      }
    });
    top_ = mark;
    return {dst, a.uniform && b.uniform};
  }

  // A branch is evaluated only for the lanes that take it, as one element at a time would,
  // unless it holds no opaque function: then evaluating it for every lane changes nothing but
  // the time spent, and a batch is faster.
  Batch batch_select(const ValueCode& n, double* dst) {
    const size_t mark = top_;
    Batch cond = batch(n.a, alloc());
    const int64_t lanes = batch_lanes_;
    int64_t taken = 0;
    if (!cond.uniform)
      for (int64_t l = 0; l < lanes; ++l) taken += cond.p[l] != 0.0;
    if (cond.uniform || taken == 0 || taken == lanes) {
      bool yes = cond.uniform ? cond.p[0] != 0.0 : taken == lanes;
      top_ = mark;
      return batch(yes ? n.b : n.c, dst);
    }
    const double* branch[2];
    for (int k = 0; k < 2; ++k) {
      const int id = k == 0 ? n.b : n.c;
      double* buf = alloc();
      if (p_.nodes[id].has_opaque) {
        per_lane(id, buf, cond.p, k == 0);
        branch[k] = buf;
      } else {
        Batch x = batch(id, buf);
        if (x.uniform) {
          const double x0 = x.p[0];
          std::fill(buf, buf + lanes, x0);
        }
        branch[k] = x.uniform ? buf : x.p;
      }
    }
    for (int64_t l = 0; l < lanes; ++l) dst[l] = cond.p[l] != 0.0 ? branch[0][l] : branch[1][l];
    top_ = mark;
    return {dst, false};
  }

  // A reduction whose value changes across the lanes: lane by lane through its cache when the
  // batch is short and its batched loop longer (the loop then batches better), otherwise all
  // lanes together, each lane combining its terms in the same order. Either way the lanes' values are
  // cached like a single value: recomputed only when a free variable changed since the last
  // batch (batch_norm's per-channel mean, batched along the channel, once per batch of channels).
  Batch batch_reduce(int id, int rid, double* dst) {
    const ReduceCode& r = p_.reduces[rid];
    const int v = batch_var_;
    const int64_t lanes = batch_lanes_;
    LaneMemo& m = lane_memo_[rid];
    const size_t nfree = r.free_vars.size();
    if (m.valid && m.var == v && m.lanes == lanes) {
      bool hit = true;
      for (size_t k = 0; hit && k < nfree; ++k) hit = m.key[k] == vars_[r.free_vars[k]];
      if (hit) {
        std::copy(m.values.get(), m.values.get() + lanes, dst);
        return {dst, false};
      }
    }
    if (lanes < kFewLanes && !r.vars.empty() && p_.extents[r.vars[r.batch_level]] > lanes)
      per_lane(id, dst, nullptr, false);
    else
      dispatch(r.reducer, [&](auto red) { lanewise<decltype(red)::value>(r, dst); });
    if (!m.values) m.values = std::make_unique<double[]>(kLanes);
    std::copy(dst, dst + lanes, m.values.get());
    m.key.resize(nfree);
    for (size_t k = 0; k < nfree; ++k) m.key[k] = vars_[r.free_vars[k]];
    m.var = v;
    m.lanes = lanes;
    m.valid = true;
    return {dst, false};
  }

  template <Reducer R>
  void lanewise(const ReduceCode& r, double* acc) {
    const int64_t lanes = batch_lanes_;
    std::fill(acc, acc + lanes, identity_of(R));
    const size_t m = r.vars.size();
    for (int v : r.vars)
      if (p_.extents[v] <= 0) return;
    int64_t* count = counters_.data() + r.counter_begin;
    for (size_t k = 0; k < m; ++k) {
      count[k] = 0;
      vars_[r.vars[k]] = p_.starts[r.vars[k]];
    }
    const size_t mark = top_;
    double* buf = alloc();
    do {
      Batch b = batch(r.body, buf);
      if (b.uniform) {
        const double x = b.p[0];
        for (int64_t l = 0; l < lanes; ++l) acc[l] = combine<R>(acc[l], x);
      } else {
        for (int64_t l = 0; l < lanes; ++l) acc[l] = combine<R>(acc[l], b.p[l]);
      }
    } while (advance(r, count, m));
    top_ = mark;
  }

  struct Memo {
    double value = 0;
    bool valid = false;
  };
  // A reduction's values for the lanes of its last batch evaluation.
  struct LaneMemo {
    std::vector<int64_t> key;  // free variables' values (the batch variable at its first lane)
    int var = -1;
    int64_t lanes = 0;
    std::unique_ptr<double[]> values;
    bool valid = false;
  };
  // The result this thread read last from each opaque node, to skip the shared cache's lock
  // while the key stays the same.
  struct Last {
    std::vector<int64_t> key;
    std::shared_ptr<const Array> result;
  };

  const Program& p_;
  const OpDesc& op_;
  const std::vector<const double*>& inputs_;  // per input, the buffer of its held region
  OpaqueCache& cache_;
  std::vector<int64_t> vars_;
  std::vector<Memo> memo_;
  std::vector<LaneMemo> lane_memo_;
  std::vector<int64_t> keys_;
  std::vector<int64_t> counters_;
  std::vector<Last> last_;
  std::vector<int64_t> key_;
  int batch_var_ = 0;
  int64_t batch_lanes_ = 1;
  std::vector<std::unique_ptr<double[]>> blocks_;
  size_t top_ = 0;
};

}  // namespace

void interpret_region(const OpDesc& op, const std::vector<RegionView>& inputs, const std::vector<int64_t>& extents,
                      const std::vector<Range>& ranges, double* out, const OpaqueCall& opaque, int threads) {
  if (ranges.size() != op.vars.size() || extents.size() != op.vars.size())
    throw ShapeError("op '" + op.name + "': " + std::to_string(ranges.size()) + " ranges and " +
                     std::to_string(extents.size()) + " extents given for " + std::to_string(op.vars.size()) +
                     " variables");
  for (size_t v = 0; v < ranges.size(); ++v)
    if (!ranges[v].empty() && (ranges[v].lo < 0 || ranges[v].hi >= extents[v]))
      throw ShapeError("op '" + op.name + "': variable '" + op.vars[v].name + "' is given the range [" +
                       std::to_string(ranges[v].lo) + ", " + std::to_string(ranges[v].hi) +
                       "] outside its extent [0, " + std::to_string(extents[v] - 1) + "]");
  int64_t total = 1;
  for (int v : op.output_vars) total *= ranges[v].size();
  if (total == 0) return;
  std::vector<Shape> shapes;
  std::vector<Box> regions;
  std::vector<const double*> data;
  for (const auto& in : inputs) {
    shapes.push_back(in.shape);
    regions.push_back(in.region);
    data.push_back(in.data);
  }
  const Program program = compile_program(op, shapes, ranges, regions);
  // Work units: batches of the output along the batch variable.
  int64_t units = 1;
  if (!op.output_vars.empty()) {
    const int64_t n = program.extents[op.output_vars[program.output_batch_var]];
    units = total / n * ((n + kLanes - 1) / kLanes);
  }
  OpaqueCache cache(opaque);
  auto work = [&](int64_t begin, int64_t end) {
    Evaluator ev(program, op, data, cache);
    ev.run(begin, end, out);
  };
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({threads, total / 1024, units})));
  if (threads <= 1) {
    work(0, units);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        work(units * t / threads, units * (t + 1) / threads);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void interpret(const OpDesc& op, const std::vector<ArrayView>& inputs, const std::vector<int64_t>& extents, double* out,
               const OpaqueCall& opaque, int threads) {
  std::vector<RegionView> whole;
  for (const auto& in : inputs) whole.push_back({in.data, Box::whole(in.shape), in.shape});
  std::vector<Range> ranges;
  for (int64_t e : extents) ranges.push_back({0, e - 1});
  interpret_region(op, whole, extents, ranges, out, opaque, threads);
}

}  // namespace tilewise::tdl

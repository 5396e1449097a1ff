#include "tdl/interpreter.h"

#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "tdl/errors.h"
#include "tdl/free_vars.h"

namespace tilewise::tdl {

namespace {

// Opaque results shared by all threads, keyed by (node, fixed indices of its slices).
class OpaqueCache {
 public:
  explicit OpaqueCache(const OpaqueCall& call) : call_(call) {}
  std::shared_ptr<const Array> get(const ExprNode* node, std::vector<int64_t> key,
                                   const std::function<std::vector<Array>()>& gather) {
    auto full_key = std::make_pair(node, std::move(key));
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(full_key);
      if (it != cache_.end()) return it->second;
    }
    auto result = std::make_shared<const Array>(call_(node->opaque, gather()));
    std::lock_guard<std::mutex> lock(mu_);
    return cache_.emplace(std::move(full_key), result).first->second;
  }

 private:
  const OpaqueCall& call_;
  std::mutex mu_;
  std::map<std::pair<const ExprNode*, std::vector<int64_t>>, std::shared_ptr<const Array>> cache_;
};

class Evaluator {
 public:
  Evaluator(const OpDesc& op, const std::vector<ArrayView>& inputs, const std::vector<int64_t>& extents,
            OpaqueCache& cache, const std::unordered_map<const ExprNode*, std::vector<int>>& free_vars)
      : op_(op), inputs_(inputs), extents_(extents), cache_(cache), free_vars_(free_vars), vars_(op.vars.size(), 0) {
    for (const auto& in : inputs) shapes_.push_back(in.shape);
    for (const auto& in : inputs) {
      std::vector<int64_t> strides(in.shape.size(), 1);
      for (size_t d = in.shape.size(); d-- > 1;) strides[d - 1] = strides[d] * in.shape[d];
      strides_.push_back(strides);
    }
  }

  std::vector<int64_t>& vars() { return vars_; }

  double eval(const Expr& e) {
    switch (e->kind) {
      case ExprNode::kConst: return e->value;
      case ExprNode::kAccess: return read(e->tensor, e->indices);
      case ExprNode::kIndexValue: return static_cast<double>(eval_index(e->indices[0], vars_.data(), shapes_));
      case ExprNode::kUnary: return unary(e->unary, eval(e->operands[0]), e->value);
      case ExprNode::kBinary: return binary(e->binary, eval(e->operands[0]), eval(e->operands[1]));
      case ExprNode::kSelect: return eval(e->operands[0]) != 0.0 ? eval(e->operands[1]) : eval(e->operands[2]);
      case ExprNode::kReduce: return cached_reduce(*e);
      case ExprNode::kOpaque: return opaque(*e);
    }
    TW_ASSERT(false, "unknown expression node");
  }

 private:
  double read(int t, const std::vector<IndexExpr>& idx) {
    const auto& in = inputs_[t];
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      int64_t i = eval_index(idx[d], vars_.data(), shapes_);
      if (i < 0 || i >= in.shape[d]) return 0.0;
      off += i * strides_[t][d];
    }
    return in.data[off];
  }

  static double unary(UnaryOp op, double a, double p) {
    switch (op) {
      case UnaryOp::kNeg: return -a;
      case UnaryOp::kExp: return std::exp(a);
      case UnaryOp::kLog: return std::log(a);
      case UnaryOp::kTanh: return std::tanh(a);
      case UnaryOp::kSigmoid: return 1.0 / (1.0 + std::exp(-a));
      case UnaryOp::kSqrt: return std::sqrt(a);
      case UnaryOp::kAbs: return std::fabs(a);
      case UnaryOp::kErf: return std::erf(a);
      case UnaryOp::kPow: return std::pow(a, p);
    }
    return 0;
  }

  static double binary(BinaryOp op, double a, double b) {
    switch (op) {
      case BinaryOp::kAdd: return a + b;
      case BinaryOp::kSub: return a - b;
      case BinaryOp::kMul: return a * b;
      case BinaryOp::kDiv: return a / b;
      case BinaryOp::kMax: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
      case BinaryOp::kMin: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
      case BinaryOp::kLt: return a < b;
      case BinaryOp::kLe: return a <= b;
      case BinaryOp::kGt: return a > b;
      case BinaryOp::kGe: return a >= b;
      case BinaryOp::kEq: return a == b;
      case BinaryOp::kNe: return a != b;
    }
    return 0;
  }

  // A reduction is recomputed only when a variable it depends on changed since its last
  // evaluation: Sum(k: (x[i,k] - mean(i))**2) computes mean(i) once per i, not once per k.
  double cached_reduce(const ExprNode& n) {
    const std::vector<int>& free = free_vars_.at(&n);
    {
      const Memo& slot = memo_[&n];
      bool hit = slot.valid;
      for (size_t k = 0; hit && k < free.size(); ++k) hit = slot.key[k] == vars_[free[k]];
      if (hit) return slot.value;
    }
    // The body binds only its own variables, so the free ones still hold the key afterwards.
    double v = reduce(n, 0, identity_of(n.reducer));
    Memo& slot = memo_[&n];  // looked up again: the body may have grown memo_
    slot.key.resize(free.size());
    for (size_t k = 0; k < free.size(); ++k) slot.key[k] = vars_[free[k]];
    slot.value = v;
    slot.valid = true;
    return v;
  }

  double reduce(const ExprNode& n, size_t level, double acc) {
    if (level == n.reduce_vars.size()) {
      double v = eval(n.operands[0]);
      switch (n.reducer) {
        case Reducer::kSum: return acc + v;
        case Reducer::kProd: return acc * v;
        case Reducer::kMax: return std::isnan(v) || v > acc ? v : acc;
        case Reducer::kMin: return std::isnan(v) || v < acc ? v : acc;
      }
    }
    int var = n.reduce_vars[level];
    for (int64_t i = 0; i < extents_[var]; ++i) {
      vars_[var] = i;
      acc = reduce(n, level + 1, acc);
    }
    return acc;
  }

  double opaque(const ExprNode& n) {
    std::vector<int64_t> key;
    for (const auto& a : n.slices)
      for (const auto& d : a.dims)
        if (d) key.push_back(eval_index(*d, vars_.data(), shapes_));
    auto gather = [&]() {
      std::vector<Array> args;
      size_t k = 0;
      for (const auto& a : n.slices) {
        const auto& in = inputs_[a.tensor];
        Array arr;
        std::vector<int64_t> fixed(a.dims.size(), -1);
        for (size_t d = 0; d < a.dims.size(); ++d)
          if (a.dims[d]) fixed[d] = key[k++];
          else arr.shape.push_back(in.shape[d]);
        int64_t total = 1;
        for (int64_t s : arr.shape) total *= s;
        arr.data.resize(total);
        std::vector<int64_t> pos(a.dims.size(), 0);
        for (int64_t flat = 0; flat < total; ++flat) {
          int64_t rem = flat, off = 0;
          bool inside = true;
          for (size_t d = a.dims.size(); d-- > 0;) {
            int64_t i;
            if (fixed[d] >= 0 || a.dims[d]) {
              i = fixed[d];
            } else {
              i = rem % in.shape[d];
              rem /= in.shape[d];
            }
            if (i < 0 || i >= in.shape[d]) inside = false;
            off += i * strides_[a.tensor][d];
          }
          arr.data[flat] = inside ? in.data[off] : 0.0;
        }
        args.push_back(std::move(arr));
      }
      return args;
    };
    auto result = cache_.get(&n, key, gather);
    if (result->shape.size() != n.indices.size())
      throw TDLError("op '" + op_.name + "': opaque function '" + op_.opaque_names[n.opaque] + "' returned an array of " +
                     std::to_string(result->shape.size()) + " dimensions but is indexed with " +
                     std::to_string(n.indices.size()));
    int64_t off = 0;
    for (size_t d = 0; d < n.indices.size(); ++d) {
      int64_t i = eval_index(n.indices[d], vars_.data(), shapes_);
      if (i < 0 || i >= result->shape[d]) return 0.0;
      off = off * result->shape[d] + i;
    }
    return result->data[off];
  }

  const OpDesc& op_;
  const std::vector<ArrayView>& inputs_;
  const std::vector<int64_t>& extents_;
  OpaqueCache& cache_;
  const std::unordered_map<const ExprNode*, std::vector<int>>& free_vars_;
  struct Memo {
    std::vector<int64_t> key;
    double value = 0;
    bool valid = false;
  };
  std::unordered_map<const ExprNode*, Memo> memo_;
  std::vector<int64_t> vars_;
  std::vector<Shape> shapes_;
  std::vector<std::vector<int64_t>> strides_;
};

}  // namespace

void interpret(const OpDesc& op, const std::vector<ArrayView>& inputs, const std::vector<int64_t>& extents, double* out,
               const OpaqueCall& opaque, int threads) {
  int64_t total = 1;
  for (int v : op.output_vars) total *= extents[v];
  OpaqueCache cache(opaque);
  const auto free_vars = reduce_free_vars(op.body);
  auto work = [&](int64_t begin, int64_t end) {
    Evaluator ev(op, inputs, extents, cache, free_vars);
    auto& vars = ev.vars();
    for (int64_t flat = begin; flat < end; ++flat) {
      int64_t rem = flat;
      for (size_t d = op.output_vars.size(); d-- > 0;) {
        int v = op.output_vars[d];
        vars[v] = rem % extents[v];
        rem /= extents[v];
      }
      out[flat] = ev.eval(op.body);
    }
  };
  threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, total / 1024)));
  if (threads <= 1) {
    work(0, total);
    return;
  }
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        work(total * t / threads, total * (t + 1) / threads);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace tilewise::tdl

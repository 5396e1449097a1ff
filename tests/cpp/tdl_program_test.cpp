// The compiled interpreter (tdl/program.h, tdl/interpreter.cpp) against a naive tree walk that
// evaluates one element at a time straight from the description (no compilation, no caching, no
// batching): results must be bit-for-bit equal, on the cases the Python operator library covers
// least (floor division and modulo in indices, tensor extents in indices, nested and shared
// cached reductions, lane batches longer than one block, opaque results and their errors).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "tdl/errors.h"
#include "tdl/interpreter.h"
#include "tdl/program.h"

namespace tilewise::tdl {
namespace {

// ---- the oracle: a direct tree walk, one element at a time

struct Naive {
  const OpDesc& op;
  const std::vector<ArrayView>& inputs;
  std::vector<Shape> shapes;
  const std::vector<int64_t>& extents;
  const OpaqueCall& call;
  std::vector<int64_t> vars;

  int64_t index(const IndexExpr& e) const { return tdl::eval_index(e, vars.data(), shapes); }

  double eval(const Expr& e) {
    switch (e->kind) {
      case ExprNode::kConst: return e->value;
      case ExprNode::kAccess: {
        const auto& in = inputs[e->tensor];
        int64_t off = 0;
        for (size_t d = 0; d < e->indices.size(); ++d) {
          int64_t i = index(e->indices[d]);
          if (i < 0 || i >= in.shape[d]) return 0.0;
          off = off * in.shape[d] + i;
        }
        return in.data[off];
      }
      case ExprNode::kIndexValue: return static_cast<double>(index(e->indices[0]));
      case ExprNode::kUnary: {
        double a = eval(e->operands[0]);
        switch (e->unary) {
          case UnaryOp::kNeg: return -a;
          case UnaryOp::kExp: return std::exp(a);
          case UnaryOp::kLog: return std::log(a);
          case UnaryOp::kTanh: return std::tanh(a);
          case UnaryOp::kSigmoid: return 1.0 / (1.0 + std::exp(-a));
          case UnaryOp::kSqrt: return std::sqrt(a);
          case UnaryOp::kAbs: return std::fabs(a);
          case UnaryOp::kErf: return std::erf(a);
          case UnaryOp::kPow: return std::pow(a, e->value);
        }
        return 0;
      }
      case ExprNode::kBinary: {
        double a = eval(e->operands[0]), b = eval(e->operands[1]);
        switch (e->binary) {
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
      case ExprNode::kSelect: return eval(e->operands[0]) != 0.0 ? eval(e->operands[1]) : eval(e->operands[2]);
      case ExprNode::kReduce: return reduce(*e, 0, identity_of(e->reducer));
      case ExprNode::kOpaque: return opaque(*e);
    }
    return 0;
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
    for (int64_t i = 0; i < extents[var]; ++i) {
      vars[var] = i;
      acc = reduce(n, level + 1, acc);
    }
    return acc;
  }

  double opaque(const ExprNode& n) {
    std::vector<Array> args;
    for (const auto& a : n.slices) {
      const auto& in = inputs[a.tensor];
      Array arr;
      std::vector<int64_t> fixed(a.dims.size(), 0);
      bool inside = true;
      for (size_t d = 0; d < a.dims.size(); ++d) {
        if (a.dims[d]) {
          fixed[d] = index(*a.dims[d]);
          inside = inside && fixed[d] >= 0 && fixed[d] < in.shape[d];
        } else {
          arr.shape.push_back(in.shape[d]);
        }
      }
      int64_t total = 1;
      for (int64_t s : arr.shape) total *= s;
      arr.data.assign(total, 0.0);
      for (int64_t flat = 0; inside && flat < total; ++flat) {
        int64_t rem = flat, off = 0, stride = 1;
        for (size_t d = a.dims.size(); d-- > 0;) {
          int64_t i = fixed[d];
          if (!a.dims[d]) {
            i = rem % in.shape[d];
            rem /= in.shape[d];
          }
          off += i * stride;
          stride *= in.shape[d];
        }
        arr.data[flat] = in.data[off];
      }
      args.push_back(std::move(arr));
    }
    Array r = call(n.opaque, args);
    int64_t off = 0;
    for (size_t d = 0; d < n.indices.size(); ++d) {
      int64_t i = index(n.indices[d]);
      if (i < 0 || i >= r.shape[d]) return 0.0;
      off = off * r.shape[d] + i;
    }
    return r.data[off];
  }

  std::vector<double> run() {
    int64_t total = 1;
    for (int v : op.output_vars) total *= extents[v];
    std::vector<double> out(total);
    vars.assign(extents.size(), 0);
    for (int64_t flat = 0; flat < total; ++flat) {
      int64_t rem = flat;
      for (size_t d = op.output_vars.size(); d-- > 0;) {
        vars[op.output_vars[d]] = rem % extents[op.output_vars[d]];
        rem /= extents[op.output_vars[d]];
      }
      out[flat] = eval(op.body);
    }
    return out;
  }
};

// ---- helpers

// Deterministic values of both signs, some repeated (ties for Max/Min), none exactly 0.
std::vector<double> values(const Shape& shape, unsigned seed) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(n);
  uint64_t x = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (auto& e : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = static_cast<double>(static_cast<int64_t>(x >> 40) % 2001 - 1000) / 257.0 + 1.0 / 1024;
  }
  return v;
}

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

struct Case {
  OpDesc op;
  std::vector<Shape> shapes;
  std::vector<int64_t> extents;
  std::vector<std::vector<double>> data;

  std::vector<ArrayView> views() const {
    std::vector<ArrayView> v;
    for (size_t i = 0; i < shapes.size(); ++i) v.push_back({data[i].data(), shapes[i]});
    return v;
  }
  std::vector<double> compiled(int threads, const OpaqueCall& call = nullptr) const {
    int64_t total = 1;
    for (int v : op.output_vars) total *= extents[v];
    std::vector<double> out(total, -12345.0);
    interpret(op, views(), extents, out.data(), call, threads);
    return out;
  }
  std::vector<double> naive(const OpaqueCall& call = nullptr) const {
    auto v = views();
    return Naive{op, v, shapes, extents, call, {}}.run();
  }
};

Case make_case(OpDesc op, std::vector<Shape> shapes, std::vector<int64_t> extents) {
  validate(op);
  Case c{std::move(op), std::move(shapes), std::move(extents), {}};
  for (size_t i = 0; i < c.shapes.size(); ++i) c.data.push_back(values(c.shapes[i], static_cast<unsigned>(i)));
  return c;
}

void expect_same(const Case& c, const OpaqueCall& call = nullptr) {
  std::vector<double> want = c.naive(call);
  for (int threads : {1, 3}) {
    std::vector<double> got = c.compiled(threads, call);
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < want.size() && bad < 5; ++i)
      if (!same(got[i], want[i])) {
        ++bad;
        ADD_FAILURE() << c.op.name << " threads=" << threads << " element " << i << ": got " << got[i] << ", want "
                      << want[i];
      }
  }
}

IndexExpr v(int i) { return index_var(i); }
IndexExpr c(int64_t k) { return index_const(k); }
IndexExpr add(IndexExpr a, IndexExpr b) { return index_add(a, b); }
IndexExpr sub(IndexExpr a, IndexExpr b) { return index_sub(a, b); }
IndexExpr mul(IndexExpr a, int64_t k) { return index_scale(a, k); }
IndexExpr fdiv(IndexExpr a, int64_t k) { return index_floordiv(a, k); }
IndexExpr mod(IndexExpr a, int64_t k) { return index_mod(a, k); }
Expr at(int t, std::vector<IndexExpr> idx) { return make_access(t, std::move(idx)); }
Expr iv(IndexExpr e) { return make_index_value(std::move(e)); }
Expr bin(BinaryOp op, Expr a, Expr b) { return make_binary(op, std::move(a), std::move(b)); }
Expr plus(Expr a, Expr b) { return bin(BinaryOp::kAdd, std::move(a), std::move(b)); }
Expr times(Expr a, Expr b) { return bin(BinaryOp::kMul, std::move(a), std::move(b)); }
Expr sum(std::vector<int> vars, Expr body) { return make_reduce(Reducer::kSum, std::move(vars), std::move(body)); }

OpDesc op_of(std::string name, std::vector<TensorDecl> inputs, std::vector<VarDecl> vars, std::vector<int> outputs) {
  OpDesc op;
  op.name = std::move(name);
  op.inputs = std::move(inputs);
  op.vars = std::move(vars);
  op.output_vars = std::move(outputs);
  return op;
}

// ---- compiled index expressions

TEST(Program, IndexCodesEvaluateAsTheDescription) {
  // Extents fold into constants; floor division and modulo keep Python semantics for negatives.
  std::vector<Shape> shapes = {{7, 5}};
  std::vector<IndexExpr> exprs = {
      sub(mul(v(0), 3), c(7)),
      fdiv(sub(v(0), c(7)), 3),
      mod(add(mul(v(1), -1), index_extent(0, 0)), 4),
      mul(fdiv(add(v(0), v(1)), 2), 3),
      add(fdiv(v(0), 2), add(fdiv(v(1), 3), mod(v(0), 5))),
      add(sub(index_extent(0, 1), v(1)), fdiv(index_extent(0, 0), 2)),
  };
  OpDesc op = op_of("idx", {{"A", 2}}, {{"x", true, {}}, {"y", true, {}}}, {0, 1});
  std::vector<Expr> reads;
  for (const auto& e : exprs) reads.push_back(iv(e));
  op.body = reads[0];
  for (size_t i = 1; i < reads.size(); ++i) op.body = plus(op.body, reads[i]);
  Program p = compile_program(op, shapes, {21, 21});
  std::vector<int> codes;
  for (const auto& node : p.nodes)
    if (node.kind == ExprNode::kIndexValue) codes.push_back(node.aux);
  ASSERT_EQ(codes.size(), exprs.size());
  for (int64_t x = -10; x <= 10; ++x)
    for (int64_t y = -10; y <= 10; ++y) {
      int64_t vars[2] = {x, y};
      for (size_t i = 0; i < exprs.size(); ++i)
        EXPECT_EQ(eval_index(p, codes[i], vars), tdl::eval_index(exprs[i], vars, shapes))
            << i << " at " << x << "," << y;
    }
}

TEST(Program, SharedNodesCompileOnceAndDependenciesAreTracked) {
  OpDesc op = op_of("shared", {{"x", 2}}, {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}}, {0, 1});
  Expr row_sum = sum({2}, at(0, {v(0), v(2)}));
  op.body = plus(times(at(0, {v(0), v(1)}), row_sum), row_sum);
  validate(op);
  Program p = compile_program(op, {{3, 4}}, {3, 4, 4});
  EXPECT_EQ(p.reduces.size(), 1u);
  const ValueCode& root = p.nodes[p.root];
  EXPECT_EQ(root.deps, var_bit(0) | var_bit(1));
  EXPECT_EQ(p.nodes[root.b].kind, ExprNode::kReduce);
  EXPECT_EQ(p.nodes[root.b].deps, var_bit(0));  // its free variable only
  EXPECT_FALSE(root.has_opaque);
}

// ---- whole ops against the oracle

TEST(Program, FloorDivisionAndModuloInIndices) {
  // Vars: i, j (output), k (reduction). Inputs: A (7), B (4, 5).
  OpDesc op = op_of("divmod", {{"A", 1}, {"B", 2}}, {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}}, {0, 1});
  Expr term = times(at(0, {fdiv(sub(mul(v(2), 2), v(0)), 3)}), iv(mod(add(v(2), v(1)), 2)));
  op.body = plus(plus(times(at(0, {fdiv(sub(v(0), c(3)), 2)}), at(1, {mod(v(0), 4), mod(add(mul(v(1), 3), c(1)), 5)})),
                      iv(fdiv(sub(v(0), v(1)), 3))),
                 sum({2}, term));
  expect_same(make_case(op, {{7}, {4, 5}}, {9, 70, 7}));
  // Transposed-convolution shape: a Select on divisibility along the batched variable.
  OpDesc up = op_of("upsample", {{"A", 2}}, {{"y", true, {}}, {"x", true, {}}}, {0, 1});
  Expr odd_x = bin(BinaryOp::kEq, iv(mod(sub(v(1), c(1)), 2)), make_const(0));
  up.body = make_select(odd_x, at(0, {fdiv(v(0), 2), fdiv(sub(v(1), c(1)), 2)}),
                        make_unary(UnaryOp::kNeg, at(0, {v(0), c(0)})));
  expect_same(make_case(up, {{5, 150}}, {11, 301}));
}

TEST(Program, TensorExtentsInIndices) {
  // Reversal and offsets written with the tensor's own extents.
  OpDesc op = op_of("extents", {{"A", 2}}, {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}}, {0, 1});
  IndexExpr h = index_extent(0, 0), w = index_extent(0, 1);
  op.body = plus(plus(at(0, {sub(sub(h, c(1)), v(0)), add(v(1), sub(fdiv(w, 2), c(3)))}), iv(sub(w, v(1)))),
                 sum({2}, at(0, {v(2), sub(sub(w, c(1)), v(1))})));
  expect_same(make_case(op, {{5, 300}}, {5, 300, 5}));
}

TEST(Program, StridedAndNegativeSteps) {
  OpDesc op = op_of("steps", {{"A", 1}}, {{"i", true, {}}}, {0});
  op.body = plus(plus(at(0, {sub(c(5), mul(v(0), 2))}), at(0, {sub(mul(v(0), 3), c(1))})),
                 at(0, {mul(fdiv(v(0), 2), 2)}));
  expect_same(make_case(op, {{10}}, {8}));
  expect_same(make_case(op, {{1000}}, {400}));
}

TEST(Program, IndicesThatCouldLeaveInt64AreRefusedWhenCompiled) {
  // Found by libFuzzer: i * 2^61 read at i = 7 overflowed int64 inside the batched read. Such an
  // index is refused when compiled (TDLError), whatever part of it a read would reach.
  OpDesc big = op_of("big", {{"A", 1}}, {{"i", true, {}}}, {0});
  big.body = at(0, {mul(v(0), int64_t{1} << 61)});
  validate(big);
  EXPECT_THROW(compile_program(big, {{4}}, {8}), TDLError);
  OpDesc scaled = op_of("scaled", {{"A", 1}}, {{"i", true, {}}}, {0});
  scaled.body = at(0, {mul(fdiv(v(0), 2), int64_t{1} << 60)});
  validate(scaled);
  EXPECT_THROW(compile_program(scaled, {{4}}, {8}), TDLError);
  // Large constants that stay bounded are fine: modulo a huge k of an index within [0, k), a
  // large offset taken back, a huge coefficient on a variable that only takes 0.
  OpDesc fine = op_of("fine", {{"A", 1}}, {{"i", true, {}}, {"j", true, {}}}, {0, 1});
  fine.body = plus(plus(at(0, {mod(v(0), int64_t{1} << 62)}), at(0, {sub(add(v(0), c(int64_t{1} << 60)), c(int64_t{1} << 60))})),
                   at(0, {add(v(0), mul(v(1), int64_t{1} << 62))}));
  expect_same(make_case(fine, {{5}}, {9, 1}));
}

TEST(Program, NestedCachedReductions) {
  // i, n output; j, k, q, k2, j2, a, b, e reduction variables.
  OpDesc op = op_of("nested", {{"x", 2}, {"y", 2}, {"z", 3}, {"w", 1}},
                    {{"i", true, {}},
                     {"n", true, {}},
                     {"j", false, {}},
                     {"k", false, {}},
                     {"q", false, {}},
                     {"k2", false, {}},
                     {"j2", false, {}},
                     {"a", false, {}},
                     {"b", false, {}},
                     {"e", false, {}}},
                    {0, 1});
  enum { I, N, J, K, Q, K2, J2, A, B, E };
  Expr mu = bin(BinaryOp::kDiv, sum({J}, at(0, {v(I), v(J)})), make_const(70));  // shared below
  Expr var = sum({K}, make_unary(UnaryOp::kPow, bin(BinaryOp::kSub, at(0, {v(I), v(K)}), mu), 2.0));
  Expr rowmax = make_reduce(Reducer::kMax, {Q}, bin(BinaryOp::kSub, at(0, {v(I), v(Q)}), at(1, {v(Q), v(N)})));
  Expr inner = sum({J2}, times(at(0, {v(I), v(J2)}), at(1, {v(J2), v(K2)})));  // depends on k2
  Expr dependent = sum({K2}, times(at(0, {v(I), v(K2)}), inner));
  Expr trailing_one = make_reduce(Reducer::kMin, {A, B}, at(2, {v(I), v(A), v(B)}));  // b has extent 1
  Expr empty = make_reduce(Reducer::kProd, {E}, at(3, {v(E)}));                       // e has extent 0
  op.body = plus(plus(plus(var, times(mu, rowmax)), plus(dependent, trailing_one)), plus(empty, mu));
  // n = 300 lanes: more than one batch block; the reductions on i alone are cached across them.
  expect_same(make_case(op, {{5, 70}, {70, 300}, {5, 3, 1}, {0}}, {5, 300, 70, 70, 70, 70, 70, 3, 1, 0}));
  // n = 2 lanes: the output is batched along i instead; the long reductions run lane by lane.
  expect_same(make_case(op, {{300, 70}, {70, 2}, {300, 3, 1}, {0}}, {300, 2, 70, 70, 70, 70, 70, 3, 1, 0}));
}

TEST(Program, NaNPropagatesThroughMaxAndMin) {
  OpDesc op = op_of("nanmax", {{"A", 2}}, {{"i", true, {}}, {"k", false, {}}}, {0});
  op.body = plus(make_reduce(Reducer::kMax, {1}, at(0, {v(0), v(1)})),
                 bin(BinaryOp::kMin, at(0, {v(0), c(0)}), at(0, {v(0), c(1)})));
  Case cs = make_case(op, {{70, 5}}, {70, 5});
  cs.data[0][2 * 5 + 3] = NAN;
  cs.data[0][4 * 5 + 1] = NAN;
  expect_same(cs);
  std::vector<double> got = cs.compiled(1);
  EXPECT_TRUE(std::isnan(got[2]) && std::isnan(got[4]) && !std::isnan(got[3]));
}

TEST(Program, ScalarOutput) {
  OpDesc op = op_of("total", {{"A", 2}}, {{"i", false, {}}, {"j", false, {}}}, {});
  op.body = sum({0, 1}, times(at(0, {v(0), v(1)}), iv(sub(v(1), v(0)))));
  expect_same(make_case(op, {{30, 700}}, {30, 700}));
}

// ---- opaque results

// Row b's cumulative sums, scaled by the row's first value; counts its calls.
struct CumSum {
  std::atomic<int>* calls;
  int64_t forbidden_from = -1;  // throw if a row whose first value is >= this is asked for
  Array operator()(int, const std::vector<Array>& args) const {
    if (calls) ++*calls;
    const Array& row = args.at(0);
    if (forbidden_from >= 0 && row.data[0] >= static_cast<double>(forbidden_from))
      throw std::runtime_error("row " + std::to_string(row.data[0]) + " was not to be computed");
    Array r;
    r.shape = {static_cast<int64_t>(row.data.size())};
    double acc = 0;
    for (double x : row.data) r.data.push_back(acc += x);
    return r;
  }
};

OpDesc opaque_op(Expr select_cond, bool by_column = false) {
  // out[i, j] = cumsum(A[i, :])[j + 1] * 2 (by_column: cumsum(A[j, :])[i + 1] * 2), read only
  // where select_cond holds (else -1).
  OpDesc op = op_of("opaque", {{"A", 2}}, {{"i", true, {}}, {"j", true, {}}}, {0, 1});
  op.opaque_names = {"cumsum"};
  const int row = by_column ? 1 : 0;
  Expr f = make_opaque(0, {SliceArg{0, {v(row), std::nullopt}}}, {add(v(1 - row), c(1))}, {index_extent(0, 1)});
  Expr body = times(f, make_const(2));
  op.body = select_cond ? make_select(select_cond, body, make_const(-1)) : body;
  return op;
}

Case opaque_case(OpDesc op, int64_t rows, int64_t cols, std::vector<int64_t> extents = {}) {
  if (extents.empty()) extents = {rows, cols};
  Case cs = make_case(std::move(op), {{rows, cols}}, extents);
  for (int64_t i = 0; i < rows; ++i) cs.data[0][i * cols] = static_cast<double>(i);  // row id in column 0
  return cs;
}

TEST(Program, OpaqueResultsAreCachedPerSlice) {
  Case cs = opaque_case(opaque_op(nullptr), 40, 100);
  std::atomic<int> calls{0};
  expect_same(cs, CumSum{nullptr});
  cs.compiled(1, CumSum{&calls});
  EXPECT_EQ(calls.load(), 40);  // once per row, whatever the number of reads
}

TEST(Program, OpaqueBranchesRunOnlyWhereTaken) {
  // Rows of A from 3 on must never reach the opaque function: the condition is uniform along the
  // batched variable j (rows i < 3), varies along it with the slice fixed per batch (i + j < 50:
  // rows from 50 on take no lane), or varies along it with the slice (row j, lanes j < 3).
  Case uniform = opaque_case(opaque_op(bin(BinaryOp::kLt, iv(v(0)), make_const(3))), 8, 100);
  Case mixed = opaque_case(opaque_op(bin(BinaryOp::kLt, iv(add(v(0), v(1))), make_const(50))), 80, 100);
  Case lanes = opaque_case(opaque_op(bin(BinaryOp::kLt, iv(v(1)), make_const(3)), true), 100, 10, {8, 100});
  EXPECT_NO_THROW(expect_same(uniform, CumSum{nullptr, 3}));
  EXPECT_NO_THROW(expect_same(mixed, CumSum{nullptr, 50}));
  EXPECT_NO_THROW(expect_same(lanes, CumSum{nullptr, 3}));
}

TEST(Program, OpaqueErrorsPropagate) {
  Case cs = opaque_case(opaque_op(nullptr), 64, 100);  // 6400 elements: 3 threads
  OpaqueCall boom = [](int, const std::vector<Array>& args) -> Array {
    if (args[0].data[0] == 50) throw std::runtime_error("boom");
    return CumSum{nullptr}(0, args);
  };
  EXPECT_THROW(cs.compiled(3, boom), std::runtime_error);
  EXPECT_THROW(cs.compiled(1, boom), std::runtime_error);
  OpaqueCall wrong_rank = [](int, const std::vector<Array>& args) {
    Array r;
    r.shape = {1, static_cast<int64_t>(args[0].data.size())};
    r.data = args[0].data;
    return r;
  };
  try {
    cs.compiled(3, wrong_rank);
    ADD_FAILURE() << "no error";
  } catch (const TDLError& e) {
    EXPECT_NE(std::string(e.what()).find("'cumsum' returned an array of 2 dimensions but is indexed with 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(Program, OpaqueSlicesOutsideTheTensorAreZero) {
  // Fixed slice index i - 2 runs off the tensor for i < 2; result index j - 3 off the result.
  OpDesc op = op_of("opaque_oob", {{"A", 2}}, {{"i", true, {}}, {"j", true, {}}}, {0, 1});
  op.opaque_names = {"cumsum"};
  op.body = make_opaque(0, {SliceArg{0, {sub(v(0), c(2)), std::nullopt}}}, {sub(v(1), c(3))}, {index_extent(0, 1)});
  Case cs = make_case(op, {{6, 7}}, {6, 9});
  expect_same(cs, CumSum{nullptr});
}

}  // namespace
}  // namespace tilewise::tdl

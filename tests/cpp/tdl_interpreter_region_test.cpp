// interpret_region (tdl/interpreter.h): one device's share of an op, its variables restricted to
// ranges and its inputs held only in regions. Oracles: the matching block of interpret() on the
// whole tensors when only output variables are restricted (bit-for-bit), and direct loops over the
// restricted sub-range when a reduction variable is (to 1e-12). Regions come from
// tdl::input_regions, sometimes grown at random within the tensor so that origins are arbitrary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>

#include "tdl/errors.h"
#include "tdl/interpreter.h"
#include "tdl/region_analysis.h"
#include "tdl_fixtures.h"

namespace tilewise::tdl {
namespace {

// ---- description builders

IndexExpr v(int i) { return index_var(i); }
IndexExpr c(int64_t k) { return index_const(k); }
IndexExpr add(IndexExpr a, IndexExpr b) { return index_add(std::move(a), std::move(b)); }
IndexExpr mul(IndexExpr a, int64_t k) { return index_scale(std::move(a), k); }
Expr at(int t, std::vector<IndexExpr> idx) { return make_access(t, std::move(idx)); }
Expr bin(BinaryOp op, Expr a, Expr b) { return make_binary(op, std::move(a), std::move(b)); }
Expr un(UnaryOp op, Expr a, double p = 0) { return make_unary(op, std::move(a), p); }

OpDesc op_of(std::string name, std::vector<TensorDecl> inputs, std::vector<VarDecl> vars, std::vector<int> outputs,
             Expr body) {
  OpDesc op;
  op.name = std::move(name);
  op.inputs = std::move(inputs);
  op.vars = std::move(vars);
  op.output_vars = std::move(outputs);
  op.body = std::move(body);
  validate(op);
  return op;
}

// C[i, j] = Sum(k: A[i, k] * B[k, j]). Vars i=0, j=1, k=2.
OpDesc matmul() {
  return op_of("matmul", {{"A", 2}, {"B", 2}}, {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}}, {0, 1},
               make_reduce(Reducer::kSum, {2}, bin(BinaryOp::kMul, at(0, {v(0), v(2)}), at(1, {v(2), v(1)}))));
}

// Padded ("same") conv1d: Sum(ci, dx: data[b, ci, x + dx - 1] * filters[ci, co, dx]).
// Vars b=0, co=1, x=2, ci=3, dx=4.
OpDesc conv1d_padded() {
  Expr data = at(0, {v(0), v(3), add(add(v(2), v(4)), c(-1))});
  Expr filters = at(1, {v(3), v(1), v(4)});
  return op_of("conv1d_padded", {{"data", 3}, {"filters", 3}},
               {{"b", true, {}}, {"co", true, {}}, {"x", true, {}}, {"ci", false, {}}, {"dx", false, {}}}, {0, 1, 2},
               make_reduce(Reducer::kSum, {3, 4}, bin(BinaryOp::kMul, data, filters)));
}

// out[i] = A[2*i + 1] - B[(i + 1) // 3]: a stride of 2, and a floor division along the batched
// variable (read lane by lane); both run off their tensors at the end.
OpDesc strided() {
  return op_of("strided", {{"A", 1}, {"B", 1}}, {{"i", true, {}}}, {0},
               bin(BinaryOp::kSub, at(0, {add(mul(v(0), 2), c(1))}), at(1, {index_floordiv(add(v(0), c(1)), 3)})));
}

// out[i, j] = A[(i + 1) // 2, j // 3] * B[j mod 7]: A's index read once per batch along j (one
// element at a time when batched along i), B's lane by lane. Vars i=0, j=1.
OpDesc floor_divided() {
  return op_of("floor_divided", {{"A", 2}, {"B", 1}}, {{"i", true, {}}, {"j", true, {}}}, {0, 1},
               bin(BinaryOp::kMul, at(0, {index_floordiv(add(v(0), c(1)), 2), index_floordiv(v(1), 3)}),
                   at(1, {index_mod(v(1), 7)})));
}

// Row softmax: exp(x[i, j] - M(i)) / Sum(k: exp(x[i, k] - M(i))), M(i) = Max(q: x[i, q]) shared.
// Vars i=0, j=1, k=2, q=3.
OpDesc softmax() {
  Expr m = make_reduce(Reducer::kMax, {3}, at(0, {v(0), v(3)}));
  Expr num = un(UnaryOp::kExp, bin(BinaryOp::kSub, at(0, {v(0), v(1)}), m));
  Expr den = make_reduce(Reducer::kSum, {2}, un(UnaryOp::kExp, bin(BinaryOp::kSub, at(0, {v(0), v(2)}), m)));
  return op_of("softmax", {{"x", 2}}, {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}, {"q", false, {}}}, {0, 1},
               bin(BinaryOp::kDiv, num, den));
}

// Layer norm without affine parameters over rows of width n: (x[i, j] - mean) / sqrt(var + 1e-5).
// Vars i=0, j=1, k=2, k2=3.
OpDesc layer_norm(int64_t n) {
  Expr mean = bin(BinaryOp::kDiv, make_reduce(Reducer::kSum, {2}, at(0, {v(0), v(2)})), make_const(double(n)));
  Expr dev = un(UnaryOp::kPow, bin(BinaryOp::kSub, at(0, {v(0), v(3)}), mean), 2.0);
  Expr var = bin(BinaryOp::kDiv, make_reduce(Reducer::kSum, {3}, dev), make_const(double(n)));
  Expr body = bin(BinaryOp::kDiv, bin(BinaryOp::kSub, at(0, {v(0), v(1)}), mean),
                  un(UnaryOp::kSqrt, bin(BinaryOp::kAdd, var, make_const(1e-5))));
  return op_of("layer_norm", {{"x", 2}}, {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}, {"k2", false, {}}},
               {0, 1}, body);
}

// out[i] = Sum(j: x[i, j] * Max(q: x[i, q])): the top-level reduction holds an inner one.
// Vars i=0, j=1, q=2.
OpDesc scaled_row_sum() {
  Expr m = make_reduce(Reducer::kMax, {2}, at(0, {v(0), v(2)}));
  return op_of("scaled_row_sum", {{"x", 2}}, {{"i", true, {}}, {"j", false, {}}, {"q", false, {}}}, {0},
               make_reduce(Reducer::kSum, {1}, bin(BinaryOp::kMul, at(0, {v(0), v(1)}), m)));
}

// out[i] = Max(k: A[i, k] - B[k]). Vars i=0, k=1.
OpDesc row_max() {
  return op_of("row_max", {{"A", 2}, {"B", 1}}, {{"i", true, {}}, {"k", false, {}}}, {0},
               make_reduce(Reducer::kMax, {1}, bin(BinaryOp::kSub, at(0, {v(0), v(1)}), at(1, {v(1)}))));
}

// out[i, j] = cumsum(A[i, :])[j] * A[i, j]: an opaque function over whole rows. Vars i=0, j=1.
OpDesc row_cumsum() {
  OpDesc op;
  op.name = "row_cumsum";
  op.inputs = {{"A", 2}};
  op.vars = {{"i", true, {}}, {"j", true, {}}};
  op.output_vars = {0, 1};
  op.opaque_names = {"cumsum"};
  Expr f = make_opaque(0, {SliceArg{0, {v(0), std::nullopt}}}, {v(1)}, {index_extent(0, 1)});
  op.body = bin(BinaryOp::kMul, f, at(0, {v(0), v(1)}));
  validate(op);
  return op;
}

Array cumsum(int, const std::vector<Array>& args) {
  Array r;
  r.shape = args.at(0).shape;
  double acc = 0;
  for (double x : args.at(0).data) r.data.push_back(acc += x);
  return r;
}

// ---- helpers

int64_t volume(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Row-major position of idx in a box of the given sizes.
int64_t flat_index(const std::vector<int64_t>& idx, const std::vector<int64_t>& lo, const std::vector<int64_t>& size) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off = off * size[d] + (idx[d] - lo[d]);
  return off;
}

// Calls f(idx) for every index of the box, row-major.
void for_each(const std::vector<Range>& box, const std::function<void(const std::vector<int64_t>&)>& f) {
  for (const Range& r : box)
    if (r.empty()) return;
  std::vector<int64_t> idx(box.size());
  for (size_t d = 0; d < box.size(); ++d) idx[d] = box[d].lo;
  while (true) {
    f(idx);
    size_t d = box.size();
    while (d-- > 0) {
      if (++idx[d] <= box[d].hi) break;
      idx[d] = box[d].lo;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// The row-major copy of `region` of a tensor.
std::vector<double> cut(const std::vector<double>& full, const Shape& shape, const Box& region) {
  std::vector<double> out;
  if (region.empty()) return out;
  const std::vector<int64_t> zero(shape.size(), 0);
  for_each(region.dims, [&](const std::vector<int64_t>& idx) { out.push_back(full[flat_index(idx, zero, shape)]); });
  return out;
}

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct Problem {
  OpDesc op;
  std::vector<Shape> shapes;
  std::vector<int64_t> extents;
  OpaqueCall call = nullptr;
  std::vector<std::vector<double>> data;

  Problem(OpDesc o, std::vector<Shape> s, std::vector<int64_t> e, OpaqueCall f = nullptr)
      : op(std::move(o)), shapes(std::move(s)), extents(std::move(e)), call(std::move(f)) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-2.0, 2.0);
    for (const Shape& shape : shapes) {
      data.emplace_back(volume(shape));
      for (double& x : data.back()) x = u(rng);
    }
  }

  std::vector<Range> full_ranges() const {
    std::vector<Range> r;
    for (int64_t e : extents) r.push_back({0, e - 1});
    return r;
  }

  std::vector<double> whole(int threads) const {
    std::vector<ArrayView> views;
    for (size_t t = 0; t < shapes.size(); ++t) views.push_back({data[t].data(), shapes[t]});
    int64_t total = 1;
    for (int o : op.output_vars) total *= extents[o];
    std::vector<double> out(total, -777.0);
    interpret(op, views, extents, out.data(), call, threads);
    return out;
  }

  // Evaluates the share over `ranges` with the inputs cut to `regions`.
  std::vector<double> share(const std::vector<Range>& ranges, const std::vector<Box>& regions, int threads) const {
    std::vector<std::vector<double>> held;
    std::vector<RegionView> views;
    for (size_t t = 0; t < shapes.size(); ++t) held.push_back(cut(data[t], shapes[t], regions[t]));
    for (size_t t = 0; t < shapes.size(); ++t) views.push_back({held[t].data(), regions[t], shapes[t]});
    int64_t total = 1;
    for (int o : op.output_vars) total *= ranges[o].size();
    std::vector<double> out(total, -777.0);
    interpret_region(op, views, extents, ranges, out.data(), call, threads);
    return out;
  }

  std::vector<Box> regions(const std::vector<Range>& ranges) const { return input_regions(op, ranges, shapes); }

  // The block of a whole output that the output variables' ranges select.
  std::vector<double> block(const std::vector<double>& whole_out, const std::vector<Range>& ranges) const {
    std::vector<Range> box;
    std::vector<int64_t> zero, size;
    for (int o : op.output_vars) {
      box.push_back(ranges[o]);
      zero.push_back(0);
      size.push_back(extents[o]);
    }
    std::vector<double> out;
    for_each(box, [&](const std::vector<int64_t>& idx) { out.push_back(whole_out[flat_index(idx, zero, size)]); });
    return out;
  }
};

// A random non-empty sub-range of [0, extent - 1], the whole of it one time in four.
Range pick(int64_t extent, std::mt19937& rng) {
  if (rng() % 4 == 0) return {0, extent - 1};
  std::uniform_int_distribution<int64_t> u(0, extent - 1);
  int64_t a = u(rng), b = u(rng);
  return {std::min(a, b), std::max(a, b)};
}

// Grows each non-empty region at random within its tensor (a buffer may hold more than is read).
std::vector<Box> grow(std::vector<Box> regions, const std::vector<Shape>& shapes, std::mt19937& rng) {
  for (size_t t = 0; t < regions.size(); ++t) {
    if (regions[t].empty()) continue;
    for (size_t d = 0; d < shapes[t].size(); ++d) {
      Range& r = regions[t].dims[d];
      r.lo = std::uniform_int_distribution<int64_t>(0, r.lo)(rng);
      r.hi = std::uniform_int_distribution<int64_t>(r.hi, shapes[t][d] - 1)(rng);
    }
  }
  return regions;
}

std::string describe(const std::vector<Range>& ranges) {
  std::string s;
  for (const Range& r : ranges) s += "[" + std::to_string(r.lo) + "," + std::to_string(r.hi) + "]";
  return s;
}

void expect_bitwise(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t e = 0; e < want.size() && bad < 5; ++e)
    if (!same(got[e], want[e])) {
      ++bad;
      ADD_FAILURE() << what << " element " << e << ": got " << got[e] << ", want " << want[e];
    }
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t e = 0; e < want.size() && bad < 5; ++e)
    if (!(std::fabs(got[e] - want[e]) <= 1e-12 * std::max(1.0, std::fabs(want[e])))) {
      ++bad;
      ADD_FAILURE() << what << " element " << e << ": got " << got[e] << ", want " << want[e];
    }
}

// Random ranges of the output variables, reduction variables whole: the block of interpret()'s
// output, bit for bit, with regions exactly as analysed and grown.
void check_output_blocks(const Problem& p, int trials) {
  std::mt19937 rng(42);
  const std::vector<double> whole = p.whole(2);
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<Range> ranges = p.full_ranges();
    for (int o : p.op.output_vars) ranges[o] = pick(p.extents[o], rng);
    std::vector<Box> regions = p.regions(ranges);
    if (trial % 2) regions = grow(regions, p.shapes, rng);
    const int threads = trial % 3 == 0 ? 3 : 1;
    expect_bitwise(p.share(ranges, regions, threads), p.block(whole, ranges),
                   p.op.name + " ranges " + describe(ranges) + " threads " + std::to_string(threads));
  }
}

using Oracle = std::function<double(const std::vector<int64_t>& out_idx, const std::vector<Range>& ranges)>;

// Random ranges of every variable in `restricted` (output variables and the top-level
// reduction's): direct loops over the sub-ranges, to 1e-12.
void check_partial_reductions(const Problem& p, const std::vector<int>& restricted, const Oracle& oracle, int trials) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<Range> ranges = p.full_ranges();
    for (int var : restricted) ranges[var] = pick(p.extents[var], rng);
    std::vector<Box> regions = p.regions(ranges);
    if (trial % 2) regions = grow(regions, p.shapes, rng);
    std::vector<Range> out_box;
    for (int o : p.op.output_vars) out_box.push_back(ranges[o]);
    std::vector<double> want;
    for_each(out_box, [&](const std::vector<int64_t>& idx) { want.push_back(oracle(idx, ranges)); });
    expect_near(p.share(ranges, regions, trial % 3 == 0 ? 3 : 1), want, p.op.name + " ranges " + describe(ranges));
  }
}

// ---- full ranges and whole regions: interpret() exactly

TEST(InterpretRegion, WholeRangesAndRegionsAreInterpret) {
  std::vector<Problem> problems = {
      Problem(matmul(), {{37, 29}, {29, 300}}, {37, 300, 29}),
      Problem(conv1d_padded(), {{2, 3, 70}, {3, 4, 3}}, {2, 4, 70, 3, 3}),
      Problem(strided(), {{590}, {90}}, {300}),
      Problem(softmax(), {{13, 300}}, {13, 300, 300, 300}),
      Problem(layer_norm(70), {{13, 70}}, {13, 70, 70, 70}),
      Problem(row_max(), {{20, 300}, {300}}, {20, 300}),
      Problem(row_cumsum(), {{30, 50}}, {30, 50}, cumsum),
  };
  for (const Problem& p : problems) {
    std::vector<Box> whole_regions;
    for (const Shape& s : p.shapes) {
      Box b;
      for (int64_t n : s) b.dims.push_back({0, n - 1});
      whole_regions.push_back(b);
    }
    for (int threads : {1, 3})
      expect_bitwise(p.share(p.full_ranges(), whole_regions, threads), p.whole(threads), p.op.name);
  }
}

// ---- only output variables restricted: blocks of interpret()

TEST(InterpretRegion, MatmulBlocks) {
  check_output_blocks(Problem(matmul(), {{37, 29}, {29, 300}}, {37, 300, 29}), 30);
  check_output_blocks(Problem(matmul(), {{300, 29}, {29, 3}}, {300, 3, 29}), 20);  // batched along i
}

TEST(InterpretRegion, PaddedConv1dBlocksReadTheHalo) {
  Problem p(conv1d_padded(), {{2, 3, 70}, {3, 4, 3}}, {2, 4, 70, 3, 3});
  check_output_blocks(p, 30);
  // A block in the middle holds a halo of one column on each side; at the edges the padding is
  // outside the tensor, so no region holds it.
  std::vector<Range> ranges = {{0, 1}, {0, 3}, {10, 19}, {0, 2}, {0, 2}};
  std::vector<Box> regions = p.regions(ranges);
  EXPECT_EQ(regions[0].dims[2], (Range{9, 20}));
  ranges[2] = {0, 9};
  EXPECT_EQ(p.regions(ranges)[0].dims[2], (Range{0, 10}));
  expect_bitwise(p.share(ranges, p.regions(ranges), 1), p.block(p.whole(1), ranges), "left edge");
}

TEST(InterpretRegion, StridedAndFloorDividedReads) {
  check_output_blocks(Problem(strided(), {{590}, {90}}, {300}), 40);
  check_output_blocks(Problem(strided(), {{41}, {5}}, {21}), 40);
}

TEST(InterpretRegion, FloorDivisionAndModuloInIndices) {
  check_output_blocks(Problem(floor_divided(), {{9, 100}, {7}}, {17, 300}), 30);  // batched along j
  check_output_blocks(Problem(floor_divided(), {{150, 2}, {7}}, {300, 5}), 30);   // batched along i
}

TEST(InterpretRegion, SoftmaxAndLayerNormRowsWithInnerReductions) {
  check_output_blocks(Problem(softmax(), {{13, 300}}, {13, 300, 300, 300}), 20);
  check_output_blocks(Problem(softmax(), {{300, 5}}, {300, 5, 5, 5}), 20);
  check_output_blocks(Problem(layer_norm(70), {{13, 70}}, {13, 70, 70, 70}), 20);
}

TEST(InterpretRegion, MaxReductionBlocks) {
  check_output_blocks(Problem(row_max(), {{20, 300}, {300}}, {20, 300}), 20);
}

TEST(InterpretRegion, OpaqueSlicesHeldWhole) {
  // The analysed region of A holds whole rows, as the opaque function takes them.
  check_output_blocks(Problem(row_cumsum(), {{30, 50}}, {30, 50}, cumsum), 20);
  check_output_blocks(Problem(row_cumsum(), {{300, 5}}, {300, 5}, cumsum), 20);
}

// ---- a reduction variable restricted: partial reductions

TEST(InterpretRegion, MatmulPartialSums) {
  Problem p(matmul(), {{37, 29}, {29, 300}}, {37, 300, 29});
  const auto& A = p.data[0];
  const auto& B = p.data[1];
  check_partial_reductions(
      p, {0, 1, 2},
      [&](const std::vector<int64_t>& o, const std::vector<Range>& r) {
        double s = 0;
        for (int64_t k = r[2].lo; k <= r[2].hi; ++k) s += A[o[0] * 29 + k] * B[k * 300 + o[1]];
        return s;
      },
      30);
}

TEST(InterpretRegion, PaddedConv1dPartialSums) {
  Problem p(conv1d_padded(), {{2, 3, 70}, {3, 4, 3}}, {2, 4, 70, 3, 3});
  const auto& data = p.data[0];
  const auto& filters = p.data[1];
  check_partial_reductions(
      p, {0, 1, 2, 3, 4},
      [&](const std::vector<int64_t>& o, const std::vector<Range>& r) {
        double s = 0;
        for (int64_t ci = r[3].lo; ci <= r[3].hi; ++ci)
          for (int64_t dx = r[4].lo; dx <= r[4].hi; ++dx) {
            const int64_t x = o[2] + dx - 1;
            const double d = x < 0 || x >= 70 ? 0.0 : data[(o[0] * 3 + ci) * 70 + x];
            s += d * filters[(ci * 4 + o[1]) * 3 + dx];
          }
        return s;
      },
      40);
}

TEST(InterpretRegion, PartialMax) {
  Problem p(row_max(), {{20, 300}, {300}}, {20, 300});
  const auto& A = p.data[0];
  const auto& B = p.data[1];
  check_partial_reductions(
      p, {0, 1},
      [&](const std::vector<int64_t>& o, const std::vector<Range>& r) {
        double m = -INFINITY;
        for (int64_t k = r[1].lo; k <= r[1].hi; ++k) m = std::max(m, A[o[0] * 300 + k] - B[k]);
        return m;
      },
      30);
}

TEST(InterpretRegion, PartialSumAroundAWholeInnerReduction) {
  // j (the top-level reduction) restricted, q (inside it) whole: the inner Max sees whole rows.
  Problem p(scaled_row_sum(), {{11, 300}}, {11, 300, 300});
  const auto& x = p.data[0];
  check_partial_reductions(
      p, {0, 1},
      [&](const std::vector<int64_t>& o, const std::vector<Range>& r) {
        double m = -INFINITY, s = 0;
        for (int64_t q = 0; q < 300; ++q) m = std::max(m, x[o[0] * 300 + q]);
        for (int64_t j = r[1].lo; j <= r[1].hi; ++j) s += x[o[0] * 300 + j] * m;
        return s;
      },
      30);
}

// ---- regions that do not hold what is read

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(InterpretRegion, ReadOutsideTheRegionIsAnError) {
  // Batched reads: A's region misses the last row the block reads.
  Problem p(matmul(), {{37, 29}, {29, 300}}, {37, 300, 29});
  std::vector<Range> ranges = {{3, 9}, {0, 299}, {0, 28}};
  std::vector<Box> regions = p.regions(ranges);
  regions[0].dims[0].hi = 8;
  std::string msg = error_of([&] { p.share(ranges, regions, 1); });
  EXPECT_NE(msg.find("op 'matmul': input 'A' is read at A[9, 0], inside its shape [37, 29] but outside the region "
                     "held [3..8, 0..28]"),
            std::string::npos)
      << msg;
  // Reads one at a time (A[i] does not change along the batched j) and lane by lane (a floor
  // division along the batched i).
  OpDesc outer = op_of("outer", {{"A", 1}, {"B", 1}}, {{"i", true, {}}, {"j", true, {}}}, {0, 1},
                       bin(BinaryOp::kMul, at(0, {v(0)}), at(1, {v(1)})));
  Problem q(outer, {{10}, {100}}, {10, 100});
  ranges = {{2, 5}, {0, 99}};
  regions = q.regions(ranges);
  regions[0].dims[0] = {3, 5};
  msg = error_of([&] { q.share(ranges, regions, 1); });
  EXPECT_NE(msg.find("input 'A' is read at A[2]"), std::string::npos) << msg;
  Problem s(strided(), {{590}, {90}}, {300});
  ranges = {{30, 99}};
  regions = s.regions(ranges);
  regions[1].dims[0].lo += 1;
  msg = error_of([&] { s.share(ranges, regions, 1); });
  EXPECT_NE(msg.find("input 'B' is read at B[10]"), std::string::npos) << msg;
}

TEST(InterpretRegion, ScalarInputHeldOrNot) {
  OpDesc op =
      op_of("scale", {{"A", 1}, {"s", 0}}, {{"i", true, {}}}, {0}, bin(BinaryOp::kMul, at(0, {v(0)}), at(1, {})));
  Problem p(op, {{300}, {}}, {300});
  std::vector<Range> ranges = {{7, 280}};
  std::vector<Box> regions = p.regions(ranges);
  EXPECT_FALSE(regions[1].empty());  // a rank-0 box: its one element
  expect_bitwise(p.share(ranges, regions, 1), p.block(p.whole(1), ranges), "scale");
  regions[1] = Box::nothing(0);
  std::string msg = error_of([&] { p.share(ranges, regions, 1); });
  EXPECT_NE(msg.find("input 's' is read at s[], inside its shape [] but outside the region held (nothing)"),
            std::string::npos)
      << msg;
}

TEST(InterpretRegion, OpaqueSliceNotHeldWholeIsAnError) {
  Problem p(row_cumsum(), {{30, 50}}, {30, 50}, cumsum);
  std::vector<Range> ranges = {{4, 6}, {10, 19}};
  std::vector<Box> regions = {Box{{{4, 6}, {0, 19}}}};  // enough for A[i, j], not for the rows
  std::string msg = error_of([&] { p.share(ranges, regions, 1); });
  EXPECT_NE(msg.find("op 'row_cumsum': opaque function 'cumsum' needs A[4, :] of shape [30, 50], but the region of "
                     "'A' held is [4..6, 0..19]"),
            std::string::npos)
      << msg;
}

TEST(InterpretRegion, BadRangesAndRegionsAreShapeErrors) {
  OpDesc op = matmul();
  const std::vector<Shape> shapes = {{37, 29}, {29, 300}};
  const std::vector<int64_t> extents = {37, 300, 29};
  std::vector<double> zeros(37 * 300 * 2), out(37 * 300);
  auto run = [&](const std::vector<Range>& ranges, const std::vector<Box>& regions) {
    interpret_region(op, {{zeros.data(), regions[0], shapes[0]}, {zeros.data(), regions[1], shapes[1]}}, extents,
                     ranges, out.data(), nullptr, 1);
  };
  std::vector<Range> ranges = {{0, 37}, {0, 299}, {0, 28}};
  std::vector<Box> regions = {Box{{{0, 36}, {0, 28}}}, Box{{{0, 28}, {0, 299}}}};
  EXPECT_THROW(run(ranges, regions), ShapeError);  // i past its extent
  ranges[0] = {0, 36};
  EXPECT_NO_THROW(run(ranges, regions));
  regions[1].dims[1].hi = 300;
  EXPECT_THROW(run(ranges, regions), ShapeError);  // outside B
  regions[1].dims.pop_back();
  EXPECT_THROW(run(ranges, regions), ShapeError);  // rank 1 for B
}

TEST(InterpretRegion, InputNotReadNeedsNoBuffer) {
  // B is read only outside its shape: its region is empty, its buffer null.
  OpDesc op = op_of("pick", {{"A", 1}, {"B", 1}}, {{"i", true, {}}},  {0},
                    make_select(bin(BinaryOp::kLt, make_index_value(v(0)), make_const(5)), at(0, {v(0)}),
                                at(1, {add(v(0), c(100))})));
  Problem p(op, {{10}, {10}}, {10});
  std::vector<Range> ranges = {{0, 4}};
  std::vector<Box> regions = p.regions(ranges);
  regions[1] = Box::nothing(1);  // B[i + 100] is always outside B
  EXPECT_TRUE(p.regions(ranges)[1].empty());
  expect_bitwise(p.share(ranges, regions, 1), p.block(p.whole(1), ranges), "pick");
}

}  // namespace
}  // namespace tilewise::tdl

// Native tile kernels (kernels/cpu/tile_kernels.h) against the TDL formulas written as plain
// double-precision loops (the oracle). Every case restricts the op's variables to random sub-ranges
// (uneven, partial reductions included) and hands the kernel only the regions the oracle reads,
// sometimes widened by a random margin, so region offsets, leading dimensions and padding are all
// exercised. Inputs are float-representable, so the kernels see exactly the oracle's values.
#include "kernels/cpu/tile_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tilewise::kernels {
namespace {

using Index = std::vector<int64_t>;
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A full input tensor in double precision that records the bounding box of its in-tensor reads.
struct Tensor {
  Index shape;
  std::vector<double> data;
  std::vector<Span> touched;

  explicit Tensor(Index s = {}) : shape(std::move(s)), touched(shape.size()) {
    data.assign(static_cast<size_t>(numel()), 0.0);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return n;
  }
  bool read() const { return any_read; }
  /// The element at idx, or 0 outside the tensor (TDL padding).
  double operator()(const Index& idx) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (idx[d] < 0 || idx[d] >= shape[d]) return 0.0;
      off = off * shape[d] + idx[d];
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      Span& t = touched[d];
      if (!any_read) {
        t = {idx[d], idx[d]};
      } else {
        t.lo = std::min(t.lo, idx[d]);
        t.hi = std::max(t.hi, idx[d]);
      }
    }
    any_read = true;
    return data[off];
  }
  bool any_read = false;
};

Tensor random_tensor(Index shape, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  Tensor t(std::move(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& v : t.data) v = static_cast<double>(static_cast<float>(u(rng)));
  return t;
}

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

/// A random non-empty sub-range of [0, extent); the full range a quarter of the time.
Span random_span(int64_t extent, std::mt19937& rng) {
  if (uniform(rng, 0, 3) == 0) return {0, extent - 1};
  int64_t a = uniform(rng, 0, extent - 1), b = uniform(rng, 0, extent - 1);
  return {std::min(a, b), std::max(a, b)};
}

/// One device's share of an op, before the regions are known.
struct OpCase {
  std::string type;
  std::string attrs = "{}";
  std::vector<std::string> names;
  std::vector<int> outs;
  Index extents;
  std::vector<Span> vars;
  std::vector<Tensor> inputs;

  std::string describe() const {
    std::ostringstream s;
    s << type << " " << attrs << " vars";
    for (size_t v = 0; v < names.size(); ++v) s << " " << names[v] << "=[" << vars[v].lo << "," << vars[v].hi << "]/" << extents[v];
    s << " inputs";
    for (const Tensor& t : inputs) {
      s << " (";
      for (int64_t e : t.shape) s << e << ",";
      s << ")";
    }
    return s.str();
  }
};

/// An op case with random inputs; the first `splittable` variables get random sub-ranges, the
/// others (nested reductions) their full extent.
OpCase make_case(std::string type, std::vector<std::string> names, std::vector<int> outs, Index extents,
                 std::vector<Index> shapes, std::mt19937& rng, int splittable = -1, std::string attrs = "{}") {
  OpCase c;
  c.type = std::move(type);
  c.attrs = std::move(attrs);
  c.names = std::move(names);
  c.outs = std::move(outs);
  c.extents = std::move(extents);
  if (splittable < 0) splittable = static_cast<int>(c.extents.size());
  for (size_t v = 0; v < c.extents.size(); ++v) {
    c.vars.push_back(static_cast<int>(v) < splittable ? random_span(c.extents[v], rng) : Span{0, c.extents[v] - 1});
  }
  for (Index& s : shapes) c.inputs.push_back(random_tensor(std::move(s), rng));
  return c;
}

/// An output element's value; v holds every variable's value, the output variables already set
/// (the oracle sets the reduction variables itself, over their restricted ranges).
using Elem = std::function<double(OpCase&, Index& v)>;

/// sum of f() over the restricted ranges of the variables `red`.
template <class F>
double sum_over(const OpCase& c, const std::vector<int>& red, Index& v, F f) {
  double s = 0;
  std::function<void(size_t)> rec = [&](size_t r) {
    if (r == red.size()) {
      s += f();
      return;
    }
    for (v[red[r]] = c.vars[red[r]].lo; v[red[r]] <= c.vars[red[r]].hi; ++v[red[r]]) rec(r + 1);
  };
  rec(0);
  return s;
}

/// The oracle's output tile, row-major over the output variables' ranges.
std::vector<double> oracle(OpCase& c, const Elem& elem) {
  std::vector<double> out;
  Index v(c.names.size(), 0);
  std::function<void(size_t)> rec = [&](size_t p) {
    if (p == c.outs.size()) {
      out.push_back(elem(c, v));
      return;
    }
    int var = c.outs[p];
    for (v[var] = c.vars[var].lo; v[var] <= c.vars[var].hi; ++v[var]) rec(p + 1);
  };
  rec(0);
  return out;
}

/// Float buffers of the inputs' regions, and the call that reads them.
struct Prepared {
  std::vector<std::vector<float>> buffers;
  TileCall call;
  std::vector<float> out;
};

// Regions: what the oracle read, widened by a random margin (clipped to the tensor) half the time.
Prepared prepare(const OpCase& c, std::mt19937& rng) {
  Prepared p;
  p.buffers.resize(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.inputs[i];
    TileIn in;
    in.shape = t.shape;
    const bool widen = uniform(rng, 0, 1) == 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (!t.any_read) {
        in.region.push_back({0, -1});
        continue;
      }
      Span r = t.touched[d];
      if (widen) {
        r.lo = std::max<int64_t>(0, r.lo - uniform(rng, 0, 2));
        r.hi = std::min<int64_t>(t.shape[d] - 1, r.hi + uniform(rng, 0, 2));
      }
      in.region.push_back(r);
    }
    int64_t n = 1;
    for (const Span& r : in.region) n *= r.size();
    std::vector<float>& buf = p.buffers[i];
    buf.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
    // Row-major walk of the region box.
    Index idx(t.shape.size());
    for (int64_t e = 0; e < n; ++e) {
      int64_t rest = e, off = 0;
      for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) {
        idx[d] = in.region[d].lo + rest % in.region[d].size();
        rest /= in.region[d].size();
      }
      for (size_t d = 0; d < t.shape.size(); ++d) off = off * t.shape[d] + idx[d];
      buf[e] = static_cast<float>(t.data[off]);
    }
    in.data = n > 0 ? buf.data() : nullptr;
    p.call.inputs.push_back(in);
  }
  TileCall& call = p.call;
  call.type = c.type;
  call.attrs_json = c.attrs;
  call.var_names = c.names;
  call.output_vars = c.outs;
  call.extents = c.extents;
  call.vars = c.vars;
  int64_t n = 1;
  for (int v : c.outs) {
    call.output_shape.push_back(c.extents[v]);
    n *= c.vars[v].size();
  }
  p.out.assign(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
  call.out = p.out.data();
  return p;
}

bool close(double got, double want, double tol) {
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

/// Runs the case natively and compares with the oracle.
void expect_native(OpCase c, const Elem& elem, std::mt19937& rng, double tol = 1e-5) {
  SCOPED_TRACE(c.describe());
  std::vector<double> want = oracle(c, elem);
  Prepared p = prepare(c, rng);
  ASSERT_TRUE(run_native(p.call)) << "declined";
  ASSERT_EQ(p.out.size(), want.size());
  int bad = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    if (!close(p.out[e], want[e], tol) && ++bad <= 5) {
      ADD_FAILURE() << "element " << e << ": got " << p.out[e] << ", want " << want[e];
    }
  }
  EXPECT_EQ(bad, 0);
}

/// Expects the call to be declined with the output untouched.
void expect_declined(const TileCall& call) {
  std::vector<float> before(call.out, call.out + 1);
  EXPECT_FALSE(run_native(call)) << call.type;
  EXPECT_TRUE(std::isnan(call.out[0]) || call.out[0] == before[0]);
}

std::vector<std::string> numbered(const char* prefix, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

std::vector<int> iota(int n, int from = 0) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

Index random_shape(std::mt19937& rng, int rank, int64_t max_extent = 6) {
  Index s;
  for (int d = 0; d < rank; ++d) s.push_back(uniform(rng, 1, max_extent));
  return s;
}

// ------------------------------------------------------------------------------------ products

struct MatmulVariant {
  const char* type;
  bool ta, tb;
};

TEST(TileKernelGemm, MatmulVariantsOnRandomBlocks) {
  std::mt19937 rng(1);
  for (MatmulVariant mv : {MatmulVariant{"matmul", false, false}, {"matmul_tn", true, false}, {"matmul_nt", false, true},
                           {"matmul_tt", true, true}}) {
    for (int trial = 0; trial < 25; ++trial) {
      int64_t m = uniform(rng, 1, 40), n = uniform(rng, 1, 40), k = uniform(rng, 1, 40);
      Index as = mv.ta ? Index{k, m} : Index{m, k}, bs = mv.tb ? Index{n, k} : Index{k, n};
      OpCase c = make_case(mv.type, {"i", "j", "k"}, {0, 1}, {m, n, k}, {as, bs}, rng);
      expect_native(c, [mv](OpCase& c, Index& v) {
        return sum_over(c, {2}, v, [&] {
          double a = mv.ta ? c.inputs[0]({v[2], v[0]}) : c.inputs[0]({v[0], v[2]});
          double b = mv.tb ? c.inputs[1]({v[1], v[2]}) : c.inputs[1]({v[2], v[1]});
          return a * b;
        });
      }, rng);
    }
  }
}

TEST(TileKernelGemm, BatchMatmulVariants) {
  std::mt19937 rng(2);
  struct V {
    const char* type;
    bool ta, tb;
  };
  for (V bv : {V{"batch_matmul", false, false}, V{"batch_matmul_nt", false, true}, V{"batch_matmul_tn", true, false}}) {
    for (int trial = 0; trial < 15; ++trial) {
      int64_t bt = uniform(rng, 1, 4), m = uniform(rng, 1, 20), n = uniform(rng, 1, 20), k = uniform(rng, 1, 20);
      Index as = bv.ta ? Index{bt, k, m} : Index{bt, m, k}, bs = bv.tb ? Index{bt, n, k} : Index{bt, k, n};
      OpCase c = make_case(bv.type, {"n", "i", "j", "k"}, {0, 1, 2}, {bt, m, n, k}, {as, bs}, rng);
      expect_native(c, [bv](OpCase& c, Index& v) {
        return sum_over(c, {3}, v, [&] {
          double a = bv.ta ? c.inputs[0]({v[0], v[3], v[1]}) : c.inputs[0]({v[0], v[1], v[3]});
          double b = bv.tb ? c.inputs[1]({v[0], v[2], v[3]}) : c.inputs[1]({v[0], v[3], v[2]});
          return a * b;
        });
      }, rng);
    }
  }
}

// linear: x[.., k] W[j, k] + b[j] for x of rank 1..3; k stays whole (the bias sits outside the sum).
TEST(TileKernelGemm, LinearWithBiasAnyRank) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    const int r = static_cast<int>(uniform(rng, 1, 3));
    Index lead = random_shape(rng, r - 1, 7);
    int64_t in = uniform(rng, 1, 30), out = uniform(rng, 1, 30);
    Index xs = lead, extents = lead;
    xs.push_back(in);
    extents.push_back(out);
    extents.push_back(in);
    std::vector<std::string> names = numbered("i", r);
    names.push_back("k");
    OpCase c = make_case("linear", names, iota(r), extents, {xs, {out, in}, {out}}, rng, r);
    expect_native(c, [r](OpCase& c, Index& v) {
      double s = sum_over(c, {r}, v, [&] {
        Index xi(v.begin(), v.begin() + r - 1);
        xi.push_back(v[r]);
        return c.inputs[0](xi) * c.inputs[1]({v[r - 1], v[r]});
      });
      return s + c.inputs[2]({v[r - 1]});
    }, rng);
  }
}

// linear_nobias and linear_grad_input (rank 2 and 3): partial sums over the reduction.
TEST(TileKernelGemm, LinearNobiasAndGradInputPartialReduction) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 30; ++trial) {
    const int r = static_cast<int>(uniform(rng, 2, 3));
    const bool grad = trial % 2 == 1;
    Index lead = random_shape(rng, r - 1, 7);
    int64_t red = uniform(rng, 1, 30), out = uniform(rng, 1, 30);
    Index xs = lead, extents = lead;
    xs.push_back(red);
    extents.push_back(out);
    extents.push_back(red);
    std::vector<std::string> names = numbered("i", r);
    names.push_back(grad ? "j" : "k");
    Index ws = grad ? Index{red, out} : Index{out, red};
    OpCase c = make_case(grad ? "linear_grad_input" : "linear_nobias", names, iota(r), extents, {xs, ws}, rng);
    expect_native(c, [r, grad](OpCase& c, Index& v) {
      return sum_over(c, {r}, v, [&] {
        Index xi(v.begin(), v.begin() + r - 1);
        xi.push_back(v[r]);
        double w = grad ? c.inputs[1]({v[r], v[r - 1]}) : c.inputs[1]({v[r - 1], v[r]});
        return c.inputs[0](xi) * w;
      });
    }, rng);
  }
}

// linear_grad_weight: Sum(r0.., dy[r.., j] x[r.., k]), every r restricted.
TEST(TileKernelGemm, LinearGradWeightOverSeveralLeadingAxes) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 30; ++trial) {
    const int nr = static_cast<int>(uniform(rng, 1, 3));
    Index lead = random_shape(rng, nr, 6);
    int64_t nj = uniform(rng, 1, 20), nk = uniform(rng, 1, 20);
    Index dys = lead, xs = lead, extents = {nj, nk};
    dys.push_back(nj);
    xs.push_back(nk);
    extents.insert(extents.end(), lead.begin(), lead.end());
    std::vector<std::string> names = {"j", "k"};
    for (auto& n : numbered("r", nr)) names.push_back(n);
    OpCase c = make_case("linear_grad_weight", names, {0, 1}, extents, {dys, xs}, rng);
    expect_native(c, [nr](OpCase& c, Index& v) {
      return sum_over(c, iota(nr, 2), v, [&] {
        Index a(v.begin() + 2, v.end()), b = a;
        a.push_back(v[0]);
        b.push_back(v[1]);
        return c.inputs[0](a) * c.inputs[1](b);
      });
    }, rng);
  }
}

TEST(TileKernelGemm, MatvecVecmatOuter) {
  std::mt19937 rng(6);
  for (int trial = 0; trial < 15; ++trial) {
    int64_t m = uniform(rng, 1, 30), n = uniform(rng, 1, 30);
    OpCase mv = make_case("matvec", {"i", "k"}, {0}, {m, n}, {{m, n}, {n}}, rng);
    expect_native(mv, [](OpCase& c, Index& v) {
      return sum_over(c, {1}, v, [&] { return c.inputs[0]({v[0], v[1]}) * c.inputs[1]({v[1]}); });
    }, rng);
    OpCase vm = make_case("vecmat", {"j", "i"}, {0}, {n, m}, {{m}, {m, n}}, rng);
    expect_native(vm, [](OpCase& c, Index& v) {
      return sum_over(c, {1}, v, [&] { return c.inputs[0]({v[1]}) * c.inputs[1]({v[1], v[0]}); });
    }, rng);
    OpCase op = make_case("outer", {"i", "j"}, {0, 1}, {m, n}, {{m}, {n}}, rng);
    expect_native(op, [](OpCase& c, Index& v) { return c.inputs[0]({v[0]}) * c.inputs[1]({v[1]}); }, rng);
  }
}

TEST(TileKernelGemm, LstmGates) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 15; ++trial) {
    int64_t b = uniform(rng, 1, 6), in = uniform(rng, 1, 20), hid = uniform(rng, 1, 20), g4 = 4 * uniform(rng, 1, 6);
    OpCase c = make_case("lstm_gates", {"b", "j", "k", "k'"}, {0, 1}, {b, g4, in, hid},
                         {{b, in}, {b, hid}, {g4, in}, {g4, hid}, {g4}, {g4}}, rng, 2);
    expect_native(c, [](OpCase& c, Index& v) {
      double x = sum_over(c, {2}, v, [&] { return c.inputs[0]({v[0], v[2]}) * c.inputs[2]({v[1], v[2]}); });
      double h = sum_over(c, {3}, v, [&] { return c.inputs[1]({v[0], v[3]}) * c.inputs[3]({v[1], v[3]}); });
      return x + c.inputs[4]({v[1]}) + h + c.inputs[5]({v[1]});
    }, rng);
  }
}

// ---------------------------------------------------------------------------------- element-wise

struct Unary {
  const char* type;
  const char* attrs;
  int arity;
  std::function<double(const std::vector<double>&)> f;
};

TEST(TileKernelElementwise, MapsOverRandomBlocksOfAnyRank) {
  const std::vector<Unary> ops = {
      {"identity", "{}", 1, [](const auto& x) { return x[0]; }},
      {"neg", "{}", 1, [](const auto& x) { return -x[0]; }},
      {"relu", "{}", 1, [](const auto& x) { return std::max(x[0], 0.0); }},
      {"relu_grad", "{}", 2, [](const auto& x) { return x[1] > 0 ? x[0] : 0.0; }},
      {"scale", R"({"alpha": 1.5, "beta": -2.0})", 1, [](const auto& x) { return 1.5 * x[0] - 2.0; }},
      {"add", "{}", 2, [](const auto& x) { return x[0] + x[1]; }},
      {"sub", "{}", 2, [](const auto& x) { return x[0] - x[1]; }},
      {"mul", "{}", 2, [](const auto& x) { return x[0] * x[1]; }},
      {"div", "{}", 2, [](const auto& x) { return x[0] / x[1]; }},
      {"axpy", R"({"alpha": -0.3})", 2, [](const auto& x) { return -0.3 * x[0] + x[1]; }},
      {"sgd", R"({"lr": 0.1, "weight_decay": 0.01})", 2,
       [](const auto& x) { return x[0] - 0.1 * (x[1] + 0.01 * x[0]); }},
      {"sgd", R"({"lr": 0.01, "weight_decay": 0.0})", 2, [](const auto& x) { return x[0] - 0.01 * x[1]; }},
      {"momentum_velocity", R"({"dampening": 0.1, "momentum": 0.8})", 2,
       [](const auto& x) { return 0.8 * x[0] + 0.9 * x[1]; }},
      {"momentum_weight", R"({"lr": 0.1})", 2, [](const auto& x) { return x[0] - 0.1 * x[1]; }},
      {"add_2", "{}", 2, [](const auto& x) { return x[0] + x[1]; }},
      {"add_3", "{}", 3, [](const auto& x) { return x[0] + x[1] + x[2]; }},
      {"add_1", "{}", 1, [](const auto& x) { return x[0]; }},
  };
  std::mt19937 rng(8);
  for (const Unary& op : ops) {
    for (int trial = 0; trial < 12; ++trial) {
      const int rank = static_cast<int>(uniform(rng, 0, 4));
      Index shape = random_shape(rng, rank);
      OpCase c = make_case(op.type, numbered("i", rank), iota(rank), shape, std::vector<Index>(op.arity, shape), rng,
                           -1, op.attrs);
      if (std::string(op.type) == "div") {  // keep divisors away from 0
        for (double& d : c.inputs[1].data) d = static_cast<double>(static_cast<float>(0.5 + std::fabs(d)));
      }
      expect_native(c, [&op](OpCase& c, Index& v) {
        std::vector<double> x;
        for (Tensor& t : c.inputs) x.push_back(t(v));
        return op.f(x);
      }, rng);
    }
  }
}

TEST(TileKernelElementwise, AddNOfManyInputs) {
  std::mt19937 rng(9);
  for (int n : {4, 7, 20}) {
    for (int trial = 0; trial < 5; ++trial) {
      const int rank = static_cast<int>(uniform(rng, 1, 3));
      Index shape = random_shape(rng, rank, 9);
      OpCase c = make_case("add_" + std::to_string(n), numbered("i", rank), iota(rank), shape,
                           std::vector<Index>(n, shape), rng);
      expect_native(c, [](OpCase& c, Index& v) {
        double s = 0;
        for (Tensor& t : c.inputs) s += t(v);
        return s;
      }, rng);
    }
  }
}

TEST(TileKernelElementwise, BroadcastsAlongOneAxis) {
  std::mt19937 rng(10);
  for (int trial = 0; trial < 10; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 1, 4));
    Index shape = random_shape(rng, rank);
    OpCase c = make_case("bias_add", numbered("i", rank), iota(rank), shape, {shape, {shape.back()}}, rng);
    expect_native(c, [rank](OpCase& c, Index& v) { return c.inputs[0](v) + c.inputs[1]({v[rank - 1]}); }, rng);

    Index nchw = random_shape(rng, static_cast<int>(uniform(rng, 3, 4)));
    const int r2 = static_cast<int>(nchw.size());
    OpCase ch = make_case("bias_add_channel", numbered("i", r2), iota(r2), nchw, {nchw, {nchw[1]}}, rng);
    expect_native(ch, [](OpCase& c, Index& v) { return c.inputs[0](v) + c.inputs[1]({v[1]}); }, rng);

    Index m = random_shape(rng, 2, 9);
    struct B {
      const char* type;
      int axis;
      bool times;
    };
    for (B b : {B{"add_row", 1, false}, B{"add_col", 0, false}, B{"mul_row", 1, true}, B{"mul_col", 0, true}}) {
      OpCase r = make_case(b.type, {"i", "j"}, {0, 1}, m, {m, {m[b.axis]}}, rng);
      expect_native(r, [b](OpCase& c, Index& v) {
        double x = c.inputs[0](v), y = c.inputs[1]({v[b.axis]});
        return b.times ? x * y : x + y;
      }, rng);
    }
  }
}

TEST(TileKernelElementwise, FillLikeReadsNothing) {
  std::mt19937 rng(11);
  for (int rank : {0, 1, 3}) {
    Index shape = random_shape(rng, rank);
    OpCase c = make_case("fill_like", numbered("i", rank), iota(rank), shape, {shape}, rng, -1, R"({"value": -2.5})");
    expect_native(c, [](OpCase&, Index&) { return -2.5; }, rng);
  }
}

TEST(TileKernelElementwise, MseLossBackwardReadsAScalar) {
  std::mt19937 rng(12);
  for (int trial = 0; trial < 10; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 1, 3));
    Index shape = random_shape(rng, rank);
    OpCase c = make_case("mse_loss_backward", numbered("i", rank), iota(rank), shape, {shape, shape, {}}, rng);
    const double numel = static_cast<double>(c.inputs[0].numel());
    expect_native(c, [numel](OpCase& c, Index& v) {
      return 2.0 * (c.inputs[0](v) - c.inputs[1](v)) * c.inputs[2]({}) / numel;
    }, rng);
  }
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(TileKernelElementwise, SelectReadsOneIndexOfAnAxis) {
  std::mt19937 rng(24);
  for (int trial = 0; trial < 20; ++trial) {
    const int nd = static_cast<int>(uniform(rng, 1, 4));
    Index shape = random_shape(rng, nd);
    const int ax = static_cast<int>(uniform(rng, 0, nd - 1));
    const int64_t index = uniform(rng, 0, shape[ax] - 1);
    Index out = shape;
    out.erase(out.begin() + ax);
    const int64_t axis_attr = uniform(rng, 0, 1) ? ax - nd : ax;
    OpCase c = make_case("select", numbered("i", nd - 1), iota(nd - 1), out, {shape}, rng, -1,
                         "{\"axis\": " + std::to_string(axis_attr) + ", \"index\": " + std::to_string(index) + "}");
    expect_native(c, [=](OpCase& c, Index& v) {
      Index x(v.begin(), v.end());
      x.insert(x.begin() + ax, index);
      return c.inputs[0](x);
    }, rng);
  }
}

// The LSTM pieces read the gates (b, 4 H) at shifted columns: quarter q of column j is j + q H.
TEST(TileKernelElementwise, LstmCellAndHiddenReadGateQuarters) {
  std::mt19937 rng(25);
  for (int trial = 0; trial < 15; ++trial) {
    const int64_t b = uniform(rng, 1, 4), h = uniform(rng, 1, 9);
    auto gate = [h](OpCase& c, int in, Index& v, int64_t q) { return c.inputs[in]({v[0], v[1] + q * h}); };
    OpCase cell = make_case("lstm_cell", {"b", "j"}, {0, 1}, {b, h}, {{b, 4 * h}, {b, h}}, rng);
    expect_native(cell, [&](OpCase& c, Index& v) {
      return sigmoid(gate(c, 0, v, 1)) * c.inputs[1](v) + sigmoid(gate(c, 0, v, 0)) * std::tanh(gate(c, 0, v, 2));
    }, rng);
    OpCase hid = make_case("lstm_hidden", {"b", "j"}, {0, 1}, {b, h}, {{b, 4 * h}, {b, h}}, rng);
    expect_native(hid, [&](OpCase& c, Index& v) { return sigmoid(gate(c, 0, v, 3)) * std::tanh(c.inputs[1](v)); }, rng);
    OpCase gc = make_case("lstm_cell_grad_c", {"b", "j"}, {0, 1}, {b, h}, {{b, h}, {b, 4 * h}}, rng);
    expect_native(gc, [&](OpCase& c, Index& v) { return c.inputs[0](v) * sigmoid(gate(c, 1, v, 1)); }, rng);
    OpCase gh = make_case("lstm_hidden_grad_c", {"b", "j"}, {0, 1}, {b, h}, {{b, h}, {b, 4 * h}, {b, h}}, rng);
    expect_native(gh, [&](OpCase& c, Index& v) {
      const double t = std::tanh(c.inputs[2](v));
      return c.inputs[0](v) * sigmoid(gate(c, 1, v, 3)) * (1.0 - t * t);
    }, rng);
  }
}

// ------------------------------------------------------------------------------------- reductions

TEST(TileKernelReduction, SumAxesPartialOverEveryAxisChoice) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 60; ++trial) {
    const int nd = static_cast<int>(uniform(rng, 1, 4));
    Index shape = random_shape(rng, nd, 7);
    std::vector<bool> red(nd, false);
    red[uniform(rng, 0, nd - 1)] = true;
    for (int d = 0; d < nd; ++d) red[d] = red[d] || uniform(rng, 0, 2) == 0;
    std::string axes;
    std::vector<int> kept_axes, red_axes;
    for (int d = 0; d < nd; ++d) {
      if (red[d]) {
        axes += (axes.empty() ? "" : ", ") + std::to_string(uniform(rng, 0, 1) ? d - nd : d);  // negative axes too
        red_axes.push_back(d);
      } else {
        kept_axes.push_back(d);
      }
    }
    std::vector<std::string> names = numbered("i", static_cast<int>(kept_axes.size()));
    for (auto& n : numbered("r", static_cast<int>(red_axes.size()))) names.push_back(n);
    Index extents;
    for (int d : kept_axes) extents.push_back(shape[d]);
    for (int d : red_axes) extents.push_back(shape[d]);
    OpCase c = make_case("sum_axes", names, iota(static_cast<int>(kept_axes.size())), extents, {shape}, rng, -1,
                         "{\"axes\": [" + axes + "]}");
    const int nk = static_cast<int>(kept_axes.size());
    expect_native(c, [=](OpCase& c, Index& v) {
      return sum_over(c, iota(static_cast<int>(red_axes.size()), nk), v, [&] {
        Index x(nd);
        for (int t = 0; t < nk; ++t) x[kept_axes[t]] = v[t];
        for (size_t t = 0; t < red_axes.size(); ++t) x[red_axes[t]] = v[nk + t];
        return c.inputs[0](x);
      });
    }, rng);
  }
}

TEST(TileKernelReduction, MaxPool2dPaddedAndPartialWindows) {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t k = uniform(rng, 1, 3), s = uniform(rng, 1, 3), p = uniform(rng, 0, k / 2);
    const int64_t n = uniform(rng, 1, 2), ch = uniform(rng, 1, 3), h = uniform(rng, k, 9), w = uniform(rng, k, 9);
    const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    char attrs[96];
    std::snprintf(attrs, sizeof attrs, R"({"kernel": %lld, "padding": %lld, "stride": %lld})", (long long)k,
                  (long long)p, (long long)s);
    OpCase c = make_case("max_pool2d", {"b", "c", "y", "xx", "i", "j"}, {0, 1, 2, 3}, {n, ch, oh, ow, k, k},
                         {{n, ch, h, w}}, rng, -1, attrs);
    expect_native(c, [=](OpCase& c, Index& v) {
      double m = -kInf;
      for (int64_t i = c.vars[4].lo; i <= c.vars[4].hi; ++i) {
        for (int64_t j = c.vars[5].lo; j <= c.vars[5].hi; ++j) {
          int64_t hh = s * v[2] + i - p, ww = s * v[3] + j - p;
          bool inside = hh >= 0 && hh < h && ww >= 0 && ww < w;
          m = std::max(m, inside ? c.inputs[0]({v[0], v[1], hh, ww}) : (p > 0 ? -kInf : 0.0));
        }
      }
      return m;
    }, rng);
  }
}

// y = max_pool2d(x) (so that x == y happens), dy random: the gradient routes dy to the maxima.
TEST(TileKernelReduction, MaxPool2dGradRoutesToTheMaxima) {
  std::mt19937 rng(26);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t k = uniform(rng, 1, 3), s = uniform(rng, 1, 3), p = uniform(rng, 0, k / 2);
    const int64_t n = uniform(rng, 1, 2), ch = uniform(rng, 1, 3), h = uniform(rng, k, 9), w = uniform(rng, k, 9);
    const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    char attrs[96];
    std::snprintf(attrs, sizeof attrs, R"({"kernel": %lld, "padding": %lld, "stride": %lld})", (long long)k,
                  (long long)p, (long long)s);
    OpCase c = make_case("max_pool2d_grad", {"b", "c", "h", "w", "i", "j"}, {0, 1, 2, 3}, {n, ch, h, w, k, k},
                         {{n, ch, h, w}, {n, ch, oh, ow}, {n, ch, oh, ow}}, rng, -1, attrs);
    Tensor &x = c.inputs[0], &y = c.inputs[1];
    for (int64_t e = 0; e < y.numel(); ++e) {
      int64_t xx = e % ow, yy = (e / ow) % oh, cc = (e / (ow * oh)) % ch, bb = e / (ow * oh * ch);
      double m = -kInf;
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t j = 0; j < k; ++j) {
          int64_t hh = s * yy + i - p, ww = s * xx + j - p;
          if (hh >= 0 && hh < h && ww >= 0 && ww < w) m = std::max(m, x.data[((bb * ch + cc) * h + hh) * w + ww]);
        }
      }
      y.data[e] = m;
    }
    expect_native(c, [=](OpCase& c, Index& v) {
      const double xv = c.inputs[0]({v[0], v[1], v[2], v[3]});  // read at every output position
      return sum_over(c, {4, 5}, v, [&] {
        int64_t th = v[2] + p - v[4], tw = v[3] + p - v[5];
        if (th % s != 0 || tw % s != 0) return 0.0;
        Index at = {v[0], v[1], th / s, tw / s};
        return (xv == c.inputs[1](at) ? 1.0 : 0.0) * c.inputs[2](at);
      });
    }, rng);
  }
}

TEST(TileKernelReduction, AdaptiveAvgPoolAndItsGradient) {
  std::mt19937 rng(27);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t kh = uniform(rng, 1, 4), kw = uniform(rng, 1, 4), n = uniform(rng, 1, 2), ch = uniform(rng, 1, 3);
    const int64_t oh = uniform(rng, 1, 3), ow = uniform(rng, 1, 3);
    const std::string attrs = "{\"kernel_h\": " + std::to_string(kh) + ", \"kernel_w\": " + std::to_string(kw) + "}";
    OpCase c = make_case("adaptive_avg_pool2d", {"b", "c", "y", "z", "i", "j"}, {0, 1, 2, 3}, {n, ch, oh, ow, kh, kw},
                         {{n, ch, oh * kh, ow * kw}}, rng, -1, attrs);
    expect_native(c, [=](OpCase& c, Index& v) {
      return sum_over(c, {4, 5}, v, [&] { return c.inputs[0]({v[0], v[1], kh * v[2] + v[4], kw * v[3] + v[5]}); }) /
             static_cast<double>(kh * kw);
    }, rng);
    OpCase g = make_case("adaptive_avg_pool2d_grad", {"b", "c", "y", "z"}, {0, 1, 2, 3}, {n, ch, oh * kh, ow * kw},
                         {{n, ch, oh, ow}}, rng, -1, attrs);
    expect_native(g, [=](OpCase& c, Index& v) {
      return c.inputs[0]({v[0], v[1], v[2] / kh, v[3] / kw}) / static_cast<double>(kh * kw);
    }, rng);
  }
}

const std::vector<std::string> kBnStats = {"n", "y", "z", "m", "y'", "z'", "n'", "y''", "z''"};

// E[x] and 1 / sqrt(E[x^2] - E[x]^2 + eps) of channel c over the whole tensor, as the TDL writes it.
std::pair<double, double> bn_stats(Tensor& x, int64_t c, double eps) {
  double s = 0, s2 = 0;
  for (int64_t a = 0; a < x.shape[0]; ++a) {
    for (int64_t h = 0; h < x.shape[2]; ++h) {
      for (int64_t w = 0; w < x.shape[3]; ++w) {
        double v = x({a, c, h, w});
        s += v;
        s2 += v * v;
      }
    }
  }
  const double n = static_cast<double>(x.shape[0] * x.shape[2] * x.shape[3]), mean = s / n;
  return {mean, 1.0 / std::sqrt(s2 / n - mean * mean + eps)};
}

TEST(TileKernelReduction, BatchNormTrainAndGrads) {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 15; ++trial) {
    Index x = {uniform(rng, 1, 3), uniform(rng, 1, 4), uniform(rng, 1, 5), uniform(rng, 1, 5)};
    const double eps = 1e-3;
    std::vector<std::string> fwd = {"b", "c", "h", "w"};
    fwd.insert(fwd.end(), kBnStats.begin(), kBnStats.end());
    Index ext = x;
    for (size_t t = 0; t < kBnStats.size(); ++t) ext.push_back(x[t % 3 == 0 ? 0 : (t % 3 == 1 ? 2 : 3)]);
    OpCase c = make_case("batch_norm_train", fwd, {0, 1, 2, 3}, ext, {x, {x[1]}, {x[1]}}, rng, 4, R"({"eps": 0.001})");
    expect_native(c, [eps](OpCase& c, Index& v) {
      auto [mean, rstd] = bn_stats(c.inputs[0], v[1], eps);
      return (c.inputs[0]({v[0], v[1], v[2], v[3]}) - mean) * rstd * c.inputs[1]({v[1]}) + c.inputs[2]({v[1]});
    }, rng);

    std::vector<std::string> gi = fwd;
    for (const char* n : {"p", "q", "r", "p'", "q'", "r'"}) gi.push_back(n);
    Index gext = ext;
    for (int t = 0; t < 6; ++t) gext.push_back(x[t % 3 == 0 ? 0 : (t % 3 == 1 ? 2 : 3)]);
    OpCase g = make_case("batch_norm_grad_input", gi, {0, 1, 2, 3}, gext, {x, x, {x[1]}}, rng, 4, R"({"eps": 0.001})");
    expect_native(g, [eps](OpCase& c, Index& v) {
      Tensor &dy = c.inputs[0], &xx = c.inputs[1];
      auto [mean, rstd] = bn_stats(xx, v[1], eps);
      double sdy = 0, sdyx = 0;
      for (int64_t a = 0; a < xx.shape[0]; ++a) {
        for (int64_t h = 0; h < xx.shape[2]; ++h) {
          for (int64_t w = 0; w < xx.shape[3]; ++w) {
            sdy += dy({a, v[1], h, w});
            sdyx += dy({a, v[1], h, w}) * (xx({a, v[1], h, w}) - mean);
          }
        }
      }
      const double n = static_cast<double>(xx.shape[0] * xx.shape[2] * xx.shape[3]);
      Index at = {v[0], v[1], v[2], v[3]};
      return c.inputs[2]({v[1]}) * rstd * (dy(at) - sdy / n - (xx(at) - mean) * rstd * rstd * sdyx / n);
    }, rng);

    std::vector<std::string> gg = {"c", "p", "q", "r"};
    gg.insert(gg.end(), kBnStats.begin(), kBnStats.end());
    Index ggext = {x[1], x[0], x[2], x[3]};
    ggext.insert(ggext.end(), ext.begin() + 4, ext.end());
    OpCase gm = make_case("batch_norm_grad_gamma", gg, {0}, ggext, {x, x}, rng, 4, R"({"eps": 0.001})");
    expect_native(gm, [eps](OpCase& c, Index& v) {  // partial over the restricted p, q, r
      auto [mean, rstd] = bn_stats(c.inputs[1], v[0], eps);
      return rstd * sum_over(c, {1, 2, 3}, v, [&] {
        Index at = {v[1], v[0], v[2], v[3]};
        return c.inputs[0](at) * (c.inputs[1](at) - mean);
      });
    }, rng);
  }
}

TEST(TileKernelReduction, LossesPartialOverTheBatch) {
  std::mt19937 rng(16);
  for (int trial = 0; trial < 15; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 1, 3));
    Index shape = random_shape(rng, rank);
    OpCase mse = make_case("mse_loss", numbered("r", rank), {}, shape, {shape, shape}, rng);
    const double numel = static_cast<double>(mse.inputs[0].numel());
    expect_native(mse, [rank, numel](OpCase& c, Index& v) {
      return sum_over(c, iota(rank), v, [&] {
               double d = c.inputs[0](v) - c.inputs[1](v);
               return d * d;
             }) / numel;
    }, rng);

    int64_t b = uniform(rng, 1, 5), k = uniform(rng, 1, 9);
    auto log_softmax = [](Tensor& logits, int64_t bb, int64_t kk) {
      double m = -kInf, s = 0;
      for (int64_t j = 0; j < logits.shape[1]; ++j) m = std::max(m, logits({bb, j}));
      for (int64_t j = 0; j < logits.shape[1]; ++j) s += std::exp(logits({bb, j}) - m);
      return logits({bb, kk}) - m - std::log(s);
    };
    OpCase ce = make_case("cross_entropy", {"b", "k", "j", "j'"}, {}, {b, k, k, k}, {{b, k}, {b, k}}, rng, 2);
    expect_native(ce, [&](OpCase& c, Index& v) {
      return -sum_over(c, {0, 1}, v, [&] { return c.inputs[1]({v[0], v[1]}) * log_softmax(c.inputs[0], v[0], v[1]); }) /
             static_cast<double>(c.inputs[0].shape[0]);
    }, rng);

    OpCase cb = make_case("cross_entropy_backward", {"b", "k", "j", "j'", "j''"}, {0, 1}, {b, k, k, k, k},
                          {{b, k}, {b, k}, {}}, rng, 2);
    expect_native(cb, [&](OpCase& c, Index& v) {
      double t = 0;
      for (int64_t j = 0; j < k; ++j) t += c.inputs[1]({v[0], j});
      return (std::exp(log_softmax(c.inputs[0], v[0], v[1])) * t - c.inputs[1]({v[0], v[1]})) * c.inputs[2]({}) /
             static_cast<double>(c.inputs[0].shape[0]);
    }, rng);
  }
}

// ---------------------------------------------------------------------------------- convolutions

struct ConvShape {
  int64_t n, ci, h, w, co, kh, kw, s, p, d, oh, ow;
  std::string attrs(const std::string& extra = "") const {
    return "{\"dilation\": " + std::to_string(d) + extra + ", \"padding\": " + std::to_string(p) +
           ", \"stride\": " + std::to_string(s) + "}";
  }
};

ConvShape random_conv(std::mt19937& rng) {
  while (true) {
    ConvShape c{};
    c.n = uniform(rng, 1, 3);
    c.ci = uniform(rng, 1, 5);
    c.co = uniform(rng, 1, 5);
    c.h = uniform(rng, 1, 9);
    c.w = uniform(rng, 1, 9);
    c.kh = uniform(rng, 1, 3);
    c.kw = uniform(rng, 1, 3);
    c.s = uniform(rng, 1, 3);
    c.p = uniform(rng, 0, 2);
    c.d = uniform(rng, 1, 2);
    int64_t nh = c.h + 2 * c.p - c.d * (c.kh - 1) - 1, nw = c.w + 2 * c.p - c.d * (c.kw - 1) - 1;
    if (nh < 0 || nw < 0) continue;
    c.oh = nh / c.s + 1;
    c.ow = nw / c.s + 1;
    return c;
  }
}

TEST(TileKernelConv, Conv2dPartialOverChannelsAndKernelOffsets) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 80; ++trial) {
    ConvShape g = random_conv(rng);
    OpCase c = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3},
                         {g.n, g.co, g.oh, g.ow, g.ci, g.kh, g.kw}, {{g.n, g.ci, g.h, g.w}, {g.co, g.ci, g.kh, g.kw}}, rng,
                         -1, g.attrs());
    expect_native(c, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        return c.inputs[0]({v[0], v[4], g.s * v[2] + g.d * v[5] - g.p, g.s * v[3] + g.d * v[6] - g.p}) *
               c.inputs[1]({v[1], v[4], v[5], v[6]});
      });
    }, rng);
  }
}

// 1x1 kernels at stride 1 without padding take the direct path (no im2col) when the region fits.
TEST(TileKernelConv, Conv2dPointwise) {
  std::mt19937 rng(18);
  for (int trial = 0; trial < 20; ++trial) {
    int64_t n = uniform(rng, 1, 3), ci = uniform(rng, 1, 8), co = uniform(rng, 1, 8), h = uniform(rng, 1, 7),
            w = uniform(rng, 1, 7);
    OpCase c = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3}, {n, co, h, w, ci, 1, 1},
                         {{n, ci, h, w}, {co, ci, 1, 1}}, rng, -1, R"({"dilation": 1, "padding": 0, "stride": 1})");
    expect_native(c, [](OpCase& c, Index& v) {
      return sum_over(c, {4}, v, [&] { return c.inputs[0]({v[0], v[4], v[2], v[3]}) * c.inputs[1]({v[1], v[4], 0, 0}); });
    }, rng);
  }
}

TEST(TileKernelConv, Conv2dBackwardDataStridedAndDilated) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 80; ++trial) {
    ConvShape g = random_conv(rng);
    std::string extra = ", \"in_h\": " + std::to_string(g.h) + ", \"in_w\": " + std::to_string(g.w);
    OpCase c = make_case("conv2d_backward_data", {"b", "ci", "h", "w", "co", "kh", "kw"}, {0, 1, 2, 3},
                         {g.n, g.ci, g.h, g.w, g.co, g.kh, g.kw}, {{g.n, g.co, g.oh, g.ow}, {g.co, g.ci, g.kh, g.kw}},
                         rng, -1, g.attrs(extra));
    expect_native(c, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        int64_t th = v[2] + g.p - g.d * v[5], tw = v[3] + g.p - g.d * v[6];
        if (th % g.s != 0 || tw % g.s != 0) return 0.0;
        return c.inputs[0]({v[0], v[4], th / g.s, tw / g.s}) * c.inputs[1]({v[4], v[1], v[5], v[6]});
      });
    }, rng);
  }
}

TEST(TileKernelConv, Conv2dBackwardFilterPartialOverBatchAndPositions) {
  std::mt19937 rng(20);
  for (int trial = 0; trial < 80; ++trial) {
    ConvShape g = random_conv(rng);
    std::string extra = ", \"kernel_h\": " + std::to_string(g.kh) + ", \"kernel_w\": " + std::to_string(g.kw);
    OpCase c = make_case("conv2d_backward_filter", {"co", "ci", "kh", "kw", "b", "y", "x"}, {0, 1, 2, 3},
                         {g.co, g.ci, g.kh, g.kw, g.n, g.oh, g.ow}, {{g.n, g.ci, g.h, g.w}, {g.n, g.co, g.oh, g.ow}},
                         rng, -1, g.attrs(extra));
    expect_native(c, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        return c.inputs[1]({v[4], v[0], v[5], v[6]}) *
               c.inputs[0]({v[4], v[1], g.s * v[5] + g.d * v[2] - g.p, g.s * v[6] + g.d * v[3] - g.p});
      });
    }, rng);
  }
}

// A larger conv: every kernel offset range and channel split at once, wider than the unit cases.
TEST(TileKernelConv, Conv2dLargerBlocks) {
  std::mt19937 rng(21);
  ConvShape g{2, 16, 14, 13, 24, 3, 3, 2, 1, 1, 0, 0};
  g.oh = (g.h + 2 * g.p - g.d * (g.kh - 1) - 1) / g.s + 1;
  g.ow = (g.w + 2 * g.p - g.d * (g.kw - 1) - 1) / g.s + 1;
  for (int trial = 0; trial < 4; ++trial) {
    OpCase c = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3},
                         {g.n, g.co, g.oh, g.ow, g.ci, g.kh, g.kw}, {{g.n, g.ci, g.h, g.w}, {g.co, g.ci, g.kh, g.kw}}, rng,
                         -1, g.attrs());
    expect_native(c, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        return c.inputs[0]({v[0], v[4], g.s * v[2] + g.d * v[5] - g.p, g.s * v[3] + g.d * v[6] - g.p}) *
               c.inputs[1]({v[1], v[4], v[5], v[6]});
      });
    }, rng);
  }
}

// ---------------------------------------------------------------------------------------- declines

// A whole-tensor matmul call with the given type, for the decline cases.
struct Fixed {
  std::vector<float> a, b, out;
  TileCall call;
  Fixed(const std::string& type, int64_t m = 4, int64_t n = 3, int64_t k = 5)
      : a(m * k, 1.0f), b(k * n, 1.0f), out(m * n, std::numeric_limits<float>::quiet_NaN()) {
    call.type = type;
    call.var_names = {"i", "j", "k"};
    call.output_vars = {0, 1};
    call.extents = {m, n, k};
    call.vars = {{0, m - 1}, {0, n - 1}, {0, k - 1}};
    call.inputs = {TileIn{a.data(), {{0, m - 1}, {0, k - 1}}, {m, k}}, TileIn{b.data(), {{0, k - 1}, {0, n - 1}}, {k, n}}};
    call.output_shape = {m, n};
    call.out = out.data();
  }
};

TEST(TileKernelDeclines, UnknownOpTypes) {
  EXPECT_TRUE(run_native(Fixed("matmul").call));
  expect_declined(Fixed("no_such_op").call);
  expect_declined(Fixed("add_0").call);
  Fixed wrong_arity("add_3");  // two inputs
  wrong_arity.call.var_names = {"i0", "i1"};
  expect_declined(wrong_arity.call);
}

TEST(TileKernelDeclines, RegionsThatLackWhatIsRead) {
  Fixed f("matmul");
  f.call.inputs[0].region[0] = {1, 3};  // row 0 of a is read but not held
  expect_declined(f.call);
  Fixed g("matmul");
  g.call.vars[2] = {1, 4};  // a partial reduction is fine...
  EXPECT_TRUE(run_native(g.call));
  EXPECT_FLOAT_EQ(g.out[0], 4.0f);
  g.call.inputs[1].region[0] = {2, 4};  // ...but not without the rows of b it reads
  expect_declined(g.call);
}

TEST(TileKernelDeclines, MalformedCalls) {
  Fixed f("matmul");
  f.call.var_names = {"i", "k", "j"};  // not matmul's description
  expect_declined(f.call);
  Fixed g("matmul");
  g.call.vars[0] = {2, 1};  // empty range
  expect_declined(g.call);
  Fixed h("matmul");
  h.call.vars[0] = {0, 4};  // past the extent
  expect_declined(h.call);
  Fixed j("matmul");
  j.call.attrs_json = "{\"stride\": ";  // not JSON
  expect_declined(j.call);
}

TEST(TileKernelDeclines, SplitsNoKernelComputes) {
  std::mt19937 rng(22);
  // linear's k sits under the bias sum: a partial k would add the bias on every device.
  OpCase lin = make_case("linear", {"i0", "i1", "k"}, {0, 1}, {3, 4, 5}, {{3, 5}, {4, 5}, {4}}, rng, 0);
  lin.vars[2] = {0, 2};
  oracle(lin, [](OpCase& c, Index& v) {
    return sum_over(c, {2}, v, [&] { return c.inputs[0]({v[0], v[2]}) * c.inputs[1]({v[1], v[2]}); }) + c.inputs[2]({v[1]});
  });
  Prepared p = prepare(lin, rng);
  expect_declined(p.call);

  // A batch-norm statistic (nested reduction) restricted.
  std::vector<std::string> fwd = {"b", "c", "h", "w"};
  fwd.insert(fwd.end(), kBnStats.begin(), kBnStats.end());
  Index x = {2, 3, 4, 4};
  Index ext = {2, 3, 4, 4, 2, 4, 4, 2, 4, 4, 2, 4, 4};
  OpCase bn = make_case("batch_norm_train", fwd, {0, 1, 2, 3}, ext, {x, {3}, {3}}, rng, 0);
  bn.vars[4] = {0, 0};
  for (Tensor& t : bn.inputs) {
    for (size_t d = 0; d < t.shape.size(); ++d) t.touched[d] = {0, t.shape[d] - 1};
    t.any_read = true;
  }
  Prepared q = prepare(bn, rng);
  expect_declined(q.call);

  // conv2d with an attribute of the wrong type.
  OpCase cv = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3}, {1, 1, 3, 3, 1, 1, 1},
                        {{1, 1, 3, 3}, {1, 1, 1, 1}}, rng, 0, R"({"stride": [1, 2]})");
  for (Tensor& t : cv.inputs) {
    for (size_t d = 0; d < t.shape.size(); ++d) t.touched[d] = {0, t.shape[d] - 1};
    t.any_read = true;
  }
  Prepared r = prepare(cv, rng);
  expect_declined(r.call);
}

TEST(TileKernelDeclines, ListsItsOpTypes) {
  std::vector<std::string> types = native_op_types();
  for (const char* t : {"matmul", "linear", "conv2d", "conv2d_backward_data", "sgd", "add_<n>", "sum_axes"}) {
    EXPECT_NE(std::find(types.begin(), types.end(), t), types.end()) << t;
  }
}

// ------------------------------------------------------------------------------------- throughput

// A 1024^3 matmul block, whole and as one of two row halves (a 2-device output split): reports
// GFLOP/s; checks only that the kernel handles it and one element is right.
TEST(TileKernelPerf, Matmul1024) {
  const int64_t n = 1024;
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(n * n), b(n * n), out(n * n);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  for (int64_t rows : {n, n / 2}) {
    TileCall call;
    call.type = "matmul";
    call.var_names = {"i", "j", "k"};
    call.output_vars = {0, 1};
    call.extents = {n, n, n};
    call.vars = {{0, rows - 1}, {0, n - 1}, {0, n - 1}};
    call.inputs = {TileIn{a.data(), {{0, rows - 1}, {0, n - 1}}, {n, n}}, TileIn{b.data(), {{0, n - 1}, {0, n - 1}}, {n, n}}};
    call.output_shape = {n, n};
    call.out = out.data();
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(run_native(call));
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    double want = 0;
    for (int64_t k = 0; k < n; ++k) want += static_cast<double>(a[5 * n + k]) * b[k * n + 7];
    EXPECT_NEAR(out[5 * n + 7], want, 1e-3);
    std::printf("[ perf     ] matmul block %lldx%lldx%lld: %.2f ms, %.1f GFLOP/s\n", (long long)rows, (long long)n,
                (long long)n, best * 1e3, 2.0 * rows * n * n / best / 1e9);
  }
}

}  // namespace
}  // namespace tilewise::kernels

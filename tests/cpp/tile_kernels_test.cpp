// Native tile kernels (kernels/cpu/tile_kernels.h) for products and element-wise ops against the
// TDL formulas as double loops (tile_oracle.h): random shapes, random uneven sub-ranges of every
// variable (partial reductions included), region-offset inputs. Also the calls run_native must
// decline, and the throughput of a 1024^3 matmul block.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/tile_kernels.h"
#include "tile_oracle.h"

namespace tilewise::kernels {
namespace {

using namespace oracle;  // NOLINT(google-build-using-namespace): the test harness

// ------------------------------------------------------------------------------------ products

struct MatmulVariant {
  const char* type;
  bool ta, tb;
};

TEST(TileKernelGemm, MatmulVariantsOnRandomBlocks) {
  std::mt19937 rng(1);
  for (MatmulVariant mv : {MatmulVariant{"matmul", false, false}, {"matmul_tn", true, false},
                           {"matmul_nt", false, true},
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

TEST(TileKernelGemm, RnnTanhCell) {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t b = uniform(rng, 1, 4), hid = uniform(rng, 1, 6), in = uniform(rng, 1, 5);
    OpCase c = make_case("rnn_tanh_cell", {"i", "j", "k", "k'"}, {0, 1}, {b, hid, in, hid},
                         {{b, in}, {b, hid}, {hid, in}, {hid, hid}, {hid}}, rng, 2);
    expect_native(c, [](OpCase& c, Index& v) {
      double s = c.inputs[4]({v[1]});
      for (int64_t k = 0; k < c.extents[2]; ++k) s += c.inputs[0]({v[0], k}) * c.inputs[2]({v[1], k});
      for (int64_t k = 0; k < c.extents[3]; ++k) s += c.inputs[1]({v[0], k}) * c.inputs[3]({v[1], k});
      return std::tanh(s);
    }, rng);
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
  // The runtime binds no buffer to an input no region reads; a rank-0 one (the loss a backward pass
  // seeds) cannot say so by an empty region, yet the call is well formed.
  OpCase seed = make_case("fill_like", {}, {}, {}, {{}}, rng, -1, R"({"value": 1.0})");
  Prepared p = prepare(seed, rng);
  p.call.inputs[0].data = nullptr;
  p.call.inputs[0].raw = nullptr;
  ASSERT_TRUE(run_native(p.call));
  EXPECT_EQ(p.out[0], 1.0f);
  // A kernel that reads such an input still declines.
  OpCase mse = make_case("mse_loss_backward", {"i0"}, {0}, {3}, {{3}, {3}, {}}, rng);
  for (Tensor& t : mse.inputs) {
    for (size_t d = 0; d < t.shape.size(); ++d) t.touched[d] = {0, t.shape[d] - 1};
    t.any_read = true;
  }
  Prepared q = prepare(mse, rng);
  ASSERT_TRUE(run_native(q.call));
  q.call.inputs[2].data = nullptr;
  q.call.inputs[2].raw = nullptr;
  expect_declined(q.call);
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

// ---------------------------------------------------------------------------------------- declines

// A whole-tensor matmul call with the given type, for the decline cases.
struct Fixed {
  std::vector<float> a, b, out;
  TileCall call;
  Fixed(const std::string& type, int64_t m = 4, int64_t n = 3, int64_t k = 5)
      : a(m * k, 1.0f), b(k * n, 1.0f), out(m * n, std::numeric_limits<float>::quiet_NaN()) {
    call.type = type;
    call.kernel = kernel_of(type);
    call.var_names = {"i", "j", "k"};
    call.output_vars = {0, 1};
    call.extents = {m, n, k};
    call.vars = {{0, m - 1}, {0, n - 1}, {0, k - 1}};
    call.inputs = {TileIn{a.data(), {{0, m - 1}, {0, k - 1}}, {m, k}},
                   TileIn{b.data(), {{0, k - 1}, {0, n - 1}}, {k, n}}};
    call.output_shape = {m, n};
    call.out = out.data();
  }
};

TEST(TileKernelDeclines, UnknownOrUndeclaredKernels) {
  EXPECT_TRUE(run_native(Fixed("matmul").call));
  expect_declined(Fixed("no_such_op").call);
  Fixed undeclared("matmul");  // an op that declares no kernel is interpreted
  undeclared.call.kernel.clear();
  expect_declined(undeclared.call);
  Fixed too_few("matmul");  // matmul's roles are i, j, k
  too_few.call.var_names.pop_back(), too_few.call.extents.pop_back(), too_few.call.vars.pop_back();
  expect_declined(too_few.call);
}

TEST(TileKernelDeclines, NamesDoNotMatterRolesDo) {
  // A renamed lambda variable changes nothing: the kernel reads positions (roles), not names.
  Fixed renamed("matmul");
  renamed.call.var_names = {"row", "col", "inner"};
  EXPECT_TRUE(run_native(renamed.call));
  EXPECT_FLOAT_EQ(renamed.out[0], 5.0f);
  // bind_roles puts variables declared in another order into the kernel's: (k, i, j) -> (i, j, k).
  Fixed shuffled("matmul");
  TileCall& c = shuffled.call;
  c.var_names = {"k", "i", "j"};
  c.extents = {5, 4, 3};
  c.vars = {{0, 4}, {0, 3}, {0, 2}};
  c.output_vars = {1, 2};
  bind_roles(c, {1, 2, 0});
  EXPECT_EQ(c.var_names, (std::vector<std::string>{"i", "j", "k"}));
  EXPECT_EQ(c.output_vars, (std::vector<int>{0, 1}));
  EXPECT_TRUE(run_native(c));
  EXPECT_THROW(bind_roles(c, {0, 0, 1}), std::invalid_argument);
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
  f.call.output_vars = {1, 0};  // not matmul's layout (its output is (i, j))
  expect_declined(f.call);
  Fixed g("matmul");
  g.call.vars[0] = {2, 1};  // empty range
  expect_declined(g.call);
  Fixed h("matmul");
  h.call.vars[0] = {0, 4};  // past the extent
  expect_declined(h.call);
  Fixed j("matmul");
  j.call.attrs = kernels::OpAttrs::parse("{\"stride\": ");  // not JSON
  expect_declined(j.call);
}

// The case's call with every input region the whole tensor.
Prepared with_whole_regions(OpCase c, std::mt19937& rng) {
  for (Tensor& t : c.inputs) {
    for (size_t d = 0; d < t.shape.size(); ++d) t.touched[d] = {0, t.shape[d] - 1};
    t.any_read = true;
  }
  return prepare(c, rng);
}

TEST(TileKernelDeclines, SplitsNoKernelComputes) {
  std::mt19937 rng(22);
  // linear's k sits under the bias sum: a partial k would add the bias on every device.
  OpCase lin = make_case("linear", {"i0", "i1", "k"}, {0, 1}, {3, 4, 5}, {{3, 5}, {4, 5}, {4}}, rng, 0);
  lin.vars[2] = {0, 2};
  expect_declined(with_whole_regions(lin, rng).call);

  // A batch-norm statistic (nested reduction) restricted.
  std::vector<std::string> fwd = {"b", "c", "h", "w"};
  fwd.insert(fwd.end(), kBnStats.begin(), kBnStats.end());
  Index x = {2, 3, 4, 4};
  Index ext = {2, 3, 4, 4, 2, 4, 4, 2, 4, 4, 2, 4, 4};
  OpCase bn = make_case("batch_norm_train", fwd, {0, 1, 2, 3}, ext, {x, {3}, {3}}, rng, 0);
  bn.vars[4] = {0, 0};
  expect_declined(with_whole_regions(bn, rng).call);
}

TEST(TileKernelDeclines, AttributesOfTheWrongType) {
  std::mt19937 rng(28);
  const std::vector<std::string> conv = {"b", "co", "y", "x", "ci", "dy", "dx"};
  for (const char* attrs : {R"({"stride": [1, 2]})", R"({"stride": 1.5})", R"({"stride": "2"})",
                            R"({"stride": null})", R"({"stride": 0})", R"({"stride": 1, "padding": -1})"}) {
    OpCase cv = make_case("conv2d", conv, {0, 1, 2, 3}, {1, 1, 3, 3, 1, 1, 1}, {{1, 1, 3, 3}, {1, 1, 1, 1}}, rng, 0,
                          attrs);
    expect_declined(with_whole_regions(cv, rng).call);
  }
  for (const char* attrs : {R"({"axes": [[0]]})", R"({"axes": "0"})", R"({})", R"({"axes": [0.5]})"}) {
    OpCase sa = make_case("sum_axes", {"i0", "r0"}, {0}, {3, 2}, {{2, 3}}, rng, 0, attrs);
    expect_declined(with_whole_regions(sa, rng).call);
  }
  OpCase sgd = make_case("sgd", {"i0"}, {0}, {4}, {{4}, {4}}, rng, 0, R"({"lr": "0.1"})");
  expect_declined(with_whole_regions(sgd, rng).call);
  // Attributes no kernel reads may be anything.
  OpCase ok = make_case("sgd", {"i0"}, {0}, {4}, {{4}, {4}}, rng, 0,
                        R"({"lr": 0.1, "note": "a string", "nested": {"a": [1, [2]]}, "flag": true})");
  EXPECT_TRUE(run_native(with_whole_regions(ok, rng).call));
}

TEST(TileKernelDeclines, ListsItsKernelsWithRoles) {
  std::vector<KernelInfo> kernels = native_kernels();
  auto find = [&](const std::string& name) {
    return std::find_if(kernels.begin(), kernels.end(), [&](const KernelInfo& k) { return k.name == name; });
  };
  for (const char* t : {"matmul", "linear", "conv2d", "conv2d_backward_data", "sgd", "add_n", "sum_axes"}) {
    EXPECT_NE(find(t), kernels.end()) << t;
  }
  EXPECT_EQ(find("conv2d")->roles, (std::vector<std::string>{"b", "co", "y", "x", "ci", "dy", "dx"}));
  EXPECT_TRUE(roles_fit({"i*", "k"}, 3));
  EXPECT_TRUE(roles_fit({"i*"}, 0));
  EXPECT_FALSE(roles_fit({"i*", "k"}, 0));
  EXPECT_FALSE(roles_fit({"i", "j", "k"}, 2));
}

// ------------------------------------------------------------------------------------- throughput

// A 1024^3 matmul block, whole and as one of two row halves (a 2-device output split), with the
// BLAS's own threads and with one thread (a runtime device): reports GFLOP/s; checks only that the
// kernel handles it and one element is right.
TEST(TileKernelPerf, Matmul1024) {
  const int64_t n = 1024;
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(n * n), b(n * n), out(n * n);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  const int threads_before = blas_threads();
  for (int threads : {threads_before, 1}) {
    set_blas_threads(threads);
    for (int64_t rows : {n, n / 2}) {
      TileCall call;
      call.type = call.kernel = "matmul";
      call.var_names = {"i", "j", "k"};
      call.output_vars = {0, 1};
      call.extents = {n, n, n};
      call.vars = {{0, rows - 1}, {0, n - 1}, {0, n - 1}};
      call.inputs = {TileIn{a.data(), {{0, rows - 1}, {0, n - 1}}, {n, n}},
                     TileIn{b.data(), {{0, n - 1}, {0, n - 1}}, {n, n}}};
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
      std::printf("[ perf     ] matmul block %lldx%lldx%lld (%s, %d threads): %.2f ms, %.1f GFLOP/s\n",
                  (long long)rows, (long long)n, (long long)n, blas_name().c_str(), blas_threads(), best * 1e3,
                  2.0 * rows * n * n / best / 1e9);
    }
  }
  set_blas_threads(threads_before);
}

}  // namespace
}  // namespace tilewise::kernels

// The partition search (cpp/partition): variable elimination against exhaustive enumeration, and
// every planner against brute force on small training graphs built by hand, with `evaluate`
// recomputing each plan's figures from its tilings and strategies alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "partition/elimination.h"
#include "partition/elimination_order.h"
#include "partition/plan.h"
#include "tdl/op_desc.h"

namespace tilewise::partition {
namespace {

// ---------------------------------------------------------------------------------------------
// Variable elimination.

int64_t add_sat(int64_t a, int64_t b) { return std::min(kInfinite, a + b); }

int64_t factor_value(const Factor& f, const std::vector<int>& domains, const std::vector<int>& values) {
  int64_t e = 0;
  for (int v : f.vars) e = e * domains[v] + values[v];
  return f.table[e];
}

int64_t total_cost(const std::vector<Factor>& factors, const std::vector<int>& domains,
                   const std::vector<int>& values) {
  int64_t c = 0;
  for (const Factor& f : factors) c = add_sat(c, factor_value(f, domains, values));
  return c;
}

// The minimum over every assignment.
int64_t exhaustive_min(const std::vector<Factor>& factors, const std::vector<int>& domains) {
  std::vector<int> values(domains.size(), 0);
  int64_t best = kInfinite + 1;
  while (true) {
    best = std::min(best, total_cost(factors, domains, values));
    size_t k = 0;
    for (; k < values.size(); ++k) {
      if (++values[k] < domains[k]) break;
      values[k] = 0;
    }
    if (k == values.size()) break;
  }
  return best;
}

struct RandomProblem {
  std::vector<int> domains;
  std::vector<Factor> factors;
};

// Pairwise and ternary factors (some unary and constant ones), variables in random order within a
// factor, costs 0..50 with the odd impossible entry.
RandomProblem random_problem(std::mt19937& rng) {
  RandomProblem p;
  const int n = std::uniform_int_distribution<int>(2, 8)(rng);
  for (int v = 0; v < n; ++v) p.domains.push_back(std::uniform_int_distribution<int>(1, 4)(rng));
  const int nf = std::uniform_int_distribution<int>(1, 2 * n)(rng);
  for (int f = 0; f < nf; ++f) {
    const int r = std::uniform_int_distribution<int>(0, 19)(rng);
    const int arity = std::min(n, r == 0 ? 0 : r < 3 ? 1 : r < 12 ? 2 : 3);
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    Factor fac;
    fac.vars.assign(all.begin(), all.begin() + arity);
    int64_t entries = 1;
    for (int v : fac.vars) entries *= p.domains[v];
    for (int64_t e = 0; e < entries; ++e)
      fac.table.push_back(std::uniform_int_distribution<int>(0, 39)(rng) == 0
                              ? kInfinite
                              : std::uniform_int_distribution<int64_t>(0, 50)(rng));
    p.factors.push_back(std::move(fac));
  }
  return p;
}

TEST(Elimination, MatchesExhaustiveSearchInGreedyOrder) {
  std::mt19937 rng(4242);
  for (int trial = 0; trial < 200; ++trial) {
    RandomProblem p = random_problem(rng);
    const int64_t want = exhaustive_min(p.factors, p.domains);
    EliminationResult r = eliminate(p.domains, p.factors);
    EXPECT_EQ(r.cost, want) << "trial " << trial;
    ASSERT_EQ(r.values.size(), p.domains.size());
    for (size_t v = 0; v < p.domains.size(); ++v) {
      EXPECT_GE(r.values[v], 0);
      EXPECT_LT(r.values[v], p.domains[v]);
    }
    EXPECT_EQ(total_cost(p.factors, p.domains, r.values), want) << "trial " << trial << ": values miss the minimum";
  }
}

TEST(Elimination, MatchesExhaustiveSearchInAGivenOrder) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    RandomProblem p = random_problem(rng);
    EliminationOptions o;
    o.order.resize(p.domains.size());
    std::iota(o.order.begin(), o.order.end(), 0);
    std::shuffle(o.order.begin(), o.order.end(), rng);
    const int64_t want = exhaustive_min(p.factors, p.domains);
    EliminationResult r = eliminate(p.domains, p.factors, o);
    EXPECT_EQ(r.cost, want) << "trial " << trial;
    EXPECT_EQ(total_cost(p.factors, p.domains, r.values), want) << "trial " << trial;
  }
}

TEST(Elimination, ChainReportsItsLargestTableAndProgress) {
  // x0 - x1 - x2 - x3, each with 3 values: eliminating in order builds 3 x 3 tables.
  std::vector<int> domains(4, 3);
  std::vector<Factor> factors;
  for (int v = 0; v < 3; ++v) {
    Factor f{{v, v + 1}, {}};
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) f.table.push_back(a == b ? 0 : 1 + a + b);
    factors.push_back(f);
  }
  factors.push_back({{2}, {5, 0, 5}});  // pulls everything to value 1
  EliminationOptions o;
  o.order = {0, 1, 2, 3};
  int64_t last_done = -1, last_total = -1;
  o.progress = [&](int64_t done, int64_t total) { last_done = done, last_total = total; };
  EliminationResult r = eliminate(domains, factors, o);
  EXPECT_EQ(r.cost, 0);
  EXPECT_EQ(r.values, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(r.largest_table, 9);
  EXPECT_EQ(last_done, 4);
  EXPECT_EQ(last_total, 4);
}

TEST(Elimination, ConstantsAndNoVariables) {
  EliminationResult r = eliminate({}, {Factor{{}, {7}}, Factor{{}, {5}}});
  EXPECT_EQ(r.cost, 12);
  EXPECT_TRUE(r.values.empty());
  // One-valued variables are no choice but their factors still count.
  r = eliminate({1, 1}, {Factor{{0, 1}, {3}}, Factor{{1}, {4}}});
  EXPECT_EQ(r.cost, 7);
  EXPECT_EQ(r.values, (std::vector<int>{0, 0}));
  // Impossible everywhere saturates at kInfinite.
  r = eliminate({2}, {Factor{{0}, {kInfinite, kInfinite}}, Factor{{0}, {kInfinite, kInfinite}}});
  EXPECT_EQ(r.cost, kInfinite);
}

TEST(Elimination, OrderMustListEveryVariable) {
  std::vector<int> domains(3, 2);
  std::vector<Factor> factors = {{{0, 1}, {0, 1, 1, 0}}, {{1, 2}, {0, 1, 1, 0}}};
  EliminationOptions short_order;
  short_order.order = {0};
  EXPECT_THROW(eliminate(domains, factors, short_order), std::logic_error);
  EliminationOptions long_order;
  long_order.order = {0, 1, 2, 0};
  EXPECT_THROW(eliminate(domains, factors, long_order), std::logic_error);
}

TEST(Elimination, TooLargeAndTimeout) {
  std::vector<int> domains(3, 4);
  std::vector<Factor> factors = {{{0, 1}, std::vector<int64_t>(16, 1)}, {{1, 2}, std::vector<int64_t>(16, 1)}};
  EliminationOptions tiny;
  tiny.max_table = 1;
  EXPECT_THROW(eliminate(domains, factors, tiny), SearchTooLarge);
  try {
    eliminate(domains, factors, tiny);
  } catch (const SearchTooLarge& e) {
    EXPECT_NE(std::string(e.what()).find("more than 1 entries"), std::string::npos) << e.what();
  }
  EliminationOptions enough;
  enough.max_table = 4;
  EXPECT_EQ(eliminate(domains, factors, enough).cost, 2);
  EliminationOptions late;
  late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  EXPECT_THROW(eliminate(domains, factors, late), SearchTimeout);
}

// ---------------------------------------------------------------------------------------------
// Small training graphs.

using graph::Graph;
using graph::Phase;
using graph::Role;

tdl::IndexExpr v(int i) { return tdl::index_var(i); }

/// lambda i, j: f(x[i, j]).
std::shared_ptr<tdl::OpDesc> unary_ew(const char* name) {
  auto op = std::make_shared<tdl::OpDesc>();
  op->name = name;
  op->inputs = {{"x", 2}};
  op->vars = {{"i", true, {}}, {"j", true, {}}};
  op->output_vars = {0, 1};
  op->body = tdl::make_unary(tdl::UnaryOp::kTanh, tdl::make_access(0, {v(0), v(1)}));
  tdl::validate(*op);
  return op;
}

/// lambda i, j: a[i, j] + b[i, j].
std::shared_ptr<tdl::OpDesc> binary_ew(const char* name) {
  auto op = std::make_shared<tdl::OpDesc>();
  op->name = name;
  op->inputs = {{"a", 2}, {"b", 2}};
  op->vars = {{"i", true, {}}, {"j", true, {}}};
  op->output_vars = {0, 1};
  op->body = tdl::make_binary(tdl::BinaryOp::kAdd, tdl::make_access(0, {v(0), v(1)}),
                              tdl::make_access(1, {v(0), v(1)}));
  tdl::validate(*op);
  return op;
}

/// lambda i, j: Sum(k: a[i, k] * b[k, j]), with a and/or b transposed.
std::shared_ptr<tdl::OpDesc> matmul(const char* name, bool ta = false, bool tb = false) {
  auto op = std::make_shared<tdl::OpDesc>();
  op->name = name;
  op->inputs = {{"a", 2}, {"b", 2}};
  op->vars = {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}};
  op->output_vars = {0, 1};
  auto a = ta ? tdl::make_access(0, {v(2), v(0)}) : tdl::make_access(0, {v(0), v(2)});
  auto b = tb ? tdl::make_access(1, {v(1), v(2)}) : tdl::make_access(1, {v(2), v(1)});
  op->body = tdl::make_reduce(tdl::Reducer::kSum, {2}, tdl::make_binary(tdl::BinaryOp::kMul, a, b));
  tdl::validate(*op);
  return op;
}

/// A 2-layer MLP, forward, backward and SGD updates: x(8, 8) @ w1(8, 4) -> h [-> tanh -> a] @ w2(4, 4)
/// -> y; dy given. Every dimension is a multiple of 4, so a 4-way chop equals two 2-way cuts.
/// Without the activation there are 9 tensor classes (brute force fits 4 devices), with it 11.
Graph build_mlp(bool activation) {
  Graph g;
  int x = g.add_tensor("x", {8, 8}, Role::kInput);
  int w1 = g.add_tensor("w1", {8, 4}, Role::kParameter);
  int w2 = g.add_tensor("w2", {4, 4}, Role::kParameter);
  auto fwd = [&](const char* type, const char* name, std::vector<int> in, std::shared_ptr<tdl::OpDesc> d,
                 const char* out) { return g.op(g.add_op(type, name, "", in, d, out, Role::kActivation)).output; };
  int h = fwd("matmul", "fc1", {x, w1}, matmul("matmul"), "h");
  int fc1 = g.tensor(h).producer;
  int a = activation ? fwd("tanh", "act", {h}, unary_ew("tanh"), "a") : h;
  int y = fwd("matmul", "fc2", {a, w2}, matmul("matmul"), "y");
  int fc2 = g.tensor(y).producer;
  int dy = g.add_tensor("grad/y", {8, 4}, Role::kGradient);
  g.set_grad_of(dy, y);
  auto bwd = [&](const char* type, const char* name, std::vector<int> in, std::shared_ptr<tdl::OpDesc> d, int f,
                 const char* out) {
    return g.op(g.add_op(type, name, "", in, d, out, Role::kGradient, std::nullopt, Phase::kBackward, f)).output;
  };
  int dw2 = bwd("matmul_tn", "fc2.dw", {a, dy}, matmul("mm_tn", true, false), fc2, "grad/w2");
  int da = bwd("matmul_nt", "fc2.dx", {dy, w2}, matmul("mm_nt", false, true), fc2, "grad/a");
  int dh = activation ? bwd("tanh_grad", "act.dx", {da, a}, binary_ew("tanh_grad"), g.tensor(a).producer, "grad/h")
                      : da;
  int dw1 = bwd("matmul_tn", "fc1.dw", {x, dh}, matmul("mm_tn", true, false), fc1, "grad/w1");
  g.set_grad_of(dw2, w2);
  g.set_grad_of(dw1, w1);
  g.set_grad_of(da, a);
  if (activation) g.set_grad_of(dh, h);
  auto update = [&](int w, int dw, const char* name) {
    int o = g.add_op("add", name, "", {w, dw}, binary_ew("add"), std::string(name) + "'", Role::kParameter,
                     std::nullopt, Phase::kUpdate);
    g.set_updates(g.op(o).output, w);
  };
  update(w1, dw1, "w1");
  update(w2, dw2, "w2");
  return g;
}

/// x(8, 4) @ w(4, 4) -> h; h + r -> z: five tensors, small enough for brute force with replication.
Graph build_chain() {
  Graph g;
  int x = g.add_tensor("x", {8, 4}, Role::kInput);
  int w = g.add_tensor("w", {4, 4}, Role::kParameter);
  int r = g.add_tensor("r", {8, 4}, Role::kInput);
  int h = g.op(g.add_op("matmul", "mm", "", {x, w}, matmul("matmul"), "h", Role::kActivation)).output;
  g.add_op("add", "residual", "", {h, r}, binary_ew("add"), "z", Role::kActivation);
  return g;
}

/// x(8, 4) @ w(4, 4) -> y.
Graph build_matmul() {
  Graph g;
  int x = g.add_tensor("x", {8, 4}, Role::kInput);
  int w = g.add_tensor("w", {4, 4}, Role::kParameter);
  g.add_op("matmul", "mm", "", {x, w}, matmul("matmul"), "y", Role::kActivation);
  return g;
}

// Checks a plan against the graph and against `evaluate`'s figures.
void expect_consistent(const Graph& g, const Plan& plan, int devices, const std::string& what) {
  SCOPED_TRACE(what + " / " + plan.algorithm);
  EXPECT_EQ(plan.devices, devices);
  EXPECT_EQ(cost::device_count(plan.parts), devices);
  const size_t m = plan.parts.size();
  ASSERT_EQ(plan.assignment.tilings.size(), g.tensors().size());
  ASSERT_EQ(plan.assignment.splits.size(), g.ops().size());
  for (const auto& t : plan.assignment.tilings) EXPECT_EQ(t.size(), m);
  for (const auto& s : plan.assignment.splits) EXPECT_EQ(s.size(), m);
  // An optimizer's new value is tiled as the tensor it replaces.
  for (const auto& t : g.tensors())
    if (t.updates >= 0) EXPECT_EQ(plan.assignment.tilings[t.id], plan.assignment.tilings[t.updates]) << t.name;
  PlanCost pc = evaluate(g, plan, 2);
  EXPECT_EQ(pc.comm_bytes, plan.comm_bytes);
  EXPECT_EQ(pc.step_bytes, plan.step_bytes);
  EXPECT_EQ(std::accumulate(plan.step_bytes.begin(), plan.step_bytes.end(), int64_t{0}), plan.comm_bytes);
  int64_t per_op = 0;
  for (const auto& c : pc.per_op) per_op += c.total();
  EXPECT_EQ(per_op, plan.comm_bytes);
  EXPECT_GE(plan.comm_bytes, 0);
  EXPECT_EQ(static_cast<int>(pc.memory.peak.size()), devices);
  EXPECT_EQ(static_cast<int>(pc.flops_per_device.size()), devices);
}

// Every algorithm (plus brute force with replication where it fits), each plan checked.
std::map<std::string, Plan> run_all(const Graph& g, int devices, const std::string& what, bool brute_replication) {
  std::map<std::string, Plan> plans;
  SearchOptions o;
  o.threads = 2;
  for (const auto& name : algorithm_names()) {
    plans[name] = partition(g, devices, name, o);
    EXPECT_EQ(plans[name].algorithm, name);
    expect_consistent(g, plans[name], devices, what);
  }
  if (brute_replication) {
    o.brute_force_replication = true;
    plans["brute_force+r"] = partition(g, devices, "brute_force", o);
    expect_consistent(g, plans["brute_force+r"], devices, what + " with replication");
  }
  return plans;
}

// What holds on any graph: brute force is the optimum of the unreplicated space, which holds
// tofu's, allrow_greedy's, icml18's and spartan's (no duplication budget); with replication it is
// the optimum of every planner's space (equal_chop's only when its k-way chops are also 2-way cuts).
void expect_ordering(const std::map<std::string, Plan>& p, bool one_step, bool chop_is_cuts, const std::string& what) {
  SCOPED_TRACE(what);
  auto bytes = [&](const std::string& n) { return p.at(n).comm_bytes; };
  for (const char* n : {"tofu", "allrow_greedy", "icml18", "spartan"}) EXPECT_LE(bytes("brute_force"), bytes(n)) << n;
  if (chop_is_cuts) EXPECT_LE(bytes("brute_force"), bytes("equal_chop"));
  if (p.count("brute_force+r")) {
    EXPECT_LE(bytes("brute_force+r"), bytes("brute_force"));
    for (const auto& n : algorithm_names())
      if (n != "equal_chop" || chop_is_cuts) EXPECT_LE(bytes("brute_force+r"), bytes(n)) << n;
  }
  if (one_step) {
    // One step is one exact search: tofu is brute force, and kcuts is brute force with replication.
    EXPECT_EQ(bytes("tofu"), bytes("brute_force"));
    EXPECT_EQ(bytes("equal_chop"), bytes("tofu"));
    for (const char* n : {"allrow_greedy", "icml18", "spartan"}) EXPECT_LE(bytes("tofu"), bytes(n)) << n;
    if (p.count("brute_force+r")) EXPECT_EQ(bytes("kcuts"), bytes("brute_force+r"));
    for (const char* n : {"data_parallel", "spartan", "tofu"}) EXPECT_LE(bytes("kcuts"), bytes(n)) << n;
  }
}

TEST(Partition, MlpTwoAndThreeDevices) {
  Graph g = build_mlp(true);
  for (int k : {2, 3}) {
    std::string what = "mlp, " + std::to_string(k) + " devices";
    auto plans = run_all(g, k, what, true);
    expect_ordering(plans, true, true, what);
    EXPECT_GT(plans["tofu"].comm_bytes, 0);  // the weights' gradients cannot all be free
  }
}

TEST(Partition, MlpFourDevices) {
  Graph g = build_mlp(false);
  auto plans = run_all(g, 4, "mlp without activation, 4 devices", false);
  expect_ordering(plans, false, true, "mlp without activation, 4 devices");
  EXPECT_EQ(plans["equal_chop"].parts, std::vector<int>{4});
  EXPECT_EQ(plans["tofu"].parts, (std::vector<int>{2, 2}));
  EXPECT_EQ(plans["tofu"].step_bytes.size(), 2u);
  EXPECT_EQ(plans["brute_force"].evaluated, 262144);  // 9 tensor classes, 4 tilings each
}

TEST(Partition, ChainWithReplication) {
  Graph g = build_chain();
  for (int k : {2, 4, 8}) {
    std::string what = "chain, " + std::to_string(k) + " devices";
    // Brute force with replication fits 2 and 4 devices (9^5 tilings), not 8. An 8-way chop cannot
    // cut w(4, 4) and replicates it, which three 2-way cuts without replication never do.
    auto plans = run_all(g, k, what, k <= 4);
    expect_ordering(plans, k == 2, k <= 4, what);
  }
}

TEST(Partition, RefinementNeverWorsensPublishedTofu) {
  // refine_rounds = 0 is Tofu as published (one exact search per step); refinement revises blocks
  // of steps with the others fixed and keeps only improvements, within brute force's space.
  SearchOptions published, refined;
  published.threads = refined.threads = 2;
  published.refine_rounds = 0;
  Graph mlp = build_mlp(false), chain = build_chain();
  for (auto [g, k] : {std::pair<const Graph*, int>{&mlp, 4}, {&chain, 4}, {&chain, 8}}) {
    SCOPED_TRACE(std::to_string(g->ops().size()) + " ops, " + std::to_string(k) + " devices");
    Plan a = partition(*g, k, "tofu", published), b = partition(*g, k, "tofu", refined);
    expect_consistent(*g, a, k, "published tofu");
    expect_consistent(*g, b, k, "refined tofu");
    EXPECT_EQ(a.unrefined_bytes, a.comm_bytes);
    EXPECT_EQ(b.unrefined_bytes, a.comm_bytes);
    EXPECT_LE(b.comm_bytes, a.comm_bytes);
    EXPECT_LE(partition(*g, k, "brute_force", refined).comm_bytes, b.comm_bytes);
  }
}

TEST(Partition, BlockSizingCountsTheTablesBuildStepFills) {
  // Refinement decides which blocks are affordable by counting values, not building them: the count
  // equals the entries build_step fills, and with a budget it stops past it (same decision).
  Graph g = build_chain();
  for (bool replicate : {false, true}) {
    Policy policy;
    policy.replicate_tensors = replicate;
    Problem p = make_problem(g, {2, 2, 2}, policy);
    SearchOptions o;
    o.threads = 1;
    Plan plan = partition(g, 8, replicate ? "kcuts" : "tofu", o);
    for (const auto& block : std::vector<std::vector<int>>{{0}, {1}, {0, 1}, {1, 2}, {0, 2}, {0, 1, 2}}) {
      StepProblem sp = build_step(p, policy, plan.assignment, block, 3, 1, std::chrono::steady_clock::time_point::max());
      double filled = 0;
      for (const auto& pair : sp.pairs) filled += static_cast<double>(pair.table.size());
      EXPECT_EQ(block_table_entries(p, policy, plan.assignment, block), filled);
      for (double budget : {filled - 1, filled, filled + 1})
        EXPECT_EQ(block_table_entries(p, policy, plan.assignment, block, budget) > budget, filled > budget);
    }
  }
}

TEST(Partition, BlockSizingCountsTheTablesOnUnevenPartsPoliciesAndNewSteps) {
  // The count walks (step, shares) states instead of listing values: it must agree with the listing
  // on uneven parts, policies that add or narrow choices, and blocks of new steps (not revising).
  // Entries are counted per op and slot (a slot sharing its pair with another counts again).
  auto listed = [](const Graph& g, const Problem& p, const StepProblem& sp) {
    double n = 0;
    for (const auto& op : g.ops()) {
      const double values = sp.domain_sizes[sp.op_var(p.op_class[op.id])];
      for (int t : op.inputs) n += values * sp.domain_sizes[sp.tensor_var(p.tensor_class[t])];
      n += values * sp.domain_sizes[sp.tensor_var(p.tensor_class[op.output])];
    }
    return n;
  };
  Graph mlp = build_mlp(false), chain = build_chain();
  std::vector<Policy> policies(4);
  policies[1].replicate_tensors = true;
  policies[2].replicate_ops = true;
  policies[3].restrict_cuts = [](int tensor, int, const std::vector<int>& c) {
    return tensor % 2 ? std::vector<int>{c.back()} : std::vector<int>{};
  };
  for (const Graph* g : {&mlp, &chain})
    for (const auto& parts : std::vector<std::vector<int>>{{3, 2, 2}, {2, 2, 2, 2}})
      for (size_t k = 0; k < policies.size(); ++k) {
        SCOPED_TRACE(std::to_string(g->ops().size()) + " ops, policy " + std::to_string(k) + ", " +
                     std::to_string(parts.size()) + " steps");
        const Policy& policy = policies[k];
        Problem p = make_problem(*g, parts, policy);
        const int m = static_cast<int>(parts.size());
        Assignment a = empty_assignment(p);
        for (int step = 0; step < m; ++step) {
          // A new block of one or two steps, then the step taken (the first value of each class).
          for (int width = 1; width <= 2 && step + width <= m; ++width) {
            std::vector<int> block;
            for (int i = step; i < step + width; ++i) block.push_back(i);
            StepProblem sp = build_step(p, policy, a, block, m, 1, std::chrono::steady_clock::time_point::max());
            EXPECT_EQ(block_table_entries(p, policy, a, block), listed(*g, p, sp));
          }
          StepProblem sp = build_step(p, policy, a, {step}, m, 1, std::chrono::steady_clock::time_point::max());
          apply_step(p, sp, std::vector<int>(sp.domain_sizes.size(), 0), a);
        }
        for (int mask = 1; mask < (1 << m); ++mask) {
          std::vector<int> block;
          for (int i = 0; i < m; ++i)
            if (mask >> i & 1) block.push_back(i);
          StepProblem sp = build_step(p, policy, a, block, m, 1, std::chrono::steady_clock::time_point::max());
          const double filled = listed(*g, p, sp);
          EXPECT_EQ(block_table_entries(p, policy, a, block), filled) << "block mask " << mask;
          EXPECT_EQ(block_table_entries(p, policy, a, block, filled - 1) > filled - 1, true);
          EXPECT_EQ(block_table_entries(p, policy, a, block, filled) > filled, false);
        }
      }
}

// The greedy order as first written: every remaining variable's weight recomputed by a scan per
// choice (smallest table, ties to fewer neighbours, then the lowest index); conditioning takes the
// scope's neighbour with the most neighbours. plan_elimination must choose exactly as this does.
EliminationPlan scan_order(const std::vector<int>& domains, std::vector<std::vector<int>> scopes, int64_t max_table) {
  const int n = static_cast<int>(domains.size());
  std::vector<char> alive(scopes.size(), 1), done(n, 0);
  auto neighbours = [&](int v) {
    std::set<int> s;
    for (size_t f = 0; f < scopes.size(); ++f)
      if (alive[f] && std::find(scopes[f].begin(), scopes[f].end(), v) != scopes[f].end())
        for (int u : scopes[f])
          if (u != v) s.insert(u);
    return std::vector<int>(s.begin(), s.end());
  };
  EliminationPlan plan;
  while (plan.order.size() + plan.conditioned.size() < static_cast<size_t>(n)) {
    int v = -1;
    double best = 0;
    for (int u = 0; u < n; ++u) {
      if (done[u]) continue;
      double w = 1;
      auto ns = neighbours(u);
      for (int x : ns) w *= domains[x];
      w *= 1 + 1e-9 * static_cast<double>(ns.size());
      if (v < 0 || w < best) v = u, best = w;
    }
    auto scope = neighbours(v);
    int64_t entries = 1;
    bool wide = false;
    for (int u : scope) wide = wide || (entries *= domains[u]) > max_table;
    if (wide) {
      int w = -1;
      size_t most = 0;
      for (int u : scope)
        if (w < 0 || neighbours(u).size() > most) w = u, most = neighbours(u).size();
      plan.conditioned.push_back(w);
      done[w] = 1;
      for (size_t f = 0; f < scopes.size(); ++f) {
        if (!alive[f]) continue;
        auto& sc = scopes[f];
        sc.erase(std::remove(sc.begin(), sc.end(), w), sc.end());
        if (sc.empty()) alive[f] = 0;
      }
      continue;
    }
    for (size_t f = 0; f < scopes.size(); ++f)
      if (alive[f] && std::find(scopes[f].begin(), scopes[f].end(), v) != scopes[f].end()) alive[f] = 0;
    done[v] = 1;
    plan.order.push_back(v);
    if (!scope.empty()) scopes.push_back(scope), alive.push_back(1);
  }
  return plan;
}

TEST(Partition, EliminationOrderIsTheGreedyScan) {
  // The order decides which of equal minima a search returns, so the ordered-set bookkeeping must
  // reproduce the scan's choices exactly, ties and conditioning included.
  std::mt19937 rng(5);
  size_t conditioned = 0;
  for (int rep = 0; rep < 200; ++rep) {
    const int n = 2 + static_cast<int>(rng() % 30);
    std::vector<int> domains(n);
    for (int& d : domains) d = 2 + static_cast<int>(rng() % 3);
    std::vector<std::vector<int>> scopes;
    const int nf = n + static_cast<int>(rng() % (2 * n));
    for (int f = 0; f < nf; ++f) {
      std::vector<int> s = {static_cast<int>(rng() % n), static_cast<int>(rng() % n)};
      if (rng() % 4 == 0) s.push_back(static_cast<int>(rng() % n));
      std::sort(s.begin(), s.end());
      s.erase(std::unique(s.begin(), s.end()), s.end());
      scopes.push_back(s);
    }
    const int64_t max_table = rep % 2 ? 16 : int64_t{1} << 26;
    OrderOptions o;
    o.max_table = max_table;
    o.too_wide = TooWide::kCondition;
    EliminationPlan got = plan_elimination(domains, scopes, o), want = scan_order(domains, scopes, max_table);
    ASSERT_EQ(got.order, want.order) << "rep " << rep;
    ASSERT_EQ(got.conditioned, want.conditioned) << "rep " << rep;
    conditioned += got.conditioned.size();
  }
  EXPECT_GT(conditioned, 20u);  // the narrow table limit did send variables to conditioning
}

TEST(Partition, SingleMatmulHandComputed) {
  Graph g = build_matmul();
  // Without replication w must be cut: the cheapest is rows split, each device fetching the
  // half of w it lacks (2 x 8 floats = 64 bytes). Data parallelism replicates w: nothing moves.
  auto plans = run_all(g, 2, "matmul, 2 devices", true);
  for (const char* n : {"tofu", "brute_force", "equal_chop", "allrow_greedy", "icml18"})
    EXPECT_EQ(plans[n].comm_bytes, 64) << n;
  for (const char* n : {"kcuts", "data_parallel", "brute_force+r"}) EXPECT_EQ(plans[n].comm_bytes, 0) << n;
  EXPECT_EQ(plans["data_parallel"].assignment.tilings[g.find_tensor("w")], std::vector<int>{cost::kReplicated});
  EXPECT_EQ(plans["data_parallel"].assignment.tilings[g.find_tensor("x")], std::vector<int>{0});
  SearchOptions o;
  o.threads = 2;
  EXPECT_EQ(partition(g, 4, "data_parallel", o).comm_bytes, 0);
  // tofu splits the rows (i): each device does exactly half of the one device's arithmetic.
  const int64_t whole = evaluate(g, partition(g, 1, "tofu", o)).flops_per_device.at(0);
  EXPECT_GT(whole, 0);
  EXPECT_EQ(plans["tofu"].assignment.splits[0][0].var, 0);
  EXPECT_EQ(evaluate(g, plans["tofu"]).flops_per_device, (std::vector<int64_t>{whole / 2, whole / 2}));
}

TEST(Partition, UnrolledTimeStepsShareChoices) {
  // Two time steps of one cell (same unroll key, type and extents) share w: Tofu §5.1 ties them.
  Graph g;
  int w = g.add_tensor("w", {4, 4}, Role::kParameter);
  std::vector<int> ops;
  for (int t = 0; t < 2; ++t) {
    int x = g.add_tensor("x" + std::to_string(t), {8, 4}, Role::kInput);
    ops.push_back(g.add_op("matmul", "cell" + std::to_string(t), "", {x, w}, matmul("matmul"),
                           "h" + std::to_string(t), Role::kActivation, std::nullopt, Phase::kForward, -1, "cell"));
  }
  SearchOptions o;
  o.threads = 2;
  for (const char* name : {"tofu", "spartan", "brute_force", "kcuts"}) {
    Plan p = partition(g, 4, name, o);
    expect_consistent(g, p, 4, "unrolled");
    const auto& a = p.assignment.splits[ops[0]];
    const auto& b = p.assignment.splits[ops[1]];
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].kind, b[i].kind) << name;
      EXPECT_EQ(a[i].var, b[i].var) << name;
    }
    EXPECT_EQ(p.assignment.tilings[g.op(ops[0]).output], p.assignment.tilings[g.op(ops[1]).output]) << name;
  }
}

TEST(Partition, OneDeviceMovesNothing) {
  Graph g = build_mlp(true);
  for (const auto& name : algorithm_names()) {
    Plan p = partition(g, 1, name);
    EXPECT_EQ(p.comm_bytes, 0) << name;
    EXPECT_TRUE(p.parts.empty()) << name;
    expect_consistent(g, p, 1, "one device");
  }
}

TEST(Partition, RejectsBadRequests) {
  Graph g = build_chain();
  EXPECT_THROW(partition(g, 0, "tofu"), PlanError);
  EXPECT_THROW(partition(g, -2, "tofu"), PlanError);
  try {
    partition(g, 2, "tofoo");
    ADD_FAILURE() << "an unknown algorithm was accepted";
  } catch (const PlanError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("tofoo"), std::string::npos) << msg;
    for (const auto& n : algorithm_names()) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
  SearchOptions neg;
  neg.time_limit = -1;
  EXPECT_THROW(partition(g, 2, "tofu", neg), PlanError);
  SearchOptions budget;
  budget.duplication_budget = -1;
  EXPECT_THROW(partition(g, 2, "spartan", budget), PlanError);
}

TEST(Partition, BruteForceRefusesGraphsPastItsBudget) {
  // 11 tensor classes with 4 tilings each on 4 devices: 4^11 assignments.
  Graph g = build_mlp(true);
  try {
    partition(g, 4, "brute_force");
    ADD_FAILURE() << "brute force took a 4^11 space";
  } catch (const SearchTooLarge& e) {
    EXPECT_NE(std::string(e.what()).find("brute_force would try"), std::string::npos) << e.what();
  }
}

TEST(Partition, TimeLimitThrowsSearchTimeout) {
  Graph g = build_mlp(true);
  SearchOptions o;
  o.time_limit = 1e-9;
  o.threads = 1;
  for (const char* n : {"tofu", "spartan", "brute_force"}) EXPECT_THROW(partition(g, 2, n, o), SearchTimeout) << n;
}

TEST(Partition, EvaluateRejectsPlansForAnotherGraph) {
  Graph g = build_chain();
  SearchOptions o;
  o.threads = 2;
  const Plan plan = partition(g, 4, "tofu", o);
  {
    Plan p = plan;
    p.assignment.tilings.pop_back();
    EXPECT_THROW(evaluate(g, p), PlanError);
  }
  {
    Plan p = plan;
    p.assignment.splits.push_back(p.assignment.splits.back());
    EXPECT_THROW(evaluate(g, p), PlanError);
  }
  {
    Plan p = plan;
    p.assignment.tilings[0] = {2, 0};  // x has rank 2
    try {
      evaluate(g, p);
      ADD_FAILURE() << "a cut along dimension 2 of a matrix was accepted";
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
    }
  }
  {
    Plan p = plan;
    p.assignment.tilings[1] = {0};  // one cut for a two-step plan
    EXPECT_THROW(evaluate(g, p), PlanError);
  }
  {
    Plan p = plan;
    p.assignment.splits[0][0] = {tdl::StrategyKind::kOutput, 7, tdl::Reducer::kSum};
    EXPECT_THROW(evaluate(g, p), PlanError);
  }
  {
    Plan p = plan;
    p.devices = 8;  // parts {2, 2} make 4
    EXPECT_THROW(evaluate(g, p), PlanError);
  }
  EXPECT_EQ(evaluate(g, plan).comm_bytes, plan.comm_bytes);
}

// The frontier's space (cpp/frontier): ops may also replicate their work, and a block of every step
// built from scratch enumerates whole sequences, each step's choices given the steps before it.
TEST(Problem, ReplicateOpsAndAFreshBlockOfEveryStep) {
  Graph g = build_matmul();  // x(8, 4) @ w(4, 4) -> y(8, 4): i = 8, j = 4, k = 4
  Policy policy;
  policy.replicate_tensors = true;
  policy.replicate_ops = true;
  Problem p = make_problem(g, {2, 2}, policy);
  auto first = op_choices(p, policy, 0, {}, 0);
  ASSERT_EQ(first.size(), 4u);  // output i, output j, reduce k, replicate
  EXPECT_EQ(first.back().kind, tdl::StrategyKind::kReplicate);
  StepProblem sp = build_step(p, policy, empty_assignment(p), {0, 1}, 2, 1, std::chrono::steady_clock::time_point::max());
  // Two steps of 2 on 4-wide j and k still leave shares of 2 >= 2: every pair of choices is a sequence.
  EXPECT_EQ(sp.op_domain[p.op_class[0]].size(), 16u);
  EXPECT_EQ(sp.tensor_domain[p.tensor_class[1]].size(), 9u);  // w(4, 4): rows, columns or replicated, twice
  for (const auto& pair : sp.pairs) EXPECT_EQ(pair.table.size(), sp.op_domain[pair.op_class].size() *
                                                                     sp.tensor_domain[pair.tensor_class].size());
}

}  // namespace
}  // namespace tilewise::partition

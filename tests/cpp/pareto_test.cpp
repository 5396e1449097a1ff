// Cost frontiers (cpp/partition/frontier.*, pareto.*): Algorithm 1 on hand-made sets and on
// random-order sets (TensorOpt Lemma 2), the generic engine over frontiers against enumeration
// of every assignment on random graphs, conditioning, the heuristic (Eq. 7), bucketing, threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "partition/elimination.h"
#include "partition/elimination_engine.h"
#include "partition/exact_sum.h"
#include "partition/frontier.h"
#include "partition/pareto.h"
#include "partition/problem.h"
#include "partition/weighted_sum.h"

namespace tilewise::partition {
namespace {

std::vector<int> kept(const std::vector<Point>& c, double bucket = 0) { return reduce_indices(c, bucket); }

TEST(FrontierReduce, KeepsTuplesStrictlyFasterThanEveryLighterOne) {
  // Points are (time, memory), unsorted; by memory the order is 0, 2, 4, 1, 3.
  std::vector<Point> c = {{9, 1}, {3, 4}, {5, 2}, {4, 5}, {2, 3}};
  EXPECT_EQ(kept(c), (std::vector<int>{0, 2, 4}));  // (9,1) (5,2) (2,3); (3,4) and (4,5) are slower
  EXPECT_TRUE(kept({}).empty());
  EXPECT_EQ(kept({{1, 1}}), (std::vector<int>{0}));
}

TEST(FrontierReduce, EqualMemoryKeepsTheFasterAndEqualTimeKeepsTheLighter) {
  EXPECT_EQ(kept({{5, 2}, {3, 2}, {4, 2}}), (std::vector<int>{1}));
  EXPECT_EQ(kept({{3, 7}, {3, 2}, {3, 5}}), (std::vector<int>{1}));
}

TEST(FrontierReduce, DuplicatesKeepTheFirst) {
  EXPECT_EQ(kept({{1, 1}, {2, 0}, {1, 1}, {2, 0}}), (std::vector<int>{1, 0}));
}

TEST(FrontierReduce, BucketCountsMemoriesInOneBucketAsEqual) {
  // Buckets of 10: 11 and 19 share bucket 1, where the faster (19, time 1) is kept.
  std::vector<Point> c = {{5, 11}, {1, 19}, {0.5, 25}, {9, 3}};
  EXPECT_EQ(kept(c), (std::vector<int>{3, 0, 1, 2}));
  EXPECT_EQ(kept(c, 10), (std::vector<int>{3, 1, 2}));
}

TEST(FrontierReduce, BucketKeepsTheLightestPoint) {
  // (9, 3) and (5, 5) share bucket 0: the faster stays, and so does the lightest.
  EXPECT_EQ(kept({{5, 5}, {9, 3}, {1, 12}}, 10), (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(kept({{5, 5}, {9, 3}, {4, 8}, {1, 12}}, 10), (std::vector<int>{1, 2, 3}));
}

// TensorOpt Lemma 2: K tuples whose memory and time ranks are independent and uniform have a
// frontier of H_K tuples on average. Measured over many sets.
TEST(FrontierReduce, RandomOrderSetsHaveHarmonicSize) {
  std::mt19937 rng(2024);
  std::uniform_real_distribution<double> u(0, 1);
  for (int K : {10, 100, 1000}) {
    const int sets = 4000;
    double total = 0;
    for (int s = 0; s < sets; ++s) {
      std::vector<Point> c(K);
      for (auto& p : c) p = {u(rng), u(rng)};
      total += static_cast<double>(kept(c).size());
    }
    double harmonic = 0;
    for (int k = 1; k <= K; ++k) harmonic += 1.0 / k;
    // The size's variance is H_K - H_K^(2) < H_K: the mean of 4000 sets is within 0.2 with margin.
    EXPECT_NEAR(total / sets, harmonic, 0.2) << "K = " << K;
  }
}

TEST(FrontierExactSum, IsCorrectlyRounded) {
  EXPECT_EQ(exact_sum({0.1, 0.2, 0.3}), 0.6);
  EXPECT_EQ(exact_sum({1.0, 1e-16, 1e-16}), 1.0000000000000002);
  EXPECT_EQ(exact_sum({1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50}), 1e-100);
  EXPECT_EQ(exact_sum({1.0, std::ldexp(1.0, -53), std::ldexp(1.0, -105)}), 1.0000000000000002);
  EXPECT_EQ(exact_sum({1.0, std::ldexp(1.0, -53)}), 1.0);  // a half-way tie goes to even
  EXPECT_EQ(exact_sum({}), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Random problems against enumeration.

// Costs on a grid of 1/8 (exact in any order of summation), some nodes with equal costs.
Point grid_point(std::mt19937& rng) {
  std::uniform_int_distribution<int> d(0, 80);
  return {d(rng) / 8.0, d(rng) / 8.0};
}

ParetoProblem random_problem(std::mt19937& rng, int shape) {
  ParetoProblem p;
  const int n = std::uniform_int_distribution<int>(1, 7)(rng);
  for (int v = 0; v < n; ++v) {
    p.nodes.emplace_back(std::uniform_int_distribution<int>(1, 5)(rng));
    for (auto& c : p.nodes.back()) c = grid_point(rng);
  }
  auto edge = [&](int u, int v) {
    ParetoEdge e{u, v, std::vector<Point>(p.nodes[u].size() * p.nodes[v].size())};
    for (auto& c : e.table) c = std::uniform_int_distribution<int>(0, 3)(rng) == 0 ? Point{0, 0} : grid_point(rng);
    p.edges.push_back(std::move(e));
  };
  for (int v = 1; v < n; ++v) {
    if (shape == 0) edge(v - 1, v);                                                 // chain
    else edge(std::uniform_int_distribution<int>(0, v - 1)(rng), v);                // tree: branches and joins
  }
  if (shape == 2)  // cycles and a second edge between some pairs
    for (int extra = 0; extra < n; ++extra) {
      int a = std::uniform_int_distribution<int>(0, n - 1)(rng), b = std::uniform_int_distribution<int>(0, n - 1)(rng);
      if (a != b) edge(a, b);
    }
  return p;
}

// Every assignment evaluated, reduced by Algorithm 1.
std::vector<Point> enumerate_frontier(const ParetoProblem& p) {
  std::vector<Point> all;
  std::vector<int> choice(p.nodes.size(), 0);
  while (true) {
    all.push_back(evaluate_pareto(p, choice));
    size_t k = 0;
    for (; k < choice.size(); ++k) {
      if (++choice[k] < static_cast<int>(p.nodes[k].size())) break;
      choice[k] = 0;
    }
    if (k == choice.size()) break;
  }
  std::vector<Point> f;
  for (int i : reduce_indices(all)) f.push_back(all[i]);
  return f;
}

void expect_same(const std::vector<Point>& a, const std::vector<Point>& b, int trial) {
  ASSERT_EQ(a.size(), b.size()) << "trial " << trial;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].time, b[i].time) << "trial " << trial << " point " << i;
    EXPECT_EQ(a[i].memory, b[i].memory) << "trial " << trial << " point " << i;
  }
}

void expect_unrolls(const ParetoProblem& p, const ParetoSolution& s, int trial) {
  ASSERT_EQ(s.points.size(), s.choices.size());
  for (size_t i = 0; i < s.points.size(); ++i) {
    Point q = evaluate_pareto(p, s.choices[i]);
    EXPECT_EQ(q.time, s.points[i].time) << "trial " << trial;
    EXPECT_EQ(q.memory, s.points[i].memory) << "trial " << trial;
  }
  for (size_t i = 1; i < s.points.size(); ++i) {
    EXPECT_LT(s.points[i - 1].memory, s.points[i].memory);
    EXPECT_GT(s.points[i - 1].time, s.points[i].time);
  }
}

TEST(FrontierSolve, MatchesEnumerationOnChainsTreesAndCycles) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    ParetoProblem p = random_problem(rng, trial % 3);
    ParetoSolution s = solve_pareto(p);
    expect_same(s.points, enumerate_frontier(p), trial);
    expect_unrolls(p, s, trial);
    EXPECT_TRUE(s.stats.conditioned.empty());
    EXPECT_TRUE(s.stats.fixed.empty());
  }
}

TEST(FrontierSolve, BoundsShrinkTheTablesAndKeepTheFrontier) {
  std::mt19937 rng(29);
  int shrunk = 0;
  for (int trial = 0; trial < 150; ++trial) {
    ParetoProblem p = random_problem(rng, trial % 3);
    ParetoOptions o;
    o.bound = false;
    ParetoSolution plain = solve_pareto(p, o);
    o.bound = true;
    ParetoSolution bounded = solve_pareto(p, o);
    expect_same(bounded.points, plain.points, trial);
    expect_unrolls(p, bounded, trial);
    EXPECT_GE(bounded.incumbents, 1);
    int64_t before = 0, after = 0;
    for (const auto& st : plain.stats.steps) before += st.total_points;
    for (const auto& st : bounded.stats.steps) after += st.total_points;
    EXPECT_LE(after, before) << "trial " << trial;
    shrunk += after < before;
  }
  EXPECT_GT(shrunk, 30);
}

TEST(FrontierSolve, ConditioningIsExactWhenTheTableLimitIsTiny) {
  std::mt19937 rng(11);
  int conditioned = 0;
  for (int trial = 0; trial < 150; ++trial) {
    ParetoProblem p = random_problem(rng, 2);
    ParetoOptions o;
    o.max_table = 1;
    ParetoSolution s = solve_pareto(p, o);
    expect_same(s.points, enumerate_frontier(p), trial);
    expect_unrolls(p, s, trial);
    conditioned += !s.stats.conditioned.empty();
    int64_t combos = 1;
    for (int v : s.stats.conditioned) combos *= static_cast<int64_t>(p.nodes[v].size());
    EXPECT_EQ(s.stats.subproblems, combos);
  }
  EXPECT_GT(conditioned, 50);
}

TEST(FrontierSolve, HeuristicEliminationIsDominatedByTheExactFrontierAndCounted) {
  std::mt19937 rng(13);
  int used = 0;
  for (int trial = 0; trial < 150; ++trial) {
    ParetoProblem p = random_problem(rng, 2);
    ParetoOptions o;
    o.max_table = 1;
    o.heuristic = true;
    o.bound = false;
    ParetoSolution s = solve_pareto(p, o);
    expect_unrolls(p, s, trial);
    used += !s.stats.fixed.empty();
    EXPECT_EQ(s.stats.subproblems, 1);
    for (auto [v, x] : s.stats.fixed)
      for (const auto& c : s.choices) EXPECT_EQ(c[v], x);
    // Every heuristic point is a real assignment, so some exact point is at least as good.
    auto exact = enumerate_frontier(p);
    for (const Point& q : s.points)
      EXPECT_TRUE(std::any_of(exact.begin(), exact.end(),
                              [&](const Point& e) { return e.time <= q.time && e.memory <= q.memory; }));
    // Bounded, the incumbents come from the same restricted space (the frontier's plan): the same
    // frontier, every point with the fixed values.
    o.bound = true;
    ParetoSolution b = solve_pareto(p, o);
    expect_same(b.points, s.points, trial);
    expect_unrolls(p, b, trial);
    EXPECT_GE(b.incumbents, 1);
    for (auto [v, x] : b.stats.fixed)
      for (const auto& c : b.choices) EXPECT_EQ(c[v], x);
  }
  EXPECT_GT(used, 50);
}

TEST(FrontierSolve, ThreadsDoNotChangeTheResult) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 40; ++trial) {
    ParetoProblem p = random_problem(rng, 2);
    ParetoOptions one, four;
    one.threads = 1, four.threads = 4;
    ParetoSolution a = solve_pareto(p, one), b = solve_pareto(p, four);
    expect_same(a.points, b.points, trial);
    EXPECT_EQ(a.choices, b.choices);
  }
}

TEST(FrontierSolve, AChainIsEliminatedInOrderAsLDP) {
  // o_0 - o_1 - ... - o_5 with K = 4: every table is CF(o_i, ·) over the next node's 4 values.
  std::mt19937 rng(19);
  ParetoProblem p;
  for (int v = 0; v < 6; ++v) {
    p.nodes.emplace_back(4);
    for (auto& c : p.nodes.back()) c = grid_point(rng);
    if (v > 0) {
      p.edges.push_back({v - 1, v, std::vector<Point>(16)});
      for (auto& c : p.edges.back().table) c = grid_point(rng);
    }
  }
  ParetoSolution s = solve_pareto(p);
  ASSERT_EQ(s.stats.steps.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(s.stats.steps[i].var, i);
    EXPECT_EQ(s.stats.steps[i].entries, i < 5 ? 4 : 1);
  }
  EXPECT_EQ(s.stats.largest_table, 16);
  expect_same(s.points, enumerate_frontier(p), 0);
}

TEST(FrontierSolve, AJoinMultipliesTheFrontiersOfItsBranches) {
  // A star: two leaves are eliminated first, each into a frontier over the centre; the centre
  // goes third (tied with the last leaf, lower index) and multiplies the two frontiers.
  std::mt19937 rng(31);
  for (int trial = 0; trial < 20; ++trial) {
    ParetoProblem p;
    p.nodes.resize(4);
    for (auto& n : p.nodes) {
      n.resize(4);
      for (auto& c : n) c = grid_point(rng);
    }
    for (int leaf = 1; leaf < 4; ++leaf) {
      p.edges.push_back({0, leaf, std::vector<Point>(16)});
      for (auto& c : p.edges.back().table) c = grid_point(rng);
    }
    ParetoSolution s = solve_pareto(p);
    ASSERT_EQ(s.stats.steps[2].var, 0);
    expect_same(s.points, enumerate_frontier(p), trial);
    expect_unrolls(p, s, trial);
  }
}

TEST(FrontierSolve, MemoryBucketStaysWithinItsBound) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 100; ++trial) {
    ParetoProblem p = random_problem(rng, trial % 3);
    ParetoOptions o;
    o.memory_bucket = trial % 2 ? 1.5 : 6.0;
    o.bound = trial % 4 < 2;  // the incumbents alone would give the least memory (the heaviest weight on it)
    ParetoSolution s = solve_pareto(p, o);
    expect_unrolls(p, s, trial);
    EXPECT_DOUBLE_EQ(s.memory_error_bound, o.memory_bucket * static_cast<double>(s.stats.steps.size() + 1));
    const std::vector<Point> exact = enumerate_frontier(p);
    ASSERT_FALSE(s.points.empty()) << "trial " << trial;
    // The least-memory end is exact: every entry keeps its lightest point.
    EXPECT_EQ(s.points[0].memory, exact[0].memory) << "trial " << trial;
    EXPECT_EQ(s.points[0].time, exact[0].time) << "trial " << trial;
    for (const Point& e : exact)
      EXPECT_TRUE(std::any_of(s.points.begin(), s.points.end(), [&](const Point& q) {
        return q.time <= e.time && q.memory <= e.memory + s.memory_error_bound;
      })) << "trial " << trial;
  }
}

// One elimination step against its definition: for every value x, every combination of one point of
// each input summed; the result is Algorithm 1 (then the bucket's thinning) over all of them, and each
// kept point unrolls to a combination that sums to it. Inputs with several points at one x make the
// merge fold products (two, three, four such inputs), drop dominated lists and pass a chain's turn on.
TEST(FrontierEliminate, EqualsTheReducedUnionOfEveryCombination) {
  std::mt19937 rng(57);
  std::uniform_int_distribution<int> cost(0, 40), count(0, 5), k_of(1, 4), dv_of(1, 5);
  for (int trial = 0; trial < 3000; ++trial) {
    const int k = k_of(rng), dv = dv_of(rng);
    const double bucket = trial % 3 == 0 ? 0.0 : (trial % 3 == 1 ? 4.0 : 16.0);
    std::vector<Frontier> inputs(static_cast<size_t>(k) * dv);  // [x * k + i]
    for (auto& f : inputs) {
      std::vector<Point> raw(static_cast<size_t>(count(rng) == 0 && rng() % 4 == 0 ? 0 : 1 + count(rng)));
      for (auto& p : raw) p = {static_cast<double>(cost(rng)), static_cast<double>(cost(rng))};
      for (int i : reduce_indices(raw)) f.push_back(raw[i]);
    }
    std::vector<Point> all;
    for (int x = 0; x < dv; ++x) {
      std::vector<Point> sums{Point{}};
      for (int i = 0; i < k; ++i) {
        std::vector<Point> next;
        for (const Point& a : sums)
          for (const Point& b : inputs[static_cast<size_t>(x) * k + i]) next.push_back({a.time + b.time, a.memory + b.memory});
        sums.swap(next);
      }
      all.insert(all.end(), sums.begin(), sums.end());
    }
    std::vector<Point> want;
    for (int i : reduce_indices(all, bucket)) want.push_back(all[i]);
    FrontierSum s(bucket);
    Frontier got;
    FrontierSum::Back back;
    s.eliminate(k, dv, [&](int i, int x) -> const Frontier& { return inputs[static_cast<size_t>(x) * k + i]; }, got,
                back);
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    for (size_t p = 0; p < got.size(); ++p) {
      EXPECT_EQ(got[p].time, want[p].time) << "trial " << trial << " point " << p;
      EXPECT_EQ(got[p].memory, want[p].memory) << "trial " << trial << " point " << p;
      std::vector<int> at(k);
      const int x = FrontierSum::unroll(back, static_cast<int>(p), k, at.data());
      Point sum{};
      for (int i = 0; i < k; ++i) {
        const Frontier& f = inputs[static_cast<size_t>(x) * k + i];
        ASSERT_LT(at[i], static_cast<int>(f.size())) << "trial " << trial;
        sum.time += f[at[i]].time, sum.memory += f[at[i]].memory;
      }
      EXPECT_EQ(sum.time, got[p].time) << "trial " << trial;
      EXPECT_EQ(sum.memory, got[p].memory) << "trial " << trial;
    }
  }
}

TEST(FrontierSolve, EmptyProblemAndImpossibleNothing) {
  ParetoSolution s = solve_pareto({});
  ASSERT_EQ(s.points.size(), 1u);
  EXPECT_EQ(s.points[0].time, 0);
  EXPECT_TRUE(s.choices[0].empty());
}

TEST(FrontierSolve, RejectsMalformedProblems) {
  ParetoProblem p;
  p.nodes = {{{1, 1}}, {{1, 1}, {2, 0}}};
  auto bad = [&](ParetoProblem q, const std::string& says) {
    try {
      solve_pareto(q);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const PlanError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  ParetoProblem q = p;
  q.edges = {{0, 2, {}}};
  bad(q, "out of range");
  q.edges = {{1, 1, std::vector<Point>(4)}};
  bad(q, "itself");
  q.edges = {{0, 1, std::vector<Point>(3)}};
  bad(q, "valid: 2");
  q = p;
  q.nodes[1][0].time = -1;
  bad(q, "node 1 configuration 0");
  q.nodes[1][0].time = NAN;
  bad(q, "finite");
  q = p;
  q.nodes[0].clear();
  bad(q, "no configuration");
}

// The engine is generic: the int64 min-sum conditions on variables as exactly as frontiers do.
TEST(FrontierEngine, MinSumConditioningMatchesTheUnconditionedMinimum) {
  std::mt19937 rng(29);
  for (int trial = 0; trial < 100; ++trial) {
    const int n = std::uniform_int_distribution<int>(2, 7)(rng);
    std::vector<int> domains(n);
    for (auto& d : domains) d = std::uniform_int_distribution<int>(1, 4)(rng);
    std::vector<Factor> factors;
    for (int f = 0; f < 2 * n; ++f) {
      int a = std::uniform_int_distribution<int>(0, n - 1)(rng), b = std::uniform_int_distribution<int>(0, n - 1)(rng);
      Factor fac{a == b ? std::vector<int>{a} : std::vector<int>{a, b}, {}};
      int64_t entries = 1;
      for (int v : fac.vars) entries *= domains[v];
      for (int64_t e = 0; e < entries; ++e) fac.table.push_back(std::uniform_int_distribution<int64_t>(0, 50)(rng));
      factors.push_back(std::move(fac));
    }
    EngineOptions o;
    o.order.max_table = 1;
    o.order.too_wide = TooWide::kCondition;
    Solution<MinSum> c = eliminate_all(MinSum{}, domains, factors, o);
    EliminationResult r = eliminate(domains, factors);
    EXPECT_EQ(c.value(), r.cost) << "trial " << trial;
    std::vector<int> values = c.assignment();
    int64_t total = 0;
    for (const auto& f : factors) {
      int64_t e = 0;
      for (int v : f.vars) e = e * domains[v] + values[v];
      total += f.table[e];
    }
    EXPECT_EQ(total, r.cost) << "trial " << trial;
  }
}

}  // namespace
}  // namespace tilewise::partition

namespace tilewise::partition {
namespace {

// One weight alone, written plainly: the oracle for WeightedSums.
struct WeightedSum {
  using Value = double;
  using Back = int;  // the minimising value of the eliminated variable
  static constexpr bool kTracksSizes = false;
  static constexpr bool kBounds = false;
  static Value unit() { return 0; }
  static int64_t size(const Value&) { return 1; }
  static int64_t bytes(const Value&, const Back&) { return sizeof(Value) + sizeof(Back); }
  static double score(const Value& v) { return v; }

  template <class At>
  void eliminate(int k, int dv, const At& at, Value& out, Back& back) const {
    double best = std::numeric_limits<double>::infinity();
    int arg = 0;
    for (int x = 0; x < dv; ++x) {
      double sum = 0;
      for (int i = 0; i < k; ++i) sum += at(i, x);
      if (sum < best) best = sum, arg = x;
    }
    out = best, back = arg;
  }
  static int unroll(const Back& back, int, int k, int* inputs) {
    for (int i = 0; i < k; ++i) inputs[i] = 0;
    return back;
  }
};

// One factor per node and per edge, each cost mapped by `value`.
template <class S, class Value>
std::vector<BasicFactor<S>> factors_of(const ParetoProblem& p, const Value& value) {
  std::vector<BasicFactor<S>> out;
  for (size_t v = 0; v < p.nodes.size(); ++v) {
    out.push_back({{static_cast<int>(v)}, {}});
    for (const Point& c : p.nodes[v]) out.back().table.push_back(value(c));
  }
  for (const auto& e : p.edges) {
    out.push_back({{e.u, e.v}, {}});
    for (const Point& c : e.table) out.back().table.push_back(value(c));
  }
  return out;
}

// The nine weighted sums in one pass (WeightedSums) against nine WeightedSum searches over the same
// plan, heuristic fixes included: the same minimum and the same minimising assignment per weight.
TEST(WeightedSums, OnePassEqualsOneSearchPerWeight) {
  std::mt19937 rng(41);
  const std::array<double, 3> weights{0.01, 1, 100};
  int fixed = 0;
  for (int trial = 0; trial < 120; ++trial) {
    ParetoProblem p = random_problem(rng, trial % 3);
    std::vector<int> domains;
    for (const auto& n : p.nodes) domains.push_back(static_cast<int>(n.size()));
    auto all = factors_of<WeightedSums<3>>(p, [&](const Point& c) {
      std::array<double, 3> v;
      for (int w = 0; w < 3; ++w) v[w] = c.time + weights[w] * c.memory;
      return v;
    });
    EngineOptions eo;
    eo.order.max_table = trial % 2 ? 1 : int64_t{1} << 20;
    eo.order.too_wide = TooWide::kHeuristic;
    eo.threads = 1 + trial % 3;
    eo.parallel_work = 1;  // every table split over the threads
    const EliminationPlan plan = plan_search(WeightedSums<3>{}, domains, all, eo.order);
    fixed += !plan.fixed.empty();
    Solution<WeightedSums<3>> one = eliminate_all(WeightedSums<3>{}, domains, all, eo, &plan);
    for (int w = 0; w < 3; ++w) {
      Solution<WeightedSum> single =
          eliminate_all(WeightedSum{}, domains,
                        factors_of<WeightedSum>(p, [&](const Point& c) { return c.time + weights[w] * c.memory; }), eo,
                        &plan);
      EXPECT_EQ(one.value()[w], single.value()) << "trial " << trial << " weight " << w;
      EXPECT_EQ(one.assignment(w), single.assignment(0)) << "trial " << trial << " weight " << w;
    }
  }
  EXPECT_GT(fixed, 20);
}

// A running sum of bounds, loosened, never exceeds the exact sum of what it holds (the engine keeps
// the live factors' bound so), however the additions and subtractions round.
TEST(FrontierBounds, LoosenedRunningSumsStayLowerBounds) {
  std::mt19937 rng(43);
  std::uniform_real_distribution<double> mag(-20, 20);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<FrontierSum::Bound> live;
    FrontierSum::Bound sum{}, largest{};
    int64_t operations = 0;
    for (int step = 0; step < 400; ++step) {
      if (!live.empty() && rng() % 2) {
        const size_t i = rng() % live.size();
        sum = FrontierSum::sub(sum, live[i]), ++operations;
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        live.push_back({std::ldexp(1.0 + (rng() % 1000) / 999.0, static_cast<int>(mag(rng))),
                        std::ldexp(1.0 + (rng() % 1000) / 997.0, static_cast<int>(mag(rng)))});
        sum = FrontierSum::add(sum, live.back()), ++operations;
        largest = FrontierSum::largest(largest, sum);
      }
      std::vector<double> times, memories;
      for (const auto& b : live) times.push_back(b.time), memories.push_back(b.memory);
      const FrontierSum::Bound safe = FrontierSum::loosen(sum, largest, operations);
      ASSERT_LE(safe.time, exact_sum(times)) << "trial " << trial << " step " << step;
      ASSERT_LE(safe.memory, exact_sum(memories)) << "trial " << trial << " step " << step;
      ASSERT_GE(safe.time, 0);
    }
  }
}

}  // namespace
}  // namespace tilewise::partition

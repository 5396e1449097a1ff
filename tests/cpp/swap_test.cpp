// The swap stage (cpp/swap) on hand-checked cases: SwapAdvisor's Fig. 4.1 (the three timings the
// thesis gives), Fig. 4.3's control edges, the encodings and operators of Figs. 4.5-4.6, the buddy
// allocator, ODSwap, the search's determinism across thread counts, and the errors.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "swap/buddy.h"
#include "swap/odswap.h"
#include "swap/planner.h"
#include "swap/search.h"
#include "swap/simulate.h"

namespace tilewise::swap {
namespace {

constexpr int64_t MB = 1000000;

/// A problem from names: tensors {name: (MB, parameter?)}, ops (name, inputs, outputs, seconds).
struct Builder {
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
  std::map<std::string, int> index;

  Builder& tensor(const std::string& name, int64_t bytes, bool parameter = false, bool live_out = false) {
    index[name] = static_cast<int>(tensors.size());
    tensors.push_back({name, bytes, parameter ? TensorKind::kParameter : TensorKind::kActivation, live_out});
    return *this;
  }
  Builder& op(const std::string& name, const std::vector<std::string>& in, const std::vector<std::string>& out,
              double seconds = 1) {
    Op o{name, {}, {}, seconds};
    for (const auto& t : in) o.inputs.push_back(index.at(t));
    for (const auto& t : out) o.outputs.push_back(index.at(t));
    ops.push_back(o);
    return *this;
  }
  Problem make(int64_t capacity, HostLink host = {1.0 * MB, 2.0 * MB}) const {
    return Problem::make(tensors, ops, capacity, host);
  }
  Schedule order(const std::vector<std::string>& names) const {
    Schedule s;
    for (const auto& n : names)
      for (size_t o = 0; o < ops.size(); ++o)
        if (ops[o].name == n) s.push_back(static_cast<int>(o));
    return s;
  }
};

/// Fig. 4.1(a): Data -> A0; Conv1(A0, W1) -> A1; Conv2(A0, W2) -> A2 (2 MB); Conv3(A2, W3) -> A3;
/// Conv4(A3, W4) -> A4; Concat(A1, A4) -> A5 (2 MB). The forward part of a training graph: its
/// activations are live out (the backward pass needs them), parameters start on the host.
Builder figure_4_1() {
  Builder b;
  for (const char* w : {"W1", "W2", "W3", "W4"}) b.tensor(w, MB, true);
  for (const char* a : {"A0", "A1", "A2", "A3", "A4", "A5"})
    b.tensor(a, std::string(a) == "A2" || std::string(a) == "A5" ? 2 * MB : MB, false, true);
  b.op("Data", {}, {"A0"})
      .op("Conv1", {"A0", "W1"}, {"A1"})
      .op("Conv2", {"A0", "W2"}, {"A2"})
      .op("Conv3", {"A2", "W3"}, {"A3"})
      .op("Conv4", {"A3", "W4"}, {"A4"})
      .op("Concat", {"A1", "A4"}, {"A5"});
  return b;
}

const std::vector<std::string> kLeftFirst = {"Data", "Conv1", "Conv2", "Conv3", "Conv4", "Concat"};
const std::vector<std::string> kRightFirst = {"Data", "Conv2", "Conv3", "Conv4", "Conv1", "Concat"};
const Pool kCoarse = {{1, 1}, {5}};    // five 2 MB objects
const Pool kFine = {{1, 2}, {8, 1}};  // eight 1 MB, one 2 MB

double units(const Builder& b, const std::vector<std::string>& order, const Pool& pool, bool double_pass = false) {
  const Problem p = b.make(10 * MB);
  return simulate_plan(p, plan_swaps(p, b.order(order), pool, double_pass)).makespan;
}

TEST(SwapFigure41, RightFirstCoarseTakesSeven) { EXPECT_DOUBLE_EQ(units(figure_4_1(), kRightFirst, kCoarse), 7); }
TEST(SwapFigure41, RightFirstFineTakesSix) { EXPECT_DOUBLE_EQ(units(figure_4_1(), kRightFirst, kFine), 6); }
TEST(SwapFigure41, LeftFirstFineTakesSeven) { EXPECT_DOUBLE_EQ(units(figure_4_1(), kLeftFirst, kFine), 7); }

TEST(SwapFigure41, RightFirstFineMatchesTheTable) {
  // Fig. 4.1(d): W2, W3, W4, W1 swapped in at t1-t4; A2 out at t4-t5 (2 MB), so Concat runs at t6.
  const Builder b = figure_4_1();
  const Problem p = b.make(10 * MB);
  const SwapPlan plan = plan_swaps(p, b.order(kRightFirst), kFine, false);
  const PlanTimes t = simulate_plan(p, plan);
  std::vector<std::string> ins;
  for (const SwapIn& s : plan.swap_ins) ins.push_back(p.tensors()[static_cast<size_t>(s.tensor)].name);
  EXPECT_EQ(ins, (std::vector<std::string>{"W2", "W3", "W4", "W1"}));
  EXPECT_EQ(t.in_start, (std::vector<double>{0, 1, 2, 3}));
  ASSERT_EQ(plan.swap_outs.size(), 1u);
  EXPECT_EQ(p.tensors()[static_cast<size_t>(plan.swap_outs[0].tensor)].name, "A2");
  EXPECT_EQ(t.out_start, (std::vector<double>{3}));
  EXPECT_EQ(t.out_end, (std::vector<double>{5}));
  EXPECT_EQ(t.op_start, (std::vector<double>{0, 1, 2, 3, 4, 5}));
  EXPECT_LE(t.peak_memory, 10 * MB);
}

TEST(SwapFigure41, RightFirstCoarseEvictsAsTheText) {
  // Fig. 4.1(c): W1 waits for Conv4 to release W4's object; A1 takes A2's object once A2 is out.
  const Builder b = figure_4_1();
  const Problem p = b.make(10 * MB);
  const SwapPlan plan = plan_swaps(p, b.order(kRightFirst), kCoarse, false);
  std::vector<std::string> pairs;
  for (const Eviction& e : plan.evictions)
    pairs.push_back(p.tensors()[static_cast<size_t>(e.victim)].name + "->" +
                    p.tensors()[static_cast<size_t>(e.newcomer)].name);
  EXPECT_EQ(pairs, (std::vector<std::string>{"W2->W4", "W3->A4", "W4->W1", "A2->A1", "W1->A5"}));
  const PlanTimes t = simulate_plan(p, plan);
  EXPECT_EQ(t.op_start, (std::vector<double>{0, 1, 2, 3, 5, 6}));  // idle in t5, as the thesis says
}

TEST(SwapFigure41, SearchFindsSixOrBetter) {
  const Builder b = figure_4_1();
  const Problem p = b.make(10 * MB);
  SearchOptions o;
  o.population = 16;
  o.generations = 10;
  o.double_pass = false;
  o.threads = 2;
  const SearchResult r = genetic_search(p, o);
  EXPECT_LE(r.makespan, 6);
  EXPECT_DOUBLE_EQ(simulate_plan(p, plan_swaps(p, r.schedule, r.pool, false)).makespan, r.makespan);
}

TEST(SwapFigure41, DoublePassKeepsParametersResident) {
  // Fine pool: after the first pass W1..W4 are resident; the second pass swaps none of them in.
  const Builder b = figure_4_1();
  const Problem p = b.make(10 * MB);
  const SwapPlan plan = plan_swaps(p, b.order(kRightFirst), kFine, true);
  EXPECT_EQ(plan.initial_residents.size(), 4u);
  EXPECT_TRUE(plan.swap_ins.empty());
  EXPECT_DOUBLE_EQ(simulate_plan(p, plan).makespan, 6);
}

TEST(SwapPlanner, Figure43ControlEdges) {
  // Fig. 4.3: op1(W1) -> A1, op2(A1, W2) -> A2, op3(A2, W3) -> A3 in 4 units of memory (activations
  // kept for a backward pass): W1 makes room for W3 and W2 for A3, both dropped (unchanged), so
  // swap-in W3 waits for op1's end and op3 for swap-in W3.
  Builder b;
  b.tensor("W1", 1, true).tensor("W2", 1, true).tensor("W3", 1, true);
  b.tensor("A1", 1, false, true).tensor("A2", 1, false, true).tensor("A3", 1, false, true);
  b.op("op1", {"W1"}, {"A1"}).op("op2", {"A1", "W2"}, {"A2"}).op("op3", {"A2", "W3"}, {"A3"});
  const Problem p = b.make(4, {1, 2});
  const SwapPlan plan = plan_swaps(p, b.order({"op1", "op2", "op3"}), Pool{{1}, {4}}, false);
  ASSERT_EQ(plan.swap_ins.size(), 3u);
  const SwapIn& w3 = plan.swap_ins[2];
  EXPECT_EQ(p.tensors()[static_cast<size_t>(w3.tensor)].name, "W3");
  EXPECT_EQ(w3.position, 2);
  EXPECT_EQ(w3.after.op, 0);  // W1's last use: op1
  EXPECT_EQ(w3.after.swap_out, -1);
  EXPECT_TRUE(plan.swap_outs.empty());  // parameters leave without a copy
  ASSERT_EQ(plan.evictions.size(), 2u);
  EXPECT_EQ(p.tensors()[static_cast<size_t>(plan.evictions[0].victim)].name, "W1");
  EXPECT_EQ(p.tensors()[static_cast<size_t>(plan.evictions[1].victim)].name, "W2");
  EXPECT_EQ(p.tensors()[static_cast<size_t>(plan.evictions[1].newcomer)].name, "A3");
  EXPECT_EQ(plan.outputs_ready[2].op, 1);  // A3 takes W2's object once op2 has ended
}

TEST(SwapPlanner, ActivationsAreCopiedOutAndBack) {
  // An early activation read again at the end, in three objects: `next` needs A1, P and A2 while A0
  // waits, so A0 goes out (copied: the host lacks it) and comes back for `last`, into A1's object.
  Builder b;
  b.tensor("A0", 4).tensor("A1", 4).tensor("P", 4, true).tensor("A2", 4).tensor("A3", 4, false, true);
  b.op("first", {}, {"A0"}).op("mid", {"A0"}, {"A1"}).op("next", {"A1", "P"}, {"A2"}).op("last", {"A0", "A2"}, {"A3"});
  const Problem p = b.make(12, {1, 2});
  const SwapPlan plan = plan_swaps(p, b.order({"first", "mid", "next", "last"}), Pool{{1}, {3}}, false);
  const PlanTimes t = simulate_plan(p, plan);
  ASSERT_EQ(plan.swap_outs.size(), 1u);
  ASSERT_EQ(plan.swap_ins.size(), 2u);  // P, then A0
  EXPECT_EQ(plan.swap_outs[0].tensor, b.index.at("A0"));
  EXPECT_EQ(plan.swap_ins[1].tensor, b.index.at("A0"));
  EXPECT_GE(t.in_start[1], t.out_end[0]);
  EXPECT_GE(t.op_start[3], t.in_end[1]);
  EXPECT_LE(t.peak_memory, 12);
}

TEST(SwapPlanner, UnlimitedMemoryEqualsIdeal) {
  const Builder b = figure_4_1();
  const Problem p = b.make(100 * MB);
  const Schedule s = given_order(p);
  const SwapPlan plan = plan_swaps(p, s, default_pool(p), true);
  EXPECT_TRUE(plan.swap_ins.empty());
  EXPECT_TRUE(plan.swap_outs.empty());
  EXPECT_DOUBLE_EQ(simulate_plan(p, plan).makespan, simulate_plan(p, ideal_plan(p, s)).makespan);
  EXPECT_DOUBLE_EQ(simulate_plan(p, ideal_plan(p, s)).makespan, p.total_seconds());
}

TEST(SwapPlanner, UpdatedParameterIsCopiedOutAndStable) {
  // A training step in miniature: fwd reads W, upd writes W in place; memory holds two of the three.
  Builder b;
  b.tensor("W", 2, true).tensor("X", 2, true).tensor("Y", 2).tensor("G", 2);
  b.op("fwd", {"X", "W"}, {"Y"}).op("grad", {"Y", "X"}, {"G"}).op("upd", {"W", "G"}, {"W"});
  const Problem p = b.make(6, {1, 2});
  const SwapPlan plan = plan_swaps(p, given_order(p), Pool{{1}, {3}}, true);
  // Whatever is resident at the start is resident at the end, in the same object.
  for (int t : plan.initial_residents) {
    bool at_end = false;
    for (const Stay& st : plan.stays)
      if (st.tensor == t && st.to == Stay::kIterationEnd) at_end = true;
    EXPECT_TRUE(at_end) << p.tensors()[static_cast<size_t>(t)].name;
  }
  const PlanTimes t = simulate_plan(p, plan);
  EXPECT_LE(t.peak_memory, 6);
}

TEST(SwapSchedule, CrossoverFigure45) {
  // SCH_1 = [1,2,3,4,5], SCH_2 = [2,3,4,1,5] (0-based below), CR = 3: SCH_C1 = [2,3,4] + [1,5].
  EXPECT_EQ(crossover({1, 2, 3, 0, 4}, {0, 1, 2, 3, 4}, 3), (Schedule{1, 2, 3, 0, 4}));
  EXPECT_EQ(crossover({0, 1, 2, 3, 4}, {1, 2, 3, 0, 4}, 3), (Schedule{0, 1, 2, 3, 4}));
}

TEST(SwapSchedule, MutationKeepsTopologicalOrder) {
  const Builder b = figure_4_1();
  const Problem p = b.make(10 * MB);
  std::mt19937_64 rng(3);
  const Schedule s = given_order(p);
  EXPECT_EQ(mutate(p, s, 0.0, rng), s);
  for (int i = 0; i < 50; ++i) EXPECT_NO_THROW(check_schedule(p, mutate(p, s, 1.0, rng)));
  for (int i = 0; i < 50; ++i) EXPECT_NO_THROW(check_schedule(p, random_order(p, rng)));
}

TEST(SwapPool, RepairsOfFigure46) {
  std::vector<int> cls = {1, 2, 1, 1};
  repair_cls(cls);
  EXPECT_EQ(cls, (std::vector<int>{1, 2, 2, 2}));
  cls = {1, 1, 3, 3};
  repair_cls(cls);
  EXPECT_EQ(cls, (std::vector<int>{1, 1, 2, 2}));
  // Sizes 1, 2, 3, 4 MB; capacity 12 MB; each op holds one tensor.
  Builder b;
  for (int i = 0; i < 8; ++i) b.tensor("a" + std::to_string(i), MB);
  b.tensor("b", 2 * MB).tensor("c", 3 * MB).tensor("d", 4 * MB);
  for (int i = 0; i < 8; ++i) b.op("make_a" + std::to_string(i), {}, {"a" + std::to_string(i)});
  b.op("make_b", {}, {"b"}).op("make_c", {}, {"c"}).op("make_d", {}, {"d"});
  const Problem p = b.make(12 * MB);
  const Pool one = {{1, 1, 1, 1}, {4}}, two = {{1, 2, 2, 2}, {8, 1}};
  EXPECT_EQ(extend(two), (std::vector<int64_t>{8, 1, 1, 1}));
  // CLS_C1 = [1, 2] + [1, 1] -> [1, 2, 2, 2]; CNT_EXT_C1 = [8, 1, 4, 4] -> CNT [8, 3] (20 MB) -> [4, 2].
  const Pool child = crossover(p, two, one, 2);
  EXPECT_EQ(child.cls, (std::vector<int>{1, 2, 2, 2}));
  EXPECT_EQ(child.cnt, (std::vector<int64_t>{4, 2}));
  EXPECT_LE(pool_bytes(p, child), 12 * MB);
}

TEST(SwapPool, RandomAndMutatedPoolsAreValid) {
  const Builder b = figure_4_1();
  const Problem p = b.make(10 * MB);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100; ++i) {
    const Pool a = random_pool(p, rng);
    EXPECT_NO_THROW(check_pool(p, a));
    EXPECT_NO_THROW(check_pool(p, mutate(p, a, 0.5, rng)));
  }
}

TEST(SwapPool, Errors) {
  const Builder b = figure_4_1();
  const Problem p = b.make(10 * MB);
  const auto error = [&](const Pool& pool) {
    try {
      check_pool(p, pool);
    } catch (const SwapError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error({{1}, {5}}).find("CLS has 1 entries"), std::string::npos);
  EXPECT_NE(error({{2, 2}, {5}}).find("CLS starts at 1"), std::string::npos);
  EXPECT_NE(error({{1, 2}, {5}}).find("CNT has 1 entries"), std::string::npos);
  EXPECT_NE(error({{1, 2}, {8, 0}}).find("op 'Conv2' holds 1 at once ('A2')"), std::string::npos)
      << error({{1, 2}, {8, 0}});
  EXPECT_NE(error({{1, 1}, {6}}).find("more than the capacity"), std::string::npos);
}

TEST(SwapProblem, LeastMemoryAndInfeasible) {
  const Builder b = figure_4_1();
  // Conv1 holds three 1 MB tensors, Conv2 one 2 MB tensor: three 1 MB objects and one 2 MB (five 2 MB
  // objects would take 6 MB).
  EXPECT_EQ(b.make(10 * MB).least_pool().bytes, 5 * MB);
  EXPECT_EQ(b.make(10 * MB).least_pool().cls, (std::vector<int>{1, 2}));
  try {
    b.make(4 * MB).check_feasible();
    FAIL() << "expected Infeasible";
  } catch (const Infeasible& e) {
    EXPECT_EQ(e.least_memory(), 5 * MB);
    EXPECT_NE(std::string(e.what()).find("least memory that works is 5000000 bytes"), std::string::npos) << e.what();
  }
}

std::string problem_error(const Builder& b, HostLink host = {1, 2}) {
  try {
    b.make(10, host);
  } catch (const SwapError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SwapProblem, Errors) {
  Builder twice;
  twice.tensor("A", 1).op("p", {}, {"A"}).op("q", {}, {"A"});
  EXPECT_NE(problem_error(twice).find("activation 'A' is written by op 'p' and op 'q'"), std::string::npos);
  Builder orphan;
  orphan.tensor("A", 1).tensor("B", 1).op("p", {"A"}, {"B"});
  EXPECT_NE(problem_error(orphan).find("no op produces it"), std::string::npos);
  Builder cycle;
  cycle.tensor("A", 1).tensor("B", 1).op("p", {"B"}, {"A"}).op("q", {"A"}, {"B"});
  EXPECT_NE(problem_error(cycle).find("dependency cycle"), std::string::npos) << problem_error(cycle);
  Builder ok;
  ok.tensor("A", 1).op("p", {}, {"A"});
  EXPECT_NE(problem_error(ok, {2, 1}).find("one_way <= both_ways"), std::string::npos);
  Builder bad = ok;
  bad.ops[0].outputs.push_back(5);
  EXPECT_NE(problem_error(bad).find("output index 5 is not a tensor"), std::string::npos);
  const Problem p = ok.make(10, {1, 2});
  try {
    check_schedule(p, {0, 0});
    FAIL();
  } catch (const SwapError& e) {
    EXPECT_NE(std::string(e.what()).find("has 2 ops"), std::string::npos);
  }
}

TEST(SwapBuddy, SplitsAndMerges) {
  Buddy b(1024, 256);  // one top block of 4 units
  Ready r;
  const int64_t x = b.allocate(0, r), y = b.allocate(1, r), z = b.allocate(0, r);
  EXPECT_EQ(x, 0);
  EXPECT_EQ(y, 512);
  EXPECT_EQ(z, 256);
  EXPECT_EQ(b.allocate(0, r), -1);
  b.release(x, 0, Ready{3, -1});
  b.release(z, 0, Ready{-1, 2});
  const int64_t w = b.allocate(1, r);  // the two merged halves: waits for both occupants
  EXPECT_EQ(w, 0);
  EXPECT_EQ(r.op, 3);
  EXPECT_EQ(r.swap_out, 2);
  Buddy odd(768, 256);  // tops of 2 units and 1 unit: never merged with each other
  EXPECT_EQ(odd.capacity(), 768);
  EXPECT_EQ(odd.allocate(1, r), 0);
  EXPECT_EQ(odd.allocate(0, r), 512);
  EXPECT_EQ(odd.allocate(0, r), -1);
}

TEST(SwapOdswap, RunsWithinCapacity) {
  const Builder b = figure_4_1();
  const Problem p = b.make(10 * MB);
  const SwapPlan plan = odswap_plan(p, b.order(kRightFirst));
  const PlanTimes t = simulate_plan(p, plan);
  EXPECT_GE(t.makespan, 6);
  EXPECT_LE(t.peak_memory, 10 * MB);
}

TEST(SwapSearch, SameSeedSameResultForAnyThreadCount) {
  const Builder b = figure_4_1();
  const Problem p = b.make(6 * MB);
  SearchOptions o;
  o.population = 12;
  o.generations = 6;
  o.seed = 11;
  o.threads = 1;
  const SearchResult one = genetic_search(p, o);
  o.threads = 3;
  const SearchResult three = genetic_search(p, o);
  EXPECT_EQ(one.schedule, three.schedule);
  EXPECT_EQ(one.pool, three.pool);
  ASSERT_EQ(one.history.size(), three.history.size());
  for (size_t g = 0; g < one.history.size(); ++g) EXPECT_EQ(one.history[g].mean, three.history[g].mean);
  EXPECT_EQ(one.stopped, "generations");
  EXPECT_EQ(one.evaluations, 12 * 7);
}

/// A random training-like problem: parameters read by a forward chain, activations of mixed sizes read
/// again by a backward chain, every parameter updated in place at the end.
Problem random_problem(std::mt19937_64& rng, int layers, HostLink host) {
  Builder b;
  std::uniform_int_distribution<int> size(1, 6);
  std::uniform_real_distribution<double> seconds(0, 2);
  b.tensor("x", MB, true);  // the input batch: on the host
  std::string prev = "x";
  for (int l = 0; l < layers; ++l) {
    const std::string w = "w" + std::to_string(l), a = "a" + std::to_string(l);
    b.tensor(w, size(rng) * MB, true).tensor(a, size(rng) * MB);
    b.op("f" + std::to_string(l), {prev, w}, {a}, l % 5 == 0 ? 0.0 : seconds(rng));
    prev = a;
  }
  b.tensor("loss", MB).op("loss", {prev}, {"loss"}, seconds(rng));
  prev = "loss";
  for (int l = layers - 1; l >= 0; --l) {
    const std::string g = "g" + std::to_string(l), w = "w" + std::to_string(l);
    b.tensor(g, b.tensors[static_cast<size_t>(b.index.at(w))].bytes);
    b.op("b" + std::to_string(l), {"a" + std::to_string(l), prev, w}, {g}, seconds(rng));
    b.op("u" + std::to_string(l), {w, g}, {w}, seconds(rng));
    prev = g;
  }
  return b.make(1000 * MB, host);
}

TEST(SwapProblem, ActivationUpdatedInPlace) {
  // g = p0 (from op q0), then g += p1, g += p2 in place; r0 reads g between, r1 after: r0 sees p0's
  // value only, so runs before the first update.
  Builder b;
  b.tensor("x", MB, true).tensor("p0", 2 * MB).tensor("p1", MB).tensor("p2", MB).tensor("y", MB).tensor("z", MB);
  b.op("q0", {"x"}, {"p0"})
      .op("r0", {"p0"}, {"y"})
      .op("q1", {"x"}, {"p1"})
      .op("add1", {"p0", "p1"}, {"p0"})
      .op("q2", {"x"}, {"p2"})
      .op("add2", {"p0", "p2"}, {"p0"})
      .op("r1", {"p0", "y"}, {"z"});
  const Problem p = b.make(100 * MB);
  const auto preds = [&](const char* op) { return p.predecessors(b.order({op})[0]); };
  EXPECT_EQ(preds("add1"), (std::vector<int>{0, 1, 2}));  // q0 (the value), r0 (reads it before), q1
  EXPECT_EQ(preds("add2"), (std::vector<int>{3, 4}));
  EXPECT_EQ(preds("r1"), (std::vector<int>{1, 5}));
  EXPECT_EQ(p.working_set(3), (std::vector<int>{1, 2}));  // p0 once
  // The add holds the total and the part (3 MB), not a third tensor for the new total.
  EXPECT_EQ(p.least_pool().bytes, 4 * MB);  // r1: p0 (2 MB) + y + z
  // With room for only that, the total goes out between updates and comes back, updated, in order.
  const Problem tight = b.make(4 * MB);
  const SwapPlan plan = plan_swaps(tight, given_order(tight), default_pool(tight), true);
  const PlanTimes t = simulate_plan(tight, plan);
  EXPECT_LE(t.peak_memory, 4 * MB);
  // A later writer that does not read it is a second producer.
  Builder twice = b;
  twice.op("q3", {"x"}, {"p0"});
  EXPECT_THROW(twice.make(100 * MB), SwapError);
}

TEST(SwapSimulate, StreamReplayEqualsTheGeneralSimulator) {
  std::mt19937_64 rng(5);
  int plans = 0;
  for (int trial = 0; trial < 40; ++trial) {
    // Both link shapes: a shared duplex link (rates change when the other direction starts) and two
    // independent directions (they never do).
    const HostLink host = trial % 2 ? HostLink{1.0 * MB, 1.6 * MB} : HostLink{1.0 * MB, 2.0 * MB};
    const Problem roomy = random_problem(rng, 4 + trial % 7, host);
    const Problem p = Problem::make(roomy.tensors(), roomy.ops(), roomy.least_pool().bytes + (trial % 4) * 2 * MB, host);
    const Schedule s = trial % 3 ? random_order(p, rng) : given_order(p);
    std::vector<SwapPlan> plans_here = {plan_swaps(p, s, random_pool(p, rng), trial % 2 == 0)};
    try {
      plans_here.push_back(odswap_plan(p, s));  // its buddy blocks may not fit where the pool does
    } catch (const SwapError&) {
    }
    for (const SwapPlan& plan : plans_here) {
      const sim::Timeline fast = plan_timeline(p, plan), general = plan_timeline(p, plan, true);
      EXPECT_EQ(fast.makespan, general.makespan);
      EXPECT_EQ(fast.start, general.start);
      EXPECT_EQ(fast.end, general.end);
      EXPECT_EQ(fast.stream_busy, general.stream_busy);
      ++plans;
    }
  }
  EXPECT_GE(plans, 60);
}

TEST(SwapSearch, SeedsAreValidAndStartTheSearch) {
  std::mt19937_64 rng(5);
  const HostLink host{1.0 * MB, 2.0 * MB};
  for (int trial = 0; trial < 12; ++trial) {
    const Problem roomy = random_problem(rng, 3 + trial, host);
    const Problem p = Problem::make(roomy.tensors(), roomy.ops(), roomy.least_pool().bytes + (trial % 3) * 3 * MB, host);
    const Schedule dfs = depth_first_order(p);
    EXPECT_NO_THROW(check_schedule(p, dfs));
    for (const Schedule& s : {given_order(p), dfs}) {
      const Pool needs = needs_pool(p, s);
      EXPECT_NO_THROW(check_pool(p, needs));
    }
    // The first generation holds the given order with both pools: its best is no worse than theirs.
    SearchOptions o;
    o.population = 8;
    o.generations = 1;
    o.seed = static_cast<uint64_t>(trial);
    const SearchResult r = genetic_search(p, o);
    const Schedule given = given_order(p);
    for (const Pool& pool : {default_pool(p), needs_pool(p, given)})
      EXPECT_LE(r.history[0].best, simulate_plan(p, plan_swaps(p, given, pool, true), false).makespan);
    o.seeded = false;
    EXPECT_EQ(genetic_search(p, o).evaluations, 16);
  }
}

TEST(SwapSearch, NeedsPoolFollowsTheSchedule) {
  // At most two of the four 1 MB tensors are alive at once (x at f, a to h, d from h to k, e at k):
  // with room for all the counts are those needs, where the default pool has one object per tensor.
  Builder b;
  b.tensor("x", MB, true).tensor("a", MB).tensor("c", 2 * MB).tensor("d", MB).tensor("e", MB);
  b.op("f", {"x"}, {"a"}, 1).op("g", {"a"}, {"c"}, 1).op("h", {"c", "a"}, {"d"}, 1).op("k", {"d"}, {"e"}, 1);
  const Problem p = b.make(100 * MB);
  const Pool pool = needs_pool(p, given_order(p));
  EXPECT_EQ(pool.cls, (std::vector<int>{1, 2}));
  EXPECT_EQ(pool.cnt, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(default_pool(p).cnt, (std::vector<int64_t>{4, 1}));
}

TEST(SwapSearch, RandomSearchCountsEvaluations) {
  const Builder b = figure_4_1();
  const Problem p = b.make(6 * MB);
  SearchOptions o;
  o.population = 8;
  o.evaluations = 20;
  const SearchResult r = random_search(p, o);
  EXPECT_EQ(r.evaluations, 20);
  EXPECT_EQ(r.history.size(), 3u);
  EXPECT_EQ(r.stopped, "evaluations");
}

}  // namespace
}  // namespace tilewise::swap

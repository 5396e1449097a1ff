#include "partition/pareto.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "partition/exact_sum.h"
#include "partition/problem.h"
#include "partition/weighted_sum.h"

namespace tilewise::partition {

namespace {

void check_cost(const Point& p, const std::string& where) {
  if (!std::isfinite(p.time) || !std::isfinite(p.memory) || p.time < 0 || p.memory < 0)
    throw PlanError(where + " costs (" + std::to_string(p.time) + ", " + std::to_string(p.memory) +
                    "); valid: finite time and memory >= 0");
}

void validate(const ParetoProblem& pr) {
  const int n = static_cast<int>(pr.nodes.size());
  for (int v = 0; v < n; ++v) {
    if (pr.nodes[v].empty())
      throw PlanError("node " + std::to_string(v) + " has no configuration; valid: at least one");
    for (size_t c = 0; c < pr.nodes[v].size(); ++c)
      check_cost(pr.nodes[v][c], "node " + std::to_string(v) + " configuration " + std::to_string(c));
  }
  for (size_t e = 0; e < pr.edges.size(); ++e) {
    const auto& ed = pr.edges[e];
    const std::string name =
        "edge " + std::to_string(e) + " (" + std::to_string(ed.u) + ", " + std::to_string(ed.v) + ")";
    if (ed.u < 0 || ed.u >= n || ed.v < 0 || ed.v >= n)
      throw PlanError(name + " names a node out of range; valid: 0.." + std::to_string(n - 1));
    if (ed.u == ed.v) throw PlanError(name + " joins a node to itself; valid: two different nodes");
    const size_t want = pr.nodes[ed.u].size() * pr.nodes[ed.v].size();
    if (ed.table.size() != want)
      throw PlanError(name + " has " + std::to_string(ed.table.size()) + " entries; valid: " + std::to_string(want) +
                      " (configurations of u x of v)");
    for (const Point& p : ed.table) check_cost(p, name);
  }
}

// One factor per node (over it) and per edge (over its ends), each cost mapped by `cost` to S's value.
template <class S, class Cost>
std::vector<BasicFactor<S>> to_factors(const ParetoProblem& pr, const Cost& cost) {
  std::vector<BasicFactor<S>> factors;
  for (size_t v = 0; v < pr.nodes.size(); ++v) {
    BasicFactor<S> f{{static_cast<int>(v)}, {}};
    for (const Point& p : pr.nodes[v]) f.table.push_back(cost(p));
    factors.push_back(std::move(f));
  }
  for (const auto& e : pr.edges) {
    BasicFactor<S> f{{e.u, e.v}, {}};
    for (const Point& p : e.table) f.table.push_back(cost(p));
    factors.push_back(std::move(f));
  }
  return factors;
}

// Memory's weight against time's (both normalised), from time alone to memory alone: nine for the exact
// search, five with the heuristic (its tables are small: the scalar pass is a larger share of the search,
// and four more weights pruned too little to pay for it; rnn-12-16k with 32 MiB buckets 0.100 -> 0.093 s).
constexpr std::array<double, 9> kExactRatios{1e-6, 1e-2, 1e-1, 0.3, 1.0, 3.0, 10.0, 1e2, 1e6};
constexpr std::array<double, 5> kHeuristicRatios{1e-6, 1e-1, 1.0, 10.0, 1e6};

// Assignments minimising weighted sums of time and memory, found by scalar searches (every entry one
// point: memory folded into time), as solutions to bound the frontier search with: every weight in one
// pass (WeightedSums), its tables split over threads. `shared`: the frontier search's own plan (with
// the heuristic: the incumbents keep its fixed values, so every point of the result does); null: a
// plan of their own, where a table too wide is narrowed by the heuristic scoring the middle weight
// (any assignment is a valid incumbent).
template <size_t N>
std::vector<std::vector<int>> weighted_sum_solutions(const ParetoProblem& pr, const std::vector<int>& domains,
                                                     const ParetoOptions& options, const EliminationPlan* shared,
                                                     const std::array<double, N>& ratios) {
  double time_total = 0, memory_total = 0;
  auto add_largest = [&](const std::vector<Point>& table) {
    double t = 0, m = 0;
    for (const Point& p : table) t = std::max(t, p.time), m = std::max(m, p.memory);
    time_total += t, memory_total += m;
  };
  for (const auto& n : pr.nodes) add_largest(n);
  for (const auto& e : pr.edges) add_largest(e.table);
  const double wt = time_total > 0 ? 1 / time_total : 1;
  std::array<double, N> wm;
  for (size_t r = 0; r < N; ++r) wm[r] = memory_total > 0 ? ratios[r] / memory_total : ratios[r];
  using Sums = WeightedSums<static_cast<int>(N)>;
  auto factors = to_factors<Sums>(pr, [&](const Point& p) {
    typename Sums::Value v;
    for (size_t r = 0; r < N; ++r) v[r] = wt * p.time + wm[r] * p.memory;
    return v;
  });
  EngineOptions eo;
  eo.order.max_table = options.max_table;
  eo.order.too_wide = TooWide::kHeuristic;
  eo.order.deadline = options.deadline;
  eo.threads = options.threads;
  eo.parallel_work = 4096;
  Solution<Sums> sol = eliminate_all(Sums{}, domains, std::move(factors), eo, shared);
  std::vector<std::vector<int>> out;
  for (size_t r = 0; r < N; ++r) out.push_back(sol.assignment(static_cast<int>(r)));
  return out;
}

}  // namespace

Point evaluate_pareto(const ParetoProblem& pr, const std::vector<int>& choice) {
  std::vector<double> times, memories;
  for (size_t v = 0; v < pr.nodes.size(); ++v) {
    const Point& p = pr.nodes[v].at(choice.at(v));
    times.push_back(p.time), memories.push_back(p.memory);
  }
  for (const auto& e : pr.edges) {
    const Point& p = e.table.at(static_cast<size_t>(choice.at(e.u)) * pr.nodes[e.v].size() + choice.at(e.v));
    times.push_back(p.time), memories.push_back(p.memory);
  }
  return {exact_sum(times), exact_sum(memories)};
}

ParetoSolution solve_pareto(const ParetoProblem& pr, const ParetoOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  validate(pr);
  if (!(options.memory_bucket >= 0) || !std::isfinite(options.memory_bucket))
    throw PlanError("memory_bucket " + std::to_string(options.memory_bucket) + "; valid: finite and >= 0");
  if (options.max_bytes < 0)
    throw PlanError("max_bytes " + std::to_string(options.max_bytes) + "; valid: >= 0 (0: no limit)");
  if (options.max_table < 1) throw PlanError("max_table " + std::to_string(options.max_table) + "; valid: >= 1");
  const int n = static_cast<int>(pr.nodes.size());
  std::vector<int> domains;
  for (int v = 0; v < n; ++v) domains.push_back(static_cast<int>(pr.nodes[v].size()));
  double time_scale = 0, memory_scale = 0;
  std::vector<BasicFactor<FrontierSum>> factors = to_factors<FrontierSum>(pr, [&](const Point& p) {
    time_scale = std::max(time_scale, p.time), memory_scale = std::max(memory_scale, p.memory);
    return FrontierSum::Value{p};
  });
  // The heuristic scores a configuration by time and memory, each relative to the largest cost.
  FrontierSum semiring(options.memory_bucket, time_scale > 0 ? 1 / time_scale : 1,
                       memory_scale > 0 ? 1 / memory_scale : 1);
  EngineOptions eo;
  eo.order.max_table = options.max_table;
  eo.order.too_wide = options.heuristic ? TooWide::kHeuristic : TooWide::kCondition;
  eo.order.deadline = options.deadline;
  eo.threads = options.threads;
  eo.parallel_work = 64;  // a frontier entry is heavy: a few already pay for a thread
  eo.max_bytes = options.max_bytes;
  eo.progress = options.progress;
  const EliminationPlan plan = plan_search(semiring, domains, factors, eo.order);
  // Incumbents: the weighted-sum solutions on their own frontier. With the heuristic they search the
  // frontier's restricted space (its plan: the same order and fixed values, no planning of their own).
  std::vector<Point> incumbent_points;
  std::vector<std::vector<int>> incumbent_choices;
  if (options.bound) {
    std::vector<std::vector<int>> found =
        options.heuristic ? weighted_sum_solutions(pr, domains, options, &plan, kHeuristicRatios)
                          : weighted_sum_solutions(pr, domains, options, nullptr, kExactRatios);
    std::vector<Point> costs;
    for (const auto& c : found) costs.push_back(evaluate_pareto(pr, c));
    for (int i : reduce_indices(costs)) incumbent_points.push_back(costs[i]), incumbent_choices.push_back(found[i]);
    semiring.set_incumbents(incumbent_points);
  }
  Solution<FrontierSum> sol = eliminate_all(semiring, domains, std::move(factors), eo, &plan);

  // Unroll every point and recount its costs once, correctly rounded: the search added them in
  // its own order. Recounting can make neighbours equal, so the result is reduced again.
  // The incumbents join the result: points their bounds dropped may have led only to them.
  std::vector<Point> points = incumbent_points;
  std::vector<std::vector<int>> choices = incumbent_choices;
  for (size_t p = 0; p < sol.value().size(); ++p) {
    choices.push_back(sol.assignment(static_cast<int>(p)));
    points.push_back(evaluate_pareto(pr, choices.back()));
  }
  ParetoSolution out;
  for (int i : reduce_indices(points)) out.points.push_back(points[i]), out.choices.push_back(std::move(choices[i]));
  out.stats = std::move(sol.stats);
  out.incumbents = static_cast<int>(incumbent_points.size());
  if (options.memory_bucket > 0) {
    const int64_t reduces = static_cast<int64_t>(out.stats.steps.size()) + 1 + (out.stats.subproblems > 1 ? 1 : 0);
    out.memory_error_bound = options.memory_bucket * static_cast<double>(reduces);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tilewise::partition

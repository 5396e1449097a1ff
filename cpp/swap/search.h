// SwapAdvisor's genetic search over (schedule, pool) (§4.4), the random-search baseline and the
// schedule-only and pool-only searches of §5.4. The fitness is the simulated makespan of the planned
// swaps (planner.h, simulate.h). docs/SWAP.md lists the operators and their parameters.
//
// The first generation: a quarter seeded from the graph (its given and depth-first orders with the
// default and needs-sized pools, then mutations of those), the rest random (§4.4.1).
// A generation: N_p / 4 crossovers of parents drawn uniformly from the population, each giving two
// schedules (Fig. 4.5) times two pools (Fig. 4.6) = 4 children, each mutated (dataflow-scheduler
// mutation and CLS flips with probability P per choice, Gaussian CNT mutation); then N_p of the
// population and children survive, drawn without replacement with probability softmax(t_norm / T),
// t_norm = (T_best - t) / T_best (Eq. 4.1, T = 1 in the paper), the best one first when `elitism`.
//
// Determinism: every random choice is made on the calling thread from one generator seeded by
// `seed`; threads only evaluate, each child's fitness into its own slot. So a seed gives the same
// search for any thread count, as long as the stop does not depend on the clock (time_limit).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "swap/plan.h"

namespace tilewise::swap {

/// One generation's figures (Fig. 5.4), over the population that survived it.
struct Generation {
  int index = 0;            ///< 0: the first, random generation
  int64_t evaluations = 0;  ///< plans simulated so far
  double seconds = 0;       ///< since the search began
  double best = 0, mean = 0, worst = 0;  ///< simulated makespans
};

struct SearchOptions {
  enum class Mode { kJoint, kScheduleOnly, kPoolOnly };
  Mode mode = Mode::kJoint;
  int population = 144;       ///< N_p (§5.1: 144)
  double mutation = 0.1;      ///< P (§5.1: 10 %)
  double temperature = 0.01;  ///< T in softmax(t_norm / T); the paper's Eq. 4.1 is T = 1
  bool elitism = true;        ///< the best individual always survives (the paper's softmax may lose it)
  /// A quarter of the first generation seeded from the graph's orders and needs-sized pools (and
  /// their mutations); false: only the given order with the default pool, the rest random (§4.4.1).
  bool seeded = true;
  bool double_pass = true;
  uint64_t seed = 0;
  int threads = 0;            ///< 0: every core
  double time_limit = 0;      ///< seconds; 0: none
  int patience = 0;           ///< stop after this many generations without a better best; 0: never
  int generations = 0;        ///< stop after this many generations after the first; 0: no bound
  int64_t evaluations = 0;    ///< stop once this many plans were simulated; 0: no bound
  /// Called on the calling thread after every generation; may throw to stop the search.
  std::function<void(const Generation&)> progress;
};

struct SearchResult {
  Schedule schedule;  ///< the best individual found
  Pool pool;
  double makespan = 0;
  std::vector<Generation> history;
  int64_t evaluations = 0;
  double seconds = 0;
  std::string stopped;  ///< "time_limit", "patience", "generations" or "evaluations"
};

/// The genetic search. Throws Infeasible when no pool fits the capacity, SwapError for bad options.
SearchResult genetic_search(const Problem& p, const SearchOptions& options);

/// Random search: `options.evaluations` random (schedule, pool) pairs (the GA's first generation,
/// drawn again and again), in batches of `population` with one Generation each; time_limit applies.
SearchResult random_search(const Problem& p, const SearchOptions& options);

}  // namespace tilewise::swap

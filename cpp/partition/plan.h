// A partition plan and the planners that find one (docs/PARTITION.md says how each planner
// treats replication). Every planner costs with cost::op_comm, so plans are comparable, and
// `evaluate` recomputes any plan's figures from its tilings and strategies alone.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cost/memory.h"
#include "partition/problem.h"

namespace tilewise::partition {

/// The algorithms `partition` knows, in the order `tilewise plan --help` lists them.
const std::vector<std::string>& algorithm_names();

struct SearchOptions {
  int threads = 0;              ///< 0 = every hardware thread
  /// Seconds; 0 = none. Past it the search returns the best complete plan it has (Plan::timed_out)
  /// or, when it has none yet, throws SearchTimeout.
  double time_limit = 0;
  /// Spartan's duplication budget: extra bytes per device that replicated tensors may use.
  int64_t duplication_budget = 0;
  /// Exact recursive planners: rounds revising blocks of steps with the others fixed (0 = Tofu as
  /// published). Blocks of one step always; larger blocks while their tables stay within the budget.
  int refine_rounds = 2;
  double refine_table_budget = 2e5;
  /// brute_force: also try replicating tensors (the oracle for kcuts' space).
  bool brute_force_replication = false;
  /// Part counts of the recursion steps (their product = devices); empty: cost::factorize(devices).
  /// The frontier's baselines use its parts (one step per link level) to be costed alike.
  std::vector<int> parts;
  /// Called with (what, done, total) as the search advances.
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

/// A plan: the placement (devices, parts, per tensor its cuts and per op its strategies: what the
/// runtime consumes) and how the search found it.
struct Plan : cost::Placement {
  std::string algorithm;
  std::vector<int64_t> step_bytes;  ///< bytes added by each recursion step, as the planner found them
  int64_t comm_bytes = 0;           ///< the planner's total
  int64_t unrefined_bytes = 0;      ///< exact recursive planners: the total before refinement
  double search_seconds = 0;
  int64_t largest_table = 0;        ///< entries of the largest DP table built (0 for greedy planners)
  int64_t evaluated = 0;            ///< brute force: assignments tried
  int64_t duplication_used = 0;     ///< spartan: bytes per device spent on replicated tensors
  /// The time limit passed during refinement: this is the best complete plan found by then.
  bool timed_out = false;
};

/// Finds a plan. `algorithm` is one of algorithm_names(); throws PlanError for an unknown name or
/// a bad device count, SearchTimeout past the time limit, SearchTooLarge when an exact search
/// (a DP table, or brute force's space) cannot fit.
Plan partition(const graph::Graph& g, int devices, const std::string& algorithm, const SearchOptions& options = {});

/// Figures of a plan recomputed from scratch.
struct PlanCost {
  int64_t comm_bytes = 0;
  std::vector<int64_t> step_bytes;      ///< cost of the first i steps minus the first i-1
  std::vector<cost::OpComm> per_op;     ///< bytes per input and for the output, per op
  cost::MemoryEstimate memory;
  std::vector<int64_t> flops_per_device;  ///< arithmetic of each device's share of the work
};

/// Throws PlanError when the plan does not fit the graph (cost::placement_misfit says why).
void validate(const graph::Graph& g, const Plan& plan);

/// Recomputes bytes (in total, per step and per op) and memory of `plan` on `g`. Throws PlanError
/// when the plan does not fit the graph (tensor/op counts, cut or strategy out of range).
PlanCost evaluate(const graph::Graph& g, const Plan& plan, int threads = 0);

}  // namespace tilewise::partition

// The partitioning problem every planner solves (docs/PARTITION.md): for each recursion step,
// a cut for every tensor and a basic strategy for every op, costed by cost::op_comm. Tensors
// and ops that must share choices form classes: an optimizer's new value shares its tensor's
// tiling (the next iteration reads it), and unrolled time steps share their strategies (Tofu §5.1).
#pragma once
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cost/class_count.h"
#include "cost/comm_cost.h"
#include "cost/count_memo.h"
#include "cost/placement.h"
#include "graph/graph.h"

namespace tilewise::partition {

/// A request the planners cannot serve (bad device count, unknown algorithm, a graph too large
/// for brute force...). The message says what would be valid.
struct PlanError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// What one planner may choose.
struct Policy {
  bool replicate_tensors = false;  ///< a tensor may be replicated at a step (SoyBean `r`)
  bool reduce_ops = true;          ///< ops may split a reduction variable (output reduction)
  /// Ops may also replicate their work at a step when they could split it (redundant computation,
  /// TensorOpt's space); otherwise replication is only the fallback of ops with nothing to split.
  bool replicate_ops = false;
  bool tie_timesteps = true;       ///< unrolled time steps share choices (Tofu §5.1)
  /// Optional: narrows the cuts a tensor may take at a step (baselines fix tilings). Gets the
  /// tensor id, the step and the candidate cuts; returns the allowed subset (empty = keep all).
  std::function<std::vector<int>(int tensor, int step, const std::vector<int>& candidates)> restrict_cuts;
};

/// The graph as planners see it.
struct Problem {
  const graph::Graph* graph = nullptr;
  std::vector<int> parts;               ///< k1 >= k2 >= ... (or one step of k for equal_chop)
  std::vector<cost::OpView> ops;        ///< per op
  std::vector<int> tensor_class;        ///< per tensor
  std::vector<int> op_class;            ///< per op
  std::vector<std::vector<int>> class_tensors;  ///< members of each tensor class
  std::vector<std::vector<int>> class_ops;      ///< members of each op class
  /// Per op, its kind: ops with the same description and shapes share one (cost/count_memo.h).
  std::vector<int> op_kind;
  /// Ops that add equal bytes to the same pair tables (one class and kind, slots in the same
  /// tensor classes): one op of each group and how many it stands for.
  struct OpGroup {
    int op = -1;
    int64_t count = 0;
  };
  std::vector<OpGroup> op_groups;
  /// Per op kind, its basic strategies (tdl::enumerate_strategies, listed once).
  std::vector<std::vector<tdl::Strategy>> kind_strategies;
  /// Counts by op kind and choices, one memo per worker thread (count_memos(threads) sizes them).
  mutable std::vector<cost::CountMemo> memos;
  /// The memos of `threads` workers, created before the workers start.
  std::vector<cost::CountMemo>& count_memos(int threads) const;
  int64_t bytes_per_element(int tensor) const;
};

/// Builds the problem; throws PlanError for a device count < 1.
Problem make_problem(const graph::Graph& g, const std::vector<int>& parts, const Policy& policy);

/// Choices made so far: per tensor its cuts, per op its strategies (one per decided step).
using cost::Assignment;
/// No step decided yet: every tiling and split empty.
Assignment empty_assignment(const Problem& p);

/// Cuts a tensor may take at `step` after `prefix`: each dimension whose smallest share is still at
/// least k_step, then replication if the policy allows it or nothing else is possible.
std::vector<int> tensor_choices(const Problem& p, const Policy& policy, int tensor, const cost::Tiling& prefix,
                                int step);

/// tensor_choices given the smallest share of each dimension after the steps before `step`.
std::vector<int> tensor_choices_by_shares(const Problem& p, const Policy& policy, int tensor,
                                          const std::vector<int64_t>& shares, int step);

/// Strategies an op may take at `step`: output variables, then reduction variables (if allowed),
/// whose range is still at least k_step. An op with none falls back to output reduction, then to
/// replicated computation (a scalar op): the only case where work is repeated, unless the policy's
/// `replicate_ops` adds replication as a last choice everywhere.
std::vector<tdl::Strategy> op_choices(const Problem& p, const Policy& policy, int op, const cost::OpSplit& prefix,
                                      int step);
/// op_choices given each variable's smallest share after the steps before `step`.
std::vector<tdl::Strategy> op_choices_by_shares(const Problem& p, const Policy& policy, int op,
                                                const std::vector<int64_t>& shares, int step);

/// One recursion step (or a block of steps revised together) as a min-sum problem over classes:
/// variables 0..T-1 are tensor classes (values = the cuts of the block's steps), T..T+O-1 op classes
/// (values = their strategies); factors cost bytes of the whole plan so far including the block
/// (so the minimum is the total, not the block's share).
struct StepProblem {
  std::vector<int> steps;                                        ///< the steps being chosen, ascending
  std::vector<std::vector<std::vector<int>>> tensor_domain;      ///< per tensor class: cut per block step
  std::vector<std::vector<cost::OpSplit>> op_domain;             ///< per op class: strategy per block step
  std::vector<int> domain_sizes;                                 ///< per variable
  struct Pair {
    int op_class = -1, tensor_class = -1;
    std::vector<int64_t> table;  ///< [op value][tensor value] bytes, summed over every op of the class and slot
  };
  std::vector<Pair> pairs;
  int tensor_var(int cls) const { return cls; }
  int op_var(int cls) const { return static_cast<int>(tensor_domain.size()) + cls; }
};

/// Costs every (op value, tensor value) pair of a block of steps, multithreaded over ops. `a` holds
/// either the steps before `steps[0]` (a new step, `steps` = {that step}: costs cover the steps so
/// far) or all `total_steps` steps (a revision of the block with the others fixed: costs cover every
/// step, and choices keep the other cuts valid; the current choices are always among the values).
StepProblem build_step(const Problem& p, const Policy& policy, const Assignment& a, const std::vector<int>& steps,
                       int total_steps, int threads, std::chrono::steady_clock::time_point deadline);

/// Entries of the pair tables `build_step` would fill for a block (to decide whether it is
/// affordable), counted without building the values (block_entries.cpp); the count stops once it
/// passes `budget` (then any figure above it is returned).
double block_table_entries(const Problem& p, const Policy& policy, const Assignment& a, const std::vector<int>& steps,
                           double budget = 1e300);

/// Sets the block's steps of the assignment to the chosen values (per variable of `sp`).
void apply_step(const Problem& p, const StepProblem& sp, const std::vector<int>& values, Assignment& a);

/// Bytes of the plan's first 1, 2, ..., `steps` steps (each a whole plan on fewer, larger devices).
std::vector<int64_t> prefix_bytes(const Problem& p, const Assignment& a, int steps, int threads);

/// The bytes each step adds: prefix[i] - prefix[i-1] (Tofu's delta_i).
std::vector<int64_t> step_deltas(const std::vector<int64_t>& prefix);

/// Whether every cut leaves each part at least one element per part count (shares >= parts).
bool valid_tiling(const cost::Shape& shape, const cost::Tiling& cuts, const std::vector<int>& parts);
bool valid_split(const std::vector<int64_t>& extents, const cost::OpSplit& split, const std::vector<int>& parts);

/// Bytes moved by one op under an assignment over its first `steps` steps (the OpComm holds bytes here).
/// `memo`: the calling thread's (optional).
cost::OpComm op_bytes(const Problem& p, int op, const Assignment& a, int steps, cost::CountMemo* memo = nullptr);

}  // namespace tilewise::partition

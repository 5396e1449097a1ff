// The graph-level cost frontier (TensorOpt §2.1, §3; docs/FRONTIERS.md "Graph-level frontier"):
// the planners' partition problem (partition/problem.h: tensor and op classes, cuts and strategies
// per recursion step, pair tables of bytes from build_step) with every configuration costed in
// (time, memory) by the cluster's time model (sim/program_sim.h prices compute, sim/cluster.h the
// links), then solved exactly by the frontier engine (partition/pareto.h).
//
// Configurations: over the part counts of the recursion steps (by default one step per link level
// of the cluster: 16 devices on 2 x 8 -> [2, 8]), a tensor class takes a cut (or replication) per
// step, an op class a basic strategy per step (output, reduce, or replicate: redundant work).
// Costs (Eq. 1-3, additive):
//  - op class: the seconds of its busiest device's share of each member op (a Compute instruction
//    priced by sim::instruction_seconds), memory 0;
//  - tensor class: the bytes of each member's tile on the busiest device, for what stays in memory
//    across the step (parameters, optimizer state, inputs, labels, parameter gradients, and forward
//    activations read by the backward pass); 0 for transient tensors and for in-place updates;
//  - (op class, tensor class): per step, the bytes that step adds to the pair (build_step's tables
//    for the first 1, 2, ... steps), spread over the devices, carried by the link the step crosses
//    as one message per peer of the step's group and member transfer (latency + bytes / bandwidth;
//    shared links divided among the machine's devices) plus the packing and unpacking the simulator
//    prices for each send and receive.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "cost/placement.h"
#include "frontier/coarse_ties.h"
#include "partition/pareto.h"
#include "partition/plan.h"
#include "partition/problem.h"
#include "sim/cluster.h"

namespace tilewise::frontier {

/// Part counts following the cluster's hierarchy: the machines first (the slowest link), then the
/// devices of one machine ({} for one device; {k} when k devices fit in one machine). A count that
/// does not divide into whole machines falls back to cost::factorize.
std::vector<int> hierarchy_parts(const sim::Cluster& cluster, int devices);

/// A Mesh-TensorFlow layout: per step, the tensor dimension every tensor is cut along: kMeshFirst
/// (dimension 0, the batch of activations), kMeshLast (the last dimension), or cost::kReplicated.
/// A tensor that cannot be cut so at a step is replicated there.
constexpr int kMeshFirst = 0;
constexpr int kMeshLast = 1;

struct ModelOptions {
  int threads = 0;  ///< 0 = every core (costing runs over ops)
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  /// Remove configurations dominated in every cost (exact: the frontier is unchanged).
  bool prune = true;
  /// TensorOpt §4.2's data loading: inputs and labels arrive split along their first dimension (the
  /// batch) at every step where it divides; consumers that want another layout fetch it (priced).
  bool batch_split_inputs = false;
  /// Tensor reuse (TensorOpt §4.2, python/tilewise/graph/reuse.py): identity ops of the graph that
  /// write a forward consumer's copy of a tensor (read by the consumer and its backward ops). Each
  /// leaves the search: one factor over (source class, copy class) prices the copy (its cheapest
  /// split: compute and fetch, and the copy's memory), and nothing where the two are tiled alike
  /// (then the plan has no copy: the consumer reads the source).
  std::vector<int> copy_ops;
  std::function<void(const std::string&, int64_t, int64_t)> progress;
};

/// The additive costs of one strategy: time = compute + network (seconds), memory (bytes).
struct Costs {
  double time = 0, memory = 0, compute = 0, network = 0;
};

/// A graph's configurations and their costs on a cluster: a decision problem for the frontier
/// engine whose variables are the tensor classes (0..T-1) then the op classes (T..T+O-1).
class FrontierModel {
 public:
  /// Builds and costs every configuration (PlanError for parts that do not multiply to the
  /// cluster's device count or exceed it; SearchTimeout past the deadline).
  FrontierModel(const graph::Graph& g, const sim::Cluster& cluster, std::vector<int> parts,
                const ModelOptions& options = {});

  const std::vector<int>& parts() const { return parts_; }
  int devices() const { return devices_; }
  int num_tensor_classes() const { return static_cast<int>(tensor_configs_.size()); }
  int num_op_classes() const { return static_cast<int>(op_configs_.size()); }
  /// Per variable, its configurations before and after pruning.
  std::vector<int> configs_before() const;
  std::vector<int> configs_after() const;
  /// A member of each class (tensor ids, then op ids), to name it.
  std::vector<int> representatives() const;
  /// The problem over the pruned configurations (what `solve` hands the engine).
  const partition::ParetoProblem& problem() const { return pruned_; }
  double build_seconds() const { return build_seconds_; }

  /// The exact frontier (choices index the pruned configurations). `coarsen`: over the space with
  /// element-wise ops tied to their input's tiling (coarse_ties.h; a restriction, far fewer
  /// variables); choices still name every class, points are costed on the full problem.
  partition::ParetoSolution solve(const partition::ParetoOptions& options, bool coarsen = false) const;
  /// Op classes the coarsened search ties to a tensor's tiling, and the variables it searches.
  int tied_ops() const { return ties_.tied_ops; }
  const Ties& ties() const { return ties_; }
  /// Each tied op joins its input's group: one variable fewer per tie.
  int coarse_variables() const { return num_tensor_classes() + num_op_classes() - ties_.tied_ops; }
  /// The frontier restricted to one Mesh-TensorFlow layout (`mesh`: per step kMeshFirst, kMeshLast or
  /// kReplicated): every tensor class at its one configuration that follows the layout (a dimension
  /// too small to cut at a step is replicated there), op classes free (all their configurations);
  /// a tensor class the layout cannot reach (inputs under batch_split_inputs) keeps its own.
  /// Choices index the unpruned configurations; only the costs are meant for use.
  partition::ParetoSolution solve_mesh(const std::vector<int>& mesh, const partition::ParetoOptions& options) const;
  /// Costs of a choice over the pruned configurations (as `solve` reports them: correctly rounded sums).
  Costs costs(const std::vector<int>& choice) const;
  /// Costs of any plan on this model's parts whose tilings and strategies are configurations of
  /// it (every planner's, with these parts); PlanError naming the first tensor or op that is not.
  Costs evaluate(const cost::Placement& plan) const;
  /// The choice (over the pruned configurations) of a plan as `evaluate` takes it; PlanError naming the
  /// first class whose configuration pruning removed (the plan is dominated there).
  std::vector<int> choice_of(const cost::Placement& plan) const;
  /// The plan of a choice over the pruned configurations: tilings and strategies of every tensor
  /// and op, bytes per step recounted by the cost model (algorithm "frontier"; `count_bytes` false:
  /// tilings and strategies only, bytes 0).
  partition::Plan plan(const std::vector<int>& choice, int threads = 0, bool count_bytes = true) const;
  /// Per reuse copy op class (ModelOptions::copy_ops): its variable, then source and copy tensor classes.
  std::vector<std::tuple<int, int, int>> copy_classes() const;
  /// The copy ops a choice keeps: those whose copy it tiles apart from the source (the others are the
  /// source itself), in graph order.
  std::vector<int> kept_copy_ops(const std::vector<int>& choice) const;

 private:
  struct CopyFactor {
    int op_class, source, copy;  // the copy op class, the tensor classes it reads and writes
    std::vector<int> split;      // per (source, copy) configuration pair (unpruned): the copy op's split
  };
  void fold_copies(const std::vector<int>& copy_ops);
  Costs sum(const std::vector<int>& full_choice) const;  // over unpruned configurations
  std::vector<int> full_choice(const cost::Placement& plan) const;  // a plan's unpruned configurations

  const graph::Graph* graph_;
  std::vector<int> parts_;
  int devices_ = 1;
  partition::Policy policy_;
  partition::Problem problem_;
  std::vector<std::vector<cost::Tiling>> tensor_configs_;  // per tensor class (unpruned)
  std::vector<std::vector<cost::OpSplit>> op_configs_;     // per op class (unpruned)
  std::vector<std::vector<partition::Point>> node_costs_;  // per variable, per configuration
  std::vector<partition::ParetoEdge> edges_;               // unpruned; memory only in copy factors
  std::vector<CopyFactor> copies_;
  std::vector<std::vector<int>> kept_;                     // per variable, unpruned indices kept
  partition::ParetoProblem pruned_;
  Ties ties_;  // element-wise ties over the pruned configurations
  double build_seconds_ = 0;
};

}  // namespace tilewise::frontier

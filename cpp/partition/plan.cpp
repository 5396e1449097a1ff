#include "partition/plan.h"

#include <algorithm>

#include "partition/elimination.h"
#include "partition/planners.h"
#include "tdl/op_cost.h"

namespace tilewise::partition {

using cost::kReplicated;
using graph::Role;

const std::vector<std::string>& algorithm_names() {
  static const std::vector<std::string> names = {"tofu",          "kcuts",      "spartan", "data_parallel",
                                                 "allrow_greedy", "equal_chop", "icml18",  "brute_force"};
  return names;
}

namespace {

// Parameters and the state that travels with them (optimizer state, constants, their new values).
bool is_parameter_like(const graph::Graph& g, int t) {
  const auto& node = g.tensor(t);
  if (node.updates >= 0) return is_parameter_like(g, node.updates);
  return node.role == Role::kParameter || node.role == Role::kOptimizerState || node.role == Role::kConstant;
}

bool is_parameter_gradient(const graph::Graph& g, int t) {
  const auto& node = g.tensor(t);
  return node.grad_of >= 0 && g.tensor(node.grad_of).role == Role::kParameter;
}

Policy policy_for(const graph::Graph& g, const std::string& algorithm, const SearchOptions& options) {
  Policy policy;
  if (algorithm == "kcuts") policy.replicate_tensors = true;
  if (algorithm == "icml18") policy.reduce_ops = false;
  if (algorithm == "spartan") policy.replicate_tensors = options.duplication_budget > 0;
  if (algorithm == "brute_force") policy.replicate_tensors = options.brute_force_replication;
  if (algorithm == "data_parallel") {
    // Replicated parameters, batch-split (dimension 0) activations; parameter gradients free, so
    // the search finds the reduce-scatter + all-gather that an all-reduce is.
    policy.replicate_tensors = true;
    policy.restrict_cuts = [&g](int t, int, const std::vector<int>& candidates) -> std::vector<int> {
      if (is_parameter_like(g, t)) return {kReplicated};
      if (is_parameter_gradient(g, t)) return {};
      if (std::find(candidates.begin(), candidates.end(), 0) != candidates.end()) return {0};
      std::vector<int> split;
      for (int c : candidates)
        if (c != kReplicated) split.push_back(c);
      return split;
    };
  }
  if (algorithm == "allrow_greedy") {
    // Tofu §7.3: every tensor along its first dimension (the next one when that is too small).
    policy.restrict_cuts = [](int, int, const std::vector<int>& candidates) -> std::vector<int> {
      return {*std::min_element(candidates.begin(), candidates.end(), [](int a, int b) {
        return (a == kReplicated ? 1 << 30 : a) < (b == kReplicated ? 1 << 30 : b);
      })};
    };
  }
  return policy;
}

}  // namespace

Plan partition(const graph::Graph& g, int devices, const std::string& algorithm, const SearchOptions& options) {
  const auto& names = algorithm_names();
  if (std::find(names.begin(), names.end(), algorithm) == names.end()) {
    std::string valid;
    for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
    throw PlanError("unknown partition algorithm '" + algorithm + "'; valid: " + valid);
  }
  if (devices < 1) throw PlanError("devices must be at least 1, got " + std::to_string(devices));
  if (options.time_limit < 0) throw PlanError("time_limit must be >= 0 seconds (0 = none)");
  if (options.duplication_budget < 0) throw PlanError("duplication_budget must be >= 0 bytes");
  auto start = std::chrono::steady_clock::now();
  auto deadline = options.time_limit > 0
                      ? start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(options.time_limit))
                      : std::chrono::steady_clock::time_point::max();
  std::vector<int> parts = cost::factorize(devices);
  if (algorithm == "equal_chop" && devices > 1) parts = {devices};  // one k-way chop per tensor
  Policy policy = policy_for(g, algorithm, options);
  Problem p = make_problem(g, parts, policy);
  Plan plan;
  if (algorithm == "spartan") plan = plan_spartan(p, policy, options, deadline);
  else if (algorithm == "brute_force") plan = plan_brute_force(p, policy, options, deadline);
  else plan = plan_recursive(p, policy, options, deadline);
  plan.algorithm = algorithm;
  plan.devices = devices;
  plan.parts = parts;
  if (algorithm == "brute_force")
    plan.step_bytes = step_deltas(prefix_bytes(p, plan.assignment, static_cast<int>(parts.size()), options.threads));
  plan.search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

void validate(const graph::Graph& g, const Plan& plan) {
  const auto& a = plan.assignment;
  const int m = static_cast<int>(plan.parts.size());
  if (cost::device_count(plan.parts) != plan.devices)
    throw PlanError("the plan's parts do not multiply to its " + std::to_string(plan.devices) + " devices");
  for (int k : plan.parts)
    if (k < 2) throw PlanError("every part count of a plan must be at least 2");
  if (a.tilings.size() != g.tensors().size() || a.splits.size() != g.ops().size())
    throw PlanError("the plan has " + std::to_string(a.tilings.size()) + " tensors and " +
                    std::to_string(a.splits.size()) + " ops; the graph has " + std::to_string(g.tensors().size()) +
                    " and " + std::to_string(g.ops().size()) + ": it was made for another graph");
  for (const auto& t : g.tensors()) {
    const auto& cuts = a.tilings[t.id];
    if (static_cast<int>(cuts.size()) != m)
      throw PlanError("tensor '" + t.name + "' has " + std::to_string(cuts.size()) + " cuts; the plan has " +
                      std::to_string(m) + " steps");
    for (int c : cuts)
      if (c != kReplicated && (c < 0 || c >= static_cast<int>(t.shape.size())))
        throw PlanError("tensor '" + t.name + "' is cut along dimension " + std::to_string(c) + " but has rank " +
                        std::to_string(t.shape.size()));
  }
  for (const auto& op : g.ops()) {
    const auto& split = a.splits[op.id];
    if (static_cast<int>(split.size()) != m)
      throw PlanError("op '" + op.name + "' has " + std::to_string(split.size()) + " strategies; the plan has " +
                      std::to_string(m) + " steps");
    for (const auto& s : split)
      if (s.kind != tdl::StrategyKind::kReplicate && (s.var < 0 || s.var >= static_cast<int>(op.desc->vars.size())))
        throw PlanError("op '" + op.name + "' splits variable " + std::to_string(s.var) + " of " +
                        std::to_string(op.desc->vars.size()));
  }
}

PlanCost evaluate(const graph::Graph& g, const Plan& plan, int threads) {
  validate(g, plan);
  const auto& a = plan.assignment;
  const int m = static_cast<int>(plan.parts.size());
  Policy any;
  Problem p = make_problem(g, plan.parts, any);
  PlanCost pc;
  const int no = static_cast<int>(g.ops().size());
  for (int o = 0; o < no; ++o) pc.per_op.push_back(op_bytes(p, o, a, m));
  auto prefix = prefix_bytes(p, a, m, threads);
  pc.step_bytes = step_deltas(prefix);
  pc.comm_bytes = prefix.empty() ? 0 : prefix.back();
  pc.memory = cost::estimate_memory(g, p.ops, a.tilings, a.splits, plan.parts);
  // Arithmetic per device: each op's FLOPs in proportion to the device's share of its iteration space.
  const int64_t n = cost::device_count(plan.parts);
  pc.flops_per_device.assign(n, 0);
  for (const auto& op : g.ops()) {
    const auto& view = p.ops[op.id];
    auto work = tdl::op_work(*op.desc, view.extents, view.input_shapes);
    double out_elems = 1, iter = 1;
    for (int64_t s : view.output_shape) out_elems *= static_cast<double>(s);
    for (int64_t e : view.extents) iter *= static_cast<double>(std::max<int64_t>(e, 1));
    double flops = work.flops_per_element * out_elems;
    for (int64_t d = 0; d < n; ++d) {
      auto ranges = cost::var_ranges(view.extents, a.splits[op.id], plan.parts, cost::device_coords(d, plan.parts, m));
      double share = 1;
      for (const auto& r : ranges) share *= static_cast<double>(std::max<int64_t>(r.size(), 1));
      pc.flops_per_device[d] += static_cast<int64_t>(flops * share / iter);
    }
  }
  return pc;
}

}  // namespace tilewise::partition

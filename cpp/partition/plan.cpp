#include "partition/plan.h"

#include <algorithm>

#include "partition/elimination.h"
#include "cost/flops.h"
#include "partition/planners.h"

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
  if (!options.parts.empty()) {
    int64_t product = 1;
    for (int k : options.parts) product *= k;
    if (product != devices)
      throw PlanError("parts multiply to " + std::to_string(product) + ", not to the " + std::to_string(devices) +
                      " devices");
    parts = options.parts;
  }
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
  std::string why = cost::placement_misfit(g, plan);
  if (!why.empty()) throw PlanError(why);
}

PlanCost evaluate(const graph::Graph& g, const Plan& plan, int threads) {
  validate(g, plan);
  const auto& a = plan.assignment;
  const int m = static_cast<int>(plan.parts.size());
  Policy any;
  Problem p = make_problem(g, plan.parts, any);
  PlanCost pc;
  const int no = static_cast<int>(g.ops().size());
  auto& memo = p.count_memos(1)[0];  // prefix_bytes' first worker finds these counts again
  for (int o = 0; o < no; ++o) pc.per_op.push_back(op_bytes(p, o, a, m, &memo));
  auto prefix = prefix_bytes(p, a, m, threads);
  pc.step_bytes = step_deltas(prefix);
  pc.comm_bytes = prefix.empty() ? 0 : prefix.back();
  pc.memory = cost::estimate_memory(g, p.ops, a.tilings, a.splits, plan.parts);
  pc.flops_per_device = cost::flops_per_device(p.ops, a.splits, plan.parts);
  return pc;
}

}  // namespace tilewise::partition

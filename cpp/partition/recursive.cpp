#include <algorithm>
#include <string>

#include "partition/elimination.h"
#include "partition/planners.h"

namespace tilewise::partition {


Plan plan_recursive(const Problem& p, const Policy& policy, const SearchOptions& options,
                    std::chrono::steady_clock::time_point deadline) {
  Plan plan;
  plan.parts = p.parts;
  plan.assignment = empty_assignment(p);
  const int m = static_cast<int>(p.parts.size());
  int64_t before = 0;
  for (int step = 0; step < m; ++step) {
    const std::string what = "step " + std::to_string(step + 1) + "/" + std::to_string(m);
    if (options.progress) options.progress(what + " costing", 0, 1);
    StepProblem sp = build_step(p, policy, plan.assignment, step, options.threads, deadline);
    std::vector<Factor> factors;
    factors.reserve(sp.pairs.size());
    for (auto& pair : sp.pairs) factors.push_back({{sp.op_var(pair.op_class), sp.tensor_var(pair.tensor_class)}, pair.table});
    EliminationOptions eo;
    eo.deadline = deadline;
    if (options.progress) eo.progress = [&](int64_t done, int64_t total) { options.progress(what + " search", done, total); };
    EliminationResult r = eliminate(sp.domain_sizes, std::move(factors), eo);
    apply_step(p, sp, r.values, plan.assignment);
    plan.step_bytes.push_back(r.cost - before);
    plan.largest_table = std::max(plan.largest_table, r.largest_table);
    before = r.cost;
  }
  plan.comm_bytes = before;
  return plan;
}

}  // namespace tilewise::partition

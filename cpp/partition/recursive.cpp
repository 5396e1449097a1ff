#include <algorithm>
#include <deque>
#include <string>

#include "partition/elimination.h"
#include "partition/planners.h"

namespace tilewise::partition {

namespace {

// SoyBean §4.2.2: BFS levels of the undirected op-tensor graph from the graph inputs; a class
// is eliminated after the last level that touches it, as the level-by-level DP does.
std::vector<int> bfs_order(const Problem& p, const StepProblem& sp) {
  const auto& g = *p.graph;
  const int nt = static_cast<int>(g.tensors().size()), no = static_cast<int>(g.ops().size());
  std::vector<int> level(nt + no, -1);
  std::deque<int> queue;
  auto visit_from = [&](int start) {
    level[start] = 0;
    queue.push_back(start);
    while (!queue.empty()) {
      int x = queue.front();
      queue.pop_front();
      std::vector<int> next;
      if (x < nt) {
        const auto& t = g.tensor(x);
        if (t.producer >= 0) next.push_back(nt + t.producer);
        for (int c : t.consumers) next.push_back(nt + c);
      } else {
        const auto& op = g.op(x - nt);
        next = op.inputs;
        next.push_back(op.output);
      }
      for (int y : next)
        if (level[y] < 0) level[y] = level[x] + 1, queue.push_back(y);
    }
  };
  for (const auto& t : g.tensors())
    if (t.producer < 0 && t.role == graph::Role::kInput && level[t.id] < 0) visit_from(t.id);
  for (int x = 0; x < nt + no; ++x)
    if (level[x] < 0) visit_from(x);
  const int ntc = static_cast<int>(sp.tensor_domain.size()), noc = static_cast<int>(sp.op_domain.size());
  std::vector<int> last(ntc + noc, 0);
  for (int t = 0; t < nt; ++t) last[sp.tensor_var(p.tensor_class[t])] = std::max(last[sp.tensor_var(p.tensor_class[t])], level[t]);
  for (int o = 0; o < no; ++o) {
    int v = sp.op_var(p.op_class[o]);
    last[v] = std::max(last[v], level[nt + o]);
    // A tensor read or written by this op is needed until the op's level is processed.
    for (int t : g.op(o).inputs) last[p.tensor_class[t]] = std::max(last[p.tensor_class[t]], level[nt + o]);
    int out = p.tensor_class[g.op(o).output];
    last[out] = std::max(last[out], level[nt + o]);
  }
  std::vector<int> order(ntc + noc);
  for (int i = 0; i < ntc + noc; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return last[a] < last[b]; });
  return order;
}

}  // namespace

Plan plan_recursive(const Problem& p, const Policy& policy, Order order, const SearchOptions& options,
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
    if (order == Order::kBfsLevels) eo.order = bfs_order(p, sp);
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

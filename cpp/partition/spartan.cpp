#include <algorithm>
#include <set>
#include <string>

#include "partition/elimination.h"
#include "partition/planners.h"
#include "tdl/interrupt.h"

namespace tilewise::partition {

namespace {

// Bytes one device holds of a class's tensors after the prefix cuts (device 0's share is the largest).
int64_t prefix_tile_bytes(const Problem& p, int tensor_class, const Assignment& a) {
  int64_t total = 0;
  for (int t : p.class_tensors[tensor_class]) {
    const auto& node = p.graph->tensor(t);
    if (node.updates >= 0) continue;  // written in place of the tensor it updates
    const auto& tiling = a.tilings[t];
    cost::Box b = cost::tile_box(node.shape, tiling, p.parts, std::vector<int>(tiling.size(), 0));
    total += b.volume() * p.bytes_per_element(t);
  }
  return total;
}

}  // namespace

Plan plan_spartan(const Problem& p, const Policy& policy, const SearchOptions& options,
                  std::chrono::steady_clock::time_point deadline) {
  Plan plan;
  plan.parts = p.parts;
  plan.assignment = empty_assignment(p);
  int64_t budget = options.duplication_budget;
  const int m = static_cast<int>(p.parts.size());
  int64_t before = 0;
  for (int step = 0; step < m; ++step) {
    const std::string what = "step " + std::to_string(step + 1) + "/" + std::to_string(m);
    if (options.progress) options.progress(what + " costing", 0, 1);
    StepProblem sp = build_step(p, policy, plan.assignment, {step}, m, options.threads, deadline);
    const int nv = static_cast<int>(sp.domain_sizes.size());
    // Pairwise edges of the tiling graph: (factor, other variable, whether this variable is the row).
    struct Edge {
      int pair;
      int other;
      bool row;
    };
    std::vector<std::vector<Edge>> edges(nv);
    for (int f = 0; f < static_cast<int>(sp.pairs.size()); ++f) {
      int ov = sp.op_var(sp.pairs[f].op_class), tv = sp.tensor_var(sp.pairs[f].tensor_class);
      edges[ov].push_back({f, tv, true});
      edges[tv].push_back({f, ov, false});
    }
    std::vector<int> connectivity(nv);
    for (int v = 0; v < nv; ++v) {
      std::set<int> others;
      for (const Edge& e : edges[v]) others.insert(e.other);
      connectivity[v] = static_cast<int>(others.size());
    }
    std::vector<int> order(nv);
    for (int v = 0; v < nv; ++v) order[v] = v;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return connectivity[a] > connectivity[b]; });
    std::vector<int> chosen(nv, -1);
    auto entry = [&](const Edge& e, int mine, int theirs) {
      const auto& pair = sp.pairs[e.pair];
      int cols = sp.domain_sizes[sp.tensor_var(pair.tensor_class)];
      return e.row ? pair.table[static_cast<size_t>(mine) * cols + theirs]
                   : pair.table[static_cast<size_t>(theirs) * cols + mine];
    };
    const int ntc = static_cast<int>(sp.tensor_domain.size());
    for (int idx = 0; idx < nv; ++idx) {
      if ((idx & 255) == 0) check_interrupt();
      if ((idx & 255) == 0 && std::chrono::steady_clock::now() > deadline)
        throw SearchTimeout("time limit reached in spartan's greedy search at " + what);
      int v = order[idx];
      int best = -1;
      int64_t best_cost = 0, best_extra = 0;
      for (int y = 0; y < sp.domain_sizes[v]; ++y) {
        int64_t extra = 0;
        if (v < ntc && sp.tensor_domain[v][y][0] == cost::kReplicated && policy.replicate_tensors) {
          // Duplication (Spartan §2.3.4) costs memory: the tile is not divided by this step's parts.
          int64_t tile = prefix_tile_bytes(p, v, plan.assignment);
          extra = tile - tile / p.parts[step];
          if (extra > budget && sp.domain_sizes[v] > 1) continue;
        }
        int64_t c = 0;
        for (const Edge& e : edges[v]) {
          int64_t m_best = kInfinite;
          if (chosen[e.other] >= 0) m_best = entry(e, y, chosen[e.other]);
          else
            for (int z = 0; z < sp.domain_sizes[e.other]; ++z) m_best = std::min(m_best, entry(e, y, z));
          c = std::min(kInfinite, c + m_best);
        }
        if (best < 0 || c < best_cost) best = y, best_cost = c, best_extra = extra;
      }
      chosen[v] = best;
      budget -= best_extra;
      plan.duplication_used += best_extra;
    }
    int64_t total = 0;
    for (const auto& pair : sp.pairs) {
      int cols = sp.domain_sizes[sp.tensor_var(pair.tensor_class)];
      total += pair.table[static_cast<size_t>(chosen[sp.op_var(pair.op_class)]) * cols +
                          chosen[sp.tensor_var(pair.tensor_class)]];
    }
    apply_step(p, sp, chosen, plan.assignment);
    plan.step_bytes.push_back(total - before);
    before = total;
  }
  plan.comm_bytes = before;
  return plan;
}

}  // namespace tilewise::partition

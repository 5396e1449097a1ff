#include "partition/elimination_order.h"

#include <algorithm>
#include <set>
#include <string>

#include "tdl/errors.h"
#include "tdl/interrupt.h"

namespace tilewise::partition {

EliminationPlan plan_elimination(const std::vector<int>& domain_sizes, std::vector<std::vector<int>> scopes,
                                 const OrderOptions& options) {
  const int n = static_cast<int>(domain_sizes.size());
  TW_ASSERT(options.order.empty() || options.order.size() == domain_sizes.size(),
            "an elimination order lists every variable once");
  std::vector<std::vector<int>> var_factors(n);  // factor ids touching each variable (may be stale)
  std::vector<char> alive;
  for (size_t f = 0; f < scopes.size(); ++f) {
    alive.push_back(scopes[f].empty() ? 0 : 1);
    for (int v : scopes[f]) var_factors[v].push_back(static_cast<int>(f));
  }
  std::vector<char> done(n, 0);  // eliminated or fixed
  EliminationPlan plan;

  // Neighbours ascending, collected by stamps into a reused buffer (this runs per weight update).
  std::vector<int> stamp(n, -1), nb;
  int stamp_id = 0;
  auto neighbours = [&](int v) -> const std::vector<int>& {
    nb.clear();
    ++stamp_id;
    stamp[v] = stamp_id;
    for (int f : var_factors[v])
      if (alive[f])
        for (int u : scopes[f])
          if (stamp[u] != stamp_id) stamp[u] = stamp_id, nb.push_back(u);
    std::sort(nb.begin(), nb.end());
    return nb;
  };
  // Size of the table eliminating v builds; ties go to the variable with fewer neighbours.
  auto weight = [&](int v) {
    double w = 1;
    const auto& ns = neighbours(v);
    for (int u : ns) w *= domain_sizes[u];
    return w * (1 + 1e-9 * static_cast<double>(ns.size()));
  };
  // The greedy order takes the smallest weight, ties to the lowest index: an ordered set of
  // (weight, variable) over the variables left, with the weights that changed updated before each
  // choice (what a scan of every variable would find, without the scan).
  std::vector<double> weights(n);
  std::set<std::pair<double, int>> by_weight;
  if (options.order.empty())
    for (int v = 0; v < n; ++v) weights[v] = weight(v), by_weight.emplace(weights[v], v);
  std::vector<char> dirty(n, 0);
  std::vector<int> dirty_list;
  auto mark_dirty = [&](int u) {
    if (!dirty[u] && !done[u]) dirty[u] = 1, dirty_list.push_back(u);
  };
  auto finish = [&](int u) {
    done[u] = 1;
    if (options.order.empty()) by_weight.erase({weights[u], u});
  };
  auto drop_dead = [&](int u) {
    auto& list = var_factors[u];
    list.erase(std::remove_if(list.begin(), list.end(), [&](int f) { return !alive[f]; }), list.end());
  };

  size_t next_in_order = 0;
  int eliminated = 0;
  while (plan.order.size() + plan.conditioned.size() + plan.fixed.size() < static_cast<size_t>(n)) {
    check_interrupt();
    if (std::chrono::steady_clock::now() > options.deadline)
      throw SearchTimeout("time limit reached after eliminating " + std::to_string(eliminated) + " of " +
                          std::to_string(n) + " variables");
    int v = -1;
    if (!options.order.empty()) {
      while (next_in_order < options.order.size()) {
        int u = options.order[next_in_order];
        TW_ASSERT(u >= 0 && u < n, "elimination order must list each variable once");
        if (!done[u]) {
          v = u;
          break;
        }
        // A variable fixed by conditioning is skipped; one listed twice is a bug.
        TW_ASSERT(std::find(plan.order.begin(), plan.order.end(), u) == plan.order.end(),
                  "elimination order must list each variable once");
        ++next_in_order;
      }
      TW_ASSERT(v >= 0, "elimination order must list each variable once");
    } else {
      for (int u : dirty_list) {
        dirty[u] = 0;
        if (done[u]) continue;
        by_weight.erase({weights[u], u});
        weights[u] = weight(u);
        by_weight.emplace(weights[u], u);
      }
      dirty_list.clear();
      v = by_weight.begin()->second;
    }
    std::vector<int> scope = neighbours(v);
    int64_t entries = 1;
    bool too_wide = false;
    for (int u : scope) {
      entries *= domain_sizes[u];
      if (entries > options.max_table) {
        too_wide = true;
        break;
      }
    }
    if (too_wide) {
      if (options.too_wide == TooWide::kThrow)
        throw SearchTooLarge("exact search needs a table of more than " + std::to_string(options.max_table) +
                             " entries (the graph is too wide for this algorithm)");
      // Take out the neighbour that links the most others (a hub such as an attention mask read
      // by every layer): fixing it splits the scope the most. Ties go to the lowest index.
      int w = -1;
      size_t most = 0;
      for (int u : scope) {
        size_t d = neighbours(u).size();
        if (w < 0 || d > most) w = u, most = d;
      }
      if (options.too_wide == TooWide::kCondition) {
        plan.conditioned.push_back(w);
      } else {
        TW_ASSERT(options.heuristic_value, "heuristic elimination needs a rule for the value");
        plan.fixed.emplace_back(w, options.heuristic_value(w));
      }
      finish(w);
      for (int u : neighbours(w)) mark_dirty(u);
      for (int f : var_factors[w]) {
        if (!alive[f]) continue;
        auto& s = scopes[f];
        s.erase(std::remove(s.begin(), s.end(), w), s.end());
        if (s.empty()) alive[f] = 0;
      }
      var_factors[w].clear();
      continue;
    }
    // Eliminate v: its factors merge into one over its scope.
    for (int f : var_factors[v]) alive[f] = 0;
    finish(v);
    ++eliminated;
    plan.order.push_back(v);
    if (!options.order.empty()) ++next_in_order;
    if (!scope.empty()) {
      int id = static_cast<int>(scopes.size());
      scopes.push_back(scope);
      alive.push_back(1);
      for (int u : scope) var_factors[u].push_back(id), mark_dirty(u);
    }
    for (int u : scope) drop_dead(u);
  }
  return plan;
}

}  // namespace tilewise::partition

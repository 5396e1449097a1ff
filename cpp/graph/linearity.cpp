#include "graph/linearity.h"

#include <stdexcept>
#include <string>
#include <unordered_set>
#include <algorithm>

namespace tilewise::graph {

SeriesParallelResult reduce_series_parallel(int n, const std::vector<std::pair<int, int>>& edges,
                                            const std::vector<int>& sources, const std::vector<int>& sinks) {
  if (n < 0) throw std::invalid_argument("reduce_series_parallel: negative node count");
  SeriesParallelResult r;
  if (n == 0) {
    r.series_parallel = true;
    return r;
  }
  const int s = n, t = n + 1;
  // A neighbour set per node: inserting an edge that is already there *is* the parallel reduction.
  std::vector<std::unordered_set<int>> adj(n + 2);
  auto check = [n](int v, const char* what) {
    if (v < 0 || v >= n)
      throw std::invalid_argument(std::string("reduce_series_parallel: ") + what + " node " + std::to_string(v) +
                                  " is not in 0.." + std::to_string(n - 1));
  };
  auto connect = [&](int a, int b) {
    if (a == b) return;
    if (!adj[a].insert(b).second) {
      ++r.parallel_reductions;
      return;
    }
    adj[b].insert(a);
  };
  for (const auto& [a, b] : edges) {
    check(a, "edge");
    check(b, "edge");
    connect(a, b);
  }
  for (int v : sources) check(v, "source"), connect(s, v);
  for (int v : sinks) check(v, "sink"), connect(v, t);

  std::vector<char> removed(n, 0);
  std::vector<int> work;
  work.reserve(n);
  for (int v = n - 1; v >= 0; --v) work.push_back(v);
  while (!work.empty()) {
    int v = work.back();
    work.pop_back();
    if (v >= n || removed[v] || adj[v].size() != 2) continue;
    auto it = adj[v].begin();
    int a = *it++, b = *it;
    adj[a].erase(v);
    adj[b].erase(v);
    adj[v].clear();
    removed[v] = 1;
    ++r.series_reductions;
    if (adj[a].count(b)) {
      // The new edge a-b is parallel to an existing one: merged, so a and b each lose a neighbour.
      ++r.parallel_reductions;
      work.push_back(a);
      work.push_back(b);
    } else {
      adj[a].insert(b);
      adj[b].insert(a);
    }
  }
  for (int v = 0; v < n; ++v)
    if (!removed[v]) r.remaining.push_back(v);
  r.series_parallel = r.remaining.empty() && adj[s].size() == 1 && adj[s].count(t) == 1;
  return r;
}

SeriesParallelResult reduce_series_parallel(int n, const std::vector<std::pair<int, int>>& directed_edges) {
  if (n < 0) throw std::invalid_argument("reduce_series_parallel: negative node count");
  std::vector<char> has_in(n, 0), has_out(n, 0);
  for (const auto& [a, b] : directed_edges) {
    if (a < 0 || a >= n || b < 0 || b >= n)
      throw std::invalid_argument("reduce_series_parallel: edge (" + std::to_string(a) + ", " + std::to_string(b) +
                                  ") has a node outside 0.." + std::to_string(n - 1));
    if (a == b) continue;
    has_out[a] = 1;
    has_in[b] = 1;
  }
  std::vector<int> sources, sinks;
  for (int v = 0; v < n; ++v) {
    if (!has_in[v]) sources.push_back(v);
    if (!has_out[v]) sinks.push_back(v);
  }
  return reduce_series_parallel(n, directed_edges, sources, sinks);
}

namespace {

/// Strongly connected components of the alive nodes (iterative Kosaraju: graphs can be long
/// chains, too deep for recursion). Returns the component id of every alive node, -1 otherwise.
std::vector<int> components(int n, const std::vector<std::vector<int>>& out, const std::vector<std::vector<int>>& in,
                            const std::vector<char>& alive) {
  std::vector<int> order, comp(n, -1);
  std::vector<char> seen(n, 0);
  std::vector<std::pair<int, size_t>> stack;
  for (int r = 0; r < n; ++r) {
    if (!alive[r] || seen[r]) continue;
    seen[r] = 1;
    stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [v, i] = stack.back();
      if (i < out[v].size()) {
        int w = out[v][i++];
        if (alive[w] && !seen[w]) seen[w] = 1, stack.push_back({w, 0});
      } else {
        order.push_back(v);
        stack.pop_back();
      }
    }
  }
  int c = 0;
  std::vector<int> todo;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (comp[*it] >= 0) continue;
    comp[*it] = c;
    todo.push_back(*it);
    while (!todo.empty()) {
      int v = todo.back();
      todo.pop_back();
      for (int w : in[v])
        if (alive[w] && comp[w] < 0) comp[w] = c, todo.push_back(w);
    }
    ++c;
  }
  return comp;
}

}  // namespace

LinearityResult check_linear(int n, const std::vector<std::pair<int, int>>& directed_edges,
                             const std::vector<char>& entry_marks, const std::vector<char>& exit_marks) {
  if (n < 0) throw std::invalid_argument("check_linear: negative node count");
  if (!entry_marks.empty() && static_cast<int>(entry_marks.size()) != n)
    throw std::invalid_argument("check_linear: entry_marks must be empty or have one flag per node");
  if (!exit_marks.empty() && static_cast<int>(exit_marks.size()) != n)
    throw std::invalid_argument("check_linear: exit_marks must be empty or have one flag per node");
  std::vector<std::unordered_set<int>> outs(n), ins(n), adj(n);
  for (const auto& [a, b] : directed_edges) {
    if (a < 0 || a >= n || b < 0 || b >= n)
      throw std::invalid_argument("check_linear: edge (" + std::to_string(a) + ", " + std::to_string(b) +
                                  ") has a node outside 0.." + std::to_string(n - 1));
    if (a == b) continue;
    outs[a].insert(b), ins[b].insert(a), adj[a].insert(b), adj[b].insert(a);
  }

  // 1. Pendant pruning.
  LinearityResult r;
  std::vector<char> alive(n, 1), fed_by_pruned(n, 0), feeds_pruned(n, 0);
  std::vector<int> work(n);
  for (int v = 0; v < n; ++v) work[v] = n - 1 - v;
  while (!work.empty()) {
    int v = work.back();
    work.pop_back();
    if (!alive[v] || adj[v].size() > 1) continue;
    if (adj[v].size() == 1) {
      int u = *adj[v].begin();
      // Both flags for a two-way edge: a recurrence state hanging off its cell (H <-> L).
      if (outs[v].count(u)) fed_by_pruned[u] = 1;
      if (ins[v].count(u)) feeds_pruned[u] = 1;
      adj[u].erase(v);
      work.push_back(u);
    }
    alive[v] = 0;
    r.pendants.push_back(v);
  }
  std::sort(r.pendants.begin(), r.pendants.end());

  // 2. Terminals from the components of what is left.
  std::vector<std::vector<int>> out(n), in(n);
  for (int v = 0; v < n; ++v) {
    if (!alive[v]) continue;
    for (int w : outs[v])
      if (alive[w]) out[v].push_back(w), in[w].push_back(v);
  }
  for (auto& o : out) std::sort(o.begin(), o.end());  // deterministic traversal
  std::vector<int> comp = components(n, out, in, alive);
  int n_comp = 0;
  for (int v = 0; v < n; ++v)
    if (alive[v]) n_comp = std::max(n_comp, comp[v] + 1);
  std::vector<char> fed(n_comp, 0), feeds(n_comp, 0);
  std::vector<std::vector<int>> members(n_comp);
  for (int v = 0; v < n; ++v) {
    if (!alive[v]) continue;
    members[comp[v]].push_back(v);
    for (int w : out[v])
      if (comp[w] != comp[v]) feeds[comp[v]] = 1, fed[comp[w]] = 1;
  }
  // One entry per source component and one exit per sink component: in a merged recurrent layer
  // several members read pendants (x and h0 feed the gates, c0 the cell), and joining them all to
  // the super source would make a bridge, as a weight in a fork-join branch would.
  for (int c = 0; c < n_comp; ++c) {
    const auto& m = members[c];  // ascending
    auto candidate = [&](int v, const std::vector<char>& pruned, const std::vector<char>& marks) {
      return pruned[v] || (!marks.empty() && marks[v]);
    };
    if (!fed[c]) {
      auto it = std::find_if(m.begin(), m.end(), [&](int v) { return candidate(v, fed_by_pruned, entry_marks); });
      r.entries.push_back(it != m.end() ? *it : m.front());
    }
    if (!feeds[c]) {
      auto it = std::find_if(m.rbegin(), m.rend(), [&](int v) { return candidate(v, feeds_pruned, exit_marks); });
      r.exits.push_back(it != m.rend() ? *it : m.back());
    }
  }
  std::sort(r.entries.begin(), r.entries.end());
  std::sort(r.exits.begin(), r.exits.end());

  // 3. Series-parallel reduction of the rest, renumbered densely.
  std::vector<int> id(n, -1), node;
  for (int v = 0; v < n; ++v)
    if (alive[v]) id[v] = static_cast<int>(node.size()), node.push_back(v);
  std::vector<std::pair<int, int>> edges;
  for (int v = 0; v < n; ++v)
    for (int w : out[v]) edges.push_back({id[v], id[w]});
  std::vector<int> sources, sinks;
  for (int v : r.entries) sources.push_back(id[v]);
  for (int v : r.exits) sinks.push_back(id[v]);
  r.reduction = reduce_series_parallel(static_cast<int>(node.size()), edges, sources, sinks);
  for (int& v : r.reduction.remaining) v = node[v];
  r.linear = r.reduction.series_parallel;
  return r;
}

}  // namespace tilewise::graph

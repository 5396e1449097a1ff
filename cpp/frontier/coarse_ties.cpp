// Element-wise ties for the frontier search (coarse_ties.h).
#include "frontier/coarse_ties.h"

#include <algorithm>
#include <map>
#include <utility>

#include "tdl/errors.h"
#include "tdl/strategy.h"

namespace tilewise::frontier {

using partition::Point;

namespace {

// The split of an op that follows its output's tiling: per step the output variable of the cut
// dimension, or replication where the tiling replicates.
cost::OpSplit aligned_split(const tdl::OpDesc& desc, const cost::Tiling& t) {
  cost::OpSplit s;
  for (int d : t) {
    tdl::Strategy st;
    if (d == cost::kReplicated) st.kind = tdl::StrategyKind::kReplicate, st.var = -1;
    else st.kind = tdl::StrategyKind::kOutput, st.var = desc.output_vars[d];
    s.push_back(st);
  }
  return s;
}

bool same_split(const cost::OpSplit& a, const cost::OpSplit& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kind != b[i].kind || a[i].var != b[i].var) return false;
  return true;
}

// The input class op class `oc` follows: the first input slot every member reads at exactly its
// output index, with the output's shape, and whose class the members agree on; -1 if none.
int aligned_input_class(const partition::Problem& p, int oc) {
  const auto& members = p.class_ops[oc];
  const graph::Graph& g = *p.graph;
  const auto& first = g.op(members[0]);
  for (size_t slot = 0; slot < first.inputs.size(); ++slot) {
    const int in_class = p.tensor_class[first.inputs[slot]];
    bool ok = true;
    for (int o : members) {
      const auto& op = g.op(o);
      if (slot >= op.inputs.size() || p.tensor_class[op.inputs[slot]] != in_class ||
          !tdl::aligned_inputs(*p.ops[o].desc)[slot] || g.tensor(op.inputs[slot]).shape != g.tensor(op.output).shape) {
        ok = false;
        break;
      }
    }
    if (ok) return in_class;
  }
  return -1;
}

}  // namespace

Ties elementwise_ties(const partition::Problem& p, const std::vector<std::vector<cost::Tiling>>& tensor_configs,
                      const std::vector<std::vector<cost::OpSplit>>& op_configs,
                      const std::vector<std::vector<int>>& kept) {
  const int nt = static_cast<int>(tensor_configs.size());
  const int no = static_cast<int>(op_configs.size());
  Ties ties;
  ties.group.assign(nt + no, -1);
  for (int oc = 0; oc < no; ++oc) {
    const int a = aligned_input_class(p, oc);
    if (a < 0) continue;
    // The op's configuration for each of its input's: the split that follows the tiling. Tied only
    // where it can follow every tiling the input may take (the input's choices stay whole).
    const auto& desc = *p.ops[p.class_ops[oc][0]].desc;
    std::vector<int> follow;
    for (int c : kept[a]) {
      const cost::OpSplit want = aligned_split(desc, tensor_configs[a][c]);
      int found = -1;
      for (size_t i = 0; i < kept[nt + oc].size() && found < 0; ++i)
        if (same_split(op_configs[oc][kept[nt + oc][i]], want)) found = static_cast<int>(i);
      if (found < 0) break;
      follow.push_back(found);
    }
    if (follow.size() != kept[a].size()) continue;
    int g = ties.group[a];
    if (g < 0) {
      g = static_cast<int>(ties.members.size());
      ties.group[a] = g;
      ties.members.push_back({a});
      std::vector<int> identity(kept[a].size());
      for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int>(i);
      ties.of.push_back({std::move(identity)});
    }
    ties.group[nt + oc] = g;
    ties.members[g].push_back(nt + oc);
    ties.of[g].push_back(std::move(follow));
    ++ties.tied_ops;
  }
  return ties;
}

Coarsened coarsen(const partition::ParetoProblem& full, const Ties& ties) {
  const int n = static_cast<int>(full.nodes.size());
  Coarsened c;
  c.coarse.assign(n, -1);
  // Per full variable: its configuration for each configuration of its coarse variable.
  std::vector<std::vector<int>> config(n);
  std::vector<int> group_var(ties.members.size(), -1);
  for (int v = 0; v < n; ++v) {
    const int g = ties.group.empty() ? -1 : ties.group[v];
    if (g < 0) {
      c.coarse[v] = static_cast<int>(c.variable.size());
      c.variable.push_back(v);
      for (int i = 0; i < static_cast<int>(full.nodes[v].size()); ++i) config[v].push_back(i);
      continue;
    }
    if (group_var[g] < 0) group_var[g] = static_cast<int>(c.variable.size()), c.variable.push_back(v);
    c.coarse[v] = group_var[g];
    const auto& members = ties.members[g];
    config[v] = ties.of[g][std::find(members.begin(), members.end(), v) - members.begin()];
  }
  const int nc = static_cast<int>(c.variable.size());
  std::vector<int> size(nc, 0);
  for (int v = 0; v < n; ++v) size[c.coarse[v]] = static_cast<int>(config[v].size());
  c.problem.nodes.assign(nc, {});
  for (int x = 0; x < nc; ++x) c.problem.nodes[x].assign(size[x], Point{0, 0});
  auto add = [](Point& to, const Point& p) { to.time += p.time, to.memory += p.memory; };
  for (int v = 0; v < n; ++v)
    for (int i = 0; i < size[c.coarse[v]]; ++i) add(c.problem.nodes[c.coarse[v]][i], full.nodes[v][config[v][i]]);
  std::map<std::pair<int, int>, int> edge_of;
  for (const auto& e : full.edges) {
    const int xu = c.coarse[e.u], xv = c.coarse[e.v];
    const size_t nv = full.nodes[e.v].size();
    auto entry = [&](int i, int j) -> const Point& {
      return e.table[static_cast<size_t>(config[e.u][i]) * nv + config[e.v][j]];
    };
    if (xu == xv) {  // inside a group: both ends follow the group's configuration
      for (int i = 0; i < size[xu]; ++i) add(c.problem.nodes[xu][i], entry(i, i));
      continue;
    }
    const int lo = std::min(xu, xv), hi = std::max(xu, xv);
    auto [it, fresh] = edge_of.try_emplace({lo, hi}, static_cast<int>(c.problem.edges.size()));
    if (fresh)
      c.problem.edges.push_back({lo, hi, std::vector<Point>(static_cast<size_t>(size[lo]) * size[hi], Point{0, 0})});
    auto& table = c.problem.edges[it->second].table;
    for (int i = 0; i < size[xu]; ++i)
      for (int j = 0; j < size[xv]; ++j) {
        const size_t at = xu == lo ? static_cast<size_t>(i) * size[hi] + j : static_cast<size_t>(j) * size[hi] + i;
        add(table[at], entry(i, j));
      }
  }
  return c;
}

std::vector<int> expand(const std::vector<int>& coarse_choice, const Coarsened& c, const Ties& ties) {
  const int n = static_cast<int>(c.coarse.size());
  std::vector<int> out(n);
  for (int v = 0; v < n; ++v) {
    const int x = coarse_choice.at(c.coarse[v]);
    const int g = ties.group.empty() ? -1 : ties.group[v];
    if (g < 0) {
      out[v] = x;
      continue;
    }
    const auto& members = ties.members[g];
    out[v] = ties.of[g][std::find(members.begin(), members.end(), v) - members.begin()][x];
  }
  return out;
}

}  // namespace tilewise::frontier

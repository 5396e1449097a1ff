#include "graph/coarsen.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

#include "tdl/strategy.h"

namespace tilewise::graph {

const char* name_of(GroupKind k) {
  switch (k) {
    case GroupKind::kOp: return "op";
    case GroupKind::kTensor: return "tensor";
    case GroupKind::kMerged: return "merged";
  }
  return "?";
}

namespace {

/// Union-find over items: ops are 0..n_ops-1, tensors n_ops..n_ops+n_tensors-1.
class UnionFind {
 public:
  explicit UnionFind(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  /// Joins the sets of a and b; the smaller root survives so that roots are stable and readable.
  bool unite(int a, int b) {
    a = find(a), b = find(b);
    if (a == b) return false;
    if (b < a) std::swap(a, b);
    parent_[b] = a;
    return true;
  }

 private:
  std::vector<int> parent_;
};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

/// "a", "a+b", "a+b+c", or "a … z (n ops)" for longer lists.
std::string join_names(const std::vector<std::string>& names, const char* what) {
  if (names.size() <= 3) {
    std::string o;
    for (size_t i = 0; i < names.size(); ++i) o += (i ? "+" : "") + names[i];
    return o;
  }
  return names.front() + " … " + names.back() + " (" + std::to_string(names.size()) + " " + what + ")";
}

}  // namespace

CoarseGraph coarsen(const Graph& g, const CoarsenOptions& options) {
  const auto& ops = g.ops();
  const auto& tensors = g.tensors();
  const int n_ops = static_cast<int>(ops.size()), n_tensors = static_cast<int>(tensors.size());
  auto op_item = [](int o) { return o; };
  auto tensor_item = [n_ops](int t) { return n_ops + t; };
  UnionFind uf(n_ops + n_tensors);

  // Forward ops are the user's computation (phase forward, differentiating nothing); forward
  // tensors are their outputs and the leaves they read. These are the seeds of the groups.
  std::vector<char> fwd_op(n_ops, 0), fwd_tensor(n_tensors, 0);
  for (const auto& op : ops) fwd_op[op.id] = op.phase == Phase::kForward && op.forward_op < 0;
  for (const auto& t : tensors) {
    if (t.grad_of >= 0 || t.updates >= 0) continue;
    if (t.producer >= 0) {
      fwd_tensor[t.id] = fwd_op[t.producer];
    } else {
      for (int c : t.consumers) fwd_tensor[t.id] |= fwd_op[c];
    }
  }

  // --- Grouping (Tofu §5.1): forward op + backward ops; forward tensor + gradients + sums. ---
  for (const auto& op : ops) {
    if (op.forward_op >= 0) {
      uf.unite(op_item(op.id), op_item(op.forward_op));
    } else if (op.phase == Phase::kBackward) {
      // A backward op differentiating no single op is a gradient sum (or the loss seed): it lives
      // with the tensor it produces, whose grad_of puts it in the forward tensor's group.
      uf.unite(op_item(op.id), tensor_item(op.output));
    }
  }
  for (const auto& t : tensors) {
    if (t.grad_of >= 0) {
      uf.unite(tensor_item(t.id), tensor_item(t.grad_of));
    } else if (t.updates >= 0) {
      uf.unite(tensor_item(t.id), tensor_item(t.updates));
    } else if (t.producer >= 0 && !fwd_op[t.producer]) {
      // Unmarked intermediates of a gradient rule or an optimizer stay with the op making them.
      uf.unite(tensor_item(t.id), op_item(t.producer));
    }
  }

  // Optimizer updates join their parameter's group. The anchor is the first of (the tensor the
  // output replaces, the op's inputs) that leads, through `updates` and `grad_of`, to a forward
  // tensor or to an earlier update op's output. Optimizer state is not a forward tensor, so Adam's
  // m' = adam_m(m, g) anchors on g -> the parameter, and m' (updates m) pulls m along. A scalar
  // shared by all updates (a gradient norm) lands with the first parameter it reads; the update
  // phase adds no edges, so this placement cannot change the coarsened graph's shape.
  auto base_of = [&](int t) {
    for (int steps = 0; steps <= n_tensors; ++steps) {
      const auto& n = tensors[t];
      if (n.grad_of >= 0) t = n.grad_of;
      else if (n.updates >= 0) t = n.updates;
      else return t;
    }
    throw GraphError("coarsen: tensor '" + tensors[t].name + "' is on a cycle of grad_of/updates links");
  };
  for (const auto& op : ops) {
    if (op.phase != Phase::kUpdate || op.forward_op >= 0) continue;
    uf.unite(op_item(op.id), tensor_item(op.output));
    std::vector<int> candidates;
    if (tensors[op.output].updates >= 0) candidates.push_back(tensors[op.output].updates);
    candidates.insert(candidates.end(), op.inputs.begin(), op.inputs.end());
    for (int c : candidates) {
      int b = base_of(c);
      int p = tensors[b].producer;
      if (fwd_tensor[b] || (p >= 0 && ops[p].phase == Phase::kUpdate)) {
        uf.unite(op_item(op.id), tensor_item(b));
        break;
      }
    }
  }

  // The grouping so far, before coalescing: its sets are the "base groups".
  std::vector<int> base(n_ops + n_tensors);
  for (int i = 0; i < n_ops + n_tensors; ++i) base[i] = uf.find(i);

  CoarseGraph cg;

  // --- Coalescing (Tofu §5.1). ---
  if (options.merge_elementwise) {
    // Input and output of an element-wise op should be partitioned identically, so the op (with
    // its backward ops) and its output (with its gradient) join the group of its main input: the
    // one of the output's shape made latest by a forward op, else a non-parameter leaf, else the
    // first. A chain linear -> relu -> add -> relu thus becomes linear -> [its output + relu + add
    // + relu + their outputs]; the residual operand of add stays a separate neighbour.
    for (const auto& op : ops) {
      if (!fwd_op[op.id] || op.inputs.empty()) continue;
      // Element-wise ops, and broadcasts (bias_add) through their input read at the output index:
      // that input and the output tile alike, as Tofu wants for element-wise ops.
      const std::vector<bool> aligned = tdl::aligned_inputs(*op.desc);
      const Shape& out_shape = tensors[op.output].shape;
      int main = -1;
      std::tuple<int, int, int> best{-2, 0, 0};
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const auto& in = tensors[op.inputs[k]];
        if (!aligned[k] || in.shape != out_shape) continue;
        bool fixed = in.role == Role::kParameter || in.role == Role::kConstant;
        std::tuple<int, int, int> key{in.producer, !fixed, -static_cast<int>(k)};
        if (main < 0 || key > best) main = in.id, best = key;
      }
      if (main < 0) continue;
      uf.unite(op_item(op.id), tensor_item(main));
      uf.unite(tensor_item(op.output), tensor_item(main));
      ++cg.elementwise_merges;
    }
  }
  if (options.merge_timesteps) {
    // The k-th op of every step of an unrolled loop shares an unroll key. Its groups merge, so
    // do its outputs' groups, and so do its inputs at one position when all are leaves (per-step
    // inputs x_t, per-step weights). Ops are also matched by type: keys are positional, and a
    // step with an extra op would otherwise pair unrelated ops.
    std::map<std::pair<std::string, std::string>, std::vector<int>> steps;
    for (const auto& op : ops)
      if (fwd_op[op.id] && !op.unroll_key.empty()) steps[{op.unroll_key, op.type}].push_back(op.id);
    for (const auto& [key, members] : steps) {
      if (members.size() < 2) continue;
      const auto& first = ops[members[0]];
      for (size_t i = 1; i < members.size(); ++i) {
        const auto& op = ops[members[i]];
        uf.unite(op_item(first.id), op_item(op.id));
        uf.unite(tensor_item(first.output), tensor_item(op.output));
        ++cg.timestep_merges;
      }
      for (size_t pos = 0; pos < first.inputs.size(); ++pos) {
        bool leaves = true;
        for (int m : members)
          leaves = leaves && pos < ops[m].inputs.size() && tensors[ops[m].inputs[pos]].producer < 0;
        if (!leaves) continue;
        for (int m : members) uf.unite(tensor_item(first.inputs[pos]), tensor_item(ops[m].inputs[pos]));
      }
    }
  }

  // --- Groups, ordered by their first forward member: op i at 3i+2, its output at 3i+3, a leaf
  // at 3c+1 just before its first forward reader c; groups without forward members go last.
  // Ties (leaves read first by the same op) go by the first tensor id, then the first op id. ---
  const int64_t kLast = 3 * static_cast<int64_t>(n_ops) + 4;
  std::map<int, std::tuple<int64_t, int, int>> order;  // root -> (position, first tensor, first op)
  auto note = [&](int item, int64_t pos) {
    int r = uf.find(item);
    int t = item < n_ops ? n_tensors : item - n_ops, o = item < n_ops ? item : n_ops;
    auto [it, fresh] = order.try_emplace(r, pos, t, o);
    if (fresh) return;
    auto& [p, ft, fo] = it->second;
    p = std::min(p, pos), ft = std::min(ft, t), fo = std::min(fo, o);
  };
  for (const auto& op : ops) note(op_item(op.id), fwd_op[op.id] ? 3 * int64_t{op.id} + 2 : kLast);
  for (const auto& t : tensors) {
    int64_t pos = kLast;
    if (fwd_tensor[t.id]) {
      if (t.producer >= 0) {
        pos = 3 * int64_t{t.producer} + 3;
      } else {
        for (int c : t.consumers)
          if (fwd_op[c]) pos = std::min(pos, 3 * int64_t{c} + 1);
      }
    }
    note(tensor_item(t.id), pos);
  }
  std::vector<std::pair<std::tuple<int64_t, int, int>, int>> sorted;
  for (const auto& [root, key] : order) sorted.push_back({key, root});
  std::sort(sorted.begin(), sorted.end());
  std::map<int, int> group_of_root;
  for (const auto& [key, root] : sorted) {
    Group grp;
    grp.id = static_cast<int>(cg.groups.size());
    group_of_root[root] = grp.id;
    cg.groups.push_back(grp);
  }
  cg.op_group.resize(n_ops);
  cg.tensor_group.resize(n_tensors);
  for (int o = 0; o < n_ops; ++o) cg.groups[cg.op_group[o] = group_of_root.at(uf.find(op_item(o)))].ops.push_back(o);
  for (int t = 0; t < n_tensors; ++t)
    cg.groups[cg.tensor_group[t] = group_of_root.at(uf.find(tensor_item(t)))].tensors.push_back(t);

  // Kind: a group coalescing several base groups that hold forward members is "merged".
  for (auto& grp : cg.groups) {
    std::set<int> bases;
    std::vector<std::string> fwd_ops, fwd_tensors;
    for (int o : grp.ops)
      if (fwd_op[o]) bases.insert(base[op_item(o)]), fwd_ops.push_back(ops[o].name);
    for (int t : grp.tensors)
      if (fwd_tensor[t]) bases.insert(base[tensor_item(t)]), fwd_tensors.push_back(tensors[t].name);
    if (bases.size() > 1) {
      grp.kind = GroupKind::kMerged;
      grp.label = fwd_ops.empty() ? join_names(fwd_tensors, "tensors") : join_names(fwd_ops, "ops");
    } else if (!fwd_ops.empty()) {
      grp.kind = GroupKind::kOp;
      grp.label = fwd_ops.front();
    } else if (!fwd_tensors.empty()) {
      grp.kind = GroupKind::kTensor;
      grp.label = fwd_tensors.front();
    } else {
      // No forward member (an optimizer step counter, an orphan backward op).
      grp.kind = grp.tensors.empty() ? GroupKind::kOp : GroupKind::kTensor;
      grp.label = grp.tensors.empty() ? ops[grp.ops.front()].name : tensors[grp.tensors.front()].name;
    }
  }

  // --- Edges: forward dataflow between groups, one per connected pair, no self-loops. ---
  std::map<std::pair<int, int>, std::pair<int, int>> pairs;  // (min, max) -> first seen (from, to)
  // Every directed pair (both ways where merging closed a cycle), for the linearity test.
  std::set<std::pair<int, int>> directed;
  auto link = [&](int a, int b) {
    if (a == b) return;
    pairs.emplace(std::make_pair(std::min(a, b), std::max(a, b)), std::make_pair(a, b));
    directed.insert({a, b});
  };
  // Entry marks: groups holding a forward leaf or an op without inputs; exit marks: groups
  // holding a forward tensor no forward op reads. They place the terminals inside cycles.
  std::vector<char> entry_mark(cg.groups.size(), 0), exit_mark(cg.groups.size(), 0);
  for (const auto& op : ops) {
    if (!fwd_op[op.id]) continue;
    int go = cg.op_group[op.id];
    if (op.inputs.empty()) entry_mark[go] = 1;
    for (int t : op.inputs) link(cg.tensor_group[t], go);
    link(go, cg.tensor_group[op.output]);
  }
  for (const auto& t : tensors) {
    if (!fwd_tensor[t.id]) continue;
    bool read = false;
    for (int c : t.consumers) read = read || fwd_op[c];
    if (t.producer < 0) entry_mark[cg.tensor_group[t.id]] = 1;
    if (!read) exit_mark[cg.tensor_group[t.id]] = 1;
  }
  for (const auto& [key, e] : pairs) cg.edges.push_back(e);
  std::set<std::pair<int, int>> unmirrored;
  for (const auto& op : ops) {
    if (fwd_op[op.id]) continue;
    int go = cg.op_group[op.id];
    std::vector<int> ends(op.inputs);
    ends.push_back(op.output);
    for (int t : ends) {
      int gt = cg.tensor_group[t];
      auto key = std::make_pair(std::min(go, gt), std::max(go, gt));
      if (go != gt && !pairs.count(key)) unmirrored.insert(key);
    }
  }
  cg.unmirrored_pairs = static_cast<int>(unmirrored.size());

  // --- Linearity (docs/ARCHITECTURE.md): pendant pruning, terminals, series-parallel reduction. ---
  cg.linearity = check_linear(static_cast<int>(cg.groups.size()),
                              std::vector<std::pair<int, int>>(directed.begin(), directed.end()), entry_mark, exit_mark);
  return cg;
}

std::string CoarseGraph::summary(const Graph& g) const {
  std::ostringstream s;
  std::map<GroupKind, int> kinds;
  for (const auto& grp : groups) kinds[grp.kind]++;
  std::map<Phase, int> phases;
  for (const auto& op : g.ops()) phases[op.phase]++;
  s << "CoarseGraph: " << groups.size() << " groups (" << kinds[GroupKind::kOp] << " op, " << kinds[GroupKind::kTensor]
    << " tensor, " << kinds[GroupKind::kMerged] << " merged), " << edges.size() << " edges\n";
  s << "  members: " << g.ops().size() << " ops (" << phases[Phase::kForward] << " forward, " << phases[Phase::kBackward]
    << " backward, " << phases[Phase::kUpdate] << " update), " << g.tensors().size() << " tensors\n";
  s << "  coalesced: " << elementwise_merges << " element-wise/aligned ops, " << timestep_merges << " time-step ops\n";
  if (unmirrored_pairs)
    s << "  note: " << unmirrored_pairs << " group pairs are linked by backward/update dataflow only\n";
  const auto& left = linearity.reduction.remaining;
  s << "  linear: " << (is_linear() ? "yes" : "no") << " (" << linearity.pendants.size()
    << " pendant groups hang off a core of " << groups.size() - linearity.pendants.size() << ")";
  if (!is_linear()) {
    s << "; " << left.size() << " groups left after series-parallel reduction:";
    for (size_t i = 0; i < left.size() && i < 6; ++i) s << " " << groups[left[i]].label;
    if (left.size() > 6) s << " …";
  }
  s << "\n";
  return s.str();
}

std::string CoarseGraph::to_dot() const {
  std::ostringstream s;
  s << "digraph coarse {\n  rankdir=TB;\n  node [fontsize=10];\n";
  for (const auto& grp : groups) {
    const char* shape = grp.kind == GroupKind::kOp ? "box" : grp.kind == GroupKind::kTensor ? "ellipse" : "octagon";
    const char* fill = grp.kind == GroupKind::kOp ? "lightgreen" : grp.kind == GroupKind::kTensor ? "white" : "khaki";
    s << "  g" << grp.id << " [shape=" << shape << ", style=filled, fillcolor=" << fill << ", label=\""
      << escape(grp.label) << "\\n" << grp.ops.size() << " ops, " << grp.tensors.size() << " tensors\"];\n";
  }
  for (const auto& [a, b] : edges) s << "  g" << a << " -> g" << b << ";\n";
  s << "}\n";
  return s.str();
}

}  // namespace tilewise::graph

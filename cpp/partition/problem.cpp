#include "partition/problem.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <thread>
#include <tuple>

#include "cost/class_count.h"
#include "partition/elimination.h"
#include "tdl/errors.h"
#include "tdl/interrupt.h"

namespace tilewise::partition {

using cost::kReplicated;
using tdl::Strategy;
using tdl::StrategyKind;

namespace {

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); }
  void unite(int a, int b) {
    a = find(a), b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

// Dense class ids in order of first member; members ascending.
void number_classes(UnionFind& uf, int n, std::vector<int>& cls, std::vector<std::vector<int>>& members) {
  std::map<int, int> id;
  cls.assign(n, -1);
  for (int i = 0; i < n; ++i) {
    auto [it, fresh] = id.emplace(uf.find(i), static_cast<int>(members.size()));
    if (fresh) members.emplace_back();
    cls[i] = it->second;
    members[it->second].push_back(i);
  }
}

// Smallest share of each dimension after the prefix cuts.
std::vector<int64_t> min_shares(const cost::Shape& shape, const cost::Tiling& prefix, const std::vector<int>& parts) {
  std::vector<int64_t> s(shape.begin(), shape.end());
  for (size_t i = 0; i < prefix.size(); ++i)
    if (prefix[i] != kReplicated) s[prefix[i]] /= parts[i];
  return s;
}

}  // namespace

int64_t Problem::bytes_per_element(int tensor) const { return graph::dtype_size(graph->tensor(tensor).dtype); }

std::vector<cost::CountMemo>& Problem::count_memos(int threads) const {
  if (memos.size() < static_cast<size_t>(threads)) memos.resize(threads);
  return memos;
}

Problem make_problem(const graph::Graph& g, const std::vector<int>& parts, const Policy& policy) {
  for (int k : parts)
    if (k < 2) throw PlanError("every recursion step needs at least 2 parts");
  Problem p;
  p.graph = &g;
  p.parts = parts;
  const int nt = static_cast<int>(g.tensors().size()), no = static_cast<int>(g.ops().size());
  // Ops alike: the same description object and shapes (the shapes fix the extents). Their views
  // are equal, so each kind's is built once (most of a graph's ops repeat an earlier one's kind).
  std::map<std::tuple<const tdl::OpDesc*, std::vector<cost::Shape>, cost::Shape>, int> kinds;
  std::vector<int> first_of_kind;
  for (const auto& op : g.ops()) {
    std::vector<cost::Shape> shapes;
    for (int t : op.inputs) shapes.push_back(g.tensor(t).shape);
    auto [it, fresh] =
        kinds.emplace(std::make_tuple(op.desc.get(), shapes, g.tensor(op.output).shape), static_cast<int>(kinds.size()));
    p.op_kind.push_back(it->second);
    if (!fresh) {
      p.ops.push_back(p.ops[first_of_kind[it->second]]);
      continue;
    }
    first_of_kind.push_back(op.id);
    p.ops.push_back(cost::make_view(*op.desc, std::move(shapes), g.tensor(op.output).shape));
    p.kind_strategies.push_back(tdl::enumerate_strategies(*op.desc));
  }
  UnionFind tu(nt), ou(no);
  for (const auto& t : g.tensors())
    if (t.updates >= 0 && g.tensor(t.updates).shape == t.shape) tu.unite(t.id, t.updates);
  if (policy.tie_timesteps) {
    std::map<std::tuple<std::string, std::string, std::vector<int64_t>>, int> first;
    for (const auto& op : g.ops()) {
      if (op.unroll_key.empty()) continue;
      auto key = std::make_tuple(op.unroll_key, op.type, p.ops[op.id].extents);
      auto [it, fresh] = first.emplace(key, op.id);
      if (fresh) continue;
      const auto& other = g.op(it->second);
      if (other.inputs.size() != op.inputs.size() || p.ops[other.id].input_shapes != p.ops[op.id].input_shapes) continue;
      ou.unite(op.id, other.id);
      tu.unite(op.output, other.output);
    }
  }
  number_classes(tu, nt, p.tensor_class, p.class_tensors);
  number_classes(ou, no, p.op_class, p.class_ops);
  // Ops of one class and kind whose slots are in the same tensor classes (with the same element
  // size) add equal bytes to the same pair tables: build_step costs one of them, counted as many.
  std::map<std::tuple<int, int, std::vector<int>, std::vector<int64_t>>, int> groups;
  for (const auto& op : g.ops()) {
    std::vector<int> classes;
    std::vector<int64_t> sizes;
    for (int t : op.inputs) classes.push_back(p.tensor_class[t]), sizes.push_back(p.bytes_per_element(t));
    classes.push_back(p.tensor_class[op.output]), sizes.push_back(p.bytes_per_element(op.output));
    auto key = std::make_tuple(p.op_class[op.id], p.op_kind[op.id], std::move(classes), std::move(sizes));
    auto [it, fresh] = groups.emplace(std::move(key), static_cast<int>(p.op_groups.size()));
    if (fresh) p.op_groups.push_back({op.id, 0});
    ++p.op_groups[it->second].count;
  }
  return p;
}

Assignment empty_assignment(const Problem& p) {
  Assignment a;
  a.tilings.assign(p.graph->tensors().size(), {});
  a.splits.assign(p.ops.size(), {});
  return a;
}

std::vector<int> tensor_choices(const Problem& p, const Policy& policy, int tensor, const cost::Tiling& prefix,
                                int step) {
  return tensor_choices_by_shares(p, policy, tensor, min_shares(p.graph->tensor(tensor).shape, prefix, p.parts), step);
}

std::vector<int> tensor_choices_by_shares(const Problem& p, const Policy& policy, int tensor,
                                          const std::vector<int64_t>& shares, int step) {
  std::vector<int> out;
  for (size_t d = 0; d < shares.size(); ++d)
    if (shares[d] >= p.parts[step]) out.push_back(static_cast<int>(d));
  if (policy.replicate_tensors || out.empty()) out.push_back(kReplicated);
  if (policy.restrict_cuts) {
    auto narrowed = policy.restrict_cuts(tensor, step, out);
    if (!narrowed.empty()) out = narrowed;
  }
  return out;
}

std::vector<Strategy> op_choices(const Problem& p, const Policy& policy, int op, const cost::OpSplit& prefix,
                                 int step) {
  std::vector<int64_t> shares(p.ops[op].extents);
  for (size_t i = 0; i < prefix.size(); ++i)
    if (prefix[i].kind != StrategyKind::kReplicate) shares[prefix[i].var] /= p.parts[i];
  return op_choices_by_shares(p, policy, op, shares, step);
}

std::vector<Strategy> op_choices_by_shares(const Problem& p, const Policy& policy, int op,
                                           const std::vector<int64_t>& shares, int step) {
  const int k = p.parts[step];
  std::vector<Strategy> outputs, reduces;
  for (const Strategy& s : p.kind_strategies[p.op_kind[op]]) {
    if (s.kind == StrategyKind::kReplicate || shares[s.var] < k) continue;
    (s.kind == StrategyKind::kOutput ? outputs : reduces).push_back(s);
  }
  std::vector<Strategy> out = outputs;
  if (policy.reduce_ops || outputs.empty()) out.insert(out.end(), reduces.begin(), reduces.end());
  if (out.empty() || policy.replicate_ops) out.push_back({StrategyKind::kReplicate, -1, tdl::Reducer::kSum});
  return out;
}

bool valid_tiling(const cost::Shape& shape, const cost::Tiling& cuts, const std::vector<int>& parts) {
  std::vector<int64_t> s(shape.begin(), shape.end());
  for (size_t i = 0; i < cuts.size(); ++i) {
    if (cuts[i] == kReplicated) continue;
    if (s[cuts[i]] < parts[i]) return false;
    s[cuts[i]] /= parts[i];
  }
  return true;
}

bool valid_split(const std::vector<int64_t>& extents, const cost::OpSplit& split, const std::vector<int>& parts) {
  std::vector<int64_t> s(extents);
  for (size_t i = 0; i < split.size(); ++i) {
    if (split[i].kind == StrategyKind::kReplicate) continue;
    if (s[split[i].var] < parts[i]) return false;
    s[split[i].var] /= parts[i];
  }
  return true;
}

namespace {

// `seq` with the entries at `steps` set to `values` (appended when `seq` stops before them).
template <class Seq>
Seq with_steps(const Seq& seq, const std::vector<int>& steps, const Seq& values) {
  Seq out(seq);
  if (out.size() < static_cast<size_t>(steps.back()) + 1) out.resize(steps.back() + 1);
  for (size_t i = 0; i < steps.size(); ++i) out[steps[i]] = values[i];
  return out;
}

bool same_strategy(const Strategy& a, const Strategy& b) { return a.kind == b.kind && a.var == b.var; }

bool same_split(const cost::OpSplit& a, const cost::OpSplit& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_strategy);
}

bool revising(const Assignment& a, const std::vector<int>& steps) {
  return !a.tilings.empty() && a.tilings[0].size() > static_cast<size_t>(steps.back());
}

// Every combination of values for the block's steps, each step's choices given the ones before it.
// When revising, only combinations that keep the whole sequence valid, the current one first (ties
// keep it).
template <class Seq, class Choices, class Valid, class Same>
std::vector<Seq> block_values(const Seq& current, const std::vector<int>& steps, bool revise, Choices choices,
                              Valid valid, Same same) {
  std::vector<Seq> all;
  Seq chosen;
  std::function<void(size_t)> extend = [&](size_t i) {
    if (i == steps.size()) {
      all.push_back(chosen);
      return;
    }
    // A new block may start past what `current` holds (every step from scratch): the block's own
    // values fill the prefix.
    Seq prefix(current.begin(), current.begin() + std::min<size_t>(current.size(), steps[i]));
    prefix.resize(steps[i]);
    for (size_t j = 0; j < i; ++j) prefix[steps[j]] = chosen[j];
    for (const auto& c : choices(prefix, steps[i])) {
      chosen.push_back(c);
      extend(i + 1);
      chosen.pop_back();
    }
  };
  extend(0);
  if (!revise) return all;
  Seq now;
  for (int s : steps) now.push_back(current[s]);
  std::vector<Seq> kept{now};
  for (auto& v : all)
    if (valid(with_steps(current, steps, v)) && !same(v, now)) kept.push_back(std::move(v));
  return kept;
}

std::vector<cost::Tiling> tensor_values(const Problem& p, const Policy& policy, const Assignment& a, int rep,
                                        const std::vector<int>& steps) {
  const auto& shape = p.graph->tensor(rep).shape;
  return block_values(
      a.tilings[rep], steps, revising(a, steps),
      [&](const cost::Tiling& prefix, int step) { return tensor_choices(p, policy, rep, prefix, step); },
      [&](const cost::Tiling& t) { return valid_tiling(shape, t, p.parts); }, std::equal_to<cost::Tiling>());
}

std::vector<cost::OpSplit> op_values(const Problem& p, const Policy& policy, const Assignment& a, int rep,
                                     const std::vector<int>& steps) {
  return block_values(
      a.splits[rep], steps, revising(a, steps),
      [&](const cost::OpSplit& prefix, int step) { return op_choices(p, policy, rep, prefix, step); },
      [&](const cost::OpSplit& s) { return valid_split(p.ops[rep].extents, s, p.parts); }, same_split);
}

}  // namespace

StepProblem build_step(const Problem& p, const Policy& policy, const Assignment& a, const std::vector<int>& block,
                       int total_steps, int threads, std::chrono::steady_clock::time_point deadline) {
  TW_ASSERT(!block.empty() && std::is_sorted(block.begin(), block.end()), "a block lists its steps ascending");
  StepProblem sp;
  sp.steps = block;
  for (const auto& members : p.class_tensors) sp.tensor_domain.push_back(tensor_values(p, policy, a, members[0], block));
  for (const auto& members : p.class_ops) sp.op_domain.push_back(op_values(p, policy, a, members[0], block));
  for (const auto& d : sp.tensor_domain) sp.domain_sizes.push_back(static_cast<int>(d.size()));
  for (const auto& d : sp.op_domain) sp.domain_sizes.push_back(static_cast<int>(d.size()));

  const int steps = revising(a, block) ? total_steps : block.back() + 1;
  const auto& g = *p.graph;
  // Every class's values as whole tilings and splits (members share them), built once per block.
  std::vector<std::vector<cost::Tiling>> class_tilings(p.class_tensors.size());
  std::vector<std::vector<std::optional<cost::CountKey>>> tiling_bits(p.class_tensors.size());
  for (size_t c = 0; c < p.class_tensors.size(); ++c)
    for (const auto& cuts : sp.tensor_domain[c]) {
      class_tilings[c].push_back(with_steps(a.tilings[p.class_tensors[c][0]], block, cuts));
      tiling_bits[c].push_back(cost::CountMemo::tiling_part(class_tilings[c].back(), steps));
    }
  std::vector<std::vector<cost::OpSplit>> class_splits(p.class_ops.size());
  for (size_t c = 0; c < p.class_ops.size(); ++c)
    for (const auto& strategies : sp.op_domain[c]) class_splits[c].push_back(with_steps(a.splits[p.class_ops[c][0]], block, strategies));
  const int ng = static_cast<int>(p.op_groups.size());
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min(threads, ng));
  std::vector<std::map<std::pair<int, int>, std::vector<int64_t>>> partial(threads);
  std::atomic<int> next{0};
  std::atomic<bool> late{false};
  auto& memos = p.count_memos(threads);
  auto work = [&](int tid) {
    auto& mine = partial[tid];
    auto& memo = memos[tid];
    std::vector<int> slots_tensor;
    std::vector<std::vector<int64_t>*> tables;
    for (int gi; (gi = next.fetch_add(1)) < ng;) {
      if (interrupt_requested() || std::chrono::steady_clock::now() > deadline) {
        late = true;
        return;
      }
      const auto [o, count] = p.op_groups[gi];
      const auto& op = g.op(o);
      const int oc = p.op_class[o];
      const auto& splits = class_splits[oc];
      const int ns = static_cast<int>(splits.size());
      slots_tensor.assign(op.inputs.begin(), op.inputs.end());
      slots_tensor.push_back(op.output);
      tables.clear();
      for (int t : slots_tensor) {
        auto& table = mine[{oc, p.tensor_class[t]}];
        if (table.empty()) table.assign(static_cast<size_t>(ns) * class_tilings[p.tensor_class[t]].size(), 0);
        tables.push_back(&table);
      }
      for (int si = 0; si < ns; ++si) {
        cost::SplitCounter counter(p.ops[o], p.op_kind[o], splits[si], p.parts, steps, &memo);
        for (size_t j = 0; j < slots_tensor.size(); ++j) {
          const int t = slots_tensor[j];
          const int tc = p.tensor_class[t];
          const auto& tilings = class_tilings[tc];
          const int nc = static_cast<int>(tilings.size());
          const int64_t scale = count * p.bytes_per_element(t);
          int64_t* row = tables[j]->data() + static_cast<size_t>(si) * nc;
          for (int ci = 0; ci < nc; ++ci)
            row[ci] += counter.elements(static_cast<int>(j), tilings[ci], &tiling_bits[tc][ci]) * scale;
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  check_interrupt();
  if (late) throw SearchTimeout("time limit reached while costing step " + std::to_string(block[0] + 1));
  std::map<std::pair<int, int>, std::vector<int64_t>> merged;
  for (auto& m : partial)
    for (auto& [key, table] : m) {
      auto& dst = merged[key];
      if (dst.empty()) dst = std::move(table);
      else
        for (size_t i = 0; i < dst.size(); ++i) dst[i] += table[i];
    }
  for (auto& [key, table] : merged) sp.pairs.push_back({key.first, key.second, std::move(table)});
  return sp;
}

void apply_step(const Problem& p, const StepProblem& sp, const std::vector<int>& values, Assignment& a) {
  for (size_t c = 0; c < p.class_tensors.size(); ++c)
    for (int t : p.class_tensors[c])
      a.tilings[t] = with_steps(a.tilings[t], sp.steps, sp.tensor_domain[c][values[sp.tensor_var(c)]]);
  for (size_t c = 0; c < p.class_ops.size(); ++c)
    for (int o : p.class_ops[c]) a.splits[o] = with_steps(a.splits[o], sp.steps, sp.op_domain[c][values[sp.op_var(c)]]);
}

std::vector<int64_t> step_deltas(const std::vector<int64_t>& prefix) {
  std::vector<int64_t> d;
  int64_t before = 0;
  for (int64_t b : prefix) d.push_back(b - before), before = b;
  return d;
}

std::vector<int64_t> prefix_bytes(const Problem& p, const Assignment& a, int steps, int threads) {
  const int no = static_cast<int>(p.ops.size());
  std::vector<std::vector<int64_t>> per_op(no, std::vector<int64_t>(steps, 0));
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min(threads, std::max(no, 1)));
  std::atomic<int> next{0};
  auto& memos = p.count_memos(threads);
  auto work = [&](int tid) {
    for (int o; (o = next.fetch_add(1)) < no && !interrupt_requested();)
      for (int s = 1; s <= steps; ++s) per_op[o][s - 1] = op_bytes(p, o, a, s, &memos[tid]).total();
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  check_interrupt();
  std::vector<int64_t> totals(steps, 0);
  for (int o = 0; o < no; ++o)
    for (int s = 0; s < steps; ++s) totals[s] += per_op[o][s];
  return totals;
}

cost::OpComm op_bytes(const Problem& p, int op, const Assignment& a, int steps, cost::CountMemo* memo) {
  const auto& node = p.graph->op(op);
  cost::SplitCounter counter(p.ops[op], p.op_kind[op], a.splits[op], p.parts, steps, memo);
  cost::OpComm c;
  for (size_t j = 0; j < node.inputs.size(); ++j)
    c.input_elements.push_back(counter.elements(static_cast<int>(j), a.tilings[node.inputs[j]]) *
                               p.bytes_per_element(node.inputs[j]));
  c.output_elements =
      counter.elements(static_cast<int>(node.inputs.size()), a.tilings[node.output]) * p.bytes_per_element(node.output);
  return c;
}

}  // namespace tilewise::partition

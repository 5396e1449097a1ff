// How large a block's tables would be, without listing its values (issue 13: refinement sized
// without enumeration). A class's values are the sequences of choices at the block's steps, each
// step's choices given the steps before it; when revising, only sequences that keep the whole plan
// valid, the current one always among them. Both the choices and the validity of a step depend on
// the sequence so far only through the smallest share of each dimension (variable), so the number
// of sequences is a count of paths through (step, shares) states, each state counted once: a
// handful of states per step where listing visits every sequence (k^steps of them).
#include <algorithm>
#include <map>

#include "partition/problem.h"

namespace tilewise::partition {

namespace {

using Shares = std::vector<int64_t>;

// Counts saturate just past the cap: the caller only asks "within budget?".
int64_t add_capped(int64_t a, int64_t b, int64_t limit) { return std::min(limit, a + b); }

// The values build_step would give one class over `block`, counted. `fixed(i)`: the current value at
// step i (or the empty value past what it holds); `choices(shares, i)`; `apply(shares, value, i)`
// divides the shares and says whether the step was valid; `same(a, b)`.
template <class Value, class Fixed, class Choices, class Apply, class Same>
int64_t count_values(const Shares& start, const std::vector<int>& block, int current_steps, bool revise, Fixed fixed,
                     Choices choices, Apply apply, Same same, int64_t cap) {
  const int end = revise ? current_steps : block.back() + 1;
  const int64_t limit = std::min<int64_t>(cap, int64_t{1} << 61) + 1;
  std::vector<char> in_block(end, 0);
  for (int s : block) in_block[s] = 1;
  std::map<std::pair<int, Shares>, int64_t> memo;
  auto paths = [&](auto&& self, int i, const Shares& shares) -> int64_t {
    if (i == end) return 1;
    auto [it, fresh] = memo.emplace(std::make_pair(i, shares), 0);
    if (!fresh) return it->second;
    int64_t n = 0;
    auto follow = [&](const Value& v) {
      Shares next(shares);
      if (apply(next, v, i) || !revise) n = add_capped(n, self(self, i + 1, next), limit);
    };
    if (in_block[i])
      for (const Value& v : choices(shares, i)) follow(v);
    else
      follow(fixed(i));
    // `it` stays valid: std::map insertions do not move other nodes.
    return it->second = n;
  };
  const int64_t valid = paths(paths, 0, start);
  if (!revise) return valid;
  // Revising, the current sequence is a value even when the listing would not reach it (a choice no
  // longer offered): it then counts once more.
  Shares shares(start);
  bool listed = true;
  for (int i = 0; i < end && listed; ++i) {
    const Value v = fixed(i);
    if (in_block[i]) {
      auto cs = choices(shares, i);
      listed = std::any_of(cs.begin(), cs.end(), [&](const Value& c) { return same(c, v); });
    }
    listed = apply(shares, v, i) && listed;
  }
  return add_capped(valid, listed ? 0 : 1, limit);
}

}  // namespace

double block_table_entries(const Problem& p, const Policy& policy, const Assignment& a, const std::vector<int>& steps,
                           double budget) {
  const bool revise = !a.tilings.empty() && a.tilings[0].size() > static_cast<size_t>(steps.back());
  const int current_steps = a.tilings.empty() ? 0 : static_cast<int>(a.tilings[0].size());
  const int64_t cap = budget < 9e18 ? static_cast<int64_t>(budget) + 1 : INT64_MAX;
  const auto& parts = p.parts;
  std::vector<int64_t> tsize(p.class_tensors.size(), -1), osize(p.class_ops.size(), -1);
  // A class's count depends only on its shape (for ops: its kind, which fixes extents and
  // strategies) and current choices, which most classes share with others: each is counted once
  // (tensors only when no restriction names them one by one).
  std::map<std::pair<cost::Shape, cost::Tiling>, int64_t> tensor_alike;
  std::map<std::pair<int, std::vector<std::pair<int, int>>>, int64_t> op_alike;
  auto tensor_size = [&](int c) {
    if (tsize[c] >= 0) return static_cast<double>(tsize[c]);
    const int rep = p.class_tensors[c][0];
    const auto& shape = p.graph->tensor(rep).shape;
    const auto& now = a.tilings[rep];
    int64_t* alike = nullptr;
    if (!policy.restrict_cuts) {
      auto [it, fresh] = tensor_alike.emplace(std::make_pair(shape, now), -1);
      alike = &it->second;
      if (!fresh) return static_cast<double>(tsize[c] = *alike);
    }
    tsize[c] = count_values<int>(
        Shares(shape.begin(), shape.end()), steps, current_steps, revise,
        [&](int i) { return i < static_cast<int>(now.size()) ? now[i] : 0; },
        [&](const Shares& s, int i) { return tensor_choices_by_shares(p, policy, rep, s, i); },
        [&](Shares& s, int cut, int i) {
          if (cut == cost::kReplicated) return true;
          const bool ok = s[cut] >= parts[i];
          s[cut] /= parts[i];
          return ok;
        },
        std::equal_to<int>(), cap);
    if (alike) *alike = tsize[c];
    return static_cast<double>(tsize[c]);
  };
  auto op_size = [&](int c) {
    if (osize[c] >= 0) return static_cast<double>(osize[c]);
    const int rep = p.class_ops[c][0];
    const auto& now = a.splits[rep];
    std::vector<std::pair<int, int>> key;
    for (const auto& st : now) key.emplace_back(static_cast<int>(st.kind), st.var);
    auto [it, fresh] = op_alike.emplace(std::make_pair(p.op_kind[rep], std::move(key)), -1);
    if (!fresh) return static_cast<double>(osize[c] = it->second);
    osize[c] = count_values<tdl::Strategy>(
        p.ops[rep].extents, steps, current_steps, revise,
        [&](int i) { return i < static_cast<int>(now.size()) ? now[i] : tdl::Strategy{}; },
        [&](const Shares& s, int i) { return op_choices_by_shares(p, policy, rep, s, i); },
        [&](Shares& s, const tdl::Strategy& st, int i) {
          if (st.kind == tdl::StrategyKind::kReplicate) return true;
          const bool ok = s[st.var] >= parts[i];
          s[st.var] /= parts[i];
          return ok;
        },
        [](const tdl::Strategy& x, const tdl::Strategy& y) { return x.kind == y.kind && x.var == y.var; }, cap);
    it->second = osize[c];
    return static_cast<double>(osize[c]);
  };
  double total = 0;
  for (const auto& op : p.graph->ops()) {
    double s = op_size(p.op_class[op.id]);
    for (int t : op.inputs) total += s * tensor_size(p.tensor_class[t]);
    total += s * tensor_size(p.tensor_class[op.output]);
    if (total > budget) break;
  }
  return total;
}

}  // namespace tilewise::partition

// Schedules: validation, the given and random topological orders, crossover and mutation (schedule.h).
#include "swap/schedule.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <string>

namespace tilewise::swap {

namespace {

std::string op_name(const Problem& p, int o) { return "'" + p.ops()[static_cast<size_t>(o)].name + "'"; }

/// Why op `a` must run before op `b` (a predecessor of b), for messages.
std::string reason(const Problem& p, int a, int b) {
  const Op& first = p.ops()[static_cast<size_t>(a)];
  const Op& second = p.ops()[static_cast<size_t>(b)];
  for (int t : first.outputs)
    for (int u : second.inputs)
      if (t == u) {
        const Tensor& x = p.tensors()[static_cast<size_t>(t)];
        if (x.kind == TensorKind::kActivation) return "it produces '" + x.name + "'";
      }
  for (int t : first.inputs)
    for (int u : second.outputs)
      if (t == u) return "it reads parameter '" + p.tensors()[static_cast<size_t>(t)].name + "' before its update";
  return "it must";
}

/// Kahn's algorithm; `pick` chooses which ready op runs next and removes it from `ready`.
template <typename Pick>
Schedule topological(const Problem& p, Pick pick) {
  const int n = p.num_ops();
  std::vector<int> waiting(static_cast<size_t>(n));
  std::vector<int> ready;
  for (int o = 0; o < n; ++o)
    if (!(waiting[static_cast<size_t>(o)] = static_cast<int>(p.predecessors(o).size()))) ready.push_back(o);
  Schedule out;
  out.reserve(static_cast<size_t>(n));
  while (!ready.empty()) {
    const int o = pick(ready);
    out.push_back(o);
    for (int s : p.successors(o))
      if (--waiting[static_cast<size_t>(s)] == 0) ready.push_back(s);
  }
  return out;
}

}  // namespace

void check_schedule(const Problem& p, const Schedule& s) {
  const int n = p.num_ops();
  if (static_cast<int>(s.size()) != n)
    throw SwapError("schedule: has " + std::to_string(s.size()) + " ops, the problem " + std::to_string(n) +
                    "; a schedule runs every op once");
  std::vector<int> position(static_cast<size_t>(n), -1);
  for (int k = 0; k < n; ++k) {
    const int o = s[static_cast<size_t>(k)];
    if (o < 0 || o >= n)
      throw SwapError("schedule: entry " + std::to_string(k) + " is op index " + std::to_string(o) +
                      ", not one of 0.." + std::to_string(n - 1));
    if (position[static_cast<size_t>(o)] >= 0)
      throw SwapError("schedule: op " + op_name(p, o) + " appears twice (positions " +
                      std::to_string(position[static_cast<size_t>(o)]) + " and " + std::to_string(k) + ")");
    position[static_cast<size_t>(o)] = k;
  }
  for (int k = 0; k < n; ++k) {
    const int o = s[static_cast<size_t>(k)];
    for (int q : p.predecessors(o))
      if (position[static_cast<size_t>(q)] > k)
        throw SwapError("schedule: op " + op_name(p, o) + " (position " + std::to_string(k) + ") runs before op " +
                        op_name(p, q) + " (position " + std::to_string(position[static_cast<size_t>(q)]) +
                        "), which must run first: " + reason(p, q, o));
  }
}

Schedule given_order(const Problem& p) {
  // Kahn's algorithm with a min-heap on the op index: the given order wherever the dependencies allow.
  const int n = p.num_ops();
  std::vector<int> waiting(static_cast<size_t>(n));
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int o = 0; o < n; ++o)
    if (!(waiting[static_cast<size_t>(o)] = static_cast<int>(p.predecessors(o).size()))) ready.push(o);
  Schedule out;
  out.reserve(static_cast<size_t>(n));
  while (!ready.empty()) {
    const int o = ready.top();
    ready.pop();
    out.push_back(o);
    for (int s : p.successors(o))
      if (--waiting[static_cast<size_t>(s)] == 0) ready.push(s);
  }
  return out;
}

Schedule depth_first_order(const Problem& p) {
  // Kahn's algorithm on a stack: successors made ready by the same op are pushed in reverse index
  // order, so the lowest index among them runs first.
  const int n = p.num_ops();
  std::vector<int> waiting(static_cast<size_t>(n)), stack, made;
  for (int o = n - 1; o >= 0; --o)
    if (!(waiting[static_cast<size_t>(o)] = static_cast<int>(p.predecessors(o).size()))) stack.push_back(o);
  Schedule out;
  out.reserve(static_cast<size_t>(n));
  while (!stack.empty()) {
    const int o = stack.back();
    stack.pop_back();
    out.push_back(o);
    made.clear();
    for (int s : p.successors(o))
      if (--waiting[static_cast<size_t>(s)] == 0) made.push_back(s);
    std::sort(made.begin(), made.end(), std::greater<int>());
    stack.insert(stack.end(), made.begin(), made.end());
  }
  return out;
}

Schedule random_order(const Problem& p, std::mt19937_64& rng) {
  return topological(p, [&](std::vector<int>& ready) {
    const size_t k = std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng);
    const int o = ready[k];
    ready[k] = ready.back();
    ready.pop_back();
    return o;
  });
}

Schedule crossover(const Schedule& head, const Schedule& rest, int cut) {
  Schedule out(head.begin(), head.begin() + cut);
  std::vector<char> taken(head.size(), 0);
  for (int o : out) taken[static_cast<size_t>(o)] = 1;
  for (int o : rest)
    if (!taken[static_cast<size_t>(o)]) out.push_back(o);
  return out;
}

Schedule mutate(const Problem& p, const Schedule& s, double probability, std::mt19937_64& rng) {
  if (probability <= 0) return s;
  const int n = p.num_ops();
  std::vector<int> position(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) position[static_cast<size_t>(s[static_cast<size_t>(k)])] = k;
  // The ready set twice: a vector for random picks, a heap on `position` for the earliest; a random
  // pick leaves its heap entry behind, skipped when it surfaces.
  std::vector<int> waiting(static_cast<size_t>(n)), ready, slot(static_cast<size_t>(n), -1);
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> earliest;
  const auto make_ready = [&](int o) {
    slot[static_cast<size_t>(o)] = static_cast<int>(ready.size());
    ready.push_back(o);
    earliest.push({position[static_cast<size_t>(o)], o});
  };
  for (int o = 0; o < n; ++o)
    if (!(waiting[static_cast<size_t>(o)] = static_cast<int>(p.predecessors(o).size()))) make_ready(o);
  std::bernoulli_distribution mutation(probability);
  Schedule out;
  out.reserve(static_cast<size_t>(n));
  while (!ready.empty()) {
    int o;
    if (ready.size() > 1 && mutation(rng)) {
      o = ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng)];
    } else {
      while (slot[static_cast<size_t>(earliest.top().second)] < 0) earliest.pop();
      o = earliest.top().second;
      earliest.pop();
    }
    const int k = slot[static_cast<size_t>(o)];
    ready[static_cast<size_t>(k)] = ready.back();
    slot[static_cast<size_t>(ready.back())] = k;
    ready.pop_back();
    slot[static_cast<size_t>(o)] = -1;
    out.push_back(o);
    for (int q : p.successors(o))
      if (--waiting[static_cast<size_t>(q)] == 0) make_ready(q);
  }
  return out;
}

}  // namespace tilewise::swap

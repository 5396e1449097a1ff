#include <algorithm>
#include <map>
#include <string>

#include "partition/elimination.h"
#include "partition/planners.h"
#include "tdl/interrupt.h"

namespace tilewise::partition {

namespace {

constexpr double kMaxWork = 2e8;

// Every valid sequence of cuts of a tensor (each step's choices depend on the cuts before it).
void tiling_sequences(const Problem& p, const Policy& policy, int tensor, cost::Tiling& prefix,
                      std::vector<cost::Tiling>& out) {
  if (prefix.size() == p.parts.size()) {
    out.push_back(prefix);
    return;
  }
  for (int c : tensor_choices(p, policy, tensor, prefix, static_cast<int>(prefix.size()))) {
    prefix.push_back(c);
    tiling_sequences(p, policy, tensor, prefix, out);
    prefix.pop_back();
  }
}

void split_sequences(const Problem& p, const Policy& policy, int op, cost::OpSplit& prefix,
                     std::vector<cost::OpSplit>& out) {
  if (prefix.size() == p.parts.size()) {
    out.push_back(prefix);
    return;
  }
  for (const auto& s : op_choices(p, policy, op, prefix, static_cast<int>(prefix.size()))) {
    prefix.push_back(s);
    split_sequences(p, policy, op, prefix, out);
    prefix.pop_back();
  }
}

}  // namespace

Plan plan_brute_force(const Problem& p, const Policy& policy, const SearchOptions& options,
                      std::chrono::steady_clock::time_point deadline) {
  const auto& g = *p.graph;
  const int m = static_cast<int>(p.parts.size());
  const int ntc = static_cast<int>(p.class_tensors.size()), noc = static_cast<int>(p.class_ops.size());
  std::vector<std::vector<cost::Tiling>> tdom(ntc);
  std::vector<std::vector<cost::OpSplit>> odom(noc);
  double space = 1;
  for (int c = 0; c < ntc; ++c) {
    cost::Tiling prefix;
    tiling_sequences(p, policy, p.class_tensors[c][0], prefix, tdom[c]);
    space *= static_cast<double>(tdom[c].size());
  }
  double per_assignment = 0;
  for (int c = 0; c < noc; ++c) {
    cost::OpSplit prefix;
    split_sequences(p, policy, p.class_ops[c][0], prefix, odom[c]);
    per_assignment += static_cast<double>(odom[c].size()) * (g.op(p.class_ops[c][0]).inputs.size() + 1);
  }
  if (space * per_assignment > kMaxWork)
    throw SearchTooLarge("brute_force would try " + std::to_string(static_cast<int64_t>(space)) +
                    " tilings of the tensors (" + std::to_string(static_cast<int64_t>(space * per_assignment)) +
                    " table reads); it handles graphs up to about 2e8: use a smaller graph or fewer devices");
  // Tables over (split sequence, tiling sequence) for every (op class, tensor class) pair.
  std::map<std::pair<int, int>, std::vector<int64_t>> tables;
  for (const auto& op : g.ops()) {
    int oc = p.op_class[op.id];
    std::vector<int> slots(op.inputs);
    slots.push_back(op.output);
    for (size_t si = 0; si < odom[oc].size(); ++si) {
      const auto& split = odom[oc][si];
      auto reads = cost::device_reads(p.ops[op.id], split, p.parts, m);
      auto computed = cost::device_outputs(p.ops[op.id], split, p.parts, m);
      auto classes = cost::partial_classes(split, p.parts, m);
      const bool disjoint = cost::outputs_are_disjoint(split);
      for (size_t j = 0; j < slots.size(); ++j) {
        int t = slots[j], tc = p.tensor_class[t];
        auto& table = tables[{oc, tc}];
        size_t cols = tdom[tc].size();
        if (table.empty()) table.assign(odom[oc].size() * cols, 0);
        for (size_t ci = 0; ci < cols; ++ci) {
          auto tiles = cost::device_tiles(g.tensor(t).shape, tdom[tc][ci], p.parts, m);
          int64_t e = j + 1 < slots.size() ? cost::fetch_elements(reads[j], tiles)
                                           : cost::output_elements(computed, classes, tiles, disjoint);
          table[si * cols + ci] += e * p.bytes_per_element(t);
        }
      }
    }
  }
  std::vector<std::vector<std::pair<int, const std::vector<int64_t>*>>> by_op(noc);
  for (const auto& [key, table] : tables) by_op[key.first].push_back({key.second, &table});

  Plan plan;
  plan.parts = p.parts;
  std::vector<int> idx(ntc, 0), best_t(ntc, 0), best_o(noc, 0), cur_o(noc, 0);
  int64_t best = kInfinite + 1;
  const int64_t total = static_cast<int64_t>(space);
  for (int64_t n = 0;; ++n) {
    if ((n & 4095) == 0) {
      check_interrupt();
      if (std::chrono::steady_clock::now() > deadline)
        throw SearchTimeout("time limit reached after " + std::to_string(n) + " of " + std::to_string(total) +
                            " brute-force assignments");
      if (options.progress) options.progress("brute force", n, total);
    }
    int64_t cost = 0;
    for (int oc = 0; oc < noc && cost < best; ++oc) {
      int64_t mbest = kInfinite;
      for (size_t s = 0; s < odom[oc].size(); ++s) {
        int64_t c = 0;
        for (const auto& [tc, table] : by_op[oc]) c += (*table)[s * tdom[tc].size() + idx[tc]];
        if (c < mbest) mbest = c, cur_o[oc] = static_cast<int>(s);
      }
      cost = std::min(kInfinite, cost + mbest);
    }
    if (cost < best) best = cost, best_t = idx, best_o = cur_o;
    ++plan.evaluated;
    int k = ntc - 1;
    for (; k >= 0; --k) {
      if (++idx[k] < static_cast<int>(tdom[k].size())) break;
      idx[k] = 0;
    }
    if (k < 0) break;
  }
  if (options.progress) options.progress("brute force", total, total);
  plan.assignment = empty_assignment(p);
  for (int c = 0; c < ntc; ++c)
    for (int t : p.class_tensors[c]) plan.assignment.tilings[t] = tdom[c][best_t[c]];
  for (int c = 0; c < noc; ++c)
    for (int o : p.class_ops[c]) plan.assignment.splits[o] = odom[c][best_o[c]];
  plan.comm_bytes = best;
  return plan;
}

}  // namespace tilewise::partition

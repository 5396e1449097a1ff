#include "cost/placement.h"

namespace tilewise::cost {

std::string placement_misfit(const graph::Graph& g, const Placement& placement) {
  const auto& a = placement.assignment;
  const int m = static_cast<int>(placement.parts.size());
  if (device_count(placement.parts) != placement.devices)
    return "the plan's parts do not multiply to its " + std::to_string(placement.devices) + " devices";
  for (int k : placement.parts)
    if (k < 2) return "every part count of a plan must be at least 2";
  if (a.tilings.size() != g.tensors().size() || a.splits.size() != g.ops().size())
    return "the plan has " + std::to_string(a.tilings.size()) + " tensors and " +
           std::to_string(a.splits.size()) + " ops; the graph has " + std::to_string(g.tensors().size()) +
           " and " + std::to_string(g.ops().size()) + ": it was made for another graph";
  for (const auto& t : g.tensors()) {
    const auto& cuts = a.tilings[t.id];
    if (static_cast<int>(cuts.size()) != m)
      return "tensor '" + t.name + "' has " + std::to_string(cuts.size()) + " cuts; the plan has " +
             std::to_string(m) + " steps";
    for (int c : cuts)
      if (c != kReplicated && (c < 0 || c >= static_cast<int>(t.shape.size())))
        return "tensor '" + t.name + "' is cut along dimension " + std::to_string(c) + " but has rank " +
               std::to_string(t.shape.size());
  }
  for (const auto& op : g.ops()) {
    const auto& split = a.splits[op.id];
    if (static_cast<int>(split.size()) != m)
      return "op '" + op.name + "' has " + std::to_string(split.size()) + " strategies; the plan has " +
             std::to_string(m) + " steps";
    for (const auto& s : split)
      if (s.kind != tdl::StrategyKind::kReplicate && (s.var < 0 || s.var >= static_cast<int>(op.desc->vars.size())))
        return "op '" + op.name + "' splits variable " + std::to_string(s.var) + " of " +
               std::to_string(op.desc->vars.size());
  }
  return "";
}

}  // namespace tilewise::cost

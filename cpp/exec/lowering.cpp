#include "exec/lowering.h"

#include <algorithm>

#include "cost/comm_cost.h"
#include "cost/transfers.h"
#include "exec/errors.h"

namespace tilewise::exec {

Lowered lower(const graph::Graph& g, const cost::Placement& plan) {
  std::string misfit = cost::placement_misfit(g, plan);
  if (!misfit.empty()) throw ExecError(misfit);
  Lowered low;
  low.parts = plan.parts;
  const int steps = static_cast<int>(plan.parts.size());
  low.devices = static_cast<int>(cost::device_count(plan.parts));
  const int n = low.devices;
  const auto& a = plan.assignment;
  for (const auto& t : g.tensors()) low.tiles.push_back(cost::device_tiles(t.shape, a.tilings[t.id], plan.parts, steps));

  for (const auto& node : g.ops()) {
    std::vector<cost::Shape> shapes;
    for (int t : node.inputs) shapes.push_back(g.tensor(t).shape);
    cost::OpView view = cost::make_view(*node.desc, shapes, g.tensor(node.output).shape);
    const auto& split = a.splits[node.id];
    OpPlan op;
    op.op = node.id;
    op.extents = view.extents;
    for (const auto& s : split)
      if (s.kind == tdl::StrategyKind::kReduce) op.reducer = s.reducer;
    auto reads = cost::device_reads(view, split, plan.parts, steps);
    auto computed = cost::device_outputs(view, split, plan.parts, steps);
    auto classes = cost::partial_classes(split, plan.parts, steps);
    const bool reduced = cost::reduces(split);
    const auto& out_tiles = low.tiles[node.output];
    op.devices.resize(n);
    for (int d = 0; d < n; ++d) {
      DeviceOp& dev = op.devices[d];
      dev.vars = cost::var_ranges(view.extents, split, plan.parts, cost::device_coords(d, plan.parts, steps));
      dev.active = std::none_of(dev.vars.begin(), dev.vars.end(), [](const Range& r) { return r.empty(); });
      dev.tile = out_tiles[d];
      dev.computed = dev.active ? computed[d] : Box::nothing(view.output_shape.size());
      dev.direct = dev.active && cost::writes_in_place(reduced, dev.computed, dev.tile);
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        SlotPlan slot;
        const auto& tiles = low.tiles[node.inputs[j]];
        slot.region = dev.active ? reads[j][d] : Box::nothing(shapes[j].size());
        if (slot.region.empty()) {
          dev.slots.push_back(std::move(slot));
          continue;
        }
        slot.use_tile = tdl::same_box(slot.region, tiles[d]);
        if (!slot.use_tile)
          cost::for_each_fetch(slot.region, tiles, d, [&](cost::TransferKind, int src, int, const Box& cell) {
            slot.parts.push_back({src, cell});
          });
        dev.slots.push_back(std::move(slot));
      }
    }
    // Output conversion: partials to the owners, results to the holders (a direct device's own
    // final values are already in place). `computed` is empty for idle devices, as dev.computed.
    cost::for_each_conversion(computed, classes, out_tiles, cost::outputs_are_disjoint(split),
                              [&](cost::TransferKind kind, int src, int dst, const Box& cell) {
                                DeviceOp& to = op.devices[dst];
                                if (kind == cost::TransferKind::kPartial) to.reduce_in.push_back({src, cell});
                                else if (src != dst || !to.direct) to.result_in.push_back({src, cell});
                              });
    for (int d = 0; d < n; ++d) {
      op.reduces = op.reduces || !op.devices[d].reduce_in.empty();
      for (const Transfer& tr : op.devices[d].result_in) op.remote_results = op.remote_results || tr.src != d;
    }
    op.remote_results = op.remote_results || op.reduces;
    low.ops.push_back(std::move(op));
  }
  return low;
}

}  // namespace tilewise::exec

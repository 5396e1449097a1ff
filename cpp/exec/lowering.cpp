#include "exec/lowering.h"

#include <algorithm>

#include "cost/comm_cost.h"
#include "exec/box_copy.h"
#include "tdl/errors.h"

namespace tilewise::exec {

namespace {

bool same_box(const Box& a, const Box& b) {
  if (a.empty() || b.empty()) return a.empty() && b.empty();
  if (a.dims.size() != b.dims.size()) return false;
  for (size_t d = 0; d < a.dims.size(); ++d)
    if (!(a.dims[d] == b.dims[d])) return false;
  return true;
}

// The grid inside `within` cut by the edges of `boxes`: calls cell(box) for every non-empty cell.
template <class Cell>
void for_each_cell(const Box& within, const std::vector<const Box*>& boxes, Cell cell) {
  const size_t rank = within.dims.size();
  if (within.empty()) return;
  std::vector<std::vector<int64_t>> cuts(rank);
  for (size_t k = 0; k < rank; ++k) {
    cuts[k] = {within.dims[k].lo, within.dims[k].hi + 1};
    for (const Box* b : boxes) {
      if (b->empty()) continue;
      for (int64_t e : {b->dims[k].lo, b->dims[k].hi + 1})
        if (e > within.dims[k].lo && e <= within.dims[k].hi) cuts[k].push_back(e);
    }
    std::sort(cuts[k].begin(), cuts[k].end());
    cuts[k].erase(std::unique(cuts[k].begin(), cuts[k].end()), cuts[k].end());
  }
  std::vector<size_t> idx(rank, 0);
  while (true) {
    Box c{std::vector<Range>(rank)};
    for (size_t k = 0; k < rank; ++k) c.dims[k] = {cuts[k][idx[k]], cuts[k][idx[k] + 1] - 1};
    cell(c);
    size_t k = 0;
    for (; k < rank; ++k) {
      if (++idx[k] + 1 < cuts[k].size()) break;
      idx[k] = 0;
    }
    if (k == rank) return;
  }
}

}  // namespace

Lowered lower(const graph::Graph& g, const partition::Plan& plan) {
  partition::validate(g, plan);
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
    const bool reduced = std::any_of(split.begin(), split.end(),
                                     [](const tdl::Strategy& s) { return s.kind == tdl::StrategyKind::kReduce; });
    const auto& out_tiles = low.tiles[node.output];
    op.devices.resize(n);
    for (int d = 0; d < n; ++d) {
      DeviceOp& dev = op.devices[d];
      dev.vars = cost::var_ranges(view.extents, split, plan.parts, cost::device_coords(d, plan.parts, steps));
      dev.active = std::none_of(dev.vars.begin(), dev.vars.end(), [](const Range& r) { return r.empty(); });
      dev.tile = out_tiles[d];
      dev.computed = dev.active ? computed[d] : Box::nothing(view.output_shape.size());
      dev.direct = dev.active && !reduced && same_box(dev.computed, dev.tile);
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        SlotPlan slot;
        const auto& tiles = low.tiles[node.inputs[j]];
        slot.region = dev.active ? reads[j][d] : Box::nothing(shapes[j].size());
        if (slot.region.empty()) {
          dev.slots.push_back(std::move(slot));
          continue;
        }
        slot.use_tile = same_box(slot.region, tiles[d]);
        if (!slot.use_tile) {
          std::vector<const Box*> edges;
          for (const auto& b : tiles) edges.push_back(&b);
          for_each_cell(slot.region, edges, [&](const Box& cell) {
            if (inside(cell, tiles[d])) {
              slot.parts.push_back({d, cell});
              return;
            }
            for (int s = 0; s < n; ++s)
              if (inside(cell, tiles[s])) {
                slot.parts.push_back({s, cell});
                return;
              }
            TW_ASSERT(false, "every element of a tensor has a holder");
          });
        }
        dev.slots.push_back(std::move(slot));
      }
    }
    // Output conversion by cells, as cost::conversion_elements counts it.
    Box whole{std::vector<Range>()};
    for (int64_t s : view.output_shape) whole.dims.push_back({0, s - 1});
    std::vector<const Box*> edges;
    for (int d = 0; d < n; ++d) edges.push_back(&op.devices[d].computed), edges.push_back(&out_tiles[d]);
    std::vector<int> computers, holders;
    for_each_cell(whole, edges, [&](const Box& cell) {
      computers.clear(), holders.clear();
      for (int d = 0; d < n; ++d) {
        if (!op.devices[d].computed.empty() && inside(cell, op.devices[d].computed)) computers.push_back(d);
        if (!out_tiles[d].empty() && inside(cell, out_tiles[d])) holders.push_back(d);
      }
      if (computers.empty() || holders.empty()) return;
      int owner = -1;
      for (int d : computers)
        if (std::find(holders.begin(), holders.end(), d) != holders.end()) {
          owner = d;
          break;
        }
      if (owner < 0) owner = computers[0];
      std::vector<int> reps;  // lowest computer of each class
      for (int d : computers)
        if (std::none_of(reps.begin(), reps.end(), [&](int r) { return classes[r] == classes[d]; })) reps.push_back(d);
      for (int r : reps)
        if (classes[r] != classes[owner]) op.devices[owner].reduce_in.push_back({r, cell});
      const bool one_class = reps.size() == 1;
      for (int q : holders) {
        bool has_final = q == owner || (one_class && std::find(computers.begin(), computers.end(), q) != computers.end());
        DeviceOp& dq = op.devices[q];
        if (has_final) {
          if (!dq.direct) dq.result_in.push_back({q, cell});
        } else {
          dq.result_in.push_back({owner, cell});
        }
      }
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

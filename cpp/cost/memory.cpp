#include "cost/memory.h"

#include <algorithm>

namespace tilewise::cost {

namespace {

bool lives_all_iteration(graph::Role r) {
  using graph::Role;
  return r == Role::kParameter || r == Role::kOptimizerState || r == Role::kConstant || r == Role::kInput ||
         r == Role::kLabel;
}

}  // namespace

MemoryEstimate estimate_memory(const graph::Graph& g, const std::vector<OpView>& ops,
                               const std::vector<Tiling>& tilings, const std::vector<OpSplit>& splits,
                               const std::vector<int>& parts) {
  const int steps = static_cast<int>(parts.size());
  const int64_t n = device_count(parts, steps);
  const int no = static_cast<int>(g.ops().size());
  MemoryEstimate m;
  m.peak.assign(n, 0);
  m.resident.assign(n, 0);
  m.peak_op.assign(n, -1);
  // Tile bytes of every tensor on every device; lifetimes in op order.
  std::vector<std::vector<int64_t>> tile_bytes(g.tensors().size());
  std::vector<int> born(g.tensors().size(), -1), dies(g.tensors().size(), -1);
  std::vector<std::vector<int>> freed_after(no), born_at(no);
  for (const auto& t : g.tensors()) {
    auto tiles = device_tiles(t.shape, tilings[t.id], parts, steps);
    int64_t bpe = graph::dtype_size(t.dtype);
    for (const auto& b : tiles) tile_bytes[t.id].push_back(t.updates >= 0 ? 0 : b.volume() * bpe);
    if (t.updates >= 0) continue;
    if (t.producer < 0 && lives_all_iteration(t.role)) {
      for (int64_t d = 0; d < n; ++d) m.resident[d] += tile_bytes[t.id][d];
      continue;
    }
    int first = std::max(t.producer, 0), last = first;
    for (int c : t.consumers) last = std::max(last, c);
    if (t.consumers.empty()) last = no - 1;  // a result (the loss): read after the iteration
    born_at[first].push_back(t.id);
    freed_after[last].push_back(t.id);
  }
  std::vector<int64_t> live(m.resident);
  for (int o = 0; o < no; ++o) {
    for (int t : born_at[o])
      for (int64_t d = 0; d < n; ++d) live[d] += tile_bytes[t][d];
    const auto& op = g.op(o);
    auto reads = device_reads(ops[o], splits[o], parts, steps);
    auto computed = device_outputs(ops[o], splits[o], parts, steps);
    auto classes = partial_classes(splits[o], parts, steps);
    const auto& out = g.tensor(op.output);
    auto out_tiles = device_tiles(out.shape, tilings[out.id], parts, steps);
    std::vector<int64_t> partials(n, 0);  // staged by owners before combining (none without a reduction)
    output_elements(computed, classes, out_tiles, outputs_are_disjoint(splits[o]), nullptr, &partials);
    const bool partial = reduces(splits[o]);
    int64_t out_bpe = graph::dtype_size(out.dtype);
    for (int64_t d = 0; d < n; ++d) {
      int64_t buffers = 0;
      for (size_t j = 0; j < op.inputs.size(); ++j) {
        const auto& tin = g.tensor(op.inputs[j]);
        auto tile = tile_box(tin.shape, tilings[tin.id], parts, device_coords(d, parts, steps));
        // A region that is exactly the tile is read in place; any other is assembled in a buffer.
        if (!reads[j][d].empty() && !tdl::same_box(reads[j][d], tile))
          buffers += reads[j][d].volume() * graph::dtype_size(tin.dtype);
      }
      if (!computed[d].empty() && !writes_in_place(partial, computed[d], out_tiles[d]))
        buffers += computed[d].volume() * out_bpe;
      buffers += partials[d] * out_bpe;
      int64_t now = live[d] + buffers;
      if (now > m.peak[d] || m.peak_op[d] < 0) m.peak[d] = std::max(m.peak[d], now), m.peak_op[d] = o;
    }
    for (int t : freed_after[o])
      for (int64_t d = 0; d < n; ++d) live[d] -= tile_bytes[t][d];
  }
  for (int64_t d = 0; d < n; ++d) m.peak[d] = std::max(m.peak[d], m.resident[d]);
  return m;
}

}  // namespace tilewise::cost

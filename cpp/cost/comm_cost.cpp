#include "cost/comm_cost.h"

#include <algorithm>

#include "tdl/errors.h"
#include "tdl/region_analysis.h"

namespace tilewise::cost {

namespace {

int64_t intersect_volume(const Box& a, const Box& b) {
  if (a.empty() || b.empty()) return 0;
  int64_t v = 1;
  for (size_t d = 0; d < a.dims.size(); ++d) {
    int64_t n = a.dims[d].intersect(b.dims[d]).size();
    if (n == 0) return 0;
    v *= n;
  }
  return v;
}

bool contains(const Box& b, const std::vector<int64_t>& point) {
  if (b.none) return false;
  for (size_t d = 0; d < point.size(); ++d)
    if (point[d] < b.dims[d].lo || point[d] > b.dims[d].hi) return false;
  return true;
}

}  // namespace

OpView make_view(const tdl::OpDesc& desc, std::vector<Shape> input_shapes, Shape output_shape) {
  OpView v;
  v.desc = &desc;
  v.extents = tdl::infer_extents(desc, input_shapes, output_shape);
  v.input_shapes = std::move(input_shapes);
  v.output_shape = std::move(output_shape);
  v.sites = std::make_shared<const std::vector<tdl::AccessSite>>(tdl::collect_access_sites(desc.body));
  return v;
}

std::vector<Box> device_tiles(const Shape& shape, const Tiling& cuts, const std::vector<int>& parts, int steps) {
  int64_t n = device_count(parts, steps);
  std::vector<Box> out;
  out.reserve(n);
  for (int64_t d = 0; d < n; ++d) out.push_back(tile_box(shape, cuts, parts, device_coords(d, parts, steps)));
  return out;
}

std::vector<std::vector<Box>> device_reads(const OpView& op, const OpSplit& split, const std::vector<int>& parts,
                                           int steps) {
  int64_t n = device_count(parts, steps);
  std::vector<std::vector<Box>> out(op.input_shapes.size());
  for (int64_t d = 0; d < n; ++d) {
    auto vars = var_ranges(op.extents, split, parts, device_coords(d, parts, steps));
    auto regions = op.sites ? tdl::input_regions(*op.sites, vars, op.input_shapes)
                            : tdl::input_regions(*op.desc, vars, op.input_shapes);
    for (size_t t = 0; t < regions.size(); ++t) out[t].push_back(std::move(regions[t]));
  }
  return out;
}

std::vector<Box> device_outputs(const OpView& op, const OpSplit& split, const std::vector<int>& parts, int steps) {
  int64_t n = device_count(parts, steps);
  std::vector<Box> out;
  out.reserve(n);
  for (int64_t d = 0; d < n; ++d) {
    auto vars = var_ranges(op.extents, split, parts, device_coords(d, parts, steps));
    // A device with an empty share (of any variable, reduced ones too) computes nothing.
    bool idle = std::any_of(vars.begin(), vars.end(), [](const Range& r) { return r.empty(); });
    Box b;
    for (int v : op.desc->output_vars) b.dims.push_back(vars[v]);
    out.push_back(idle ? Box::nothing(b.dims.size()) : std::move(b));
  }
  return out;
}

std::vector<int> partial_classes(const OpSplit& split, const std::vector<int>& parts, int steps) {
  int64_t n = device_count(parts, steps);
  std::vector<int> cls(n, 0);
  for (int64_t d = 0; d < n; ++d) {
    auto c = device_coords(d, parts, steps);
    int id = 0;
    for (int i = 0; i < steps; ++i)
      if (split[i].kind == tdl::StrategyKind::kReduce) id = id * parts[i] + c[i];
    cls[d] = id;
  }
  return cls;
}

int64_t fetch_elements(const std::vector<Box>& reads, const std::vector<Box>& tiles) {
  int64_t total = 0;
  for (size_t d = 0; d < reads.size(); ++d) {
    if (reads[d].empty()) continue;
    total += reads[d].volume() - intersect_volume(reads[d], tiles[d]);
  }
  return total;
}

int64_t conversion_elements(const std::vector<Box>& computed, const std::vector<int>& classes,
                            const std::vector<Box>& tiles, std::vector<int64_t>* received,
                            std::vector<int64_t>* partials) {
  const size_t n = computed.size();
  TW_ASSERT(tiles.size() == n && classes.size() == n, "one computed region, class and tile per device");
  if (received) received->assign(n, 0);
  if (partials) partials->assign(n, 0);
  if (n == 0) return 0;
  const size_t rank = tiles[0].dims.size();
  // Cells: the grid cut by every region's and tile's edges; membership is constant in a cell.
  std::vector<std::vector<int64_t>> cuts(rank);
  for (size_t d = 0; d < n; ++d)
    for (size_t k = 0; k < rank; ++k)
      for (const Box* b : {&computed[d], &tiles[d]}) {
        if (b->empty()) continue;
        cuts[k].push_back(b->dims[k].lo);
        cuts[k].push_back(b->dims[k].hi + 1);
      }
  for (auto& c : cuts) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    if (c.size() < 2) return 0;
  }
  int64_t total = 0;
  std::vector<size_t> idx(rank, 0);
  std::vector<int64_t> point(rank);
  std::vector<int> seen_classes;
  while (true) {
    int64_t volume = 1;
    for (size_t k = 0; k < rank; ++k) {
      point[k] = cuts[k][idx[k]];
      volume *= cuts[k][idx[k] + 1] - cuts[k][idx[k]];
    }
    // Who computed this cell, who must hold it.
    int owner = -1, first_computer = -1;
    seen_classes.clear();
    for (size_t d = 0; d < n; ++d) {
      bool c = contains(computed[d], point), t = contains(tiles[d], point);
      if (c) {
        if (first_computer < 0) first_computer = static_cast<int>(d);
        if (t && owner < 0) owner = static_cast<int>(d);
        if (std::find(seen_classes.begin(), seen_classes.end(), classes[d]) == seen_classes.end())
          seen_classes.push_back(classes[d]);
      }
    }
    if (first_computer >= 0) {
      if (owner < 0) owner = first_computer;
      int64_t distinct = static_cast<int64_t>(seen_classes.size());
      int64_t moved = distinct - 1;
      if (received) (*received)[owner] += (distinct - 1) * volume;
      if (partials) (*partials)[owner] += (distinct - 1) * volume;
      for (size_t d = 0; d < n; ++d) {
        if (static_cast<int>(d) == owner || !contains(tiles[d], point)) continue;
        bool has_final = distinct == 1 && contains(computed[d], point);
        if (!has_final) {
          ++moved;
          if (received) (*received)[d] += volume;
        }
      }
      total += moved * volume;
    }
    size_t k = 0;
    for (; k < rank; ++k) {
      if (++idx[k] + 1 < cuts[k].size()) break;
      idx[k] = 0;
    }
    if (k == rank) break;
  }
  return total;
}

int64_t misplaced_elements(const std::vector<Box>& computed, const std::vector<Box>& tiles,
                           std::vector<int64_t>* received) {
  int64_t total = 0;
  if (received) received->assign(tiles.size(), 0);
  for (size_t d = 0; d < tiles.size(); ++d) {
    int64_t moved = tiles[d].empty() ? 0 : tiles[d].volume() - intersect_volume(tiles[d], computed[d]);
    total += moved;
    if (received) (*received)[d] = moved;
  }
  return total;
}

bool outputs_are_disjoint(const OpSplit& split) {
  return std::all_of(split.begin(), split.end(), [](const tdl::Strategy& s) { return s.kind == tdl::StrategyKind::kOutput; });
}

int64_t OpComm::total() const {
  int64_t t = output_elements;
  for (int64_t e : input_elements) t += e;
  return t;
}

OpComm op_comm(const OpView& op, const OpSplit& split, const std::vector<Tiling>& input_tilings,
               const Tiling& output_tiling, const std::vector<int>& parts, int steps) {
  OpComm c;
  auto reads = device_reads(op, split, parts, steps);
  for (size_t t = 0; t < op.input_shapes.size(); ++t)
    c.input_elements.push_back(fetch_elements(reads[t], device_tiles(op.input_shapes[t], input_tilings[t], parts, steps)));
  auto computed = device_outputs(op, split, parts, steps);
  auto tiles = device_tiles(op.output_shape, output_tiling, parts, steps);
  c.output_elements = outputs_are_disjoint(split)
                          ? misplaced_elements(computed, tiles)
                          : conversion_elements(computed, partial_classes(split, parts, steps), tiles);
  return c;
}

}  // namespace tilewise::cost

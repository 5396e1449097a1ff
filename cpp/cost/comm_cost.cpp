#include "cost/comm_cost.h"

#include <algorithm>

#include "cost/transfers.h"
#include "tdl/errors.h"
#include "tdl/region_analysis.h"

namespace tilewise::cost {

namespace {

// Sums a transfer enumeration (transfers.h): remote elements in all, and per receiving device.
struct Count {
  static constexpr bool kBoxes = false;
  int64_t total = 0;
  std::vector<int64_t>* received = nullptr;
  std::vector<int64_t>* partials = nullptr;
  void operator()(TransferKind kind, int /*src*/, int dst, int64_t elements) {
    total += elements;
    if (received) (*received)[dst] += elements;
    if (partials && kind == TransferKind::kPartial) (*partials)[dst] += elements;
  }
};

}  // namespace

OpView make_view(const tdl::OpDesc& desc, std::vector<Shape> input_shapes, Shape output_shape) {
  OpView v;
  v.desc = &desc;
  v.extents = tdl::infer_extents(desc, input_shapes, output_shape);
  v.input_shapes = std::move(input_shapes);
  v.output_shape = std::move(output_shape);
  v.sites = std::make_shared<const std::vector<tdl::AccessSite>>(tdl::collect_access_sites(desc.body));
  v.accesses = input_accesses(v);
  return v;
}

std::shared_ptr<const std::vector<InputAccesses>> input_accesses(const OpView& op) {
  auto sites = op.sites ? op.sites : std::make_shared<const std::vector<tdl::AccessSite>>(
                                          tdl::collect_access_sites(op.desc->body));
  auto out = std::make_shared<std::vector<InputAccesses>>(op.input_shapes.size());
  for (size_t t = 0; t < out->size(); ++t) (*out)[t].dim_vars.resize(op.input_shapes[t].size());
  for (const auto& s : *sites) {
    InputAccesses& in = (*out)[s.tensor];
    in.sites.push_back({s});
    for (size_t j = 0; j < s.dims.size() && j < in.dim_vars.size(); ++j)
      if (s.dims[j]) tdl::collect_vars(*s.dims[j], in.dim_vars[j]);
  }
  return out;
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
  Count count;
  for (size_t d = 0; d < reads.size(); ++d) for_each_fetch(reads[d], tiles, static_cast<int>(d), count);
  return count.total;
}

int64_t conversion_elements(const std::vector<Box>& computed, const std::vector<int>& classes,
                            const std::vector<Box>& tiles, std::vector<int64_t>* received,
                            std::vector<int64_t>* partials) {
  return output_elements(computed, classes, tiles, false, received, partials);
}

int64_t output_elements(const std::vector<Box>& computed, const std::vector<int>& classes,
                        const std::vector<Box>& tiles, bool disjoint, std::vector<int64_t>* received,
                        std::vector<int64_t>* partials) {
  if (received) received->assign(tiles.size(), 0);
  if (partials) partials->assign(tiles.size(), 0);
  Count count{0, received, partials};
  for_each_conversion(computed, classes, tiles, disjoint, count);
  return count.total;
}

bool outputs_are_disjoint(const OpSplit& split) {
  return std::all_of(split.begin(), split.end(), [](const tdl::Strategy& s) { return s.kind == tdl::StrategyKind::kOutput; });
}

bool reduces(const OpSplit& split) {
  return std::any_of(split.begin(), split.end(), [](const tdl::Strategy& s) { return s.kind == tdl::StrategyKind::kReduce; });
}

bool writes_in_place(bool reduces, const Box& computed, const Box& tile) {
  return !reduces && !computed.empty() && tdl::same_box(computed, tile);
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
  c.output_elements = output_elements(computed, partial_classes(split, parts, steps), tiles, outputs_are_disjoint(split));
  return c;
}

}  // namespace tilewise::cost

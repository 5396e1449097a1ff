// Python view of tile geometry (cpp/cost/tiling.h): device coordinates, the tile a device owns and
// tiling strings, so that Python shows the very boxes the cost model and the runtime use.
// Conversion only; tilewise.plan.tiling validates the arguments before calling these.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <utility>
#include <vector>

#include "bindings/bindings.h"
#include "cost/tiling.h"

namespace py = pybind11;

namespace tilewise::bindings {

namespace {

std::vector<std::pair<int64_t, int64_t>> box_pairs(const tdl::Box& box) {
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(box.dims.size());
  for (const auto& r : box.dims) out.emplace_back(r.lo, r.hi);
  return out;
}

}  // namespace

void bind_cost(py::module_& m) {
  m.def(
      "device_coords",
      [](int64_t d, const std::vector<int>& parts) {
        return cost::device_coords(d, parts, static_cast<int>(parts.size()));
      },
      py::arg("device"), py::arg("parts"),
      "Mixed-radix coordinates of a device over `parts`, the first step most significant.");
  m.def(
      "tile_box",
      [](const tdl::Shape& shape, const cost::Tiling& cuts, const std::vector<int>& parts,
         const std::vector<int>& coords) { return box_pairs(cost::tile_box(shape, cuts, parts, coords)); },
      py::arg("shape"), py::arg("cuts"), py::arg("parts"), py::arg("coords"),
      "The tile (inclusive (lo, hi) per dimension) the device at `coords` owns.");
  m.def(
      "tile_boxes",
      [](const tdl::Shape& shape, const cost::Tiling& cuts, const std::vector<int>& parts) {
        const int steps = static_cast<int>(parts.size());
        const int64_t k = cost::device_count(parts);
        std::vector<std::vector<std::pair<int64_t, int64_t>>> out;
        out.reserve(static_cast<size_t>(k));
        for (int64_t d = 0; d < k; ++d)
          out.push_back(box_pairs(cost::tile_box(shape, cuts, parts, cost::device_coords(d, parts, steps))));
        return out;
      },
      py::arg("shape"), py::arg("cuts"), py::arg("parts"), "Every device's tile, in device order.");
  m.def("tiling_str", &cost::tiling_str, py::arg("cuts"), py::arg("rank"),
        "\"R C\" for matrices, \"P0 P2\" for other ranks, \"r\" for replication.");
}

}  // namespace tilewise::bindings

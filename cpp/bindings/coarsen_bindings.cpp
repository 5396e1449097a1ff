// Python view of graph coarsening (cpp/graph/coarsen.h, linearity.h). Conversion only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "bindings/bindings.h"
#include "graph/coarsen.h"
#include "graph/linearity.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::graph;

void bind_coarsen(py::module_& m) {
  py::class_<SeriesParallelResult>(m, "SeriesParallelResult", "What the series-parallel reduction left behind.")
      .def_readonly("series_parallel", &SeriesParallelResult::series_parallel)
      .def_readonly("series_reductions", &SeriesParallelResult::series_reductions)
      .def_readonly("parallel_reductions", &SeriesParallelResult::parallel_reductions)
      .def_readonly("remaining", &SeriesParallelResult::remaining);

  py::class_<LinearityResult>(m, "LinearityResult", "Pendants, terminals and the series-parallel reduction.")
      .def_readonly("linear", &LinearityResult::linear)
      .def_readonly("pendants", &LinearityResult::pendants)
      .def_readonly("entries", &LinearityResult::entries)
      .def_readonly("exits", &LinearityResult::exits)
      .def_readonly("reduction", &LinearityResult::reduction);

  py::class_<Group>(m, "CoarseGroup", "A group of the coarsened graph (read-only view).")
      .def_readonly("id", &Group::id)
      .def_property_readonly("kind", [](const Group& g) { return name_of(g.kind); })
      .def_readonly("ops", &Group::ops)
      .def_readonly("tensors", &Group::tensors)
      .def_readonly("label", &Group::label);

  py::class_<CoarseGraph>(m, "CoarseGraph", "A coarsened graph (Tofu §5.1), read-only.")
      .def_readonly("groups", &CoarseGraph::groups)
      .def_readonly("edges", &CoarseGraph::edges)
      .def_readonly("op_group", &CoarseGraph::op_group)
      .def_readonly("tensor_group", &CoarseGraph::tensor_group)
      .def_readonly("elementwise_merges", &CoarseGraph::elementwise_merges)
      .def_readonly("timestep_merges", &CoarseGraph::timestep_merges)
      .def_readonly("unmirrored_pairs", &CoarseGraph::unmirrored_pairs)
      .def_readonly("linearity", &CoarseGraph::linearity)
      .def_property_readonly("is_linear", &CoarseGraph::is_linear)
      .def("summary", &CoarseGraph::summary, py::arg("graph"))
      .def("to_dot", &CoarseGraph::to_dot);

  m.def(
      "coarsen",
      [](const Graph& g, bool merge_elementwise, bool merge_timesteps) {
        return coarsen(g, CoarsenOptions{merge_elementwise, merge_timesteps});
      },
      py::arg("graph"), py::arg("merge_elementwise") = true, py::arg("merge_timesteps") = true,
      py::call_guard<py::gil_scoped_release>(), "Coarsen a graph (Tofu §5.1); runs without the GIL.");

  m.def(
      "reduce_series_parallel",
      [](int n, const std::vector<std::pair<int, int>>& edges, const std::optional<std::vector<int>>& sources,
         const std::optional<std::vector<int>>& sinks) {
        if (sources.has_value() != sinks.has_value())
          throw std::invalid_argument("reduce_series_parallel: give both sources and sinks, or neither");
        return sources ? reduce_series_parallel(n, edges, *sources, *sinks) : reduce_series_parallel(n, edges);
      },
      py::arg("n"), py::arg("edges"), py::arg("sources") = py::none(), py::arg("sinks") = py::none(),
      py::call_guard<py::gil_scoped_release>(),
      "Two-terminal series-parallel reduction of a graph on nodes 0..n-1 (sources/sinks from the "
      "edge directions when not given).");

  m.def(
      "check_linear",
      [](int n, const std::vector<std::pair<int, int>>& edges, const std::vector<int>& entries,
         const std::vector<int>& exits) {
        std::vector<char> entry_marks, exit_marks;
        auto marks = [n](const std::vector<int>& ids, std::vector<char>& into) {
          if (ids.empty()) return;
          into.assign(n, 0);
          for (int v : ids) {
            if (v < 0 || v >= n) throw std::invalid_argument("check_linear: marked node " + std::to_string(v) +
                                                             " is outside 0.." + std::to_string(n - 1));
            into[v] = 1;
          }
        };
        marks(entries, entry_marks);
        marks(exits, exit_marks);
        return check_linear(n, edges, entry_marks, exit_marks);
      },
      py::arg("n"), py::arg("edges"), py::arg("entries") = std::vector<int>{}, py::arg("exits") = std::vector<int>{},
      py::call_guard<py::gil_scoped_release>(),
      "Tofu linearity of a directed graph on nodes 0..n-1: pendant pruning, terminals, series-parallel reduction.");
}

}  // namespace tilewise::bindings

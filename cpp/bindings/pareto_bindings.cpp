// Python view of the frontier engine on plain decision problems (cpp/partition/pareto.*,
// frontier.*): arrays of (time, memory) in, points, choices and statistics out. Conversion only.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "bindings/bindings.h"
#include "bindings/interruptible.h"
#include "partition/frontier.h"
#include "partition/pareto.h"
#include "partition/problem.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::partition;
using Costs = py::array_t<double, py::array::c_style | py::array::forcecast>;

namespace {

// An (n, 2) array of (time, memory) rows as points.
std::vector<Point> to_points(const Costs& a, const std::string& what) {
  if (a.ndim() != 2 || a.shape(1) != 2)
    throw PlanError(what + " must be an (n, 2) array of (time, memory); got " + std::to_string(a.ndim()) +
                    " dimensions");
  std::vector<Point> out(a.shape(0));
  auto r = a.unchecked<2>();
  for (py::ssize_t i = 0; i < a.shape(0); ++i) out[i] = {r(i, 0), r(i, 1)};
  return out;
}

}  // namespace

void bind_pareto(py::module_& m) {
  py::class_<ParetoSolution>(m, "ParetoSolution", "A cost frontier of a decision problem, with statistics.")
      .def_property_readonly("times", [](const ParetoSolution& s) {
        std::vector<double> t;
        for (const Point& p : s.points) t.push_back(p.time);
        return t;
      })
      .def_property_readonly("memories", [](const ParetoSolution& s) {
        std::vector<double> t;
        for (const Point& p : s.points) t.push_back(p.memory);
        return t;
      })
      .def_readonly("choices", &ParetoSolution::choices)
      .def_property_readonly("largest_table", [](const ParetoSolution& s) { return s.stats.largest_table; })
      .def_property_readonly("conditioned", [](const ParetoSolution& s) { return s.stats.conditioned; })
      .def_property_readonly("heuristic_fixed", [](const ParetoSolution& s) { return s.stats.fixed; })
      .def_property_readonly("subproblems", [](const ParetoSolution& s) { return s.stats.subproblems; })
      .def_property_readonly("steps",
                             [](const ParetoSolution& s) {
                               std::vector<std::tuple<int, int64_t, int64_t, int64_t>> out;
                               for (const auto& st : s.stats.steps)
                                 out.emplace_back(st.var, st.entries, st.max_points, st.total_points);
                               return out;
                             })
      .def_readonly("incumbents", &ParetoSolution::incumbents)
      .def_readonly("memory_error_bound", &ParetoSolution::memory_error_bound)
      .def_readonly("seconds", &ParetoSolution::seconds);

  m.def(
      "pareto_solve",
      [](const std::vector<Costs>& nodes, const std::vector<std::tuple<int, int, Costs>>& edges, int64_t max_table,
         bool heuristic, double memory_bucket, int threads, double time_limit,
         std::function<void(int64_t, int64_t)> progress, bool bound, int64_t max_bytes) {
        ParetoProblem p;
        for (size_t v = 0; v < nodes.size(); ++v) p.nodes.push_back(to_points(nodes[v], "node " + std::to_string(v)));
        for (size_t e = 0; e < edges.size(); ++e) {
          const auto& [u, v, table] = edges[e];
          p.edges.push_back({u, v, to_points(table, "edge " + std::to_string(e))});
        }
        ParetoOptions o;
        o.max_table = max_table;
        o.heuristic = heuristic;
        o.memory_bucket = memory_bucket;
        o.threads = threads;
        o.bound = bound;
        o.max_bytes = max_bytes;
        if (time_limit > 0)
          o.deadline = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(time_limit));
        if (progress)
          o.progress = [progress](int64_t done, int64_t total) {
            py::gil_scoped_acquire gil;
            progress(done, total);
          };
        Interruptible interruptible;  // Ctrl-C stops the search
        py::gil_scoped_release release;
        return solve_pareto(p, o);
      },
      py::arg("nodes"), py::arg("edges"), py::arg("max_table") = ParetoOptions{}.max_table,
      py::arg("heuristic") = false, py::arg("memory_bucket") = 0.0, py::arg("threads") = 0,
      py::arg("time_limit") = 0.0, py::arg("progress") = nullptr, py::arg("bound") = true,
      py::arg("max_bytes") = ParetoOptions{}.max_bytes,
      "The cost frontier of nodes (each an (n, 2) array of (time, memory)) and edges (u, v, (n_u*n_v, 2) "
      "array); runs without the GIL.");

  m.def(
      "pareto_reduce",
      [](const Costs& points, double memory_bucket) {
        std::vector<Point> c = to_points(points, "points");
        Interruptible interruptible;  // Ctrl-C stops the search
        py::gil_scoped_release release;
        return reduce_indices(c, memory_bucket);
      },
      py::arg("points"), py::arg("memory_bucket") = 0.0,
      "TensorOpt Algorithm 1: indices of the (time, memory) rows on the frontier, by increasing memory.");
}

}  // namespace tilewise::bindings

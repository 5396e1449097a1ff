// Python view of the graph-level frontier (cpp/frontier/graph_frontier.*): a model of a graph's
// configurations and costs on a cluster, solved by the frontier engine. Conversion only.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "bindings/bindings.h"
#include "bindings/interruptible.h"
#include "frontier/graph_frontier.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::frontier;
using CostTuple = std::tuple<double, double, double, double>;

namespace {

std::chrono::steady_clock::time_point deadline_after(double seconds) {
  if (seconds <= 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(seconds));
}

CostTuple to_tuple(const Costs& c) { return {c.time, c.memory, c.compute, c.network}; }

}  // namespace

void bind_frontier(py::module_& m) {
  m.def("hierarchy_parts", &hierarchy_parts, py::arg("cluster"), py::arg("devices"),
        "Part counts following the cluster's hierarchy: machines first, then the devices of one machine.");

  py::class_<FrontierModel>(m, "FrontierModel", "A graph's configurations and their (time, memory) costs on a cluster.")
      .def(py::init([](const graph::Graph& g, const sim::Cluster& cluster, std::vector<int> parts, int threads,
                       double time_limit, bool prune, bool batch_split_inputs,
                       std::function<void(const std::string&, int64_t, int64_t)> progress, std::vector<int> copy_ops) {
             ModelOptions o;
             o.threads = threads;
             o.deadline = deadline_after(time_limit);
             o.prune = prune;
             o.batch_split_inputs = batch_split_inputs;
             o.copy_ops = std::move(copy_ops);
             if (progress)
               o.progress = [progress](const std::string& what, int64_t done, int64_t total) {
                 py::gil_scoped_acquire gil;
                 progress(what, done, total);
               };
             Interruptible interruptible;  // Ctrl-C stops the search
             py::gil_scoped_release release;
             return std::make_unique<FrontierModel>(g, cluster, std::move(parts), o);
           }),
           py::arg("graph"), py::arg("cluster"), py::arg("parts"), py::arg("threads") = 0, py::arg("time_limit") = 0.0,
           py::arg("prune") = true, py::arg("batch_split_inputs") = false, py::arg("progress") = nullptr,
           py::arg("copy_ops") = std::vector<int>{}, py::keep_alive<1, 2>())
      .def_property_readonly("parts", &FrontierModel::parts)
      .def_property_readonly("devices", &FrontierModel::devices)
      .def_property_readonly("num_tensor_classes", &FrontierModel::num_tensor_classes)
      .def_property_readonly("num_op_classes", &FrontierModel::num_op_classes)
      .def_property_readonly("configs_before", &FrontierModel::configs_before)
      .def_property_readonly("configs_after", &FrontierModel::configs_after)
      .def_property_readonly("representatives", &FrontierModel::representatives)
      .def_property_readonly("build_seconds", &FrontierModel::build_seconds)
      .def_property_readonly("copy_classes", &FrontierModel::copy_classes,
                             "Per reuse copy: (its op class's variable, source tensor class, copy tensor class).")
      .def_property_readonly("nodes",
                             [](const FrontierModel& f) {
                               std::vector<std::vector<std::tuple<double, double>>> out;
                               for (const auto& n : f.problem().nodes) {
                                 out.emplace_back();
                                 for (const auto& p : n) out.back().emplace_back(p.time, p.memory);
                               }
                               return out;
                             })
      .def_property_readonly("edges",
                             [](const FrontierModel& f) {
                               std::vector<std::tuple<int, int, std::vector<std::tuple<double, double>>>> out;
                               for (const auto& e : f.problem().edges) {
                                 std::vector<std::tuple<double, double>> t;
                                 for (const auto& p : e.table) t.emplace_back(p.time, p.memory);
                                 out.emplace_back(e.u, e.v, std::move(t));
                               }
                               return out;
                             })
      .def(
          "solve",
          [](const FrontierModel& f, int64_t max_table, bool heuristic, double memory_bucket, int threads,
             double time_limit, std::function<void(int64_t, int64_t)> progress, bool bound, int64_t max_bytes,
             bool coarsen) {
            partition::ParetoOptions o;
            o.max_table = max_table;
            o.heuristic = heuristic;
            o.memory_bucket = memory_bucket;
            o.threads = threads;
            o.bound = bound;
            o.max_bytes = max_bytes;
            o.deadline = deadline_after(time_limit);
            if (progress)
              o.progress = [progress](int64_t done, int64_t total) {
                py::gil_scoped_acquire gil;
                progress(done, total);
              };
            Interruptible interruptible;  // Ctrl-C stops the search
            py::gil_scoped_release release;
            return f.solve(o, coarsen);
          },
          py::arg("max_table") = partition::ParetoOptions{}.max_table, py::arg("heuristic") = false,
          py::arg("memory_bucket") = 0.0, py::arg("threads") = 0, py::arg("time_limit") = 0.0,
          py::arg("progress") = nullptr, py::arg("bound") = true,
          py::arg("max_bytes") = partition::ParetoOptions{}.max_bytes, py::arg("coarsen") = false,
          "The exact frontier over the pruned configurations (coarsen: element-wise ops tied to their input's "
          "tiling); runs without the GIL.")
      .def_property_readonly("tied_ops", &FrontierModel::tied_ops,
                             "Op classes the coarsened search ties to their aligned input's tiling.")
      .def_property_readonly("ties",
                             [](const FrontierModel& f) {
                               std::vector<std::vector<std::pair<int, std::vector<int>>>> out;
                               const Ties& t = f.ties();
                               for (size_t g = 0; g < t.members.size(); ++g) {
                                 out.emplace_back();
                                 for (size_t m = 0; m < t.members[g].size(); ++m)
                                   out.back().emplace_back(t.members[g][m], t.of[g][m]);
                               }
                               return out;
                             },
                             "Per group of the coarsened search: (variable, its configuration per configuration "
                             "of the group's tensor class), the tensor class first.")
      .def_property_readonly("coarse_variables", &FrontierModel::coarse_variables,
                             "Variables the coarsened search has (groups and free classes).")
      .def(
          "solve_mesh",
          [](const FrontierModel& f, const std::vector<int>& mesh, int threads, double time_limit) {
            partition::ParetoOptions o;
            o.threads = threads;
            o.deadline = deadline_after(time_limit);
            Interruptible interruptible;  // Ctrl-C stops the search
            py::gil_scoped_release release;
            return f.solve_mesh(mesh, o);
          },
          py::arg("mesh"), py::arg("threads") = 0, py::arg("time_limit") = 0.0,
          "The frontier under one Mesh-TensorFlow layout (per step 0: first dimension, 1: last, -1: replicated).")
      .def("kept_copy_ops", &FrontierModel::kept_copy_ops, py::arg("choice"),
           "The reuse copy ops a choice keeps (tiled apart from their source), in graph order.")
      .def("costs", [](const FrontierModel& f, const std::vector<int>& choice) { return to_tuple(f.costs(choice)); },
           py::arg("choice"), "(time, memory, compute, network) of a choice over the pruned configurations.")
      .def(
          "evaluate",
          [](const FrontierModel& f, const partition::Plan& plan) {
            Interruptible interruptible;  // Ctrl-C stops the search
            py::gil_scoped_release release;
            return to_tuple(f.evaluate(plan));
          },
          py::arg("plan"), "(time, memory, compute, network) of a plan on the same parts, costed alike.")
      .def(
          "choice_of",
          [](const FrontierModel& f, const partition::Plan& plan) {
            py::gil_scoped_release release;
            return f.choice_of(plan);
          },
          py::arg("plan"), "A plan's choice over the pruned configurations (PlanError where pruning removed one).")
      .def(
          "plan",
          [](const FrontierModel& f, const std::vector<int>& choice, int threads, bool count_bytes) {
            Interruptible interruptible;  // Ctrl-C stops the search
            py::gil_scoped_release release;
            return f.plan(choice, threads, count_bytes);
          },
          py::arg("choice"), py::arg("threads") = 0, py::arg("count_bytes") = true,
          "The plan of a choice over the pruned configurations (count_bytes=False: tilings and strategies only).");
}

}  // namespace tilewise::bindings

// Python view of the partition planners and the plan cost model (cpp/partition, cpp/cost).
// Conversion only: strategies travel as (kind, variable, reducer) tuples.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <tuple>

#include "bindings/bindings.h"
#include "bindings/interruptible.h"
#include "partition/elimination.h"
#include "partition/plan.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::partition;
using StrategyTuple = std::tuple<std::string, int, std::string>;

namespace {

StrategyTuple to_tuple(const tdl::Strategy& s) { return {tdl::name_of(s.kind), s.var, tdl::name_of(s.reducer)}; }

tdl::Strategy from_tuple(const StrategyTuple& t) {
  tdl::Strategy s;
  const auto& [kind, var, reducer] = t;
  if (kind == "output") s.kind = tdl::StrategyKind::kOutput;
  else if (kind == "reduce") s.kind = tdl::StrategyKind::kReduce;
  else if (kind == "replicate") s.kind = tdl::StrategyKind::kReplicate;
  else throw PlanError("unknown strategy kind '" + kind + "'; valid: output, reduce, replicate");
  s.var = var;
  if (reducer == "Sum") s.reducer = tdl::Reducer::kSum;
  else if (reducer == "Max") s.reducer = tdl::Reducer::kMax;
  else if (reducer == "Min") s.reducer = tdl::Reducer::kMin;
  else if (reducer == "Prod") s.reducer = tdl::Reducer::kProd;
  else throw PlanError("unknown reducer '" + reducer + "'; valid: Sum, Max, Min, Prod");
  return s;
}

}  // namespace

void bind_partition(py::module_& m) {
  py::register_exception<PlanError>(m, "PlanError", PyExc_ValueError);
  py::register_exception<SearchTimeout>(m, "SearchTimeout", PyExc_TimeoutError);
  py::register_exception<SearchTooLarge>(m, "SearchTooLarge", PyExc_RuntimeError);

  m.def("partition_algorithms", &algorithm_names, "Names of the partition algorithms.");
  m.def("factorize", &cost::factorize, py::arg("devices"), "k = k1*k2*... with k1 >= k2 >= ... (Tofu §5.2).");

  py::class_<Plan>(m, "Plan", "A partition plan (tilings, strategies, predicted bytes).")
      .def(py::init([](const std::string& algorithm, int devices, const std::vector<int>& parts,
                       const std::vector<cost::Tiling>& tilings, const std::vector<std::vector<StrategyTuple>>& splits,
                       const std::vector<int64_t>& step_bytes, int64_t comm_bytes, double search_seconds) {
             Plan p;
             p.algorithm = algorithm;
             p.devices = devices;
             p.parts = parts;
             p.assignment.tilings = tilings;
             for (const auto& ops : splits) {
               cost::OpSplit s;
               for (const auto& t : ops) s.push_back(from_tuple(t));
               p.assignment.splits.push_back(std::move(s));
             }
             p.step_bytes = step_bytes;
             p.comm_bytes = comm_bytes;
             p.search_seconds = search_seconds;
             return p;
           }),
           py::arg("algorithm"), py::arg("devices"), py::arg("parts"), py::arg("tilings"), py::arg("splits"),
           py::arg("step_bytes"), py::arg("comm_bytes"), py::arg("search_seconds"))
      .def_readonly("algorithm", &Plan::algorithm)
      .def_readonly("devices", &Plan::devices)
      .def_readonly("parts", &Plan::parts)
      .def_property_readonly("tilings", [](const Plan& p) { return p.assignment.tilings; })
      .def_property_readonly("splits",
                             [](const Plan& p) {
                               std::vector<std::vector<StrategyTuple>> out;
                               for (const auto& s : p.assignment.splits) {
                                 out.emplace_back();
                                 for (const auto& st : s) out.back().push_back(to_tuple(st));
                               }
                               return out;
                             })
      .def_readonly("step_bytes", &Plan::step_bytes)
      .def_readonly("comm_bytes", &Plan::comm_bytes)
      .def_readonly("unrefined_bytes", &Plan::unrefined_bytes)
      .def_readonly("search_seconds", &Plan::search_seconds)
      .def_readonly("largest_table", &Plan::largest_table)
      .def_readonly("evaluated", &Plan::evaluated)
      .def_readonly("duplication_used", &Plan::duplication_used)
      .def_readonly("timed_out", &Plan::timed_out);

  py::class_<cost::MemoryEstimate>(m, "MemoryEstimate", "Per-device memory of a plan.")
      .def_readonly("peak", &cost::MemoryEstimate::peak)
      .def_readonly("resident", &cost::MemoryEstimate::resident)
      .def_readonly("peak_op", &cost::MemoryEstimate::peak_op);

  py::class_<PlanCost>(m, "PlanCost", "A plan's figures recomputed from scratch.")
      .def_readonly("comm_bytes", &PlanCost::comm_bytes)
      .def_readonly("step_bytes", &PlanCost::step_bytes)
      .def_property_readonly("per_op",
                             [](const PlanCost& c) {
                               std::vector<std::pair<std::vector<int64_t>, int64_t>> out;
                               for (const auto& o : c.per_op) out.push_back({o.input_elements, o.output_elements});
                               return out;
                             })
      .def_readonly("memory", &PlanCost::memory)
      .def_readonly("flops_per_device", &PlanCost::flops_per_device);

  m.def(
      "partition",
      [](const graph::Graph& g, int devices, const std::string& algorithm, int threads, double time_limit,
         int64_t duplication_budget, bool brute_force_replication, int refine_rounds, double refine_table_budget,
         std::function<void(const std::string&, int64_t, int64_t)> progress, std::vector<int> parts) {
        SearchOptions o;
        o.parts = std::move(parts);
        o.refine_rounds = refine_rounds;
        o.refine_table_budget = refine_table_budget;
        o.threads = threads;
        o.time_limit = time_limit;
        o.duplication_budget = duplication_budget;
        o.brute_force_replication = brute_force_replication;
        if (progress)
          o.progress = [progress](const std::string& what, int64_t done, int64_t total) {
            py::gil_scoped_acquire gil;
            progress(what, done, total);
          };
        Interruptible interruptible;  // Ctrl-C stops the search
        py::gil_scoped_release release;
        return tilewise::partition::partition(g, devices, algorithm, o);
      },
      py::arg("graph"), py::arg("devices"), py::arg("algorithm"), py::arg("threads") = 0, py::arg("time_limit") = 0.0,
      py::arg("duplication_budget") = 0, py::arg("brute_force_replication") = false,
      py::arg("refine_rounds") = SearchOptions{}.refine_rounds,
      py::arg("refine_table_budget") = SearchOptions{}.refine_table_budget, py::arg("progress") = nullptr,
      py::arg("parts") = std::vector<int>{},
      "Find a partition plan (`parts`: the steps' part counts, empty = factorize(devices)); runs without the GIL.");

  m.def(
      "evaluate_plan",
      [](const graph::Graph& g, const Plan& plan, int threads) {
        Interruptible interruptible;  // Ctrl-C stops the search
        py::gil_scoped_release release;
        return evaluate(g, plan, threads);
      },
      py::arg("graph"), py::arg("plan"), py::arg("threads") = 0, "Recompute a plan's bytes and memory.");
}

}  // namespace tilewise::bindings

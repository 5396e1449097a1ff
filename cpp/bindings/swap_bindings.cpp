// Python view of the swap stage (cpp/swap): problems, plans with their simulated times, the searches.
// Conversion only: tilewise.swap checks types and names before calling these; the core validates the
// rest and throws SwapError (Python _core.SwapError, a ValueError) or Infeasible (SwapInfeasibleError,
// a SwapError carrying `least_memory`). Planning and searching run without the GIL.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bindings/bindings.h"
#include "bindings/interruptible.h"
#include "swap/odswap.h"
#include "swap/planner.h"
#include "swap/search.h"
#include "swap/simulate.h"

namespace py = pybind11;

namespace tilewise::bindings {

namespace {

using swap::TimedPlan;
using TensorRow = std::tuple<std::string, int64_t, std::string, bool>;  // name, bytes, kind, live_out
using OpRow = std::tuple<std::string, std::vector<int>, std::vector<int>, double>;
using GenerationRow = std::tuple<int, int64_t, double, double, double, double>;

swap::TensorKind kind_of(const std::string& k) {
  if (k == "parameter") return swap::TensorKind::kParameter;
  if (k == "activation") return swap::TensorKind::kActivation;
  throw swap::SwapError("unknown tensor kind '" + k + "'; valid: parameter, activation");
}

py::array_t<double> array_of(const std::vector<double>& v) {
  return py::array_t<double>(static_cast<py::ssize_t>(v.size()), v.data());
}

swap::SearchOptions::Mode mode_of(const std::string& m) {
  if (m == "joint") return swap::SearchOptions::Mode::kJoint;
  if (m == "schedule_only") return swap::SearchOptions::Mode::kScheduleOnly;
  if (m == "pool_only") return swap::SearchOptions::Mode::kPoolOnly;
  throw swap::SwapError("unknown search mode '" + m + "'; valid: joint, schedule_only, pool_only");
}

}  // namespace

void bind_swap(py::module_& m) {
  static py::exception<swap::SwapError> swap_error(m, "SwapError", PyExc_ValueError);
  static py::exception<swap::Infeasible> infeasible(m, "SwapInfeasibleError", swap_error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const swap::Infeasible& e) {
      py::object error = py::reinterpret_borrow<py::object>(infeasible.ptr())(e.what());
      error.attr("least_memory") = e.least_memory();
      PyErr_SetObject(infeasible.ptr(), error.ptr());
    } catch (const swap::SwapError& e) {
      PyErr_SetString(swap_error.ptr(), e.what());
    }
  });

  py::class_<swap::Problem>(m, "SwapProblem", "A validated swap problem (cpp/swap/problem.h).")
      .def(py::init([](const std::vector<TensorRow>& tensors, const std::vector<OpRow>& ops, int64_t capacity,
                       double one_way, double both_ways) {
             std::vector<swap::Tensor> ts;
             for (const auto& [name, bytes, kind, live_out] : tensors)
               ts.push_back({name, bytes, kind_of(kind), live_out});
             std::vector<swap::Op> os;
             for (const auto& [name, inputs, outputs, seconds] : ops) os.push_back({name, inputs, outputs, seconds});
             Interruptible interruptible;  // Ctrl-C stops the search
             py::gil_scoped_release release;
             return swap::Problem::make(std::move(ts), std::move(os), capacity, {one_way, both_ways});
           }),
           py::arg("tensors"), py::arg("ops"), py::arg("capacity"), py::arg("one_way"), py::arg("both_ways"))
      .def_property_readonly("capacity", &swap::Problem::capacity)
      .def_property_readonly("sizes", &swap::Problem::sizes)
      .def_property_readonly("total_bytes", &swap::Problem::total_bytes)
      .def_property_readonly("total_seconds", &swap::Problem::total_seconds)
      .def_property_readonly("least_pool_bytes", [](const swap::Problem& p) { return p.least_pool().bytes; })
      .def_property_readonly("least_pool_cls", [](const swap::Problem& p) { return p.least_pool().cls; })
      .def("check_feasible", &swap::Problem::check_feasible)
      .def("given_order", &swap::given_order)
      .def("random_order",
           [](const swap::Problem& p, uint64_t seed) {
             std::mt19937_64 rng(seed);
             return swap::random_order(p, rng);
           },
           py::arg("seed"))
      .def("default_pool",
           [](const swap::Problem& p) {
             const swap::Pool pool = swap::default_pool(p);
             return std::make_pair(pool.cls, pool.cnt);
           })
      .def("least_counts", &swap::least_counts, py::arg("cls"))
      .def("pool_bytes",
           [](const swap::Problem& p, const std::vector<int>& cls, const std::vector<int64_t>& cnt) {
             return swap::pool_bytes(p, {cls, cnt});
           },
           py::arg("cls"), py::arg("cnt"));

  py::class_<TimedPlan>(m, "SwapPlan", "A swap plan and its simulated times (cpp/swap/plan.h, simulate.h).")
      .def_property_readonly("method", [](const TimedPlan& t) { return t.plan.method; })
      .def_property_readonly("schedule", [](const TimedPlan& t) { return t.plan.schedule; })
      .def_property_readonly("cls", [](const TimedPlan& t) { return t.plan.pool.cls; })
      .def_property_readonly("cnt", [](const TimedPlan& t) { return t.plan.pool.cnt; })
      .def_property_readonly("double_pass", [](const TimedPlan& t) { return t.plan.double_pass; })
      .def_property_readonly("memory_bytes", [](const TimedPlan& t) { return t.plan.memory_bytes; })
      .def_property_readonly("initial_residents", [](const TimedPlan& t) { return t.plan.initial_residents; })
      .def_property_readonly("objects",
                             [](const TimedPlan& t) {
                               std::vector<std::tuple<int64_t, int64_t, int>> out;
                               for (const auto& o : t.plan.objects) out.emplace_back(o.offset, o.bytes, o.size_class);
                               return out;
                             })
      .def_property_readonly("swap_ins",
                             [](const TimedPlan& t) {
                               std::vector<std::tuple<int, int, int>> out;
                               for (const auto& s : t.plan.swap_ins) out.emplace_back(s.tensor, s.object, s.position);
                               return out;
                             })
      .def_property_readonly("swap_outs",
                             [](const TimedPlan& t) {
                               std::vector<std::tuple<int, int, int>> out;
                               for (const auto& s : t.plan.swap_outs) out.emplace_back(s.tensor, s.object, s.after);
                               return out;
                             })
      .def_property_readonly("evictions",
                             [](const TimedPlan& t) {
                               std::vector<std::tuple<int, int, int, int>> out;
                               for (const auto& e : t.plan.evictions)
                                 out.emplace_back(e.victim, e.newcomer, e.position, e.swap_out);
                               return out;
                             })
      .def_property_readonly("stays",
                             [](const TimedPlan& t) {
                               std::vector<std::tuple<int, int>> out;
                               for (const auto& s : t.plan.stays) out.emplace_back(s.tensor, s.object);
                               return out;
                             })
      .def_property_readonly("makespan", [](const TimedPlan& t) { return t.times.makespan; })
      .def_property_readonly("op_start", [](const TimedPlan& t) { return array_of(t.times.op_start); })
      .def_property_readonly("op_end", [](const TimedPlan& t) { return array_of(t.times.op_end); })
      .def_property_readonly("in_start", [](const TimedPlan& t) { return array_of(t.times.in_start); })
      .def_property_readonly("in_end", [](const TimedPlan& t) { return array_of(t.times.in_end); })
      .def_property_readonly("out_start", [](const TimedPlan& t) { return array_of(t.times.out_start); })
      .def_property_readonly("out_end", [](const TimedPlan& t) { return array_of(t.times.out_end); })
      .def_property_readonly("stay_start", [](const TimedPlan& t) { return array_of(t.times.stay_start); })
      .def_property_readonly("stay_end", [](const TimedPlan& t) { return array_of(t.times.stay_end); })
      .def_property_readonly("stream_busy", [](const TimedPlan& t) { return t.times.stream_busy; })
      .def_property_readonly("peak_memory", [](const TimedPlan& t) { return t.times.peak_memory; })
      .def_property_readonly("peak_tensor_bytes", [](const TimedPlan& t) { return t.times.peak_tensor_bytes; });

  m.def(
      "swap_plan",
      [](const swap::Problem& p, const std::vector<int>& schedule, const std::vector<int>& cls,
         const std::vector<int64_t>& cnt, bool double_pass) {
        return swap::timed(p, swap::plan_swaps(p, schedule, {cls, cnt}, double_pass));
      },
      py::arg("problem"), py::arg("schedule"), py::arg("cls"), py::arg("cnt"), py::arg("double_pass"),
      py::call_guard<py::gil_scoped_release>(), "SwapAdvisor's swap plan for a schedule and pool, simulated.");
  m.def(
      "swap_ideal",
      [](const swap::Problem& p, const std::vector<int>& schedule) {
        return swap::timed(p, swap::ideal_plan(p, schedule));
      },
      py::arg("problem"), py::arg("schedule"), py::call_guard<py::gil_scoped_release>(),
      "The plan with unlimited memory (no swaps), simulated.");
  m.def(
      "swap_odswap",
      [](const swap::Problem& p, const std::vector<int>& schedule) {
        return swap::timed(p, swap::odswap_plan(p, schedule));
      },
      py::arg("problem"), py::arg("schedule"), py::call_guard<py::gil_scoped_release>(),
      "ODSwap's second iteration for a schedule, simulated.");

  py::class_<swap::SearchResult>(m, "SwapSearchResult", "What a swap search found (cpp/swap/search.h).")
      .def_readonly("schedule", &swap::SearchResult::schedule)
      .def_property_readonly("cls", [](const swap::SearchResult& r) { return r.pool.cls; })
      .def_property_readonly("cnt", [](const swap::SearchResult& r) { return r.pool.cnt; })
      .def_readonly("makespan", &swap::SearchResult::makespan)
      .def_readonly("evaluations", &swap::SearchResult::evaluations)
      .def_readonly("seconds", &swap::SearchResult::seconds)
      .def_readonly("stopped", &swap::SearchResult::stopped)
      .def_property_readonly("history", [](const swap::SearchResult& r) {
        std::vector<GenerationRow> out;
        for (const auto& g : r.history) out.emplace_back(g.index, g.evaluations, g.seconds, g.best, g.mean, g.worst);
        return out;
      });
  m.def(
      "swap_search",
      [](const swap::Problem& p, bool random, const std::string& mode, int population, double mutation,
         double temperature, bool elitism, bool double_pass, uint64_t seed, int threads, double time_limit,
         int patience, int generations, int64_t evaluations, std::function<void(const GenerationRow&)> progress) {
        swap::SearchOptions o;
        o.mode = mode_of(mode);
        o.population = population;
        o.mutation = mutation;
        o.temperature = temperature;
        o.elitism = elitism;
        o.double_pass = double_pass;
        o.seed = seed;
        o.threads = threads;
        o.time_limit = time_limit;
        o.patience = patience;
        o.generations = generations;
        o.evaluations = evaluations;
        if (progress)
          o.progress = [progress](const swap::Generation& g) {
            py::gil_scoped_acquire gil;
            progress(GenerationRow{g.index, g.evaluations, g.seconds, g.best, g.mean, g.worst});
          };
        Interruptible interruptible;  // Ctrl-C stops the search
        py::gil_scoped_release release;
        return random ? swap::random_search(p, o) : swap::genetic_search(p, o);
      },
      py::arg("problem"), py::arg("random"), py::arg("mode"), py::arg("population"), py::arg("mutation"),
      py::arg("temperature"), py::arg("elitism"), py::arg("double_pass"), py::arg("seed"), py::arg("threads"),
      py::arg("time_limit"), py::arg("patience"), py::arg("generations"), py::arg("evaluations"),
      py::arg("progress") = nullptr,
      "The genetic search (or, with random=True, random search) over schedules and pools; runs without the GIL. "
      "progress gets (generation, evaluations, seconds, best, mean, worst) after every generation.");
}

}  // namespace tilewise::bindings

// Python view of the program simulation (cpp/sim/program_sim.h): a plan's or an executable's
// programs timed on a cluster. Conversion only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bindings/bindings.h"
#include "exec/lowering.h"
#include "exec/share_timing.h"
#include "partition/plan.h"
#include "sim/program_sim.h"

namespace py = pybind11;

namespace tilewise::bindings {

using sim::Prediction;

namespace {

using Shares = std::vector<std::unordered_map<std::string, double>>;

sim::OpScales measured_ops(std::vector<double> seconds, std::vector<double> work, Shares shares) {
  if (seconds.size() != work.size() || (!shares.empty() && shares.size() != seconds.size()))
    throw std::invalid_argument("op times: " + std::to_string(seconds.size()) + " seconds but " +
                                std::to_string(work.size()) + " work figures and " + std::to_string(shares.size()) +
                                " share tables");
  return sim::OpScales{std::move(seconds), std::move(work), std::move(shares)};
}

}  // namespace

void bind_predict(py::module_& m) {
  py::class_<Prediction>(m, "Prediction", "One simulated step of per-device programs on a cluster.")
      .def_readonly("step_seconds", &Prediction::step_seconds)
      .def_readonly("compute_seconds", &Prediction::compute_seconds)
      .def_readonly("comm_seconds", &Prediction::comm_seconds)
      .def_readonly("idle_seconds", &Prediction::idle_seconds)
      .def_readonly("peak_memory", &Prediction::peak_memory)
      .def_readonly("intra_bytes", &Prediction::intra_bytes)
      .def_readonly("inter_bytes", &Prediction::inter_bytes)
      .def_readonly("host_bytes", &Prediction::host_bytes)
      .def_readonly("streams", &Prediction::streams)
      .def(
          "tasks",
          [](const Prediction& p) {
            py::list out;
            for (size_t i = 0; i < p.tasks.size(); ++i) {
              const auto& t = p.tasks[i];
              const auto& ti = p.info[i];
              out.append(py::make_tuple(t.stream, p.timeline.start[i], p.timeline.end[i], ti.device, ti.instr, ti.op,
                                        ti.kind, ti.kernel, ti.work, ti.bytes));
            }
            return out;
          },
          "Per task: (stream, start, end, device, instruction, op, kind, priced kind or link level, work, bytes).");

  m.def(
      "simulate_plan",
      [](const graph::Graph& g, const partition::Plan& plan, const sim::Cluster& cluster, std::vector<int> keep,
         std::vector<double> op_seconds, std::vector<double> op_work, Shares op_shares, bool keep_tasks) {
        const exec::Lowered low = exec::lower(g, plan, keep);
        const sim::OpScales s = measured_ops(std::move(op_seconds), std::move(op_work), std::move(op_shares));
        return sim::simulate_programs(g, low, cluster, s.seconds.empty() ? nullptr : &s, keep_tasks);
      },
      py::arg("graph"), py::arg("plan"), py::arg("cluster"), py::arg("keep"), py::arg("op_seconds"),
      py::arg("op_work"), py::arg("op_shares") = Shares{}, py::arg("keep_tasks") = true,
      py::call_guard<py::gil_scoped_release>(),
      "Lowers the plan (keeping `keep` after the step, as the executable does) and simulates one step of its "
      "programs on the cluster; `op_seconds`/`op_work`: per op, measured at full size on one device (empty: "
      "the kernel model alone; seconds <= 0: that op unmeasured); `op_shares`: per op, {share signature: "
      "its timed seconds over the whole op's} (empty: shares scaled by work).");
  m.def(
      "time_share_ratios",
      [](const graph::Graph& g, const partition::Plan& whole, const std::vector<const partition::Plan*>& plans,
         int repeats) {
        if (whole.devices != 1) throw std::invalid_argument("time_share_ratios: `whole` must be a one-device plan");
        const exec::Lowered whole_low = exec::lower(g, whole);
        std::vector<exec::Lowered> lows;
        lows.reserve(plans.size());
        std::vector<const exec::Lowered*> ptrs;
        for (const partition::Plan* plan : plans) ptrs.push_back(&lows.emplace_back(exec::lower(g, *plan)));
        std::vector<std::tuple<int, std::string, double>> out;
        for (auto& t : exec::time_share_ratios(g, whole_low, ptrs, repeats))
          out.emplace_back(t.op, std::move(t.signature), t.ratio);
        return out;
      },
      py::arg("graph"), py::arg("whole"), py::arg("plans"), py::arg("repeats") = 5,
      py::call_guard<py::gil_scoped_release>(),
      "Every distinct share of the plans' ops timed as its native kernel runs it alone from cold caches, in "
      "turns with the whole op of the one-device plan `whole` (exec::time_share_ratios): (op id, share "
      "signature, share seconds over the whole op's).");
  m.def(
      "predicted_peak_memory",
      [](const graph::Graph& g, const partition::Plan& plan, std::vector<int> keep) {
        const exec::Lowered low = exec::lower(g, plan, keep);
        std::vector<int64_t> out;
        for (const auto& p : low.programs) out.push_back(sim::program_peak_memory(p));
        return out;
      },
      py::arg("graph"), py::arg("plan"), py::arg("keep"), py::call_guard<py::gil_scoped_release>(),
      "Per device: the bytes its program holds at its peak (resident buffers + the arena's planned block).");
}

}  // namespace tilewise::bindings

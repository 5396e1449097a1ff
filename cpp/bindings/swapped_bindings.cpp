// Python view of swapped execution (cpp/exec/swap_runtime.h). A swap plan (cpp/swap/plan.h) becomes
// exec's SwapSchedule through bindings/swap_schedule.h (shared with the CUDA module).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <tuple>
#include <vector>

#include "bindings/bindings.h"
#include "bindings/interruptible.h"
#include "bindings/opaque_call.h"
#include "bindings/tensor_arrays.h"
#include "bindings/swap_schedule.h"
#include "exec/swap_runtime.h"
#include "sim/program_sim.h"
#include "swap/simulate.h"

namespace py = pybind11;

namespace tilewise::bindings {

namespace {

using exec::ExecError;

}  // namespace

void bind_swapped(py::module_& m) {
  m.def(
      "swap_buffers",
      [](const graph::Graph& g, const std::vector<int>& keep, const std::vector<std::pair<int, int>>& in_place) {
        const exec::Lowered low = exec::one_device_base(g, keep, in_place);
        const exec::Program& p = low.programs[0];
        std::vector<int> op_of(p.buffers.size(), -1);
        for (const auto& in : p.instrs)
          if (in.kind == exec::InstrKind::kAlloc && p.buffers[in.buffer].role == exec::BufferRole::kRegion)
            op_of[in.buffer] = in.op;
        std::vector<std::tuple<int, std::string, std::string, int, int, int64_t>> out;
        for (size_t b = 0; b < p.buffers.size(); ++b) {
          const auto& buf = p.buffers[b];
          out.emplace_back(static_cast<int>(b), buf.name, exec::role_name(buf.role), buf.tensor, op_of[b],
                           buf.bytes());
        }
        return out;
      },
      py::arg("graph"), py::arg("keep"), py::arg("in_place") = std::vector<std::pair<int, int>>{},
      "The buffers of the graph's one-device program, what a swap plan places: per buffer (id, name, role, tensor, "
      "op assembling it (regions; -1 otherwise), bytes).");

  py::class_<exec::SwapExecutable>(m, "SwapExecutable", "A graph run under a swap plan on one CPU device.")
      .def(py::init([](const graph::Graph& g, const swap::TimedPlan& plan, const std::vector<int>& buffer_of,
                       const std::vector<int>& op_of, int64_t capacity, const std::vector<int>& keep,
                       const std::vector<py::object>& opaque, double timeout,
                       const std::vector<std::pair<int, int>>& in_place) {
             return std::make_unique<exec::SwapExecutable>(g, schedule_of(plan.plan, buffer_of, op_of), capacity, keep,
                                                           opaque_calls(opaque), timeout, in_place);
           }),
           py::arg("graph"), py::arg("plan"), py::arg("buffer_of"), py::arg("op_of"), py::arg("capacity") = 0,
           py::arg("keep") = std::vector<int>{}, py::arg("opaque") = std::vector<py::object>{},
           py::arg("timeout") = 300.0, py::arg("in_place") = std::vector<std::pair<int, int>>{},
           py::keep_alive<1, 2>())
      .def("set_tensor",
           [](exec::SwapExecutable& e, int tensor, const py::array& a) {
             py::array in = bindings::tensor_input(e.graph(), tensor, a);
             e.set_tensor(tensor, in.data());
           })
      .def("get_tensor",
           [](const exec::SwapExecutable& e, int tensor, const std::vector<int64_t>&) {
             py::array out = bindings::tensor_output(e.graph(), tensor);
             e.read_tensor(tensor, out.mutable_data());
             return out;
           })
      .def("step", &exec::SwapExecutable::step, py::call_guard<Interruptible, py::gil_scoped_release>())
      .def_property_readonly("stats", &exec::SwapExecutable::stats, py::return_value_policy::copy)
      .def("program", &exec::SwapExecutable::program, py::arg("device"), py::return_value_policy::reference_internal)
      .def("set_profile", &exec::SwapExecutable::set_profile, py::arg("on"))
      .def_property_readonly("devices", &exec::SwapExecutable::devices)
      .def_property_readonly("memory_bytes", [](const exec::SwapExecutable& e) { return e.lowered().schedule.memory_bytes; })
      .def_property_readonly("swap_in_bytes", [](const exec::SwapExecutable& e) { return e.lowered().swap_in_bytes; })
      .def_property_readonly("swap_out_bytes", [](const exec::SwapExecutable& e) { return e.lowered().swap_out_bytes; });

  m.def(
      "simulate_swapped",
      [](const graph::Graph& g, const exec::SwapExecutable& e, const sim::Cluster& cluster,
         std::vector<double> op_seconds, std::vector<double> op_work, bool keep_tasks) {
        if (op_seconds.size() != op_work.size())
          throw std::invalid_argument("op times: " + std::to_string(op_seconds.size()) + " seconds but " +
                                      std::to_string(op_work.size()) + " work figures");
        const sim::OpScales s{std::move(op_seconds), std::move(op_work), {}};  // one device: no shares to time
        return sim::simulate_programs(g, e.lowered().low, cluster, s.seconds.empty() ? nullptr : &s, keep_tasks);
      },
      py::arg("graph"), py::arg("executable"), py::arg("cluster"), py::arg("op_seconds"), py::arg("op_work"),
      py::arg("keep_tasks") = true, py::call_guard<py::gil_scoped_release>(),
      "One step of a swapped executable's program simulated on the cluster (swaps on its host link).");
}

}  // namespace tilewise::bindings

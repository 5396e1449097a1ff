// Python view of the CPU runtime (cpp/exec). Conversion only: arrays travel as NumPy float32.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "bindings/interruptible.h"
#include "bindings/exec_errors.h"
#include "bindings/opaque_call.h"
#include "bindings/tensor_arrays.h"
#include "exec/link_probe.h"
#include "exec/runtime.h"
#include "partition/plan.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::exec;

void bind_exec(py::module_& m) {
  static py::exception<OutOfMemory> oom(m, "OutOfMemory", PyExc_MemoryError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemory& e) {
      raise_out_of_memory(oom, e);
    }
  });

  static py::exception<CommunicationError> comm_error(m, "CommunicationError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CommunicationError& e) {
      raise_communication_error(comm_error, e);
    }
  });

  py::class_<Program>(m, "Program", "One device's step: instructions on named streams (cpp/exec/program.h).")
      .def_readonly("device", &Program::device)
      .def_readonly("devices", &Program::devices)
      .def_readonly("streams", &Program::streams)
      .def("text", &Program::text)
      .def("to_json", &Program::to_json)
      .def_property_readonly("bytes_sent", &Program::bytes_sent)
      .def_property_readonly("bytes_received", &Program::bytes_received)
      .def_property_readonly("flops", &Program::flops)
      .def("__len__", [](const Program& p) { return p.instrs.size(); })
      .def("instructions",
           [](const Program& p) {
             // (kind, stream, op name or "", text, bytes, flops) per instruction
             py::list out;
             for (const Instr& in : p.instrs)
               out.append(py::make_tuple(kind_name(in.kind), p.streams[in.stream],
                                         in.op >= 0 ? p.op_names[in.op] : std::string(), p.instr_text(in), in.bytes,
                                         in.flops));
             return out;
           })
      .def("__repr__", [](const Program& p) {
        return "<Program of device " + std::to_string(p.device) + ": " + std::to_string(p.instrs.size()) +
               " instructions>";
      });

  m.def(
      "predicted_traffic",
      [](const graph::Graph& g, const partition::Plan& plan) { return predicted_traffic(g, plan); },
      py::arg("graph"), py::arg("plan"),
      "Bytes each device sends and receives in a step under the plan: (sent, received), per device.");

  m.def("mailbox_one_way_seconds", &mailbox_one_way_seconds, py::arg("bytes"), py::arg("rounds"), py::arg("repeats"),
        py::call_guard<py::gil_scoped_release>(),
        "One-way seconds per message of `bytes` between two in-process devices (ping-pong, median of runs).");
  m.def("box_copy_seconds", &box_copy_seconds, py::arg("bytes"), py::arg("strided"), py::arg("combine"),
        py::arg("repeats"), py::arg("run") = 128, py::arg("cold") = false, py::arg("warm_source") = false,
        py::call_guard<py::gil_scoped_release>(),
        "Seconds of one box copy (or combine) of `bytes`: contiguous, or runs of `run` floats (half the columns "
        "of rows of 2 * run); `cold`: both buffers evicted from the caches before each; `warm_source`: the "
        "source read back into them after that.");
  m.def("parallel_copy_rate", &parallel_copy_rate, py::arg("threads"), py::arg("bytes"), py::arg("repeats"),
        py::call_guard<py::gil_scoped_release>(),
        "Bytes per second (read + written) of `threads` threads copying their own buffers at once.");

  py::class_<RunStats>(m, "RunStats", "What the last step measured.")
      .def_readonly("bytes_moved", &RunStats::bytes_moved)
      .def_readonly("bytes_received", &RunStats::bytes_received)
      .def_readonly("bytes_sent", &RunStats::bytes_sent)
      .def_readonly("scratch_bytes", &RunStats::scratch_bytes)
      .def_readonly("undo_bytes", &RunStats::undo_bytes)
      .def_readonly("device_seconds", &RunStats::device_seconds)
      .def_readonly("message_bytes", &RunStats::message_bytes)
      .def_readonly("profile", &RunStats::profile)
      .def_readonly("peak_bytes", &RunStats::peak_bytes)
      .def_readonly("op_seconds", &RunStats::op_seconds)
      .def_property_readonly("op_native", [](const RunStats& s) { return std::vector<bool>(s.op_native.begin(), s.op_native.end()); })
      .def_readonly("step_seconds", &RunStats::step_seconds)
      .def_readonly("swapped_in_bytes", &RunStats::swapped_in_bytes)
      .def_readonly("swapped_out_bytes", &RunStats::swapped_out_bytes)
      .def_readonly("pool_peak_bytes", &RunStats::pool_peak_bytes)
      .def_readonly("steps", &RunStats::steps);

  py::class_<Executable>(m, "Executable", "A partition plan lowered for CPU devices (worker threads).")
      .def(py::init([](const graph::Graph& g, const partition::Plan& plan, int64_t capacity,
                       const std::vector<int>& keep, const std::vector<py::object>& opaque, double timeout) {
             // Per op: None, or fn(function id, [float64 arrays]) -> array, called with the GIL.
             return std::make_unique<Executable>(g, plan, capacity, keep, opaque_calls(opaque), timeout);
           }),
           py::arg("graph"), py::arg("plan"), py::arg("capacity") = 0, py::arg("keep") = std::vector<int>{},
           py::arg("opaque") = std::vector<py::object>{}, py::arg("timeout") = 300.0, py::keep_alive<1, 2>())
      .def("set_tensor",
           [](Executable& e, int tensor, const py::array& a) {
             py::array in = tensor_input(e.graph(), tensor, a);
             e.set_tensor(tensor, in.data());
           })
      .def("get_tensor",
           [](const Executable& e, int tensor, const std::vector<int64_t>&) {
             py::array out = tensor_output(e.graph(), tensor);
             e.read_tensor(tensor, out.mutable_data());
             return out;
           }, "The tensor in its dtype (the shape argument is the tensor's own, kept for callers).")
      .def("step", &Executable::step, py::call_guard<Interruptible, py::gil_scoped_release>())
      .def_property_readonly("stats", &Executable::stats, py::return_value_policy::copy)
      .def("program", &Executable::program, py::arg("device"), py::return_value_policy::reference_internal)
      .def("set_profile", &Executable::set_profile, py::arg("on"))
      .def("set_atomic", &Executable::set_atomic, py::arg("on"))
      .def("set_check_finite", &Executable::set_check_finite, py::arg("on"))
      .def("restore_updates", &Executable::restore_updates)
      .def_property_readonly("devices", &Executable::devices);
}

}  // namespace tilewise::bindings

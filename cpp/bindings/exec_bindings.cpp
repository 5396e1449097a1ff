// Python view of the CPU runtime (cpp/exec). Conversion only: arrays travel as NumPy float32.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/bindings.h"
#include "exec/runtime.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::exec;

void bind_exec(py::module_& m) {
  static py::exception<OutOfMemory> oom(m, "OutOfMemory", PyExc_MemoryError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OutOfMemory& e) {
      py::object err = py::handle(oom.ptr())(e.what());
      err.attr("device") = e.device;
      err.attr("tensor") = e.tensor;
      err.attr("bytes") = e.bytes;
      err.attr("in_use") = e.in_use;
      err.attr("capacity") = e.capacity;
      PyErr_SetObject(oom.ptr(), err.ptr());
    }
  });

  py::class_<RunStats>(m, "RunStats", "What the last step measured.")
      .def_readonly("bytes_moved", &RunStats::bytes_moved)
      .def_readonly("bytes_received", &RunStats::bytes_received)
      .def_readonly("peak_bytes", &RunStats::peak_bytes)
      .def_readonly("op_seconds", &RunStats::op_seconds)
      .def_property_readonly("op_native", [](const RunStats& s) { return std::vector<bool>(s.op_native.begin(), s.op_native.end()); })
      .def_readonly("step_seconds", &RunStats::step_seconds)
      .def_readonly("steps", &RunStats::steps);

  py::class_<Executable>(m, "Executable", "A partition plan lowered for CPU devices (worker threads).")
      .def(py::init<const graph::Graph&, const partition::Plan&, int64_t, const std::vector<int>&>(), py::arg("graph"),
           py::arg("plan"), py::arg("capacity") = 0, py::arg("keep") = std::vector<int>{}, py::keep_alive<1, 2>())
      .def("set_tensor",
           [](Executable& e, int tensor, py::array_t<float, py::array::c_style | py::array::forcecast> a) {
             e.set_tensor(tensor, a.data());
           })
      .def("get_tensor",
           [](const Executable& e, int tensor, const std::vector<int64_t>& shape) {
             auto v = e.get_tensor(tensor);
             py::array_t<float> out(shape);
             std::copy(v.begin(), v.end(), out.mutable_data());
             return out;
           })
      .def("step", &Executable::step, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("stats", &Executable::stats, py::return_value_policy::copy)
      .def_property_readonly("devices", &Executable::devices);
}

}  // namespace tilewise::bindings

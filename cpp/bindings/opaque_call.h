// A Python callable fn(function id, [float64 arrays]) -> array as the interpreter's OpaqueCall:
// called from any thread, it takes the GIL for the call.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <vector>

#include "tdl/interpreter.h"

namespace tilewise::bindings {

inline tdl::OpaqueCall opaque_from_python(const pybind11::object& fn_object) {
  namespace py = pybind11;
  auto fn = std::make_shared<py::object>(fn_object);
  return [fn](int id, const std::vector<tdl::Array>& args) {
    py::gil_scoped_acquire gil;
    py::list py_args;
    for (const auto& a : args) {
      py::array_t<double> arr(a.shape);
      std::copy(a.data.begin(), a.data.end(), arr.mutable_data());
      py_args.append(arr);
    }
    auto r = (*fn)(id, py_args).cast<py::array_t<double, py::array::c_style | py::array::forcecast>>();
    tdl::Array res;
    res.shape.assign(r.shape(), r.shape() + r.ndim());
    res.data.assign(r.data(), r.data() + r.size());
    return res;
  };
}

/// Per op: None, or a Python callable for its opaque functions (as the executables take them).
inline std::vector<tdl::OpaqueCall> opaque_calls(const std::vector<pybind11::object>& per_op) {
  std::vector<tdl::OpaqueCall> calls(per_op.size());
  for (size_t i = 0; i < per_op.size(); ++i)
    if (!per_op[i].is_none()) calls[i] = opaque_from_python(per_op[i]);
  return calls;
}

}  // namespace tilewise::bindings

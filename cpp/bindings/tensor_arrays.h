// NumPy arrays in and out of the executables' tensors, in each tensor's own dtype (float32 values,
// int64/int32 ids and labels, bool masks): one place that maps dtypes and checks what is given,
// so a wrong dtype or size is an ExecError, never a read past the array's end.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "exec/errors.h"
#include "graph/graph.h"

namespace tilewise::bindings {

/// The NumPy dtype of a graph dtype the runtime holds.
inline pybind11::dtype numpy_dtype(const std::string& dtype) {
  namespace py = pybind11;
  if (dtype == "float32") return py::dtype::of<float>();
  if (dtype == "int64") return py::dtype::of<int64_t>();
  if (dtype == "int32") return py::dtype::of<int32_t>();
  if (dtype == "bool") return py::dtype::of<bool>();
  throw exec::ExecError("the runtime holds float32, int64, int32 and bool tensors, not " + dtype);
}

/// `a` as a C-contiguous array of tensor `tensor`'s dtype and element count (converted when the
/// values allow it: NumPy's same-kind casting; anything else is an ExecError naming the tensor).
inline pybind11::array tensor_input(const graph::Graph& g, int tensor, const pybind11::array& a) {
  namespace py = pybind11;
  if (tensor < 0 || tensor >= static_cast<int>(g.tensors().size()))
    throw exec::ExecError("tensor id " + std::to_string(tensor) + " is not a tensor of the graph");
  const auto& t = g.tensor(tensor);
  const py::dtype want = numpy_dtype(t.dtype);
  py::array out = a;
  if (!a.dtype().is(want)) {
    py::module_ np = py::module_::import("numpy");
    if (!np.attr("can_cast")(a.dtype(), want, "same_kind").cast<bool>())
      throw exec::ExecError("'" + t.name + "' is " + t.dtype + "; got an array of " +
                            py::str(a.dtype()).cast<std::string>());
    out = a.attr("astype")(want);
  }
  out = py::array::ensure(out, py::array::c_style);
  if (out.size() != t.elements())
    throw exec::ExecError("'" + t.name + "' has " + std::to_string(t.elements()) + " elements; got an array of " +
                          std::to_string(out.size()));
  return out;
}

/// A new array of tensor `tensor`'s dtype and shape for a read_tensor to fill.
inline pybind11::array tensor_output(const graph::Graph& g, int tensor) {
  const auto& t = g.tensor(tensor);
  return pybind11::array(numpy_dtype(t.dtype), std::vector<pybind11::ssize_t>(t.shape.begin(), t.shape.end()));
}

}  // namespace tilewise::bindings

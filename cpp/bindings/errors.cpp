// Maps the core's typed C++ exceptions to Python exception types (ValueError subclasses).
#include <pybind11/pybind11.h>

#include "bindings/bindings.h"
#include "exec/errors.h"
#include "graph/graph.h"
#include "kernels/cpu/tile_kernels.h"
#include "tdl/errors.h"

namespace py = pybind11;

namespace tilewise::bindings {

void bind_errors(py::module_& m) {
  py::register_exception<TDLError>(m, "TDLError", PyExc_ValueError);
  py::register_exception<ShapeError>(m, "ShapeError", PyExc_ValueError);
  py::register_exception<graph::GraphError>(m, "GraphError", PyExc_ValueError);
  // A ValueError, as PlanError (which the runtime raised before it had its own type) is.
  static py::exception<exec::ExecError> exec_error(m, "ExecError", PyExc_ValueError);
  // The CUDA backend's failures (tilewise._cuda raises it; _core only defines it, so that
  // tw.CudaError exists in every build).
  static py::exception<exec::CudaError> cuda_error(m, "CudaError", exec_error.ptr());
  // check_finite's finding: an ExecError with the op, tensor, device and counts as attributes.
  static py::exception<exec::NumericalError> numerical_error(m, "NumericalError", exec_error.ptr());
  // A value a kernel cannot take (an id outside the table) fails the step as an ExecError too.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const exec::CudaError& e) {
      py::object err = py::handle(cuda_error.ptr())(e.what());  // an instance, to carry the fields
      err.attr("call") = e.call;
      err.attr("name") = e.name;
      PyErr_SetObject(cuda_error.ptr(), err.ptr());
    } catch (const exec::NumericalError& e) {
      py::object err = py::handle(numerical_error.ptr())(e.what());
      err.attr("op") = e.op;
      err.attr("tensor") = e.tensor;
      err.attr("device") = e.device;
      err.attr("nan") = e.nan;
      err.attr("inf") = e.inf;
      PyErr_SetObject(numerical_error.ptr(), err.ptr());
    } catch (const exec::ExecError& e) {
      PyErr_SetString(exec_error.ptr(), e.what());
    } catch (const kernels::InvalidInput& e) {
      PyErr_SetString(exec_error.ptr(), e.what());
    }
  });
}

}  // namespace tilewise::bindings

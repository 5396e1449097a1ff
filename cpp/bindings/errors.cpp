// Maps the core's typed C++ exceptions to Python exception types (ValueError subclasses).
#include <pybind11/pybind11.h>

#include "bindings/bindings.h"
#include "exec/errors.h"
#include "graph/graph.h"
#include "tdl/errors.h"

namespace py = pybind11;

namespace tilewise::bindings {

void bind_errors(py::module_& m) {
  py::register_exception<TDLError>(m, "TDLError", PyExc_ValueError);
  py::register_exception<ShapeError>(m, "ShapeError", PyExc_ValueError);
  py::register_exception<graph::GraphError>(m, "GraphError", PyExc_ValueError);
  // A ValueError, as PlanError (which the runtime raised before it had its own type) is.
  py::register_exception<exec::ExecError>(m, "ExecError", PyExc_ValueError);
}

}  // namespace tilewise::bindings

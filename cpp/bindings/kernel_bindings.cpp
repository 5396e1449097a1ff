// Python view of the native kernel table (cpp/kernels/cpu/tile_kernels.h): which kernels exist and
// the roles of their variables, so that `@tw.op(kernel=...)` is checked where it is written.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bindings/bindings.h"
#include "kernels/cpu/tile_kernels.h"

namespace py = pybind11;

namespace tilewise::bindings {

void bind_kernels(py::module_& m) {
  m.def(
      "native_kernels",
      [] {
        std::vector<std::pair<std::string, std::vector<std::string>>> out;
        for (const auto& k : kernels::native_kernels()) out.emplace_back(k.name, k.roles);
        return out;
      },
      "[(kernel name, roles of its variables in order; a role ending in '*' takes zero or more)].");
  m.def(
      "native_kernel_kinds",
      [] {
        std::map<std::string, std::string> out;
        for (const auto& k : kernels::native_kernels()) out[k.name] = k.kind;
        return out;
      },
      "{kernel name: its kind for the time model: gemm, conv, elementwise, reduction, norm, layout, embedding}.");
}

}  // namespace tilewise::bindings

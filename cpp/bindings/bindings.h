// Entry points of the pybind11 module, one per stage; each lives in its own file.
#pragma once
#include <pybind11/pybind11.h>

namespace tilewise::bindings {
void bind_errors(pybind11::module_& m);
void bind_tdl(pybind11::module_& m);
void bind_graph(pybind11::module_& m);
void bind_coarsen(pybind11::module_& m);
void bind_build_info(pybind11::module_& m);
void bind_cost(pybind11::module_& m);
void bind_partition(pybind11::module_& m);
void bind_pareto(pybind11::module_& m);
void bind_kernels(pybind11::module_& m);
void bind_exec(pybind11::module_& m);
void bind_cluster(pybind11::module_& m);
void bind_predict(pybind11::module_& m);
void bind_simulator(pybind11::module_& m);
void bind_swap(pybind11::module_& m);
void bind_swapped(pybind11::module_& m);
void bind_frontier(pybind11::module_& m);
}  // namespace tilewise::bindings

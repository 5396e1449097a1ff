// The extension module tilewise._core: conversion only, no logic (STYLE.md).
#include "bindings/bindings.h"
#include "bindings/interruptible.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "tilewise C++ core";
  tilewise::bindings::bind_errors(m);
  tilewise::bindings::bind_tdl(m);
  tilewise::bindings::bind_graph(m);
  tilewise::bindings::bind_coarsen(m);
  tilewise::bindings::bind_build_info(m);
  tilewise::bindings::bind_cost(m);
  tilewise::bindings::bind_partition(m);
  tilewise::bindings::bind_pareto(m);
  tilewise::bindings::bind_kernels(m);
  tilewise::bindings::bind_exec(m);
  tilewise::bindings::bind_cluster(m);
  tilewise::bindings::bind_predict(m);
  tilewise::bindings::bind_simulator(m);
  tilewise::bindings::bind_swap(m);
  tilewise::bindings::bind_swapped(m);
  tilewise::bindings::bind_frontier(m);
  // Last: translators registered later are tried first, and Interrupted is a std::runtime_error.
  tilewise::bindings::bind_interrupt(m);
}

// Python view of the discrete-event simulator (cpp/sim/simulator.h). Tasks arrive as columns (NumPy
// arrays, lists in CSR form) rather than one object each: a plan's programs hold 10^5 tasks and
// building as many Python objects would cost more than simulating them. Conversion only;
// tilewise.sim.simulate validates the tasks before calling this, the core re-checks every value.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bindings/bindings.h"
#include "sim/simulator.h"

namespace py = pybind11;

namespace tilewise::bindings {

namespace {

template <typename T>
using Column = py::array_t<T, py::array::c_style | py::array::forcecast>;

template <typename T>
const T* column(const Column<T>& a, size_t n, const char* name) {
  if (a.ndim() != 1 || static_cast<size_t>(a.shape(0)) != n)
    throw std::invalid_argument(std::string(name) + " must be a 1-d array of " + std::to_string(n) +
                                " values, one per task");
  return a.data();
}

/// Row i of a CSR list: indices[offsets[i] .. offsets[i+1]), bounds checked (a bad offset would
/// read outside the array).
std::vector<int> row(const int64_t* offsets, const Column<int32_t>& indices, size_t i, const char* name) {
  const int64_t lo = offsets[i], hi = offsets[i + 1];
  if (lo < 0 || hi < lo || hi > indices.shape(0))
    throw std::invalid_argument(std::string(name) + " offsets must ascend from 0 to the length of the indices");
  return std::vector<int>(indices.data() + lo, indices.data() + hi);
}

/// Copied out: a Timeline is small beside the tasks, and NumPy owns what Python keeps.
template <typename T>
py::array_t<T> array_of(const std::vector<T>& v) {
  return py::array_t<T>(static_cast<py::ssize_t>(v.size()), v.data());
}

}  // namespace

void bind_simulator(py::module_& m) {
  py::class_<sim::Timeline>(m, "SimTimeline", "When each task ran (cpp/sim/simulator.h).")
      .def_readonly("makespan", &sim::Timeline::makespan)
      .def_property_readonly("start", [](const sim::Timeline& t) { return array_of(t.start); })
      .def_property_readonly("end", [](const sim::Timeline& t) { return array_of(t.end); })
      .def_property_readonly("stream_busy", [](const sim::Timeline& t) { return array_of(t.stream_busy); })
      .def_property_readonly("peak_memory", [](const sim::Timeline& t) { return array_of(t.peak_memory); });
  m.def(
      "simulate_tasks",
      [](const std::vector<std::string>& names, const Column<int32_t>& stream, const Column<double>& seconds,
         const Column<double>& work, const Column<double>& max_rate, const Column<int64_t>& resource_offsets,
         const Column<int32_t>& resource_indices, const Column<int64_t>& after_offsets,
         const Column<int32_t>& after_indices, const Column<int64_t>& memory, const Column<int32_t>& memory_pool,
         int streams, const std::vector<std::string>& resource_names, const std::vector<double>& capacities) {
        const size_t n = names.size();
        const int32_t* st = column(stream, n, "stream");
        const double* sec = column(seconds, n, "seconds");
        const double* wk = column(work, n, "work");
        const double* mr = column(max_rate, n, "max_rate");
        const int64_t* ro = column(resource_offsets, n + 1, "resource_offsets");
        const int64_t* ao = column(after_offsets, n + 1, "after_offsets");
        const int64_t* mem = column(memory, n, "memory");
        const int32_t* pool = column(memory_pool, n, "memory_pool");
        if (resource_names.size() != capacities.size())
          throw std::invalid_argument("resource_names and capacities differ in length");
        std::vector<sim::Task> tasks(n);
        for (size_t i = 0; i < n; ++i) {
          sim::Task& t = tasks[i];
          t.name = names[i];
          t.stream = st[i];
          t.seconds = sec[i];
          t.work = wk[i];
          t.max_rate = mr[i];
          t.resources = row(ro, resource_indices, i, "resource");
          t.after = row(ao, after_indices, i, "after");
          t.memory = mem[i];
          t.memory_pool = pool[i];
        }
        std::vector<sim::Resource> resources(capacities.size());
        for (size_t r = 0; r < capacities.size(); ++r) resources[r] = {resource_names[r], capacities[r]};
        return sim::simulate(tasks, streams, resources);
      },
      py::arg("names"), py::arg("stream"), py::arg("seconds"), py::arg("work"), py::arg("max_rate"),
      py::arg("resource_offsets"), py::arg("resource_indices"), py::arg("after_offsets"), py::arg("after_indices"),
      py::arg("memory"), py::arg("memory_pool"), py::arg("streams"), py::arg("resource_names"),
      py::arg("capacities"), py::call_guard<py::gil_scoped_release>(),
      "Simulate tasks given as columns (CSR lists for resources and after); runs without the GIL. "
      "std::invalid_argument (bad values, a dependency cycle) arrives as ValueError.");
}

}  // namespace tilewise::bindings

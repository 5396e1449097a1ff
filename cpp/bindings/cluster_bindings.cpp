// Python view of the cluster description (cpp/sim/cluster.h): profiles, kernel rates, devices, links
// and clusters with read/write fields. Conversion only; tilewise.sim.cluster validates what users
// give before it reaches these, and std::invalid_argument from validate() arrives as ValueError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings/bindings.h"
#include "sim/cluster.h"

namespace py = pybind11;

namespace tilewise::bindings {

using namespace tilewise::sim;

void bind_cluster(py::module_& m) {
  m.def("kernel_kinds", &kernel_kinds, "The kernel kinds a device profile prices, in table order.");
  m.def("cached_kernel_kinds", &cached_kernel_kinds,
        "Kinds a profile may add: copies, combines and sends from a source in the last-level cache.");

  py::class_<Profile>(m, "Profile", "A quantity measured at sizes, interpolated linearly in log2(size).")
      .def(py::init<>())
      .def(py::init([](std::vector<double> sizes, std::vector<double> values) {
             return Profile{std::move(sizes), std::move(values)};
           }),
           py::arg("sizes"), py::arg("values"))
      .def_readwrite("sizes", &Profile::sizes, "Ascending positive sizes (a copy: assign, do not append).")
      .def_readwrite("values", &Profile::values, "The value at each size (a copy: assign, do not append).")
      .def("at", &Profile::at, py::arg("size"), "The value at `size`, clamped to the end points outside them.")
      .def("empty", &Profile::empty)
      .def("validate", &Profile::validate, py::arg("what"), "ValueError naming `what` when out of range.");

  py::class_<KernelRate>(m, "KernelRate", "Work per second of one kernel kind, plus a per-call overhead.")
      .def(py::init<>())
      .def(py::init([](Profile rate, double overhead) { return KernelRate{std::move(rate), overhead}; }),
           py::arg("rate"), py::arg("overhead") = 0.0)
      .def_readwrite("rate", &KernelRate::rate)
      .def_readwrite("overhead", &KernelRate::overhead);

  py::class_<DeviceProfile>(m, "DeviceProfile", "One device: its memory and what its kernels cost.")
      .def(py::init<>())
      .def_readwrite("name", &DeviceProfile::name)
      .def_readwrite("memory", &DeviceProfile::memory)
      .def_readwrite("kernels", &DeviceProfile::kernels, "Kind -> KernelRate (a copy: assign the whole dict).")
      .def_readwrite("concurrent_streams", &DeviceProfile::concurrent_streams)
      .def("kernel_seconds", &DeviceProfile::kernel_seconds, py::arg("kind"), py::arg("work"));

  py::class_<Link>(m, "Link", "A link level: bandwidth profile, latency, duplex and sharing.")
      .def(py::init<>())
      .def_readwrite("name", &Link::name)
      .def_readwrite("bandwidth", &Link::bandwidth)
      .def_readwrite("latency", &Link::latency)
      .def_readwrite("duplex", &Link::duplex)
      .def_readwrite("duplex_bandwidth", &Link::duplex_bandwidth)
      .def_readwrite("shared", &Link::shared)
      .def("transfer_seconds", &Link::transfer_seconds, py::arg("bytes"));

  py::class_<Cluster>(m, "Cluster", "Devices grouped into machines and the links between them.")
      .def(py::init<>())
      .def_readwrite("name", &Cluster::name)
      .def_readwrite("devices", &Cluster::devices)
      .def_readwrite("devices_per_machine", &Cluster::devices_per_machine)
      .def_readwrite("concurrent_devices", &Cluster::concurrent_devices)
      .def_readwrite("memory_concurrency", &Cluster::memory_concurrency)
      .def_readwrite("cache_bytes", &Cluster::cache_bytes)
      .def_readwrite("device", &Cluster::device)
      .def_readwrite("intra", &Cluster::intra)
      .def_readwrite("inter", &Cluster::inter)
      .def_readwrite("host", &Cluster::host)
      .def("machines", &Cluster::machines)
      .def("machine_of", &Cluster::machine_of, py::arg("device"))
      .def("link", &Cluster::link, py::arg("a"), py::arg("b"), py::return_value_policy::reference_internal)
      .def("validate", &Cluster::validate);
}

}  // namespace tilewise::bindings

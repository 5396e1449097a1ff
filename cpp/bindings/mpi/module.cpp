// tilewise._mpi: the MPI executor (cpp/exec/mpi), its own extension module, built only when CMake
// finds MPI, so that `import tilewise` (tilewise._core) never loads libmpi. Graph, Plan, Program and
// RunStats are _core's pybind11 types (shared across the two modules); errors are raised as
// _core's exception types. Conversion only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "bindings/exec_errors.h"
#include "bindings/opaque_call.h"
#include "bindings/tensor_arrays.h"
#include "exec/arena.h"
#include "exec/errors.h"
#include "exec/mpi/mpi_executable.h"
#include "kernels/cpu/tile_kernels.h"
#include "partition/plan.h"

namespace py = pybind11;
using namespace tilewise;
using exec::mpi::MpiExecutable;

PYBIND11_MODULE(_mpi, m) {
  m.doc() = "The MPI executor of tilewise: one rank per device (cpp/exec/mpi).";
  py::module_ core = py::module_::import("tilewise._core");  // registers Graph, Plan, Program, RunStats
  // This module's copies of the exception types map onto _core's Python exceptions.
  static py::object exec_error = core.attr("ExecError");
  static py::object comm_error = core.attr("CommunicationError");
  static py::object oom = core.attr("OutOfMemory");
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const exec::CommunicationError& e) {
      tilewise::bindings::raise_communication_error(comm_error, e);
    } catch (const exec::OutOfMemory& e) {
      tilewise::bindings::raise_out_of_memory(oom, e);
    } catch (const exec::ExecError& e) {
      PyErr_SetString(exec_error.ptr(), e.what());
    } catch (const kernels::InvalidInput& e) {
      PyErr_SetString(exec_error.ptr(), e.what());
    }
  });

  m.def("init", &exec::mpi::init, "MPI_Init_thread (once per process).");
  m.def("finalize", &exec::mpi::finalize, "MPI_Finalize (once, at exit).");
  m.def("rank", &exec::mpi::rank, "This process's rank in MPI_COMM_WORLD (initialises MPI).");
  m.def("size", &exec::mpi::size, "The number of ranks in MPI_COMM_WORLD (initialises MPI).");
  m.def(
      "broadcast_bytes",
      [](const py::bytes& data, int root) {
        std::string in = data;
        std::string out;
        {
          py::gil_scoped_release release;
          out = exec::mpi::broadcast_bytes(in, root);
        }
        return py::bytes(out);
      },
      py::arg("data"), py::arg("root") = 0, "Root's bytes on every rank (MPI_Bcast; collective).");
  m.def(
      "gather_bytes",
      [](const py::bytes& data, int root) -> py::object {
        std::string in = data;
        std::vector<std::string> all;
        {
          py::gil_scoped_release release;
          all = exec::mpi::gather_bytes(in, root);
        }
        if (exec::mpi::rank() != root) return py::none();
        py::list out;
        for (const auto& b : all) out.append(py::bytes(b));
        return out;
      },
      py::arg("data"), py::arg("root") = 0,
      "Every rank's bytes as a list in rank order on root, None on the other ranks (MPI_Gatherv; collective).");
  m.def("all_ok", &exec::mpi::all_ok, py::arg("ok"), py::call_guard<py::gil_scoped_release>(),
        "Whether every rank passed ok=True (MPI_Allreduce, logical and; collective).");
  m.def("one_way_seconds", &exec::mpi::one_way_seconds, py::arg("bytes"), py::arg("rounds"), py::arg("repeats"),
        py::call_guard<py::gil_scoped_release>(),
        "Calibration: one-way seconds per message of `bytes` between ranks 0 and 1 (every rank calls it; "
        "rank 0 gets the figure).");
  m.attr("ULFM") = exec::mpi::ulfm_compiled();  // compiled with ULFM (the headers define MPIX_ERR_PROC_FAILED)
  m.def("ulfm_enabled", &exec::mpi::ulfm_enabled,
        "Whether ULFM is on in this run (mpirun --with-ft ulfm; read when MPI is initialised).");
  m.def("peer_failure_seen", &exec::mpi::peer_failure_seen,
        "Whether this process saw a peer fail or revoked the communicators (MPI_Finalize is then skipped).");
  m.def("mpi_version", [] {
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(text, &len);
    return std::string(text, static_cast<size_t>(len));
  });

  py::class_<MpiExecutable>(m, "Executable", "This rank's device of a plan lowered for MPI ranks.")
      .def(py::init([](const graph::Graph& g, const partition::Plan& plan, int64_t capacity,
                       const std::vector<int>& keep, const std::vector<py::object>& opaque, double timeout) {
             return std::make_unique<MpiExecutable>(g, plan, capacity, keep, bindings::opaque_calls(opaque), timeout);
           }),
           py::arg("graph"), py::arg("plan"), py::arg("capacity") = 0, py::arg("keep") = std::vector<int>{},
           py::arg("opaque") = std::vector<py::object>{}, py::arg("timeout") = 300.0, py::keep_alive<1, 2>())
      .def("set_tensor",
           [](MpiExecutable& e, int tensor, const py::array& a) {
             py::array in = bindings::tensor_input(e.graph(), tensor, a);
             e.set_tensor(tensor, in.data());
           })
      .def("get_tensor",
           [](const MpiExecutable& e, int tensor, const std::vector<int64_t>&) {
             py::array out = bindings::tensor_output(e.graph(), tensor);
             void* into = out.mutable_data();
             {
               py::gil_scoped_release nogil;
               e.read_tensor(tensor, into);
             }
             return out;
           },
           "Collective: the full tensor on every rank.")
      .def("gather_tensor",
           [](const MpiExecutable& e, int tensor, const std::vector<int64_t>&) -> py::object {
             std::vector<std::byte> v;
             {
               py::gil_scoped_release nogil;
               v = e.gather_bytes(tensor);
             }
             if (e.rank() != 0) return py::none();
             py::array out = bindings::tensor_output(e.graph(), tensor);
             std::memcpy(out.mutable_data(), v.data(), v.size());
             return out;
           },
           "Collective: the full tensor on rank 0, None on the other ranks.")
      .def("step", &MpiExecutable::step, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("stats", &MpiExecutable::stats, py::return_value_policy::copy)
      .def("program", &MpiExecutable::program, py::arg("device"), py::return_value_policy::reference_internal)
      .def("set_profile", &MpiExecutable::set_profile, py::arg("on"))
      .def("set_atomic", &MpiExecutable::set_atomic, py::arg("on"))
      .def("set_check_finite", &MpiExecutable::set_check_finite, py::arg("on"))
      .def("restore_updates", &MpiExecutable::restore_updates)
      .def("local_tile",
           [](const MpiExecutable& e, int tensor) -> py::object {
             const auto& box = e.local_box(tensor);
             if (box.empty()) return py::none();
             std::vector<py::ssize_t> shape;
             for (const auto& r : box.dims) shape.push_back(r.size());
             py::array out(bindings::numpy_dtype(e.graph().tensor(tensor).dtype), shape);
             if (!e.read_local(tensor, out.mutable_data())) return py::none();
             return out;
           },
           "This rank's own tile of the tensor (not collective; works after a failed step), None when it holds none.")
      .def_property_readonly("rank", &MpiExecutable::rank)
      .def_property_readonly("devices", &MpiExecutable::devices);
}

// tilewise._cuda: the CUDA backend's host side (cpp/exec/cuda), its own extension module, built only
// when CMake finds nvcc and the cuBLAS/cuDNN/NCCL wheels, so that `import tilewise` never loads
// them. Errors are raised as _core's exception types (tw.CudaError, tw.ExecError, tw.OutOfMemory).
// Conversion only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "bindings/exec_errors.h"
#include "exec/arena.h"
#include "exec/cuda/device.h"
#include "exec/cuda/device_arena.h"
#include "exec/errors.h"

namespace py = pybind11;
using namespace tilewise;
namespace cuda = tilewise::exec::cuda;

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "The CUDA backend of tilewise, host side: versions, devices, device arenas (cpp/exec/cuda).";
  py::module_ core = py::module_::import("tilewise._core");
  static py::object exec_error = core.attr("ExecError");
  static py::object cuda_error = core.attr("CudaError");
  static py::object oom = core.attr("OutOfMemory");
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const exec::CudaError& e) {
      py::object err = cuda_error(e.what());
      err.attr("call") = e.call;
      err.attr("name") = e.name;
      PyErr_SetObject(cuda_error.ptr(), err.ptr());
    } catch (const exec::OutOfMemory& e) {
      tilewise::bindings::raise_out_of_memory(oom, e);
    } catch (const exec::ExecError& e) {
      PyErr_SetString(exec_error.ptr(), e.what());
    }
  });

  m.def(
      "versions",
      [] {
        const cuda::Versions v = cuda::versions();
        py::dict d;
        d["cuda_runtime"] = v.runtime;
        d["cuda_driver"] = v.driver;
        d["cublas"] = v.cublas;
        d["cudnn"] = v.cudnn;
        d["nccl"] = v.nccl;
        return d;
      },
      "The linked libraries' versions as reported at run time (no device needed): cuda_runtime, "
      "cuda_driver ('' without a driver), cublas, cudnn, nccl.");
  m.def(
      "device_count",
      [] {
        const cuda::DeviceCount d = cuda::device_count();
        return py::make_tuple(d.count, d.error);
      },
      "(count, error): the CUDA devices visible; (0, 'cudaErrorInsufficientDriver: ...') without a driver.");

  m.def(
      "plan_block",
      [](const std::vector<std::tuple<int64_t, int64_t, int64_t>>& lives) {
        std::vector<exec::BufferLife> v;
        for (const auto& [bytes, born, dies] : lives) v.push_back({bytes, born, dies});
        const cuda::DevicePlan plan = cuda::plan_device_block(v);
        return py::make_tuple(plan.offsets, plan.block_bytes);
      },
      py::arg("lives"),
      "(offsets, block_bytes) of a device arena for buffers given as (bytes, born, dies): exec::plan_block, "
      "the CPU arena's planner.");

  py::class_<cuda::DeviceArena>(m, "DeviceArena",
                                "One GPU's block of a planned step (cudaMalloc, never managed memory).")
      .def(py::init([](int device, const std::vector<std::tuple<int64_t, int64_t, int64_t>>& lives,
                       int64_t capacity) {
             std::vector<exec::BufferLife> v;
             for (const auto& [bytes, born, dies] : lives) v.push_back({bytes, born, dies});
             return std::make_unique<cuda::DeviceArena>(device, cuda::plan_device_block(v), capacity);
           }),
           py::arg("device"), py::arg("lives"), py::arg("capacity") = 0)
      .def_property_readonly("device", &cuda::DeviceArena::device)
      .def_property_readonly("block_bytes", [](const cuda::DeviceArena& a) { return a.plan().block_bytes; })
      .def_property_readonly("offsets", [](const cuda::DeviceArena& a) { return a.plan().offsets; });
}

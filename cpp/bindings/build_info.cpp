// _core.build_info() and _core.gemm(): conversion between Python and cpp/kernels/cpu only.
#include <pybind11/numpy.h>

#include <algorithm>
#include <string>

#include "bindings/bindings.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/build_info.h"
#include "kernels/cpu/tile_kernels.h"

namespace py = pybind11;

namespace tilewise::bindings {
namespace {

py::dict to_dict(const kernels::BuildInfo& info) {
  py::dict d;
  d["version"] = info.version;
  d["compiler"] = info.compiler;
  d["build_type"] = info.build_type;
  d["blas"] = info.blas;
  d["blas_threads"] = info.blas_threads;
  d["openmp"] = info.openmp;
  d["openmp_max_threads"] = info.openmp_max_threads;
  d["mpi"] = info.mpi;
  d["mpi_version"] = info.mpi_version;
  d["cuda"] = info.cuda;
  d["cuda_version"] = info.cuda_version;
  d["hardware_threads"] = info.hardware_threads;
  return d;
}

// A C-contiguous 2-D view of `x` (copied only if it is not one already).
template <typename T>
py::array_t<T, py::array::c_style> as_matrix(const py::array& x, const char* name) {
  if (x.ndim() != 2) {
    throw py::value_error("gemm: " + std::string(name) + " must be 2-D, got " +
                          std::to_string(x.ndim()) + "-D");
  }
  return py::array_t<T, py::array::c_style>::ensure(x);
}

template <typename T>
py::array gemm(const py::array& a_in, const py::array& b_in, bool trans_a, bool trans_b) {
  const auto a = as_matrix<T>(a_in, "a");
  const auto b = as_matrix<T>(b_in, "b");
  const int64_t m = trans_a ? a.shape(1) : a.shape(0);
  const int64_t k = trans_a ? a.shape(0) : a.shape(1);
  const int64_t kb = trans_b ? b.shape(1) : b.shape(0);
  const int64_t n = trans_b ? b.shape(0) : b.shape(1);
  if (k != kb) {
    throw py::value_error("gemm: inner dimensions differ: op(a) is " + std::to_string(m) + "x" +
                          std::to_string(k) + ", op(b) is " + std::to_string(kb) + "x" +
                          std::to_string(n) + " (trans_a=" + (trans_a ? "True" : "False") +
                          ", trans_b=" + (trans_b ? "True" : "False") + ")");
  }
  py::array_t<T, py::array::c_style> c({m, n});
  const T* pa = a.data();
  const T* pb = b.data();
  T* pc = c.mutable_data();
  // Row-major contiguous storage: the leading dimension is the stored column count.
  const int64_t lda = std::max<int64_t>(1, a.shape(1));
  const int64_t ldb = std::max<int64_t>(1, b.shape(1));
  const int64_t ldc = std::max<int64_t>(1, n);
  {
    py::gil_scoped_release release;
    kernels::gemm(trans_a, trans_b, m, n, k, T(1), pa, lda, pb, ldb, T(0), pc, ldc);
  }
  return std::move(c);
}

}  // namespace

void bind_build_info(py::module_& m) {
  m.def("kernel_heap_scratch_bytes", &kernels::heap_scratch_bytes,
        "Bytes native kernels took from the heap since the process started because a call's scratch "
        "buffer was missing or smaller than planned (0 while every step runs in its planned scratch).");
  m.def(
      "build_info", [] { return to_dict(kernels::build_info()); },
      "What this build contains: version, compiler, build_type, blas, blas_threads, openmp, "
      "openmp_max_threads, mpi, mpi_version, cuda, cuda_version, hardware_threads.");

  m.def(
      "gemm",
      [](const py::array& a, const py::array& b, bool trans_a, bool trans_b) -> py::array {
        // Exact dtype match: no silent float64 -> float32 rounding, no int -> float promotion.
        if (py::isinstance<py::array_t<float>>(a) && py::isinstance<py::array_t<float>>(b)) {
          return gemm<float>(a, b, trans_a, trans_b);
        }
        if (py::isinstance<py::array_t<double>>(a) && py::isinstance<py::array_t<double>>(b)) {
          return gemm<double>(a, b, trans_a, trans_b);
        }
        throw py::type_error("gemm: a and b must both be float32 or both float64 arrays, got " +
                             std::string(py::str(a.dtype())) + " and " +
                             std::string(py::str(b.dtype())));
      },
      py::arg("a"), py::arg("b"), py::arg("trans_a") = false, py::arg("trans_b") = false,
      "op(a) @ op(b) through the linked BLAS, op = transpose where asked; float32 or float64, "
      "2-D. Releases the GIL. For tests and benchmarks.");
}

}  // namespace tilewise::bindings

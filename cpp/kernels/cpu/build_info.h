// What this build of tilewise contains: compiler, BLAS, OpenMP, and the optional features found at
// configure time (cmake/features.cmake). Reported by `tilewise info` and tilewise.build_info().
#pragma once

#include <string>

namespace tilewise::kernels {

/// A snapshot of the build and of the machine it runs on.
struct BuildInfo {
  std::string version;         ///< tilewise version (project version in CMakeLists.txt)
  std::string compiler;        ///< C++ compiler id and version, e.g. "GNU 12.2.0"
  std::string build_type;      ///< CMake build type, e.g. "Release"
  std::string blas;            ///< linked BLAS, as blas_name()
  int blas_threads = 1;        ///< threads the BLAS uses per call, as blas_threads()
  bool openmp = false;         ///< compiled with OpenMP (not required by anything yet)
  int openmp_max_threads = 0;  ///< omp_get_max_threads() when openmp, else 0
  bool mpi = false;            ///< MPI found at configure time (TILEWISE_WITH_MPI); detection only
  std::string mpi_version;     ///< MPI standard version found, "" when none
  bool cuda = false;           ///< CUDA compiler found at configure time (TILEWISE_WITH_CUDA)
  std::string cuda_version;    ///< CUDA toolkit version found, "" when unknown or none
  unsigned hardware_threads = 0;  ///< std::thread::hardware_concurrency(); 0 when unknown
};

/// Fills a BuildInfo from compile-time definitions and a few run-time queries.
BuildInfo build_info();

}  // namespace tilewise::kernels

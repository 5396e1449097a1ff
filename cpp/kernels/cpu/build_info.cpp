#include "kernels/cpu/build_info.h"

#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/blas.h"

// cmake/features.cmake defines these on this source only; defaults keep a foreign build compiling.
#ifndef TILEWISE_COMPILER
#define TILEWISE_COMPILER "unknown"
#endif
#ifndef TILEWISE_BUILD_TYPE
#define TILEWISE_BUILD_TYPE "unknown"
#endif
#ifndef TILEWISE_MPI_FOUND
#define TILEWISE_MPI_FOUND 0
#define TILEWISE_MPI_VERSION ""
#endif
#ifndef TILEWISE_CUDA_FOUND
#define TILEWISE_CUDA_FOUND 0
#define TILEWISE_CUDA_VERSION ""
#endif

namespace tilewise::kernels {

BuildInfo build_info() {
  BuildInfo info;
  info.version = TILEWISE_VERSION;
  info.compiler = TILEWISE_COMPILER;
  info.build_type = TILEWISE_BUILD_TYPE;
  info.blas = blas_name();
  info.blas_threads = blas_threads();
#ifdef _OPENMP
  info.openmp = true;
  info.openmp_max_threads = omp_get_max_threads();
#endif
  info.mpi = TILEWISE_MPI_FOUND != 0;
  info.mpi_version = TILEWISE_MPI_VERSION;
  info.cuda = TILEWISE_CUDA_FOUND != 0;
  info.cuda_version = TILEWISE_CUDA_VERSION;
  info.hardware_threads = std::thread::hardware_concurrency();
  return info;
}

}  // namespace tilewise::kernels

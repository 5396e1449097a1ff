#include "exec/cuda/device.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include "exec/errors.h"

namespace tilewise::exec::cuda {

namespace {

// CUDA encodes versions as 1000*major + 10*minor (runtime, driver) or major*10000 + minor*100 +
// patch (NCCL >= 2.9); cuDNN 9 as major*10000 + minor*100 + patch.
std::string dotted(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

void check(int code, const std::string& call) {
  if (code == cudaSuccess) return;
  const auto err = static_cast<cudaError_t>(code);
  // Clear the (non-sticky) error so the next call does not report it again.
  cudaGetLastError();
  throw CudaError(call, cudaGetErrorName(err), cudaGetErrorString(err));
}

Versions versions() {
  Versions v;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    v.runtime = dotted(runtime / 1000, (runtime % 1000) / 10, 0);
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    v.driver = dotted(driver / 1000, (driver % 1000) / 10, 0);
  cudaGetLastError();
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    v.cublas = dotted(major, minor, patch);
  const auto cudnn = static_cast<int>(cudnnGetVersion());
  v.cudnn = dotted(cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) v.nccl = dotted(nccl / 10000, (nccl % 10000) / 100, nccl % 100);
  return v;
}

DeviceCount device_count() {
  DeviceCount d;
  const cudaError_t err = cudaGetDeviceCount(&d.count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    d.count = 0;
    d.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
  }
  return d;
}

}  // namespace tilewise::exec::cuda

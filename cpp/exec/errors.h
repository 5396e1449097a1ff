// Errors the runtime raises for a plan, graph or feed it cannot run (bindings: tilewise.ExecError,
// a ValueError). Running out of a device's memory is exec::OutOfMemory (arena.h), a MemoryError.
#pragma once
#include <atomic>
#include <stdexcept>
#include <string>
#include <utility>

namespace tilewise::exec {

/// A plan that does not fit the graph, a graph the CPU runtime cannot hold (a non-float32 tensor,
/// an opaque function not given), a tensor that cannot be set or read, a step after a failed one.
/// The message names the tensor or op and what would be valid.
struct ExecError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// exe.step(check_finite=True): the first op, in the program order of the device that found it,
/// whose output (or partial sum) holds NaN or Inf (Python tw.NumericalError, an ExecError).
struct NumericalError : ExecError {
  NumericalError(const std::string& what, std::string op, std::string tensor, int device, int64_t nan, int64_t inf)
      : ExecError(what), op(std::move(op)), tensor(std::move(tensor)), device(device), nan(nan), inf(inf) {}
  std::string op, tensor;
  int device;
  int64_t nan, inf;
};

/// A CUDA runtime (or cuBLAS, cuDNN, NCCL) call that failed: on a machine without a device or driver
/// the first device call (cudaGetDeviceCount, cudaMalloc) fails with cudaErrorInsufficientDriver or
/// cudaErrorNoDevice, and the CUDA backend raises this (Python tw.CudaError, an ExecError) naming
/// the call and the library's error name and text. Defined here, with no CUDA dependency, so that
/// _core can register the Python type whether or not tilewise._cuda was built.
struct CudaError : ExecError {
  CudaError(std::string call, std::string name, const std::string& text)
      : ExecError(call + " failed: " + name + " (" + text + ")"), call(std::move(call)), name(std::move(name)) {}
  std::string call;  ///< the failing call, e.g. "cudaMalloc(4096 bytes) on device 0"
  std::string name;  ///< the error's name, e.g. "cudaErrorInsufficientDriver"
};

/// One caller at a time: a second thread calling step/set/get while another is inside one gets
/// ExecError at once (an executable holds one step's buffers; interleaving would corrupt them).
class ExclusiveUse {
 public:
  class Guard {
   public:
    Guard(const ExclusiveUse& use, const char* what) : use_(use) {
      if (use_.busy_.exchange(true))
        throw ExecError(std::string("this executable is busy in another thread; ") + what +
                        " waits for nobody: call it from one thread at a time (or compile one executable per thread)");
    }
    ~Guard() { use_.busy_.store(false); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    const ExclusiveUse& use_;
  };

 private:
  mutable std::atomic<bool> busy_{false};
};

}  // namespace tilewise::exec

namespace tilewise::exec {

/// A receive that did not complete by its deadline, or a peer that failed while this device
/// waited on it (Python tw.CommunicationError, a RuntimeError). Names the device, the peer and the
/// instruction it was waiting on.
struct CommunicationError : std::runtime_error {
  CommunicationError(int device, int peer, const std::string& what)
      : std::runtime_error(what), device(device), peer(peer) {}
  int device, peer;
};

}  // namespace tilewise::exec

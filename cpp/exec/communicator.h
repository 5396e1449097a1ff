// Moving boxes of tensors between devices. The runtime only talks to this interface, so an MPI or
// NCCL communicator can replace the in-process one (shared memory between worker threads) later.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "tdl/interval.h"

namespace tilewise::exec {

using tdl::Box;

class Communicator {
 public:
  virtual ~Communicator() = default;
  /// Device `dst` receives `what` from device `src`'s buffer (holding `src_box`) into its own buffer
  /// (holding `dst_box`). Called by dst's worker; src's buffer is not written meanwhile.
  virtual void receive(int src, const float* src_buf, const Box& src_box, int dst, float* dst_buf,
                       const Box& dst_box, const Box& what) = 0;
  /// Bytes each device has received since the last reset.
  virtual std::vector<int64_t> bytes_received() const = 0;
  virtual void reset() = 0;
};

/// Worker threads of one process: a receive is a strided copy, counted.
class InProcessCommunicator : public Communicator {
 public:
  explicit InProcessCommunicator(int devices);
  void receive(int src, const float* src_buf, const Box& src_box, int dst, float* dst_buf, const Box& dst_box,
               const Box& what) override;
  std::vector<int64_t> bytes_received() const override;
  void reset() override;

 private:
  std::unique_ptr<std::atomic<int64_t>[]> received_;
  int devices_;
};

}  // namespace tilewise::exec

// Moving boxes of tensors between devices that share one address space: a receive takes a raw
// pointer into the sending device's buffer and copies the box out of it, counting the bytes. The
// runtime moves data only through this class, which makes the bytes it reports exact; it is not a
// transport interface for MPI or NCCL (a peer's pointer means nothing in another process; such a
// transport would post sends and receives of owned buffers).
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

// Two-sided communication between devices: what an executor's Send and Recv instructions call.
// A device sends a box of one of its own buffers to a peer under a tag; the peer receives that
// tag from that device into a box of one of its own buffers. Neither ever sees the other's memory,
// so a transport between processes implements the same interface (MPI: MPI_Isend/MPI_Irecv with
// subarray datatypes, polled against the deadline; NCCL likewise on streams).
//
// MailboxCommunicator is the one for devices that are threads of one process: a send packs the
// box into a message (buffers recycled per destination) and posts it to the destination's mailbox;
// a receive waits for the message with its (source, tag) and unpacks it.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tdl/interval.h"

namespace tilewise::exec {

using tdl::Box;
using Deadline = std::chrono::steady_clock::time_point;

class Communicator {
 public:
  explicit Communicator(int devices);
  virtual ~Communicator() = default;
  /// Device `self` sends box `what` of its buffer `buf` (which holds `buf_box`, row-major, elements
  /// of `element_bytes` each) to `peer` under `tag`. Returns once `buf` may be reused; never waits
  /// for the receiver.
  virtual void send(int self, int peer, int64_t tag, const void* buf, const Box& buf_box, const Box& what,
                    int64_t element_bytes) = 0;
  /// Device `self` receives the message `peer` sent under `tag` into box `what` of `buf` (which
  /// holds `buf_box`, elements of `element_bytes`). Waits until `deadline`, then throws
  /// CommunicationError; throws it at once when the communicator was aborted (another device failed).
  virtual void recv(int self, int peer, int64_t tag, void* buf, const Box& buf_box, const Box& what,
                    int64_t element_bytes, Deadline deadline) = 0;
  /// Whether that message has arrived (recv would not wait).
  virtual bool poll(int self, int peer, int64_t tag) = 0;
  /// A device failed: every receive waiting now or later throws CommunicationError naming `device`.
  virtual void abort(int device, const std::string& why) = 0;
  /// Before a step: clears the counters, an abort and messages left from a failed step.
  virtual void reset();

  /// Bytes each device sent / received since the last reset.
  std::vector<int64_t> bytes_sent() const;
  std::vector<int64_t> bytes_received() const;
  int devices() const { return devices_; }

 protected:
  void count(int src, int dst, int64_t bytes) {
    sent_[src] += bytes;
    received_[dst] += bytes;
  }

 private:
  int devices_;
  std::unique_ptr<std::atomic<int64_t>[]> sent_, received_;
};

/// Devices that are worker threads of one process.
class MailboxCommunicator : public Communicator {
 public:
  explicit MailboxCommunicator(int devices);
  void send(int self, int peer, int64_t tag, const void* buf, const Box& buf_box, const Box& what,
            int64_t element_bytes) override;
  void recv(int self, int peer, int64_t tag, void* buf, const Box& buf_box, const Box& what, int64_t element_bytes,
            Deadline deadline) override;
  bool poll(int self, int peer, int64_t tag) override;
  void abort(int device, const std::string& why) override;
  void reset() override;
  /// Bytes of message buffers the mailboxes hold (in flight or kept for reuse): memory outside the
  /// devices' arenas, the price of two-sided messages within one process.
  int64_t buffer_bytes() const;

 private:
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    int64_t capacity = 0;  ///< bytes
  };
  struct Mailbox {
    std::mutex m;
    std::condition_variable cv;
    std::map<std::pair<int, int64_t>, Buffer> messages;  ///< (source, tag) -> packed box
    std::vector<Buffer> spare;                           ///< recycled buffers
    int64_t bytes = 0;                                   ///< capacity held, all buffers
  };
  std::vector<std::unique_ptr<Mailbox>> boxes_;
  std::mutex abort_m_;
  std::atomic<bool> aborted_{false};
  int failed_device_ = -1;
  std::string why_;
};

}  // namespace tilewise::exec

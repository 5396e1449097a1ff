// The MPI executor: one process (rank) per device. Every rank lowers the same (graph, plan) to the
// same programs and tags (lowering is deterministic), keeps a DeviceRunner for its own device only
// and runs that device's program against an MpiCommunicator. Built only when CMake finds MPI
// (TILEWISE_WITH_MPI), into its own extension module tilewise._mpi, so that the core never needs
// libmpi.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "exec/communicator.h"
#include "exec/mpi/fault_domain.h"
#include "exec/runtime.h"

namespace tilewise::exec::mpi {

/// MPI_Init_thread once per process (MPI_THREAD_SERIALIZED); no-op when MPI is initialised already.
/// Throws ExecError when the libmpi loaded is not the Open MPI release the module was compiled
/// against (another libmpi.so.40 found first by the loader).
void init();
/// MPI_Finalize once, when initialised and not finalised yet, and no peer failure was seen
/// (peer_failure_seen(): Open MPI 5.0's MPI_Finalize can hang after one).
void finalize();
int rank();
int size();
/// MPI_Bcast of `data` from `root` (its size first): every rank gets root's bytes. Collective.
std::string broadcast_bytes(const std::string& data, int root);
/// Every rank's bytes, in rank order, on `root`; empty on the other ranks (MPI_Gather of the sizes,
/// MPI_Gatherv; collective).
std::vector<std::string> gather_bytes(const std::string& data, int root);
/// Whether every rank passed `ok` (MPI_Allreduce with MPI_LAND). Collective: lets ranks that failed a
/// local step (opening a GPU) tell the others before a collective call that would wait for them.
bool all_ok(bool ok);

/// Calibration (TensorOpt §3.2: profile the actual bandwidth at 2^i bytes): one-way seconds per
/// message of `bytes` between ranks 0 and 1 of MPI_COMM_WORLD through an MpiCommunicator, as
/// programs send (packing and unpacking included), from `rounds` round trips, median of
/// `repeats`. Every rank calls it; ranks other than 0 and 1 only wait at the barriers. Returns
/// the figure on rank 0 (0 elsewhere).
double one_way_seconds(int64_t bytes, int rounds, int repeats);

/// Communicator over MPI: devices are the ranks of `comm`. A send packs the box into a message
/// buffer and starts MPI_Isend (completed later; buffers recycled); a receive starts MPI_Irecv
/// into the buffer (or a staging buffer when the box is not the whole buffer) and polls it with
/// MPI_Test until it completes or the deadline passes (then cancels it, revokes the communicators
/// where ULFM is on, and throws CommunicationError naming the peer). An MPI error (a lost peer or
/// a revoked communicator, under ULFM) goes through `faults` (FaultDomain::raise). Tags are taken modulo MPI_TAG_UB + 1: messages between a
/// pair with equal tags are matched in the order they were sent, and both sides follow their
/// programs' order.
class MpiCommunicator : public Communicator {
 public:
  /// `comm` must be in `faults` (MPI_ERRORS_RETURN), which must outlive this communicator.
  MpiCommunicator(MPI_Comm comm, FaultDomain& faults);
  ~MpiCommunicator() override;
  void send(int self, int peer, int64_t tag, const void* buf, const Box& buf_box, const Box& what,
            int64_t element_bytes) override;
  void recv(int self, int peer, int64_t tag, void* buf, const Box& buf_box, const Box& what, int64_t element_bytes,
            Deadline deadline) override;
  bool poll(int self, int peer, int64_t tag) override;
  void abort(int device, const std::string& why) override;
  void reset() override;
  /// Waits (MPI_Test) until every send started has completed, or throws CommunicationError at the deadline.
  void flush(int self, Deadline deadline);
  /// Bytes of message buffers held (in flight or kept for reuse), outside the arena.
  int64_t buffer_bytes() const;

 private:
  int mpi_tag(int64_t tag) const { return static_cast<int>(tag % (static_cast<int64_t>(tag_ub_) + 1)); }
  void progress();  ///< completes finished sends, recycling their buffers
  struct Pending {
    MPI_Request request;
    std::vector<std::byte> data;
    int peer = -1;
    int64_t tag = 0;
  };
  MPI_Comm comm_;
  FaultDomain* faults_;
  int rank_ = 0;
  int tag_ub_ = 32767;
  std::vector<Pending> pending_;
  std::vector<std::vector<std::byte>> spare_;
  std::vector<std::byte> staging_;
  bool aborted_ = false;
  int failed_device_ = -1;
  std::string why_;
};

/// One rank's executor: the device `rank` of `plan.devices` (which must equal the ranks' number).
/// Methods that gather or reduce (get_tensor, gather_tensor, step's statistics) are collective:
/// every rank calls them in the same order, as running the same script does.
class MpiExecutable {
 public:
  MpiExecutable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity_per_device,
                const std::vector<int>& keep = {}, std::vector<tdl::OpaqueCall> opaque = {},
                double timeout_seconds = 300);
  ~MpiExecutable();
  MpiExecutable(const MpiExecutable&) = delete;
  MpiExecutable& operator=(const MpiExecutable&) = delete;

  /// The full array (row-major, the tensor's dtype, given on every rank): this rank copies its
  /// device's tile of it.
  void set_tensor(int tensor, const void* data);
  /// Gathers the tensor's bytes on rank 0 (collective). Returns them on rank 0, nothing elsewhere.
  std::vector<std::byte> gather_bytes(int tensor) const;
  /// gather_bytes of a float32 tensor.
  std::vector<float> gather_tensor(int tensor) const;
  /// Gathers on rank 0 and broadcasts: the full tensor on every rank, into `out` (collective).
  void read_tensor(int tensor, void* out) const;
  /// read_tensor of a float32 tensor.
  std::vector<float> get_tensor(int tensor) const;
  /// This rank's own tile of `tensor` into `out` (the tile's bytes; not collective, works after a
  /// failed step). False when this rank holds none.
  bool read_local(int tensor, void* out) const;
  /// The tile of `tensor` this rank holds (empty box: none).
  const Box& local_box(int tensor) const { return low_.tiles[low_.storage_of[tensor]][rank_]; }
  /// Atomic steps (DeviceRunner::set_atomic): a failed step leaves this rank's tiles as they were.
  void set_atomic(bool on) { runner_->set_atomic(on); }
  /// NaN/Inf checks after every compute and combine (DeviceRunner::set_check_finite).
  void set_check_finite(bool on) { runner_->set_check_finite(on); }
  /// After a step whose results could not be gathered: puts back its in-place updates (atomic steps).
  void restore_updates() { runner_->restore_updates(); }
  /// Runs this rank's program once; then (collective) gathers every device's statistics.
  void step();
  const RunStats& stats() const { return stats_; }
  int devices() const { return low_.devices; }
  int rank() const { return rank_; }
  const graph::Graph& graph() const { return g_; }
  const Program& program(int device) const;
  void set_profile(bool on) { profile_ = on; }

 private:
  const graph::Graph& g_;
  Lowered low_;
  std::vector<tdl::OpaqueCall> opaque_;
  int rank_ = 0;
  MPI_Comm comm_ = MPI_COMM_NULL;  ///< the executor's own duplicate of MPI_COMM_WORLD (point to point)
  MPI_Comm coll_ = MPI_COMM_NULL;  ///< another, for gathers and statistics
  mutable FaultDomain faults_;     ///< both: MPI_ERRORS_RETURN, revoked together when a peer is lost
  std::unique_ptr<DeviceRunner> runner_;
  std::unique_ptr<MpiCommunicator> mpi_comm_;
  RunStats stats_;
  Deadline bookkeeping_deadline() const;  ///< now + the timeout: for gathers and broadcasts outside steps
  /// Waits for a request of a collective or of a gather; on a timeout, marks the executor failed.
  MPI_Status collective_wait(MPI_Request& req, Deadline deadline, const std::string& what) const;
  mutable bool failed_ = false;  ///< a step or a collective failed: the ranks are out of step
  bool profile_ = false;
  double timeout_;
  ExclusiveUse use_;  ///< step/set/get from one thread at a time
};

}  // namespace tilewise::exec::mpi

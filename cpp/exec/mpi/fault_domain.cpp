#include "exec/mpi/fault_domain.h"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: ULFM's MPIX_ names where it was built with them
#endif

#include <chrono>
#include <cstdint>

#include "exec/errors.h"

#ifdef MPIX_ERR_PROC_FAILED
#define TILEWISE_ULFM 1
#else
#define TILEWISE_ULFM 0
#endif

namespace tilewise::exec::mpi {

namespace {

bool g_ulfm_enabled = false;
bool g_failure_seen = false;

std::string error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(len));
}

std::string rank_name(int r) { return "device " + std::to_string(r) + " (MPI rank " + std::to_string(r) + ")"; }

#if TILEWISE_ULFM
// The ranks of `comm` its failure detector reports failed so far.
std::vector<int> failed_ranks(MPI_Comm comm) {
  std::vector<int> out;
  MPI_Group failed = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) return out;
  int n = 0;
  MPI_Group_size(failed, &n);
  if (n > 0 && MPI_Comm_group(comm, &all) == MPI_SUCCESS) {
    std::vector<int> in(static_cast<size_t>(n));
    out.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) in[i] = i;
    MPI_Group_translate_ranks(failed, n, in.data(), all, out.data());
    MPI_Group_free(&all);
  }
  MPI_Group_free(&failed);
  return out;
}

// A survivor told by a revocation may not have heard of the failure itself yet: the notice arrives
// as the library progresses (measured: within milliseconds). Wait for it a little, no longer.
std::vector<int> wait_for_failed_ranks(MPI_Comm comm) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  std::vector<int> failed = failed_ranks(comm);
  while (failed.empty() && std::chrono::steady_clock::now() < until) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);  // drives progress
    failed = failed_ranks(comm);
  }
  return failed;
}
#endif

}  // namespace

bool ulfm_compiled() { return TILEWISE_ULFM != 0; }

bool ulfm_enabled() { return g_ulfm_enabled; }

bool peer_failure_seen() { return g_failure_seen; }

void read_ulfm_enabled() {
#if TILEWISE_ULFM
  // The library's own switch, as `mpirun --with-ft ulfm` sets it (MPI_T control variable).
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return;
  int index = 0;
  if (MPI_T_cvar_get_index("mpi_ft_enable", &index) == MPI_SUCCESS) {
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      int64_t value = 0;  // a bool or an int, little or big: any nonzero byte is "on"
      if (count == 1 && MPI_T_cvar_read(handle, &value) == MPI_SUCCESS) g_ulfm_enabled = value != 0;
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
#endif
}

void FaultDomain::add(MPI_Comm comm) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  comms_.push_back(comm);
}

void FaultDomain::raise(int rc, const char* call, int self, int peer, const std::string& doing) {
  int cls = rc;
  MPI_Error_class(rc, &cls);
#if TILEWISE_ULFM
  if (cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_PROC_FAILED_PENDING || cls == MPIX_ERR_REVOKED) {
    g_failure_seen = true;
    for (MPI_Comm c : comms_) MPIX_Comm_revoke(c);  // every survivor's pending operations end now
    std::vector<int> failed = comms_.empty() ? std::vector<int>{} : wait_for_failed_ranks(comms_.front());
    if (failed.empty())
      throw CommunicationError(self, peer,
                               rank_name(self) + ": another rank revoked the communicators (a peer failed or its "
                                                 "deadline passed) while " +
                                   rank_name(self) + " was " + doing + " (" + call + ": " + error_text(rc) + ")");
    std::string names = rank_name(failed[0]);
    for (size_t i = 1; i < failed.size(); ++i) names += ", " + rank_name(failed[i]);
    throw CommunicationError(self, failed[0],
                             rank_name(self) + ": " + names + (failed.size() > 1 ? " were" : " was") +
                                 " lost (the MPI library reports the process failed; communicators revoked) while " +
                                 rank_name(self) + " was " + doing);
  }
#else
  (void)peer;  // only a lost process names a peer
#endif
  throw ExecError(rank_name(self) + ": " + call + " failed while " + doing + ": " + error_text(rc) + " (class " +
                  std::to_string(cls) + ")");
}

void FaultDomain::revoke() {
#if TILEWISE_ULFM
  if (!g_ulfm_enabled) return;
  g_failure_seen = true;
  for (MPI_Comm c : comms_) MPIX_Comm_revoke(c);
#endif
}

}  // namespace tilewise::exec::mpi

// The order in which one host thread drives several devices' programs through a step (the CUDA
// executor over NCCL, and the host executable that checks it). Every instruction but a Recv runs in
// program order as soon as its device gets to it; a Send only packs its box into a staging buffer of
// its own there (so it never waits and later instructions may reuse the box's bytes), and goes out
// with its Recv: a device at a Recv waits until its Send is packed, then the pair is issued in a wave,
// every pair of the wave in one group (NCCL's rule for one thread managing several GPUs: a send and
// its receive in one ncclGroupStart/End, or the thread may wait forever).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "exec/program.h"

namespace tilewise::exec::cuda {

/// One Send or Recv: device and instruction index in its program.
struct CommOp {
  int device = 0;
  size_t instr = 0;
};

/// Runs one step of `programs` (one per device): `local(device, instr)` for every instruction but a
/// Recv (a Send: its packing), `group(ops)` for each wave of (Send, Recv) pairs. Throws ExecError naming
/// the waiting instructions when the programs cannot finish (a Recv whose Send never comes, or a Send
/// nobody receives).
void run_step(const std::vector<Program>& programs, const std::function<void(int, size_t)>& local,
              const std::function<void(const std::vector<CommOp>&)>& group);

/// One NCCL call one rank of an MPI job issues for its device (executor.h's RankSetup): the wave it is
/// in, Send or Recv, the peer and the bytes.
struct RankCall {
  int wave = 0;
  bool send = false;
  int peer = 0;
  int64_t bytes = 0;
};

/// Per device, in order, the calls its rank issues in a step (run_step's waves, each rank's part).
/// NCCL matches a rank's sends to a peer with the peer's receives from it in order: the k-th of each
/// must agree in bytes (and here they share their wave).
std::vector<std::vector<RankCall>> rank_calls(const std::vector<Program>& programs);

/// One device's instructions in an order one host thread may issue them to its streams: each stream's
/// in program order, every Wait after the Record of its event (CUDA's cudaStreamWaitEvent waits for the
/// event's last *issued* record). A swapped program lists its three streams one after another, so its
/// list order does not do. Throws ExecError when the streams wait on each other in a cycle.
std::vector<size_t> stream_order(const Program& program);

}  // namespace tilewise::exec::cuda

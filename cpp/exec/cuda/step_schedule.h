// The order in which one host thread drives several devices' programs through a step (the CUDA
// executor over NCCL, and the host executable that checks it). Every instruction but a Recv runs in
// program order as soon as its device gets to it; a Send only packs its box into a staging buffer of
// its own there (so it never waits and later instructions may reuse the box's bytes), and goes out
// with its Recv: a device at a Recv waits until its Send is packed, then the pair is issued in a wave,
// every pair of the wave in one group (NCCL's rule for one thread managing several GPUs: a send and
// its receive in one ncclGroupStart/End, or the thread may wait forever).
#pragma once
#include <cstddef>
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

/// One device's instructions in an order one host thread may issue them to its streams: each stream's
/// in program order, every Wait after the Record of its event (CUDA's cudaStreamWaitEvent waits for the
/// event's last *issued* record). A swapped program lists its three streams one after another, so its
/// list order does not do. Throws ExecError when the streams wait on each other in a cycle.
std::vector<size_t> stream_order(const Program& program);

}  // namespace tilewise::exec::cuda

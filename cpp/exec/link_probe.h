// Measurements for calibration (TensorOpt §3.2: profile what the system really does, at 2^i bytes):
// messages through the thread executor's communicator, the runtime's box copies and combines, and
// how much of the memory bandwidth several devices of one machine get at once. The cluster profile
// of "this machine" is fitted from these and from timed programs (python/tilewise/exec/calibration.py).
#pragma once
#include <cstdint>
#include <vector>

#include "exec/communicator.h"

namespace tilewise::exec {

/// One-way seconds per message of `bytes` (float32 elements rounded up, at least one) between two
/// in-process devices (two threads, MailboxCommunicator), from `rounds` round trips (median of
/// `repeats` runs). The figure includes packing and unpacking the box.
double mailbox_one_way_seconds(int64_t bytes, int rounds, int repeats);

/// Seconds of one copy_box (or combine_box with `combine`) of `bytes` from a buffer twice as wide:
/// `strided` copies half the columns of a 2-D buffer (runs of `run` floats out of rows of 2 * `run`),
/// else one contiguous run. Median of `repeats` after a warm-up; `cold`: both buffers evicted from the
/// caches before each (128 MiB written); `warm_source` (with `cold`): the source read back into the
/// caches after that (a tensor just computed, copied into a buffer not touched for a while).
double box_copy_seconds(int64_t bytes, bool strided, bool combine, int repeats, int64_t run = 128, bool cold = false,
                        bool warm_source = false);

/// Bytes per second (read + written) of `threads` threads each copying its own `bytes`-sized
/// buffer at the same time, all together (the best of `repeats`).
double parallel_copy_rate(int threads, int64_t bytes, int repeats);

}  // namespace tilewise::exec

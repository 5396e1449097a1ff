// Programs on a cluster (TensorOpt §2.1 Eq. 1-3, §3.2; SwapAdvisor §4.2-4.3): every device's program
// (exec/program.h) becomes tasks of the discrete-event simulator (simulator.h), each priced against
// the cluster (cluster.h). The one time model of tilewise: predictions shown beside a plan or beside
// an executable's measurements, frontier points and swap schedules are all timed here.
//
// What a task is per instruction:
//  - Compute: the op's share, `kernel_kind` of its declared kernel ("interpreter" without one), its
//    work FLOPs (gemm, conv, interpreter) or bytes read and written (the other kinds).
//  - Send: the sender packs the box (kind "copy", 2x bytes: read and write), then the link carries it
//    (latency + bytes / bandwidth(bytes), shared as the link level says); Recv: the receiver, once
//    the link is done, unpacks it (kind "copy"). Messages between one pair keep their order.
//  - Combine: kind "combine" (two reads and a write per element); Copy: kind "copy".
//  - Record/Wait: events between the streams of a device that runs them concurrently.
//  - SwapIn/SwapOut (swapped programs, exec/swap_lowering.h): the cluster's host link, latency +
//    bytes / bandwidth(bytes), one resource per direction (both capped by duplex_bandwidth), on the
//    program's "swap-in"/"swap-out" streams, which always run beside the device's own (copy threads).
//  - Alloc/Free: no time; memory is the arena's static plan of the same alloc/free sequence
//    (exec::plan_block), so predicted peaks are what the runtime holds.
// A CPU device runs its program in order on one worker: its streams collapse into one. When the
// cluster runs fewer devices at once than there are (threads on fewer cores), compute and copies
// share a "cores" resource of that capacity.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/lowering.h"
#include "graph/graph.h"
#include "sim/cluster.h"
#include "sim/simulator.h"

namespace tilewise::sim {

/// Per instruction of a program (a step that repeats): its reuse distance, the bytes of the distinct
/// buffers the device touched since the buffers it reads were last touched (an LRU stack distance,
/// each buffer counted once at its size; a copy reads only its source). 0 for an instruction that
/// reads nothing or moves no bytes.
std::vector<double> reuse_distances(const exec::Program& prog);

/// What a task of a simulated program stands for.
struct TaskInfo {
  int device = -1;       ///< the device whose program holds the instruction (links: the sender)
  int instr = -1;        ///< index in that device's program
  int op = -1;           ///< the graph op (-1: none)
  std::string kind;      ///< "compute", "send", "link", "recv", "combine", "copy", "event", "swap_in", "swap_out"
  std::string kernel;    ///< the kernel kind priced (compute/copy/combine), the link level (link)
  double work = 0;       ///< FLOPs or bytes priced
  int64_t bytes = 0;     ///< bytes moved (send/link/recv)
};

/// Ops measured on one device (tw.measure_ops): per op its seconds and work at full size
/// (seconds <= 0: not measured, priced by the kernel model). A share of a measured op takes
/// seconds_full x g(work) / g(work_full), with g(w) = a + w / R from its kind's profile (a: the
/// time of the profile's smallest call, R: its highest rate): the op keeps what it measured, and
/// only a share small enough for per-call costs to matter gets relatively slower.
///
/// `shares` (per op; may be empty) holds what tw.measure_ops(graph, plans=...) timed of a plan's shares:
/// per share signature (exec::share_signature), the share's kernel time over the whole op's, both
/// timed alone. A share found there takes seconds_full x that ratio instead (a GEMM share's packing,
/// the kernel a share's shape picks: what g cannot know).
struct OpScales {
  std::vector<double> seconds, work;
  std::vector<std::unordered_map<std::string, double>> shares;
};

/// A simulated step.
struct Prediction {
  double step_seconds = 0;
  std::vector<double> compute_seconds;  ///< per device: compute, combine and local copies
  std::vector<double> comm_seconds;     ///< per device: packing and unpacking messages
  std::vector<double> idle_seconds;     ///< per device: step - busy (waiting for messages, or for a core)
  std::vector<int64_t> peak_memory;     ///< per device: resident buffers + the planned block
  int64_t intra_bytes = 0, inter_bytes = 0;  ///< bytes sent over each link level
  int64_t host_bytes = 0;                    ///< bytes swapped over the host link (both directions)
  std::vector<Task> tasks;               ///< the simulated tasks (names, streams, what they waited for)
  std::vector<TaskInfo> info;            ///< per task
  std::vector<std::string> streams;      ///< per stream: "d0", "d0/compute", "link d0->d1"
  Timeline timeline;
};

/// The seconds of one instruction of a program of `g` on `cluster`'s device (0 for Alloc/Free/
/// events; Send and Recv: the packing and unpacking only). `scales` may be null.
double instruction_seconds(const graph::Graph& g, const exec::Instr& in, const Cluster& cluster,
                           const OpScales* scales = nullptr);

/// The kernel kind pricing a Compute instruction of `op` ("interpreter" when it declares no native kernel).
std::string compute_kind(const graph::Graph& g, int op);

/// Whether a kernel kind is priced per FLOP (gemm, conv, interpreter); every other kind is priced per
/// byte read and written.
bool priced_by_flops(const std::string& kind);

/// Simulates one step of `low`'s programs on `cluster` (cluster.devices >= low.devices; throws
/// std::invalid_argument otherwise). `keep_tasks`: fill tasks/info/streams (timelines to show);
/// false for a search's fitness calls.
Prediction simulate_programs(const graph::Graph& g, const exec::Lowered& low, const Cluster& cluster,
                             const OpScales* scales = nullptr, bool keep_tasks = true);

/// Peak bytes of one device's program: its resident buffers plus the block the arena plans for its
/// allocations in program order (exec::plan_block).
int64_t program_peak_memory(const exec::Program& prog);

}  // namespace tilewise::sim

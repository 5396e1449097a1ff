// Program translation for the CUDA backend (host code, no CUDA dependency): one device's program,
// as lowering builds it for the CPU runtime (program.h), becomes a launch plan — every buffer's
// offset in the device arena (exec::plan_block, the CPU arena's planner, over the same allocation
// clock the CPU arena and the simulator use), and per instruction the stream it runs on, the kernels
// it launches (kernel_select.h), the region pack/unpack of box copies (copy_plan.h) and the events
// between streams. The CUDA executor (executor.h) only follows the plan.
//
// Streams are SwapAdvisor's three: 0 compute, 1 copy-in (the program's "comm" and "swap-in"
// streams), 2 copy-out ("swap-out"). An op whose kernel has no CUDA implementation is an error here,
// at translation time, naming the op and why (never skipped).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "exec/copy_plan.h"
#include "exec/cuda/kernel_select.h"
#include "exec/errors.h"
#include "exec/lowering.h"
#include "graph/graph.h"

namespace tilewise::exec::cuda {

/// Ops with no CUDA kernel (yet): `ops` names each with its reason, one per line.
struct Untranslatable : ExecError {
  explicit Untranslatable(const std::string& ops)
      : ExecError("the CUDA backend cannot run these ops (no CUDA kernel for their calls yet):\n" + ops), ops(ops) {}
  std::string ops;
};

/// One instruction, translated.
struct Launch {
  InstrKind kind = InstrKind::kCompute;
  int stream = 0;  ///< 0 compute, 1 copy-in, 2 copy-out
  int op = -1;
  std::string library;     ///< "cublas", "cudnn", "kernel", "copy", "event", "memory", "comm", "swap"
  std::vector<Step> steps;  ///< Compute: in order, on the compute stream
  CopyPlan copy;            ///< Copy and Combine: the region geometry (elements)
  int element_bytes = 4;    ///< Copy: the element size (float32 and int32 4, int64 8, bool 1)
  int event = -1;           ///< Record / Wait
  int64_t offset = -1;      ///< swapped programs: Alloc / SwapIn / SwapOut's byte offset in the pool
};

/// One device's program, translated.
struct LaunchPlan {
  int device = 0;
  std::vector<int64_t> offset;     ///< per buffer: bytes into the arena block; -1: resident (own cudaMalloc)
                                   ///< or, in a swapped program, wherever each Alloc or SwapIn puts it
  int64_t block_bytes = 0;         ///< the arena block (plan_block), or a swapped program's pool
  bool swapped = false;            ///< a swapped program (streams compute, swap-in, swap-out)
  int64_t resident_bytes = 0;      ///< bytes of resident buffers (parameters, inputs)
  std::vector<Launch> launches;    ///< per instruction of the program
  int events = 0;                  ///< events the program records
};

/// Translates `device`'s program of `low` (lowered for `g`). Throws Untranslatable naming every op
/// whose call has no CUDA kernel.
LaunchPlan translate(const graph::Graph& g, const Lowered& low, int device);

/// Per op of the graph that some device computes: its kernel and the CUDA library chosen for it, or
/// why none (the coverage report; translate throws for any row with a reason).
struct CoverageRow {
  int op = -1;
  std::string name, type, kernel, library, why_not;
};
std::vector<CoverageRow> coverage(const graph::Graph& g, const Lowered& low);

/// The buffer holding `tensor`'s tile (or its storage's: an in-place update's) on `device`, or -1;
/// ExecError for no such tensor.
int tile_buffer(const Lowered& low, int device, int tensor);

/// ExecError for an id outside its table that device `device`'s embedding met (`e.tag`: the
/// instruction), worded as the CPU kernel's InvalidInput: the op, the id, where, the table's rows.
[[noreturn]] void throw_bad_id(const graph::Graph& g, const Lowered& low, int device, const IdError& e);

/// Whether a launch plan has an embedding lookup (whose ids an executor must check after it runs).
bool looks_up_ids(const LaunchPlan& plan);

/// The first instruction of `device`'s program that writes an optimizer update (-1: none): where an
/// executor checks the lookups before the step changes any parameter.
int first_update(const graph::Graph& g, const Lowered& low, int device);

/// The stream index of a program stream name ("compute" 0; "comm", "swap-in" 1; "swap-out" 2).
int stream_index(const std::string& name);

}  // namespace tilewise::exec::cuda

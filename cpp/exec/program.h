// Programs (Tofu §6, TensorOpt §4.2, SwapAdvisor §4.3): what one device executes in a step, as an
// ordered list of instructions on named streams. Lowering (lowering.h) builds one per device from
// the graph, the placement and the one transfer enumeration of cost/transfers.h; an executor runs
// them: the thread executor (runtime.h) one worker per device in one process, an MPI executor
// (later) one rank per device, each with its own device's program.
//
// A program names its buffers (tiles of tensors, assembled input regions, computed outputs,
// staging for partials); instructions refer to them by id. Communication is two-sided: a `Send`
// on the source device and a `Recv` on the destination carry the same tag, so no device ever reads
// another's memory. Every instruction knows the bytes it moves and the FLOPs it computes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tdl/expr.h"
#include "tdl/interval.h"

namespace tilewise::exec {

using tdl::Box;

enum class InstrKind {
  kAlloc,    ///< take `buffer` from the device's memory
  kFree,     ///< return `buffer`
  kCompute,  ///< run `op`'s share on this device: inputs `inputs` (per op input; -1: reads nothing) into `buffer`
  kSend,     ///< send box `box` of `buffer` to `peer` under `tag`
  kRecv,     ///< receive box `box` from `peer` under `tag` into `buffer`
  kCombine,  ///< buffer[box] = reducer(buffer[box], src[box]) (a received partial into the computed buffer)
  kCopy,     ///< buffer[box] = src[box], both on this device
  kRecord,   ///< mark event `event` on this stream: everything before it on the stream is done
  kWait,     ///< this stream waits for event `event` (recorded on another stream)
  kSwapOut,  ///< copy `buffer` (at byte `offset` of the device's pool) to the host store (swap_lowering.h)
  kSwapIn,   ///< copy `buffer` from the host store to byte `offset` of the device's pool
};

const char* kind_name(InstrKind k);

/// What a buffer holds.
enum class BufferRole {
  kTile,      ///< the device's tile of a tensor (`tensor`: the tensor whose storage it is)
  kRegion,    ///< an input region assembled for an op (Tofu's MultiFetch)
  kComputed,  ///< an op's computed output (partial sums, or final values not of the own tile)
  kStaging,   ///< partials received before they are combined
  kScratch,   ///< a Compute instruction's scratch (kernel_call.h), alive only during it: no tensor;
              ///< its box is [0, bytes / 4) of float32 words
};

const char* role_name(BufferRole r);

struct BufferDesc {
  std::string name;
  BufferRole role = BufferRole::kTile;
  int tensor = -1;       ///< the graph tensor it holds a box of
  Box box;               ///< which box, in global coordinates (row-major in the buffer)
  bool resident = false;  ///< allocated outside steps (tiles of tensors without a producer)
  std::string dtype = "float32";  ///< element type: float32, or int64/int32/bool for ids, labels and masks
  int64_t elements() const { return box.empty() ? 0 : box.volume(); }
  int64_t bytes() const;  ///< elements() times the size of `dtype`
};

struct Instr {
  InstrKind kind = InstrKind::kCompute;
  int stream = 0;            ///< index into Program::streams
  int op = -1;               ///< the graph op it belongs to (-1: none)
  int buffer = -1;           ///< the buffer written (Alloc/Free: the buffer; Send: the one read)
  int src = -1;              ///< Copy/Combine: the buffer read
  std::vector<int> inputs;   ///< Compute: per op input, the buffer read (-1: nothing)
  int scratch = -1;          ///< Compute: its scratch buffer (kScratch; -1: it takes none)
  int peer = -1;             ///< Send: destination device; Recv: source device
  int64_t tag = -1;          ///< Send/Recv: matches the pair (unique in a lowering)
  Box box;                   ///< the box moved, copied or combined (global coordinates)
  tdl::Reducer reducer = tdl::Reducer::kSum;  ///< Combine
  int event = -1;            ///< Record/Wait
  int64_t bytes = 0;         ///< bytes moved, copied, combined or allocated
  int64_t offset = -1;       ///< swapped programs: Alloc/SwapIn/SwapOut's byte offset in the pool (-1: none)
  double flops = 0;          ///< Compute: the share's FLOPs; Combine: one per element
};

/// One device's step.
struct Program {
  int device = 0;
  int devices = 1;
  std::vector<std::string> streams;  ///< "compute", "comm"; swapped programs: "compute", "swap-in", "swap-out"
  std::vector<BufferDesc> buffers;
  std::vector<Instr> instrs;
  std::vector<std::string> op_names;  ///< per graph op, for printing
  std::vector<int> tile_of;           ///< [tensor]: the buffer holding its tile on this device (-1: none)

  int64_t bytes_sent() const;
  int64_t bytes_received() const;
  double flops() const;
  /// One instruction per line: `12 compute  compute fc1.matmul -> fc1.out[0:8,0:16] (4096 FLOPs)`.
  std::string text() const;
  std::string instr_text(const Instr& in) const;
  std::string to_json() const;
};

}  // namespace tilewise::exec

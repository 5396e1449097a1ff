// The kernel call of one device's share of an op (kernels::TileCall, everything but the data) and the
// scratch its Compute instruction takes. Lowering builds it to size the instruction's scratch buffer
// (a buffer of the program alive during the Compute only: the arena plans it like any other, so the
// planned peak and the simulator's memory include it); the runtime builds the same call once and
// hands the kernel that buffer, so kernels take nothing from the heap.
#pragma once
#include <cstdint>
#include <vector>

#include "exec/lowering.h"
#include "graph/graph.h"
#include "kernels/cpu/tile_kernels.h"

namespace tilewise::exec {

/// `op`'s share on `device` as its kernel reads it (variables in the kernel's role order); the data
/// pointers, output and scratch are null. The device must be active in the op.
kernels::TileCall kernel_call(const graph::Graph& g, const OpPlan& op, int device);

/// Where a Compute instruction's scratch buffer holds what: float32 copies of integer and bool
/// inputs (for kernels that read float32 only: torch's promotion), then the kernel's scratch, or the
/// interpreter's float64 copies of the inputs and the output when the op declares no kernel.
struct ScratchLayout {
  std::vector<int64_t> as_float;  ///< per op input: byte offset of its float32 copy, -1: none
  int64_t kernel = 0;             ///< byte offset of the kernel's (or the interpreter's) part
  int64_t kernel_bytes = 0;       ///< its bytes
  bool interpreted = false;       ///< the op declares no kernel: the part is the interpreter's
  int64_t bytes = 0;              ///< the buffer's bytes (0: the instruction takes no scratch)
};

/// The layout of `call`'s scratch; `call` as kernel_call built it for op `op` of `g`.
ScratchLayout scratch_layout(const graph::Graph& g, int op, const kernels::TileCall& call);

}  // namespace tilewise::exec

// Verification of the CUDA plans without a GPU: for every op a device computes in a lowered plan,
// the call as the CPU runtime builds it (exec::kernel_call) gets seeded random float32 inputs in the
// regions the device reads; the CPU kernel (kernels::run_native) and the host reference of the CUDA
// steps (host_reference.h: cuBLAS/cuDNN semantics on the derived parameters, the device functors of
// device_math.h) both compute it, and the rows report the difference.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "exec/lowering.h"
#include "graph/graph.h"

namespace tilewise::exec::cuda {

struct CheckRow {
  int op = -1;
  int device = 0;
  std::string name, kernel, library;
  int64_t elements = 0;   ///< output elements compared
  double max_error = 0;   ///< max |cuda - cpu| / max(max |cpu|, 1e-30) over the block (NaN where both are NaN: equal)
  bool checked = false;   ///< false: no CUDA selection, or the CPU kernel declined (see `note`)
  std::string note;
};

/// One row per (op, active device) of `low`, at most `max_elements` output elements per call
/// (larger calls are skipped with a note: the reference is a plain loop). `nonfinite`: about one
/// input value in 16 is NaN, +Inf or -Inf instead (the CUDA math must follow the CPU kernel's
/// propagation: a NaN where the CPU has one, the same infinities). `coarse`: values drawn from
/// {-1, -0.5, 0, 0.5, 1}, so equalities and ties occur (max pooling's winners, its gradient's y).
std::vector<CheckRow> host_check(const graph::Graph& g, const Lowered& low, uint64_t seed, int64_t max_elements,
                                 bool nonfinite = false, bool coarse = false);

}  // namespace tilewise::exec::cuda

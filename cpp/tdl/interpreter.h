// Reference interpreter: evaluates any TDL op on concrete arrays (float64), so every op is
// executable and testable before it has a native kernel. Reads out of bounds are 0.
#pragma once
#include <functional>
#include <vector>

#include "tdl/op_desc.h"

namespace tilewise::tdl {

/// A read-only row-major float64 array.
struct ArrayView {
  const double* data = nullptr;
  Shape shape;
};

/// A dense float64 array owned by value.
struct Array {
  std::vector<double> data;
  Shape shape;
};

/// Computes an opaque function: (opaque id, argument slices) -> result array. May be called
/// from several threads at once; the interpreter caches results per distinct argument slice.
using OpaqueCall = std::function<Array(int opaque, const std::vector<Array>& args)>;

/// Evaluates the op for the given inputs and variable extents into out (row-major, the
/// output variables' extents). Compiles the description once (tdl/program.h), then splits the
/// output over `threads` threads. Results are bit-for-bit those of evaluating the description
/// one element at a time, reductions combining their terms in row-major order.
void interpret(const OpDesc& op, const std::vector<ArrayView>& inputs, const std::vector<int64_t>& extents, double* out,
               const OpaqueCall& opaque, int threads);

}  // namespace tilewise::tdl

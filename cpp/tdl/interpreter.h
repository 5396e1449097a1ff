// Reference interpreter: evaluates any TDL op on concrete arrays (float64), so every op is
// executable and testable before it has a native kernel. Reads out of bounds are 0. It evaluates
// a whole op, or one device's share of it: its variables restricted to ranges, its inputs held
// only in the regions that share reads.
#pragma once
#include <functional>
#include <vector>

#include "tdl/interval.h"
#include "tdl/op_desc.h"

namespace tilewise::tdl {

/// A read-only row-major float64 array.
struct ArrayView {
  const double* data = nullptr;
  Shape shape;
};

/// A read-only row-major float64 buffer holding `region` (inclusive [lo, hi] per dimension, within
/// the tensor; an empty box holds nothing) of an input tensor whose full shape is `shape`.
struct RegionView {
  const double* data = nullptr;
  Box region;
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
/// output variables' extents): interpret_region over everything. Compiles the description once
/// (tdl/program.h), then splits the output over `threads` threads. Results are bit-for-bit those
/// of evaluating the description one element at a time, reductions combining their terms in
/// row-major order.
void interpret(const OpDesc& op, const std::vector<ArrayView>& inputs, const std::vector<int64_t>& extents, double* out,
               const OpaqueCall& opaque, int threads);

/// Evaluates the op with each variable v taking only the values ranges[v] (within [0,
/// extents[v] - 1]) into out, row-major over the output variables' ranges: restricted output
/// variables give a block of the output, restricted reduction variables the partial reduction
/// over their sub-ranges (every reduction loops over its variables' ranges, so a reduction nested
/// inside another, which the partitioned runtime never restricts, is to get its whole extent).
/// `extents` are the full extents. Numerics are those of interpret(), each element combining its
/// terms in row-major order: with reduction variables whole, the block is bit-for-bit that part
/// of interpret()'s output; full ranges and whole-tensor regions give interpret()'s output exactly.
///
/// Reads outside a tensor are 0 and touch no buffer; every element read inside a tensor must lie
/// in its region (as tdl::input_regions gives it): std::logic_error otherwise, naming the element,
/// as when an opaque function takes a slice the region does not hold whole. ShapeError for ranges
/// outside the extents and regions of the wrong rank or outside their tensor.
void interpret_region(const OpDesc& op, const std::vector<RegionView>& inputs, const std::vector<int64_t>& extents,
                      const std::vector<Range>& ranges, double* out, const OpaqueCall& opaque, int threads);

}  // namespace tilewise::tdl

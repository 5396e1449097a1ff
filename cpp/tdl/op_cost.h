// Work of an op read off its description, for the cost model: FLOPs and element reads.
#pragma once
#include <vector>

#include "tdl/op_desc.h"

namespace tilewise::tdl {

/// Per output element: arithmetic operations (each +, -, *, /, comparison, select and math
/// function counts 1; a reduction adds one combine per reduced element) and input element
/// reads (accesses evaluated; opaque arguments count their slice once), averaged over the
/// output. A reduction counts once per value of the enclosing variables it depends on, as the
/// interpreter computes it (a row mean once per row). Opaque functions' own work counts 0.
struct OpWork {
  double flops_per_element = 0;
  double reads_per_element = 0;
};

OpWork op_work(const OpDesc& op, const std::vector<int64_t>& extents, const std::vector<Shape>& shapes);

}  // namespace tilewise::tdl

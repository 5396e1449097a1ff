// Symbolic interval analysis (Tofu §4.2): the region of every input that a worker reads,
// given the range of each index variable. One set of transfer rules runs in two domains:
// concrete integers (exact regions for given shapes) and affine forms of the extents
// (printable symbolic regions such as [0, X_b/2 - 1]).
#pragma once
#include <optional>
#include <vector>

#include "tdl/access_sites.h"
#include "tdl/affine.h"
#include "tdl/interval.h"
#include "tdl/op_desc.h"

namespace tilewise::tdl {

/// Range of index values an index expression takes when each variable v ranges over vars[v].
/// Exact (a bounding interval) for linear forms and floor division of linear forms.
Range eval_range(const IndexExpr& e, const std::vector<Range>& vars, const std::vector<Shape>& shapes);

/// The same rules over affine bounds; floor division divides the coefficients (Tofu Fig. 4),
/// modulo k gives [0, k-1].
Interval<Affine> eval_symbolic(const IndexExpr& e, const std::vector<Interval<Affine>>& vars);

/// Per input, the bounding box of the in-bounds elements read when variables range over
/// `vars` (empty box when nothing is read). Out-of-bounds reads are zeros and read nothing.
/// Exact per dimension; conservative only when one variable indexes two dimensions of an
/// access and clipping couples them (e.g. a diagonal read running off the tensor).
std::vector<Box> input_regions(const OpDesc& op, const std::vector<Range>& vars, const std::vector<Shape>& shapes);

/// The same with the op's access sites collected beforehand (collect_access_sites(op.body)): the
/// planners ask for thousands of variable ranges per op.
std::vector<Box> input_regions(const std::vector<AccessSite>& sites, const std::vector<Range>& vars,
                               const std::vector<Shape>& shapes);

/// A symbolic bound that is the min (for lo) or max (for hi) of several affine forms, one
/// per access that could not be ordered symbolically.
struct SymbolicRange {
  std::vector<Affine> lo;  ///< region starts at min(lo...)
  std::vector<Affine> hi;  ///< region ends at max(hi...)
  std::string str(const Names& names) const;
};

/// Per input, per dimension, the symbolic region (unclipped, as in Tofu); inputs never read
/// have no dimensions.
std::vector<std::vector<SymbolicRange>> symbolic_input_regions(const OpDesc& op, const std::vector<Interval<Affine>>& vars);

}  // namespace tilewise::tdl

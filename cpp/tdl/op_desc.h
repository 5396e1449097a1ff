// A traced operator description: its input tensors, index variables and output lambda body.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tdl/expr.h"

namespace tilewise::tdl {

using Shape = std::vector<int64_t>;

/// An input tensor of the op; rank -1 when the description never indexes it.
struct TensorDecl {
  std::string name;
  int rank = -1;
};

/// An index variable: an output variable (argument of the output lambda) or a reduction
/// variable (argument of a reducer's lambda), with an optional explicit extent.
struct VarDecl {
  std::string name;
  bool output = false;
  std::optional<IndexExpr> extent;  ///< from `extents=`: a constant or a tensor extent
};

/// `output = lambda out_vars: body` over named inputs (Tofu §4.1).
struct OpDesc {
  std::string name;
  std::vector<TensorDecl> inputs;
  std::vector<VarDecl> vars;
  std::vector<int> output_vars;  ///< variable ids in output-dimension order
  std::vector<std::string> opaque_names;
  Expr body;
  /// The native kernel declared for the op (`@tw.op(kernel=...)`): a name cpp/kernels knows, which
  /// the TDL stage carries but does not interpret; empty when none. `kernel_vars[r]` is the variable
  /// that takes the kernel's r-th role (empty: the variables in description order).
  std::string kernel;
  std::vector<int> kernel_vars;

  Names names() const;
  /// Readable form of a sub-expression, for messages.
  std::string str(const Expr& e) const;
  std::string str(const IndexExpr& e) const;
  /// `lambda b, co, x: Sum(...)`.
  std::string str() const;
};

/// Checks scoping, ranks and bindings; throws TDLError naming the op and sub-expression.
void validate(const OpDesc& op);

/// Extent of every variable for the given input shapes; `out` fixes the output variables.
/// Throws ShapeError when shapes do not fit or an extent cannot be determined.
std::vector<int64_t> infer_extents(const OpDesc& op, const std::vector<Shape>& shapes,
                                   const std::optional<Shape>& out = std::nullopt);

/// The output shape the accesses determine (infer_extents restricted to output variables).
Shape infer_output_shape(const OpDesc& op, const std::vector<Shape>& shapes);

/// Checks the number and ranks of input shapes against the description.
void check_input_shapes(const OpDesc& op, const std::vector<Shape>& shapes);

/// Throws ShapeError when an access index of `op` can reach magnitudes past 2^61 for these shapes
/// (variables at `extents`, or at the largest dimension where not known yet), so that the analyses'
/// int64 arithmetic (regions, extents, the interpreter's indices) never overflows.
void check_index_magnitudes(const OpDesc& op, const std::vector<Shape>& shapes, const std::vector<int64_t>& extents);

}  // namespace tilewise::tdl

// The reference interpreter's compiled form of an op, built once per `interpret` call for the
// given input shapes, variable ranges and input regions held: index expressions become (variable,
// coefficient) terms plus a constant with the tensor extents folded in (FloorDiv, Mod, Scale and
// Add kept as nodes over them); value nodes become a flat vector with child indices, one per
// distinct node of the description; tensor accesses carry their strides in the buffers held.
// Each node also records which variables it depends on, so the interpreter can tell a value that
// is the same across a loop from one that changes with it.
#pragma once
#include <cstdint>
#include <vector>

#include "tdl/interval.h"
#include "tdl/op_desc.h"

namespace tilewise::tdl {

/// Bit set of variable ids; ids past 63 set every bit (treated as "may depend").
using VarMask = uint64_t;
inline VarMask var_bit(int var) { return var < 64 ? VarMask{1} << var : ~VarMask{0}; }

/// coeff * vars[var] in a compiled linear index.
struct IndexTerm {
  int var = 0;
  int64_t coeff = 0;
};

/// One node of a compiled index expression: a linear leaf, or Add/Scale/FloorDiv/Mod of others.
struct IndexCode {
  IndexNode::Kind kind = IndexNode::kLinear;
  int64_t k = 1;                     ///< factor or divisor of kScale, kFloorDiv, kMod
  int a = -1, b = -1;                ///< operand codes (b for kAdd only)
  int64_t constant = 0;              ///< kLinear: the constant, tensor extents folded in
  int term_begin = 0, term_end = 0;  ///< kLinear: its terms in Program::terms
  VarMask deps = 0;                  ///< variables it depends on
};

/// One dimension of a tensor access: a linear index (constant + terms) or any other (`code`),
/// both counted from the first index the input's buffer holds (`origin`): folded into the
/// constant of a linear index, subtracted by an Add node at the root of a non-linear one (only
/// where the origin is not 0), so that reading a region costs what reading a whole tensor does.
struct AccessDim {
  int64_t extent = 0;  ///< number of indices held in this dimension (the tensor's size when held whole)
  int64_t stride = 0;  ///< row-major stride in elements of the held buffer
  int64_t constant = 0;
  int term_begin = 0, term_end = 0;
  int code = -1;       ///< root IndexCode of a non-linear index; -1 for a linear one
  int64_t origin = 0;  ///< first index held (0 when held whole)
  int64_t size = 0;    ///< size of the tensor in this dimension
  int axis = 0;        ///< which dimension of the tensor it is (linear ones are stored first)
};

/// A read of an input element; reads outside the held region are 0. Linear dimensions come first.
struct AccessCode {
  int tensor = 0;
  int dim_begin = 0, linear_end = 0, dim_end = 0;  ///< in Program::dims
  VarMask deps = 0;
  /// The input is held only in part: a read outside the region must also be outside the tensor
  /// (checked), since the region was to hold every element read.
  bool partial = false;
};

/// A reduction: row-major loops over `vars` (each over its range) around `body`, cached on its
/// free variables (recomputed only when one of them changed since its last evaluation).
struct ReduceCode {
  Reducer reducer = Reducer::kSum;
  std::vector<int> vars;
  std::vector<int> free_vars;  ///< sorted, as reduce_free_vars gives them
  int body = -1;
  /// The loop batched when one element's reduction runs: the last variable of extent other than
  /// 1 (those after it are fixed at their start, so the order of terms is unchanged), or the last.
  int batch_level = 0;
  int counter_begin = 0;  ///< its loop counters in a per-thread array (a reduction never runs inside itself)
  int key_begin = 0;      ///< its cache key (values of free_vars) in a per-thread array
};

/// One argument of an opaque function: fixed dimensions (IndexCode) and whole ones (-1).
struct SliceCode {
  int tensor = 0;
  std::vector<int> dims;
};

/// An opaque function's result read at `result_indices`; results are cached per node and
/// values of the fixed slice indices.
struct OpaqueCode {
  int fn = 0;
  std::vector<SliceCode> slices;
  std::vector<int> result_indices;
};

/// A value node; `aux` is the AccessCode, ReduceCode, OpaqueCode or IndexCode it uses.
struct ValueCode {
  ExprNode::Kind kind = ExprNode::kConst;
  UnaryOp unary = UnaryOp::kNeg;
  BinaryOp binary = BinaryOp::kAdd;
  double value = 0;  ///< kConst; exponent of kPow
  int a = -1, b = -1, c = -1;
  int aux = -1;
  VarMask deps = 0;          ///< variables it depends on (a reduction: its free variables)
  bool has_opaque = false;   ///< an opaque function below: evaluating it has effects beyond its value
};

/// The compiled op.
struct Program {
  std::vector<ValueCode> nodes;
  int root = -1;
  std::vector<IndexCode> index_codes;
  std::vector<IndexTerm> terms;
  std::vector<AccessCode> accesses;
  std::vector<AccessDim> dims;
  std::vector<ReduceCode> reduces;
  std::vector<OpaqueCode> opaques;
  std::vector<int> output_vars;
  /// Position in output_vars of the variable the output is evaluated in batches along: the last
  /// one if it is long enough (contiguous reads), else the longest.
  int output_batch_var = 0;
  /// Per variable, the values it takes: starts[v], ..., starts[v] + extents[v] - 1 (its whole
  /// extent from 0 unless restricted).
  std::vector<int64_t> starts;
  std::vector<int64_t> extents;
  std::vector<Shape> shapes;  ///< input shapes (of the whole tensors)
  std::vector<Box> regions;   ///< per input, the region its buffer holds (the whole tensor unless restricted)
  int num_counters = 0;
  int num_keys = 0;
};

/// Compiles the op's body for these input shapes and variable extents, every variable over its
/// whole extent and every input held whole.
Program compile_program(const OpDesc& op, const std::vector<Shape>& shapes, const std::vector<int64_t>& extents);

/// Compiles the op's body with variable v taking the values ranges[v] and input t held as the
/// row-major buffer of regions[t] (a box within its shape, or an empty box: nothing held).
/// Throws ShapeError for a region of the wrong rank or reaching outside its tensor.
Program compile_program(const OpDesc& op, const std::vector<Shape>& shapes, const std::vector<Range>& ranges,
                        const std::vector<Box>& regions);

/// Floor division and Python-style modulo by k > 0.
inline int64_t floor_div(int64_t a, int64_t k) { return a >= 0 ? a / k : -((-a + k - 1) / k); }
inline int64_t floor_mod(int64_t a, int64_t k) { return a - floor_div(a, k) * k; }

/// Value of the terms [begin, end) plus a constant.
inline int64_t eval_linear(const Program& p, int64_t constant, int begin, int end, const int64_t* vars) {
  for (int t = begin; t < end; ++t) constant += p.terms[t].coeff * vars[p.terms[t].var];
  return constant;
}

/// The value of a compiled index expression for the given variable values.
inline int64_t eval_index(const Program& p, int code, const int64_t* vars) {
  const IndexCode& c = p.index_codes[code];
  switch (c.kind) {
    case IndexNode::kLinear: return eval_linear(p, c.constant, c.term_begin, c.term_end, vars);
    case IndexNode::kAdd: return eval_index(p, c.a, vars) + eval_index(p, c.b, vars);
    case IndexNode::kScale: return c.k * eval_index(p, c.a, vars);
    case IndexNode::kFloorDiv: return floor_div(eval_index(p, c.a, vars), c.k);
    case IndexNode::kMod: return floor_mod(eval_index(p, c.a, vars), c.k);
  }
  return 0;
}

}  // namespace tilewise::tdl

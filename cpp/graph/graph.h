// The graph IR: tensors (shape, dtype, role) and ops (a TDL description plus attributes),
// forward, backward and optimizer-update alike. Shapes come from the TDL descriptions.
#pragma once
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tdl/op_desc.h"

namespace tilewise::graph {

using tdl::Shape;

/// What a tensor is for; memory is reported per role. A constant is fixed data read each step
/// (a frozen buffer, running statistics, a mask built from shapes): no gradient, no update.
enum class Role { kInput, kLabel, kParameter, kConstant, kActivation, kGradient, kOptimizerState };
const char* name_of(Role r);
Role role_from(const std::string& s);  ///< throws GraphError for an unknown name

/// Which part of a training iteration an op belongs to.
enum class Phase { kForward, kBackward, kUpdate };
const char* name_of(Phase p);
Phase phase_from(const std::string& s);

/// A user error in building or loading a graph.
struct GraphError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Bytes of one element of a dtype ("float32", "float64", "float16", "bfloat16", "int64", "int32", "bool").
int64_t dtype_size(const std::string& dtype);

struct TensorNode {
  int id = -1;
  std::string name;
  Shape shape;
  std::string dtype = "float32";
  Role role = Role::kActivation;
  int producer = -1;            ///< op writing it; -1 for graph inputs and parameters
  std::vector<int> consumers;   ///< ops reading it, in insertion order
  int grad_of = -1;             ///< the tensor this is (a part of) the gradient of
  int updates = -1;             ///< the parameter/state this new value replaces (optimizer update)

  int64_t elements() const;
  int64_t bytes() const;
};

struct OpNode {
  int id = -1;
  std::string type;             ///< the TDL op's name, e.g. "conv2d"
  std::string name;             ///< unique instance name, e.g. "layer1.0.conv1"
  std::string attrs_json;       ///< attributes as a JSON object, e.g. {"stride": 2}
  std::vector<int> inputs;
  int output = -1;
  std::shared_ptr<const tdl::OpDesc> desc;
  Phase phase = Phase::kForward;
  int forward_op = -1;          ///< for backward ops: the forward op they differentiate
  std::string unroll_key;       ///< equal for the same op of different time steps ("" if none)
};

/// A dataflow graph of TDL ops. Ids are dense indices in insertion order.
class Graph {
 public:
  /// Adds a tensor with no producer (input, label, parameter, optimizer state).
  int add_tensor(const std::string& name, const Shape& shape, Role role, const std::string& dtype = "float32");

  /// Adds an op and its output tensor. The output shape is `out` if given, else inferred from
  /// the description (tdl::infer_output_shape). Throws GraphError/ShapeError naming the op.
  int add_op(const std::string& type, const std::string& name, const std::string& attrs_json,
             const std::vector<int>& inputs, std::shared_ptr<const tdl::OpDesc> desc, const std::string& out_name,
             Role out_role, const std::optional<Shape>& out = std::nullopt, Phase phase = Phase::kForward,
             int forward_op = -1, const std::string& unroll_key = "", const std::string& dtype = "float32");

  /// Marks `tensor` as (a part of) the gradient of `of`: another tensor of the same shape.
  void set_grad_of(int tensor, int of);
  /// Marks `tensor` as the new value of `of`, a parameter or optimizer state no op computes, of the
  /// same shape and dtype, that nothing else updates. GraphError otherwise. (Graph files must also
  /// have the new value computed by an op; graph/graph.py checks that when loading.)
  void set_updates(int tensor, int of);

  const std::vector<TensorNode>& tensors() const { return tensors_; }
  const std::vector<OpNode>& ops() const { return ops_; }
  const TensorNode& tensor(int id) const;
  const OpNode& op(int id) const;
  int find_tensor(const std::string& name) const;  ///< -1 if absent
  int find_op(const std::string& name) const;      ///< -1 if absent

  /// Elements of all parameter tensors.
  int64_t num_parameters() const;
  /// Bytes of all tensors of a role (updated values that replace a tensor count 0: in place).
  int64_t bytes(Role role) const;

  /// Readable summary: ops by phase and type, parameters, bytes by role.
  std::string summary() const;
  /// Graphviz DOT: tensors as ellipses coloured by role, ops as boxes.
  std::string to_dot() const;

 private:
  std::string unique_check(const std::string& name, bool is_op) const;
  std::vector<TensorNode> tensors_;
  std::vector<OpNode> ops_;
  std::vector<std::pair<std::string, int>> tensor_index_, op_index_;  // sorted by name
};

}  // namespace tilewise::graph

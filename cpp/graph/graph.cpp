#include "graph/graph.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "tdl/errors.h"
#include "tdl/limits.h"

namespace tilewise::graph {

const char* name_of(Role r) {
  switch (r) {
    case Role::kInput: return "input";
    case Role::kLabel: return "label";
    case Role::kParameter: return "parameter";
    case Role::kConstant: return "constant";
    case Role::kActivation: return "activation";
    case Role::kGradient: return "gradient";
    case Role::kOptimizerState: return "optimizer_state";
  }
  return "?";
}

Role role_from(const std::string& s) {
  for (Role r : {Role::kInput, Role::kLabel, Role::kParameter, Role::kConstant, Role::kActivation, Role::kGradient,
                 Role::kOptimizerState})
    if (s == name_of(r)) return r;
  throw GraphError("unknown tensor role '" + s +
                   "' (valid: input, label, parameter, constant, activation, gradient, optimizer_state)");
}

const char* name_of(Phase p) {
  switch (p) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kUpdate: return "update";
  }
  return "?";
}

Phase phase_from(const std::string& s) {
  for (Phase p : {Phase::kForward, Phase::kBackward, Phase::kUpdate})
    if (s == name_of(p)) return p;
  throw GraphError("unknown op phase '" + s + "' (valid: forward, backward, update)");
}

int64_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, int64_t> sizes = {
      {"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2}, {"int64", 8}, {"int32", 4}, {"bool", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end())
    throw GraphError("unknown dtype '" + dtype + "' (valid: float32, float64, float16, bfloat16, int64, int32, bool)");
  return it->second;
}

int64_t TensorNode::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
int64_t TensorNode::bytes() const { return elements() * dtype_size(dtype); }

namespace {
int lookup(const std::vector<std::pair<std::string, int>>& index, const std::string& name) {
  auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(name, -1));
  return it != index.end() && it->first == name ? it->second : -1;
}
void insert(std::vector<std::pair<std::string, int>>& index, const std::string& name, int id) {
  index.insert(std::lower_bound(index.begin(), index.end(), std::make_pair(name, -1)), {name, id});
}
}  // namespace

std::string Graph::unique_check(const std::string& name, bool is_op) const {
  if (name.empty()) throw GraphError(std::string(is_op ? "op" : "tensor") + " names must not be empty");
  if (lookup(is_op ? op_index_ : tensor_index_, name) >= 0)
    throw GraphError(std::string(is_op ? "op" : "tensor") + " name '" + name + "' is already used in the graph");
  return name;
}

int Graph::add_tensor(const std::string& name, const Shape& shape, Role role, const std::string& dtype) {
  unique_check(name, false);
  dtype_size(dtype);
  for (int64_t d : shape)
    if (d < 0) throw GraphError("tensor '" + name + "' has a negative extent");
  tdl::check_shape_size(shape, "tensor '" + name + "'");  // before any size arithmetic overflows
  TensorNode t;
  t.id = static_cast<int>(tensors_.size());
  t.name = name;
  t.shape = shape;
  t.role = role;
  t.dtype = dtype;
  tensors_.push_back(t);
  insert(tensor_index_, name, t.id);
  return t.id;
}

int Graph::add_op(const std::string& type, const std::string& name, const std::string& attrs_json,
                  const std::vector<int>& inputs, std::shared_ptr<const tdl::OpDesc> desc, const std::string& out_name,
                  Role out_role, const std::optional<Shape>& out, Phase phase, int forward_op,
                  const std::string& unroll_key, const std::string& dtype) {
  unique_check(name, true);
  unique_check(out_name, false);
  if (!desc) throw GraphError("op '" + name + "' has no TDL description");
  if (inputs.size() != desc->inputs.size())
    throw GraphError("op '" + name + "' (" + type + ") takes " + std::to_string(desc->inputs.size()) +
                     " inputs, got " + std::to_string(inputs.size()));
  std::vector<Shape> shapes;
  for (int t : inputs) {
    if (t < 0 || t >= static_cast<int>(tensors_.size()))
      throw GraphError("op '" + name + "' reads tensor id " + std::to_string(t) + ", which is not in the graph");
    shapes.push_back(tensors_[t].shape);
  }
  if (forward_op >= static_cast<int>(ops_.size())) throw GraphError("op '" + name + "': unknown forward op");
  Shape out_shape;
  try {
    if (out) tdl::check_shape_size(*out, "the declared output");
    auto ext = tdl::infer_extents(*desc, shapes, out);  // with `out`: checks ranks and reduction extents
    if (out) {
      out_shape = *out;
    } else {
      for (int v : desc->output_vars) out_shape.push_back(ext[v]);
    }
    // Extents are multiplied by coefficients and device counts downstream: keep them in range.
    for (size_t v = 0; v < ext.size(); ++v)
      if (ext[v] < 0 || ext[v] > tdl::kMaxExtent)
        throw ShapeError("variable `" + desc->vars[v].name + "` has extent " + std::to_string(ext[v]) +
                         "; extents may be at most 2^40");
  } catch (const ShapeError& e) {
    throw ShapeError("in graph op '" + name + "': " + e.what());
  }
  int out_id = add_tensor(out_name, out_shape, out_role, dtype);
  OpNode op;
  op.id = static_cast<int>(ops_.size());
  op.type = type;
  op.name = name;
  op.attrs_json = attrs_json.empty() ? "{}" : attrs_json;
  op.inputs = inputs;
  op.output = out_id;
  op.desc = std::move(desc);
  op.phase = phase;
  op.forward_op = forward_op;
  op.unroll_key = unroll_key;
  ops_.push_back(op);
  insert(op_index_, name, op.id);
  tensors_[out_id].producer = op.id;
  for (int t : inputs) {
    auto& c = tensors_[t].consumers;
    if (std::find(c.begin(), c.end(), op.id) == c.end()) c.push_back(op.id);
  }
  return op.id;
}

void Graph::set_grad_of(int tensor, int of) {
  if (tensor < 0 || tensor >= static_cast<int>(tensors_.size()) || of < 0 || of >= static_cast<int>(tensors_.size()))
    throw GraphError("set_grad_of: unknown tensor id");
  const TensorNode &g = tensors_[tensor], &t = tensors_[of];
  if (tensor == of) throw GraphError("tensor '" + g.name + "' cannot be the gradient of itself");
  if (g.shape != t.shape)
    throw GraphError("tensor '" + g.name + "' cannot be the gradient of '" + t.name + "': their shapes differ");
  tensors_[tensor].grad_of = of;
}

void Graph::set_updates(int tensor, int of) {
  if (tensor < 0 || tensor >= static_cast<int>(tensors_.size()) || of < 0 || of >= static_cast<int>(tensors_.size()))
    throw GraphError("set_updates: unknown tensor id");
  // The runtime stores an update in place of the tensor it replaces, following `updates` links:
  // a self-update looped forever and an update of a computed tensor crashed the step.
  const TensorNode &n = tensors_[tensor], &t = tensors_[of];
  const std::string what = "tensor '" + n.name + "' cannot update '" + t.name + "': ";
  if (tensor == of) throw GraphError(what + "a tensor does not update itself");
  if (t.producer >= 0 || (t.role != Role::kParameter && t.role != Role::kOptimizerState))
    throw GraphError(what + "only a parameter or optimizer state that no op computes is updated");
  if (n.shape != t.shape || n.dtype != t.dtype) throw GraphError(what + "an update keeps shape and dtype");
  for (const auto& other : tensors_)
    if (other.updates == of && other.id != tensor)
      throw GraphError(what + "'" + other.name + "' already updates it");
  tensors_[tensor].updates = of;
}

const TensorNode& Graph::tensor(int id) const {
  if (id < 0 || id >= static_cast<int>(tensors_.size())) throw GraphError("unknown tensor id " + std::to_string(id));
  return tensors_[id];
}

const OpNode& Graph::op(int id) const {
  if (id < 0 || id >= static_cast<int>(ops_.size())) throw GraphError("unknown op id " + std::to_string(id));
  return ops_[id];
}

int Graph::find_tensor(const std::string& name) const { return lookup(tensor_index_, name); }
int Graph::find_op(const std::string& name) const { return lookup(op_index_, name); }

int64_t Graph::num_parameters() const {
  int64_t n = 0;
  for (const auto& t : tensors_)
    if (t.role == Role::kParameter && t.updates < 0) n += t.elements();
  return n;
}

int64_t Graph::bytes(Role role) const {
  int64_t n = 0;
  for (const auto& t : tensors_)
    if (t.role == role && t.updates < 0) n += t.bytes();
  return n;
}

namespace {
std::string human_bytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  std::ostringstream s;
  s.precision(u ? 3 : 0);
  s << std::fixed << v << " " << units[u];
  return s.str();
}
// Quotes and backslashes escaped for a DOT label.
std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}
}  // namespace

std::string Graph::summary() const {
  std::ostringstream s;
  std::map<Phase, std::map<std::string, int>> by_phase;
  for (const auto& op : ops_) by_phase[op.phase][op.type]++;
  s << "Graph: " << ops_.size() << " ops, " << tensors_.size() << " tensors, " << num_parameters()
    << " parameters\n";
  for (const auto& [phase, types] : by_phase) {
    int total = 0;
    for (const auto& [t, n] : types) total += n;
    s << "  " << name_of(phase) << ": " << total << " ops (";
    bool first = true;
    for (const auto& [t, n] : types) s << (first ? "" : ", ") << t << " x" << n, first = false;
    s << ")\n";
  }
  s << "  bytes by role:";
  for (Role r : {Role::kInput, Role::kLabel, Role::kParameter, Role::kConstant, Role::kActivation, Role::kGradient,
                 Role::kOptimizerState}) {
    int64_t b = bytes(r);
    if (b) s << " " << name_of(r) << " " << human_bytes(b) << ";";
  }
  s << "\n";
  return s.str();
}

std::string Graph::to_dot() const {
  static const std::map<Role, std::string> colour = {
      {Role::kInput, "lightblue"},      {Role::kLabel, "lightblue"}, {Role::kParameter, "gold"},
      {Role::kConstant, "wheat"},
      {Role::kActivation, "white"},     {Role::kGradient, "pink"},   {Role::kOptimizerState, "lightgrey"}};
  std::ostringstream s;
  s << "digraph tilewise {\n  rankdir=TB;\n  node [fontsize=10];\n";
  for (const auto& t : tensors_) {
    std::string shape;
    for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? "x" : "") + std::to_string(t.shape[i]);
    s << "  t" << t.id << " [shape=ellipse, style=filled, fillcolor=" << colour.at(t.role) << ", label=\""
      << dot_escape(t.name) << "\\n" << shape << "\"];\n";
  }
  for (const auto& op : ops_) {
    s << "  o" << op.id << " [shape=box, style=filled, fillcolor=" << (op.phase == Phase::kForward ? "lightgreen" : op.phase == Phase::kBackward ? "salmon" : "khaki")
      << ", label=\"" << dot_escape(op.name) << "\\n(" << dot_escape(op.type) << ")\"];\n";
    for (int t : op.inputs) s << "  t" << t << " -> o" << op.id << ";\n";
    s << "  o" << op.id << " -> t" << op.output << ";\n";
  }
  s << "}\n";
  return s.str();
}

}  // namespace tilewise::graph

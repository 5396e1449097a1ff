#include "exec/kernel_call.h"

#include "kernels/cpu/op_attrs.h"

namespace tilewise::exec {

namespace {

kernels::Span span(const Range& r) { return {r.lo, r.hi}; }

int64_t aligned(int64_t bytes) { return (bytes + 15) / 16 * 16; }  // pieces 16-byte aligned, as the kernels'

int64_t volume(const std::vector<kernels::Span>& box) {
  int64_t v = 1;
  for (const auto& s : box) v *= s.size();
  return v;
}

}  // namespace

kernels::TileCall kernel_call(const graph::Graph& g, const OpPlan& op, int device) {
  const auto& node = g.op(op.op);
  const DeviceOp& dev = op.devices[device];
  kernels::TileCall call;
  call.type = node.type;
  call.attrs = kernels::OpAttrs::parse(node.attrs_json);  // once, not per step
  for (const auto& v : node.desc->vars) call.var_names.push_back(v.name);
  call.output_vars = node.desc->output_vars;
  call.extents = op.extents;
  for (const auto& r : dev.vars) call.vars.push_back(span(r));
  for (size_t j = 0; j < node.inputs.size(); ++j) {
    kernels::TileIn in;
    for (const auto& r : dev.slots[j].region.dims) in.region.push_back(span(r));
    in.shape = g.tensor(node.inputs[j]).shape;
    in.dtype = kernels::dtype_of(g.tensor(node.inputs[j]).dtype);
    call.inputs.push_back(std::move(in));
  }
  call.output_shape = g.tensor(node.output).shape;
  call.kernel = node.desc->kernel;  // the op's declared native kernel, in its role order
  kernels::bind_roles(call, node.desc->kernel_vars);
  return call;
}

ScratchLayout scratch_layout(const graph::Graph& g, int op, const kernels::TileCall& call) {
  ScratchLayout s;
  const auto& node = g.op(op);
  const bool converts = !kernels::reads_integers(call.kernel);
  for (size_t j = 0; j < call.inputs.size(); ++j) {
    const kernels::TileIn& in = call.inputs[j];
    const int64_t n = in.region.empty() && in.shape.empty() ? 1 : volume(in.region);
    if (converts && in.dtype != kernels::DType::kFloat32 && n > 0) {
      s.as_float.push_back(s.bytes);
      s.bytes += aligned(n * 4);
    } else {
      s.as_float.push_back(-1);
    }
  }
  s.kernel = s.bytes;
  s.interpreted = node.desc->kernel.empty();
  if (s.interpreted) {
    // interpret_region's float64 views: every input region and the output block.
    for (const auto& in : call.inputs) s.kernel_bytes += aligned(volume(in.region) * 8);
    int64_t out = 1;
    for (int v : call.output_vars) out *= call.vars[v].size();
    s.kernel_bytes += aligned(out * 8);
  } else {
    s.kernel_bytes = kernels::scratch_bytes(call);
  }
  s.bytes += s.kernel_bytes;
  return s;
}

}  // namespace tilewise::exec

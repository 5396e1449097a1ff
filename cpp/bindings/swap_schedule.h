// A swap plan (cpp/swap/plan.h) as exec's SwapSchedule (cpp/exec/swap_lowering.h), field by field,
// through two index maps the Python layer builds from names (problem tensor -> buffer of the
// one-device program, problem op -> graph op). Conversion only: the lowering checks that the result
// fits the graph. Shared by the CPU's swapped executable (_core) and the CUDA module (_cuda).
#pragma once
#include <string>
#include <vector>

#include "exec/errors.h"
#include "exec/swap_lowering.h"
#include "swap/plan.h"

namespace tilewise::bindings {

inline int mapped(const std::vector<int>& map, int i, const char* what) {
  if (i < 0 || i >= static_cast<int>(map.size()))
    throw exec::ExecError(std::string("swap plan: ") + what + " " + std::to_string(i) + " has no counterpart in the graph");
  return map[i];
}

inline exec::SwapReady ready_of(const swap::Ready& r) { return {r.op, r.swap_out, r.swap_in}; }

inline exec::SwapSchedule schedule_of(const swap::SwapPlan& p, const std::vector<int>& buffer_of, const std::vector<int>& op_of) {
  exec::SwapSchedule s;
  for (int o : p.schedule) s.order.push_back(mapped(op_of, o, "op"));
  s.memory_bytes = p.memory_bytes;
  for (const auto& o : p.objects) s.objects.emplace_back(o.offset, o.bytes);
  for (const auto& in : p.swap_ins)
    s.swap_ins.push_back({mapped(buffer_of, in.tensor, "tensor"), in.object, in.position, ready_of(in.after), in.issued});
  for (const auto& o : p.swap_outs) s.swap_outs.push_back({mapped(buffer_of, o.tensor, "tensor"), o.object, o.after, o.issued});
  for (const auto& r : p.outputs_ready) s.outputs_ready.push_back(ready_of(r));
  for (const auto& st : p.stays)
    s.stays.push_back({mapped(buffer_of, st.tensor, "tensor"), st.object, static_cast<exec::StayEdge>(st.from),
                       static_cast<exec::StayEdge>(st.to), st.from_index, st.to_index});
  return s;
}


}  // namespace tilewise::bindings

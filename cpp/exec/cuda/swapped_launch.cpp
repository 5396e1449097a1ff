#include "exec/cuda/swapped_launch.h"

#include <algorithm>
#include <string>

#include "exec/cuda/step_schedule.h"
#include "exec/errors.h"

namespace tilewise::exec::cuda {

namespace {

std::vector<std::pair<int, int64_t>> swapped_in_by_event(const Program& program) {
  int events = 0;
  for (const Instr& in : program.instrs) events = std::max(events, in.event + 1);
  std::vector<std::pair<int, int64_t>> by(static_cast<size_t>(events), {-1, 0});
  int last_in = -1;
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    const Instr& in = program.instrs[i];
    if (in.stream != 1) continue;  // the swap-in stream
    if (in.kind == InstrKind::kSwapIn) last_in = static_cast<int>(i);
    if (in.kind == InstrKind::kRecord && last_in >= 0)
      by[static_cast<size_t>(in.event)] = {program.instrs[last_in].buffer, program.instrs[last_in].offset}, last_in = -1;
  }
  return by;
}

std::vector<char> host_stored(const graph::Graph& g, const Program& program) {
  std::vector<char> stored(program.buffers.size(), 0);
  for (const auto& t : g.tensors())
    if (t.producer < 0 && program.tile_of[t.id] >= 0) stored[program.tile_of[t.id]] = 1;
  for (const Instr& in : program.instrs)
    if (in.kind == InstrKind::kSwapIn || in.kind == InstrKind::kSwapOut) stored[in.buffer] = 1;
  return stored;
}

}  // namespace

SwappedLaunch prepare_swapped(const graph::Graph& g, const SwapSchedule& s, const std::vector<int>& keep,
                              const std::vector<std::pair<int, int>>& in_place, Lowered* low, LaunchPlan* plan) {
  SwappedLowered swl = lower_swapped(g, s, keep, in_place);
  *low = std::move(swl.low);
  *plan = translate(g, *low, 0);
  const Program& prog = low->programs[0];
  SwappedLaunch out;
  out.home = std::move(swl.home);
  out.objects = s.objects;
  out.pool_bytes = std::max(plan->block_bytes, s.memory_bytes);
  out.host_stored = host_stored(g, prog);
  out.swapped_in_by = swapped_in_by_event(prog);
  out.order = stream_order(prog);
  return out;
}

int swapped_buffer(const Lowered& low, int tensor) {
  if (tensor < 0 || tensor >= static_cast<int>(low.storage_of.size())) throw ExecError("no tensor " + std::to_string(tensor));
  return low.programs[0].tile_of[low.storage_of[tensor]];
}

SwappedLaunch::Source SwappedLaunch::source(const graph::Graph& g, const Lowered& low, int tensor, int steps,
                                            const std::vector<char>& on_host) const {
  Source src;
  src.buffer = swapped_buffer(low, tensor);
  if (src.buffer < 0) return src;
  // A parameter, input or state is where it starts a step; a result where the last step left it.
  const bool canonical = g.tensor(low.storage_of[tensor]).producer < 0;
  src.object = canonical ? home[src.buffer].object : steps > 0 ? home[src.buffer].end_object : -1;
  src.host = src.object < 0 && host_stored[src.buffer] && (canonical || (steps > 0 && on_host[src.buffer]));
  return src;
}

}  // namespace tilewise::exec::cuda

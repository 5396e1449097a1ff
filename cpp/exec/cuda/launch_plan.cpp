#include "exec/cuda/launch_plan.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

#include "exec/arena.h"
#include "exec/errors.h"
#include "exec/kernel_call.h"
#include "graph/graph.h"

namespace tilewise::exec::cuda {

int stream_index(const std::string& name) {
  if (name == "compute") return 0;
  if (name == "comm" || name == "swap-in") return 1;
  if (name == "swap-out") return 2;
  throw ExecError("a program stream '" + name + "' the CUDA backend does not know (compute, comm, swap-in, swap-out)");
}

namespace {

// The arena's clock (arena.h): one tick per Alloc or Free in program order; buffers not freed in the
// step (results kept for reading) live to its end. The same lives sim::program_peak_memory plans.
void plan_offsets(const Program& prog, LaunchPlan* out) {
  std::vector<BufferLife> lives;
  std::vector<int> buffer_of;
  std::unordered_map<int, size_t> live;
  int64_t clock = 0;
  for (const auto& in : prog.instrs) {
    if (in.kind == InstrKind::kAlloc) {
      live[in.buffer] = lives.size();
      buffer_of.push_back(in.buffer);
      lives.push_back({prog.buffers[in.buffer].bytes(), clock++, -1});
    } else if (in.kind == InstrKind::kFree) {
      auto it = live.find(in.buffer);
      if (it != live.end()) lives[it->second].dies = clock++, live.erase(it);
    }
  }
  for (auto& l : lives)
    if (l.dies < 0) l.dies = clock;
  std::vector<int64_t> offsets;
  out->block_bytes = plan_block(lives, &offsets);
  out->offset.assign(prog.buffers.size(), -1);
  for (size_t i = 0; i < lives.size(); ++i) out->offset[buffer_of[i]] = offsets[i];
  for (const auto& b : prog.buffers)
    if (b.resident) out->resident_bytes += b.bytes();
}

std::string op_line(const graph::Graph& g, int op, const std::string& why) {
  return "  " + g.op(op).name + " (" + g.op(op).type + "): " + why;
}

}  // namespace

LaunchPlan translate(const graph::Graph& g, const Lowered& low, int device) {
  if (device < 0 || device >= static_cast<int>(low.programs.size()))
    throw ExecError("no program for device " + std::to_string(device) + " (the plan has " +
                    std::to_string(low.programs.size()) + ")");
  const Program& prog = low.programs[device];
  LaunchPlan plan;
  plan.device = device;
  plan.swapped = prog.streams.size() == 3 && prog.streams[1] == "swap-in";
  if (plan.swapped) {  // a pool laid out by the swap plan: each Alloc and SwapIn names its offset
    plan.offset.assign(prog.buffers.size(), -1);
    for (const Instr& in : prog.instrs)
      if (in.offset >= 0) plan.block_bytes = std::max(plan.block_bytes, in.offset + prog.buffers[in.buffer].bytes());
  } else {
    plan_offsets(prog, &plan);
  }
  std::map<int, std::string> refused;  // op -> why, each op once
  for (const Instr& in : prog.instrs) {
    Launch l;
    l.kind = in.kind;
    l.stream = stream_index(prog.streams.at(static_cast<size_t>(in.stream)));
    l.op = in.op;
    l.offset = in.offset;
    switch (in.kind) {
      case InstrKind::kAlloc:
      case InstrKind::kFree: l.library = "memory"; break;
      case InstrKind::kRecord:
      case InstrKind::kWait:
        l.library = "event";
        l.event = in.event;
        plan.events = std::max(plan.events, in.event + 1);
        break;
      case InstrKind::kSend:
      case InstrKind::kRecv: l.library = "comm"; break;
      case InstrKind::kSwapIn:
      case InstrKind::kSwapOut: l.library = "swap"; break;
      case InstrKind::kCopy:
      case InstrKind::kCombine: {
        const BufferDesc &dst = prog.buffers[in.buffer], &src = prog.buffers[in.src];
        if (dst.dtype != src.dtype) {
          refused.emplace(in.op, "a box copy from " + src.dtype + " to " + dst.dtype + " elements");
        } else if (in.kind == InstrKind::kCombine && dst.dtype != "float32") {
          refused.emplace(in.op, "combining partials of " + dst.dtype + " elements (sums are float32)");
        }
        l.library = "copy";
        l.copy = plan_copy(src.box, dst.box, in.box);
        l.element_bytes = static_cast<int>(graph::dtype_size(dst.dtype));
        break;
      }
      case InstrKind::kCompute: {
        const kernels::TileCall call = kernel_call(g, low.ops[in.op], device);
        Selection s = select_kernel(call);
        if (!s.ok()) refused.emplace(in.op, s.why_not);
        l.library = s.library;
        l.steps = std::move(s.steps);
        break;
      }
    }
    plan.launches.push_back(std::move(l));
  }
  if (!refused.empty()) {
    std::string lines;
    int shown = 0;
    for (const auto& [op, why] : refused) {
      if (++shown > 20) {
        lines += "  ... and " + std::to_string(refused.size() - 20) + " more\n";
        break;
      }
      lines += op_line(g, op, why) + "\n";
    }
    throw Untranslatable(lines);
  }
  return plan;
}

std::vector<CoverageRow> coverage(const graph::Graph& g, const Lowered& low) {
  std::vector<CoverageRow> rows;
  for (const OpPlan& op : low.ops) {
    CoverageRow row;
    row.op = op.op;
    row.name = g.op(op.op).name;
    row.type = g.op(op.op).type;
    bool any = false;
    for (int d = 0; d < low.devices; ++d) {
      if (!op.devices[d].active) continue;
      const kernels::TileCall call = kernel_call(g, op, d);
      row.kernel = call.kernel;
      const Selection s = select_kernel(call);
      if (!any || !s.ok()) row.library = s.library;
      if (!s.ok() && row.why_not.empty()) row.why_not = s.why_not;
      any = true;
    }
    if (any) rows.push_back(std::move(row));
  }
  return rows;
}

int tile_buffer(const Lowered& low, int device, int tensor) {
  if (tensor < 0 || tensor >= static_cast<int>(low.storage_of.size())) throw ExecError("no tensor " + std::to_string(tensor));
  const Program& prog = low.programs[device];
  const int b = prog.tile_of[tensor];
  return b >= 0 ? b : prog.tile_of[low.storage_of[tensor]];
}

void throw_bad_id(const graph::Graph& g, const Lowered& low, int device, const IdError& e) {
  const auto& instrs = low.programs.at(static_cast<size_t>(device)).instrs;
  const int op = e.tag >= 0 && e.tag < static_cast<long long>(instrs.size()) ? instrs[static_cast<size_t>(e.tag)].op : -1;
  throw ExecError("op '" + (op >= 0 ? g.op(op).name : std::string("?")) + "': id " + std::to_string(e.id) +
                  " at position " + std::to_string(e.position) + " of device " + std::to_string(device) +
                  "'s ids is not a row of the table (0 .. " + std::to_string(e.table_rows - 1) + ")");
}

bool looks_up_ids(const LaunchPlan& plan) {
  for (const Launch& l : plan.launches)
    for (const Step& s : l.steps)
      if (s.kind == Step::kRow && static_cast<RowFn>(s.row.fn) == RowFn::kEmbedding) return true;
  return false;
}

int first_update(const graph::Graph& g, const Lowered& low, int device) {
  const auto& instrs = low.programs.at(static_cast<size_t>(device)).instrs;
  for (size_t i = 0; i < instrs.size(); ++i)
    if (instrs[i].kind == InstrKind::kCompute && instrs[i].op >= 0 && g.tensor(g.op(instrs[i].op).output).updates >= 0)
      return static_cast<int>(i);
  return -1;
}

}  // namespace tilewise::exec::cuda

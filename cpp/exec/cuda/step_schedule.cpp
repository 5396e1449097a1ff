#include "exec/cuda/step_schedule.h"

#include <algorithm>
#include <map>
#include <string>

#include "exec/errors.h"
#include "graph/graph.h"

namespace tilewise::exec::cuda {

void run_step(const std::vector<Program>& programs, const std::function<void(int, size_t)>& local,
              const std::function<void(const std::vector<CommOp>&)>& group) {
  const int n = static_cast<int>(programs.size());
  std::vector<size_t> pc(n, 0);
  std::map<int64_t, CommOp> packed;  // Sends passed, by tag, not yet issued with their Recv
  while (true) {
    bool moved = false;
    for (int d = 0; d < n; ++d) {
      const auto& instrs = programs[d].instrs;
      for (; pc[d] < instrs.size() && instrs[pc[d]].kind != InstrKind::kRecv; ++pc[d], moved = true) {
        local(d, pc[d]);
        if (instrs[pc[d]].kind == InstrKind::kSend) packed[instrs[pc[d]].tag] = {d, pc[d]};
      }
    }
    std::vector<CommOp> wave;  // each device at a Recv whose Send is packed, with that Send
    for (int d = 0; d < n; ++d) {
      if (pc[d] == programs[d].instrs.size()) continue;
      auto it = packed.find(programs[d].instrs[pc[d]].tag);
      if (it == packed.end()) continue;
      wave.push_back(it->second);
      wave.push_back({d, pc[d]});
      packed.erase(it);
    }
    if (!wave.empty()) {
      group(wave);
      for (const CommOp& op : wave)
        if (programs[op.device].instrs[op.instr].kind == InstrKind::kRecv) ++pc[op.device];
      continue;
    }
    std::string waiting;
    for (int d = 0; d < n; ++d)
      if (pc[d] < programs[d].instrs.size())
        waiting += " device " + std::to_string(d) + " at " + programs[d].instr_text(programs[d].instrs[pc[d]]) + ";";
    for (const auto& [tag, op] : packed)
      waiting += " device " + std::to_string(op.device) + "'s " + programs[op.device].instr_text(programs[op.device].instrs[op.instr]) + " unreceived;";
    if (waiting.empty()) return;
    if (!moved) throw ExecError("the devices' programs wait on each other (a Send or Recv without its partner):" + waiting);
  }
}

std::vector<std::vector<RankCall>> rank_calls(const std::vector<Program>& programs) {
  std::vector<std::vector<RankCall>> out(programs.size());
  int wave = 0;
  run_step(
      programs, [](int, size_t) {},
      [&](const std::vector<CommOp>& ops) {
        for (const CommOp& op : ops) {
          const Program& prog = programs[op.device];
          const Instr& in = prog.instrs[op.instr];
          out[op.device].push_back({wave, in.kind == InstrKind::kSend, in.peer,
                                    in.box.volume() * graph::dtype_size(prog.buffers[in.buffer].dtype)});
        }
        ++wave;
      });
  return out;
}

std::vector<size_t> stream_order(const Program& program) {
  const size_t ns = program.streams.size();
  std::vector<std::vector<size_t>> on(ns);
  int events = 0;
  for (size_t i = 0; i < program.instrs.size(); ++i) {
    on[static_cast<size_t>(program.instrs[i].stream)].push_back(i);
    events = std::max(events, program.instrs[i].event + 1);
  }
  std::vector<char> recorded(static_cast<size_t>(events), 0);
  std::vector<size_t> at(ns, 0), order;
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t s = 0; s < ns; ++s)
      for (; at[s] < on[s].size(); ++at[s], moved = true) {
        const Instr& in = program.instrs[on[s][at[s]]];
        if (in.kind == InstrKind::kWait && !recorded[static_cast<size_t>(in.event)]) break;
        if (in.kind == InstrKind::kRecord) recorded[static_cast<size_t>(in.event)] = 1;
        order.push_back(on[s][at[s]]);
      }
  }
  if (order.size() != program.instrs.size())
    throw ExecError("device " + std::to_string(program.device) + "'s streams wait on each other in a cycle");
  return order;
}

}  // namespace tilewise::exec::cuda

#include "exec/cuda/step_schedule.h"

#include <map>
#include <string>

#include "exec/errors.h"

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

}  // namespace tilewise::exec::cuda

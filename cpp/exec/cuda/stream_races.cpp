#include "exec/cuda/stream_races.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>

#include "exec/cuda/step_schedule.h"
#include "exec/errors.h"

namespace tilewise::exec::cuda {

namespace {

constexpr int kStreams = 3;
using Clock = std::array<int64_t, kStreams>;  // per stream: the last instruction (its 1-based count) ordered before

struct Access {
  size_t instr;
  int stream;
  int64_t seq;  // the instruction's 1-based count on its stream
  int space;    // 0: the arena block or pool; 1 + b: resident buffer b's own allocation
  int64_t lo, hi;
  bool write;
  int buffer;
};

}  // namespace

std::vector<StreamRace> stream_races(const Lowered& low, const LaunchPlan& plan, int device, size_t limit,
                                     const SwappedLaunch* swapped, size_t* ordered) {
  if (ordered) *ordered = 0;
  if (plan.swapped && !swapped) throw ExecError("stream_races: a swapped program needs its SwappedLaunch");
  const Program& prog = low.programs.at(static_cast<size_t>(device));
  const std::vector<size_t> order = plan.swapped ? stream_order(prog) : [&] {
    std::vector<size_t> o(prog.instrs.size());
    for (size_t i = 0; i < o.size(); ++i) o[i] = i;
    return o;
  }();
  // Where each buffer is: a fixed arena offset, its own allocation (resident), or in a swapped program
  // wherever its Alloc or SwapIn put it last.
  std::vector<int64_t> where(prog.buffers.size(), -1);
  for (size_t b = 0; b < prog.buffers.size(); ++b) {
    const int home = plan.swapped ? swapped->home[b].object : -1;
    where[b] = !plan.swapped ? plan.offset[b] : home >= 0 ? swapped->objects[static_cast<size_t>(home)].first : -1;
  }
  std::vector<Clock> stream_clock(kStreams, Clock{});
  std::vector<int64_t> count(kStreams, 0);
  std::map<int, Clock> event_clock;
  std::vector<Access> seen;
  std::vector<StreamRace> out;
  auto describe = [&](const Access& a) {
    const Instr& in = prog.instrs[a.instr];
    return "instruction " + std::to_string(a.instr) + " (" + kind_name(in.kind) +
           (in.op >= 0 && in.op < static_cast<int>(prog.op_names.size()) ? " " + prog.op_names[in.op] : std::string()) +
           ", stream " + std::to_string(a.stream) + ") " + (a.write ? "writes" : "reads") + " '" +
           prog.buffers[a.buffer].name + "'";
  };
  for (size_t i : order) {
    const Instr& in = prog.instrs[i];
    const Launch& l = plan.launches[i];
    const int s = l.stream;
    Clock now = stream_clock[s];
    now[s] = ++count[s];
    if (l.kind == InstrKind::kRecord) event_clock[l.event] = now;
    if (l.kind == InstrKind::kWait) {
      auto it = event_clock.find(l.event);
      if (it != event_clock.end())
        for (int k = 0; k < kStreams; ++k) now[k] = std::max(now[k], it->second[k]);
    }
    stream_clock[s] = now;
    if (plan.swapped && l.kind == InstrKind::kAlloc) where[in.buffer] = l.offset;
    if (plan.swapped && l.kind == InstrKind::kWait && l.event >= 0 &&
        static_cast<size_t>(l.event) < swapped->swapped_in_by.size() && swapped->swapped_in_by[l.event].first >= 0)
      where[swapped->swapped_in_by[l.event].first] = swapped->swapped_in_by[l.event].second;
    std::vector<std::pair<int, bool>> touched;  // (buffer, writes)
    switch (in.kind) {
      case InstrKind::kCompute:
        for (int b : in.inputs)
          if (b >= 0) touched.emplace_back(b, false);
        if (in.scratch >= 0) touched.emplace_back(in.scratch, true);
        touched.emplace_back(in.buffer, true);
        break;
      case InstrKind::kCopy: touched = {{in.src, false}, {in.buffer, true}}; break;
      case InstrKind::kCombine: touched = {{in.src, false}, {in.buffer, true}}; break;
      case InstrKind::kSend: touched = {{in.buffer, false}}; break;
      case InstrKind::kRecv: touched = {{in.buffer, true}}; break;
      case InstrKind::kSwapIn: touched = {{in.buffer, true}}; break;
      case InstrKind::kSwapOut: touched = {{in.buffer, false}}; break;
      default: break;
    }
    for (const auto& [b, write] : touched) {
      const BufferDesc& buf = prog.buffers[b];
      if (buf.bytes() == 0) continue;
      const bool arena = plan.swapped ? where[b] >= 0 : plan.offset[b] >= 0;
      Access a{i, s, now[s], arena ? 0 : 1 + b, arena ? where[b] : 0, (arena ? where[b] : 0) + buf.bytes(), write, b};
      if (plan.swapped && (l.kind == InstrKind::kSwapOut || l.kind == InstrKind::kSwapIn))
        a.space = 0, a.lo = l.offset, a.hi = l.offset + buf.bytes();
      for (const Access& x : seen) {
        if (x.space != a.space || x.stream == a.stream || (!x.write && !a.write) || x.hi <= a.lo || a.hi <= x.lo) continue;
        if (x.seq <= now[x.stream]) {  // ordered: x happens before this instruction
          if (ordered) ++*ordered;
          continue;
        }
        if (out.size() < limit)
          out.push_back(StreamRace{x.instr, i, describe(x) + " and " + describe(a) + " with no event ordering them"});
      }
      seen.push_back(a);
    }
  }
  return out;
}

}  // namespace tilewise::exec::cuda

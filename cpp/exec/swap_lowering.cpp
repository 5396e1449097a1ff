// Lowering of a swap plan onto the one-device program (swap_lowering.h): checks, then the three streams.
#include "exec/swap_lowering.h"

#include <algorithm>
#include <string>
#include <tuple>

#include "exec/errors.h"
#include "graph/graph.h"
#include "tdl/errors.h"

namespace tilewise::exec {

Lowered one_device_base(const graph::Graph& g, const std::vector<int>& keep,
                        const std::vector<std::pair<int, int>>& in_place) {
  cost::Placement one;
  one.devices = 1;
  one.assignment.tilings.assign(g.tensors().size(), cost::Tiling{});
  one.assignment.splits.assign(g.ops().size(), cost::OpSplit{});
  return lower(g, one, keep, in_place);
}

namespace {

[[noreturn]] void misfit(const std::string& what) { throw ExecError("swap plan: " + what); }

std::string str(int64_t x) { return std::to_string(x); }

// Ops in `order` must be every op of `g` once, each after the producers of its inputs, and every
// reader of a tensor before the op that updates it in place (it reads the old value).
std::vector<int> check_order(const graph::Graph& g, const std::vector<int>& order) {
  const int nops = static_cast<int>(g.ops().size());
  if (static_cast<int>(order.size()) != nops)
    misfit("the schedule has " + str(order.size()) + " ops but the graph has " + str(nops) +
           " (a plan of another graph?)");
  std::vector<int> pos(nops, -1);
  for (int k = 0; k < nops; ++k) {
    const int op = order[k];
    if (op < 0 || op >= nops) misfit("schedule entry " + str(k) + " is op " + str(op) + ", not one of 0.." + str(nops - 1));
    if (pos[op] >= 0) misfit("op '" + g.op(op).name + "' is scheduled twice");
    pos[op] = k;
  }
  for (const auto& op : g.ops())
    for (int t : op.inputs) {
      const int p = g.tensor(t).producer;
      if (p >= 0 && pos[p] > pos[op.id])
        misfit("op '" + op.name + "' is scheduled before '" + g.op(p).name + "', which produces its input '" +
               g.tensor(t).name + "'");
    }
  for (const auto& t : g.tensors()) {
    if (t.updates < 0 || t.producer < 0) continue;
    for (int c : g.tensor(t.updates).consumers)
      if (c != t.producer && pos[c] > pos[t.producer])
        misfit("op '" + g.op(c).name + "' reads '" + g.tensor(t.updates).name + "' but is scheduled after '" +
               g.op(t.producer).name + "', which updates it in place");
  }
  return pos;
}

// The streams must be able to finish: a dry run advancing every stream as far as its waits allow
// (a cycle of control edges would deadlock the executor; the simulator would report it too).
void check_runnable(const Program& p) {
  const int ns = static_cast<int>(p.streams.size());
  std::vector<std::vector<int>> on(ns);
  int events = 0;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    on[p.instrs[i].stream].push_back(static_cast<int>(i));
    if (p.instrs[i].event >= 0) events = std::max(events, p.instrs[i].event + 1);
  }
  std::vector<char> recorded(events, 0);
  std::vector<size_t> at(ns, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < ns; ++s)
      while (at[s] < on[s].size()) {
        const Instr& in = p.instrs[on[s][at[s]]];
        if (in.kind == InstrKind::kWait && !recorded[in.event]) break;
        if (in.kind == InstrKind::kRecord) recorded[in.event] = 1;
        ++at[s], moved = true;
      }
  }
  for (int s = 0; s < ns; ++s)
    if (at[s] < on[s].size())
      misfit("its control edges form a cycle: stream '" + p.streams[s] + "' waits forever at instruction " +
             str(on[s][at[s]]) + " (" + p.instr_text(p.instrs[on[s][at[s]]]) + ")");
}

}  // namespace

SwappedLowered lower_swapped(const graph::Graph& g, const SwapSchedule& s, const std::vector<int>& keep,
                             const std::vector<std::pair<int, int>>& in_place) {
  SwappedLowered out;
  out.low = one_device_base(g, keep, in_place);
  out.schedule = s;
  const Program& base = out.low.programs[0];
  const int nb = static_cast<int>(base.buffers.size());
  const int n = static_cast<int>(s.order.size());
  const int nin = static_cast<int>(s.swap_ins.size()), nout = static_cast<int>(s.swap_outs.size());
  const int nobj = static_cast<int>(s.objects.size());
  for (const auto& b : base.buffers)
    if (b.role == BufferRole::kComputed || b.role == BufferRole::kStaging)
      misfit(std::string("the graph's one-device program holds ") + role_name(b.role) + " buffer '" + b.name +
             "', which no swap plan places (only tiles and regions are the plan's tensors)");
  check_order(g, s.order);

  // Ranges: objects inside the pool, buffers inside their objects.
  if (s.memory_bytes < 0) misfit("memory_bytes is negative");
  for (int o = 0; o < nobj; ++o) {
    const auto [off, bytes] = s.objects[o];
    if (off < 0 || bytes < 0 || off + bytes > s.memory_bytes)
      misfit("object " + str(o) + " [" + str(off) + ", " + str(off + bytes) + ") is not inside the pool of " +
             str(s.memory_bytes) + " bytes");
  }
  auto bytes_of = [&](int b) { return base.buffers[b].bytes(); };
  auto check_place = [&](const char* what, int index, int buffer, int object) {
    if (buffer < 0 || buffer >= nb) misfit(std::string(what) + " " + str(index) + ": buffer " + str(buffer) + " out of range");
    if (object < 0 || object >= nobj) misfit(std::string(what) + " " + str(index) + ": object " + str(object) + " out of range");
    if (bytes_of(buffer) > s.objects[object].second)
      misfit(std::string(what) + " " + str(index) + ": '" + base.buffers[buffer].name + "' (" + str(bytes_of(buffer)) +
             " bytes) does not fit object " + str(object) + " (" + str(s.objects[object].second) + " bytes)");
  };
  auto check_position = [&](const char* what, int index, int k, bool optional) {
    if ((optional && k == -1) || (k >= 0 && k < n)) return;
    misfit(std::string(what) + " " + str(index) + ": position " + str(k) + " out of range");
  };
  for (int j = 0; j < nin; ++j) {
    const auto& in = s.swap_ins[j];
    check_place("swap-in", j, in.buffer, in.object);
    check_position("swap-in", j, in.position, false);
    check_position("swap-in", j, in.after.op, true);
    check_position("swap-in", j, in.issued, true);
    if (in.after.swap_out < -1 || in.after.swap_out >= nout || in.after.swap_in < -1 || in.after.swap_in >= j)
      misfit("swap-in " + str(j) + " waits for a swap that is not before it");
  }
  for (int j = 0; j < nout; ++j) {
    const auto& o = s.swap_outs[j];
    check_place("swap-out", j, o.buffer, o.object);
    check_position("swap-out", j, o.after, true);
    check_position("swap-out", j, o.issued, true);
  }
  if (static_cast<int>(s.outputs_ready.size()) != n)
    misfit("outputs_ready has " + str(s.outputs_ready.size()) + " entries for " + str(n) + " positions");
  for (const auto& r : s.outputs_ready)
    if (r.swap_out < -1 || r.swap_out >= nout || r.swap_in < -1 || r.swap_in >= nin)
      misfit("outputs_ready names a swap out of range");

  // Stays: where each buffer is, from when to when, in schedule positions.
  out.home.assign(nb, SwapHome{});
  std::vector<std::vector<int>> stays_of(nb), starts_at(n), ends_at(n);
  auto from_pos = [&](const SwapSchedule::Stay& st) {
    switch (st.from) {
      case StayEdge::kIterationStart: return -1;
      case StayEdge::kOpStart: return st.from_index;
      case StayEdge::kSwapInStart: return s.swap_ins[st.from_index].position;
      default: return n + 1;
    }
  };
  auto to_pos = [&](const SwapSchedule::Stay& st) {
    switch (st.to) {
      case StayEdge::kOpEnd: return st.to_index;
      case StayEdge::kSwapOutEnd: return s.swap_outs[st.to_index].after;
      case StayEdge::kIterationEnd: return n;
      default: return -2;
    }
  };
  for (int i = 0; i < static_cast<int>(s.stays.size()); ++i) {
    const auto& st = s.stays[i];
    check_place("stay", i, st.buffer, st.object);
    const bool from_ok = st.from == StayEdge::kIterationStart ||
                         (st.from == StayEdge::kOpStart && st.from_index >= 0 && st.from_index < n) ||
                         (st.from == StayEdge::kSwapInStart && st.from_index >= 0 && st.from_index < nin);
    const bool to_ok = st.to == StayEdge::kIterationEnd || (st.to == StayEdge::kOpEnd && st.to_index >= 0 && st.to_index < n) ||
                       (st.to == StayEdge::kSwapOutEnd && st.to_index >= 0 && st.to_index < nout);
    if (!from_ok || !to_ok) misfit("stay " + str(i) + " of '" + base.buffers[st.buffer].name + "' has edges out of range");
    stays_of[st.buffer].push_back(i);
    if (st.from == StayEdge::kIterationStart) out.home[st.buffer].object = st.object;
    if (st.from == StayEdge::kOpStart) starts_at[st.from_index].push_back(i);
    if (st.to == StayEdge::kOpEnd) ends_at[st.to_index].push_back(i);
    if (st.to == StayEdge::kIterationEnd) out.home[st.buffer].end_object = st.object;
  }

  // One tensor per object at a time: in schedule positions, an object's stays do not overlap (a
  // stay covers its first position to its last; the next occupant comes in after the last use).
  {
    std::vector<std::vector<std::tuple<int, int, int>>> in_object(nobj);  // (from, to, buffer)
    for (const auto& st : s.stays)
      if (from_pos(st) <= to_pos(st)) in_object[st.object].emplace_back(from_pos(st), to_pos(st), st.buffer);
    for (int o = 0; o < nobj; ++o) {
      auto& v = in_object[o];
      std::sort(v.begin(), v.end());
      for (size_t i = 1; i < v.size(); ++i)
        if (std::get<0>(v[i]) <= std::get<1>(v[i - 1]))
          misfit("object " + str(o) + " holds '" + base.buffers[std::get<2>(v[i - 1])].name + "' and '" +
                 base.buffers[std::get<2>(v[i])].name + "' at once (position " + str(std::get<0>(v[i])) + ")");
    }
  }

  // The device's data between steps: what starts an iteration in an object must end it there.
  for (int b = 0; b < nb; ++b)
    if (out.home[b].object >= 0 && out.home[b].end_object != out.home[b].object)
      misfit("'" + base.buffers[b].name + "' starts the iteration in object " + str(out.home[b].object) +
             " but does not end it there (the next iteration would not find it)");

  // The base program's work per op (copies assembling regions, then the compute), and the check that
  // every buffer an op touches is in memory at its position.
  std::vector<std::vector<int>> work(g.ops().size());
  for (size_t i = 0; i < base.instrs.size(); ++i) {
    const Instr& in = base.instrs[i];
    if (in.kind == InstrKind::kCopy || in.kind == InstrKind::kCompute) work[in.op].push_back(static_cast<int>(i));
    else
      TW_ASSERT(in.kind == InstrKind::kAlloc || in.kind == InstrKind::kFree || in.kind == InstrKind::kRecord ||
                    in.kind == InstrKind::kWait,
                "a one-device program moves nothing between devices");
  }
  for (int k = 0; k < n; ++k) {
    const int op = s.order[k];
    auto held = [&](int b) {
      if (b < 0) return;
      for (int i : stays_of[b])
        if (from_pos(s.stays[i]) <= k && k <= to_pos(s.stays[i])) return;
      misfit("op '" + g.op(op).name + "' (position " + str(k) + ") uses '" + base.buffers[b].name +
             "', which the plan does not hold in memory then (a plan of another graph?)");
    };
    for (int i : work[op]) {
      const Instr& in = base.instrs[i];
      held(in.buffer), held(in.src);
      for (int b : in.inputs) held(b);
    }
  }

  // A tensor that lives across steps (a parameter, optimizer state) and is updated in place must leave
  // the step where the next one looks for it: copied out after its update, or back in its object (an
  // initial resident). A single-pass plan (double_pass=False) may leave it updated in memory only.
  {
    std::vector<int> written(nb, -1);  // position of the last write
    for (int k = 0; k < n; ++k)
      for (int i : work[s.order[k]])
        if (base.instrs[i].kind == InstrKind::kCompute) written[base.instrs[i].buffer] = k;
    std::vector<int> copied(nb, -1);  // position after which the last copy out runs
    for (const auto& o : s.swap_outs) copied[o.buffer] = std::max(copied[o.buffer], o.after);
    for (const auto& t : g.tensors()) {
      const int b = base.tile_of[t.id];
      if (t.producer >= 0 || b < 0 || written[b] < 0) continue;
      if (out.home[b].object < 0 && copied[b] < written[b])
        misfit("'" + t.name + "' is updated in place at position " + str(written[b]) +
               " but neither copied out after that nor kept in its object for the next iteration "
               "(a single-pass plan? plan with double_pass=True)");
    }
  }

  // The program.
  Program p;
  p.device = 0, p.devices = 1;
  p.streams = {"compute", "swap-in", "swap-out"};
  p.buffers = base.buffers;
  for (auto& b : p.buffers) b.resident = false;  // everything lives in the pool or the host store
  p.op_names = base.op_names;
  p.tile_of = base.tile_of;
  enum Stream { kCompute = 0, kIn = 1, kOut = 2 };
  const auto op_event = [](int k) { return k; };
  const auto in_event = [&](int j) { return n + j; };
  const auto out_event = [&](int j) { return n + nin + j; };
  std::vector<char> op_waited(n, 0);
  for (const auto& in : s.swap_ins) {
    if (in.after.op >= 0) op_waited[in.after.op] = 1;
    if (in.issued >= 0) op_waited[in.issued] = 1;
  }
  for (const auto& o : s.swap_outs) {
    if (o.after >= 0) op_waited[o.after] = 1;
    if (o.issued >= 0) op_waited[o.issued] = 1;
  }
  auto event = [&](InstrKind kind, int stream, int e, int op) {
    Instr in;
    in.kind = kind, in.stream = stream, in.event = e, in.op = op;
    p.instrs.push_back(in);
  };
  auto memory = [&](InstrKind kind, int stream, int buffer, int object, int op) {
    Instr in;
    in.kind = kind, in.stream = stream, in.buffer = buffer, in.op = op, in.bytes = bytes_of(buffer);
    if (object >= 0) in.offset = s.objects[object].first;
    p.instrs.push_back(in);
  };
  std::vector<std::vector<int>> ins_for(n);
  for (int j = 0; j < nin; ++j) ins_for[s.swap_ins[j].position].push_back(j);
  for (int k = 0; k < n; ++k) {
    const int op = s.order[k];
    for (int j : ins_for[k]) event(InstrKind::kWait, kCompute, in_event(j), op);
    const SwapReady& r = s.outputs_ready[k];
    if (r.swap_out >= 0) event(InstrKind::kWait, kCompute, out_event(r.swap_out), op);
    if (r.swap_in >= 0) event(InstrKind::kWait, kCompute, in_event(r.swap_in), op);
    for (int i : starts_at[k]) memory(InstrKind::kAlloc, kCompute, s.stays[i].buffer, s.stays[i].object, op);
    for (int i : work[op]) {
      Instr in = base.instrs[i];
      in.stream = kCompute;
      p.instrs.push_back(std::move(in));
    }
    for (int i : ends_at[k]) memory(InstrKind::kFree, kCompute, s.stays[i].buffer, -1, op);
    if (op_waited[k]) event(InstrKind::kRecord, kCompute, op_event(k), op);
  }
  for (int j = 0; j < nin; ++j) {
    const auto& in = s.swap_ins[j];
    const int op = s.order[in.position];
    if (in.after.op >= 0) event(InstrKind::kWait, kIn, op_event(in.after.op), op);
    if (in.after.swap_out >= 0) event(InstrKind::kWait, kIn, out_event(in.after.swap_out), op);
    if (in.issued >= 0 && in.issued != in.after.op) event(InstrKind::kWait, kIn, op_event(in.issued), op);
    memory(InstrKind::kSwapIn, kIn, in.buffer, in.object, op);
    out.swap_in_bytes += bytes_of(in.buffer);
    event(InstrKind::kRecord, kIn, in_event(j), op);
  }
  for (int j = 0; j < nout; ++j) {
    const auto& o = s.swap_outs[j];
    const int op = o.after >= 0 ? s.order[o.after] : -1;
    if (o.after >= 0) event(InstrKind::kWait, kOut, op_event(o.after), op);
    if (o.issued >= 0 && o.issued != o.after) event(InstrKind::kWait, kOut, op_event(o.issued), op);
    memory(InstrKind::kSwapOut, kOut, o.buffer, o.object, op);
    out.swap_out_bytes += bytes_of(o.buffer);
    event(InstrKind::kRecord, kOut, out_event(j), op);
  }
  check_runnable(p);
  out.low.programs[0] = std::move(p);
  return out;
}

}  // namespace tilewise::exec

// The augmented graph as simulator tasks, and the memory sweep over the simulated stays (simulate.h).
#include "swap/simulate.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "sim/simulator.h"

namespace tilewise::swap {

namespace {

enum Resource : int { kToDevice = 0, kToHost = 1, kLink = 2 };

/// The augmented graph as general simulator tasks: compute positions, then swap-ins, then swap-outs.
std::vector<sim::Task> plan_tasks(const Problem& p, const SwapPlan& plan) {
  const int n = static_cast<int>(plan.schedule.size());
  const int nin = static_cast<int>(plan.swap_ins.size()), nout = static_cast<int>(plan.swap_outs.size());
  const auto in_task = [&](int j) { return n + j; };
  const auto out_task = [&](int j) { return n + nin + j; };
  std::vector<sim::Task> tasks(static_cast<size_t>(n + nin + nout));
  for (int k = 0; k < n; ++k) {
    sim::Task& t = tasks[static_cast<size_t>(k)];
    t.stream = kCompute;
    t.seconds = p.ops()[static_cast<size_t>(plan.schedule[static_cast<size_t>(k)])].seconds;
    // The op's own earlier positions are stream order already; swap-outs freeing its outputs' objects are not.
    const Ready& r = plan.outputs_ready[static_cast<size_t>(k)];
    if (r.swap_out >= 0) t.after.push_back(out_task(r.swap_out));
    if (r.swap_in >= 0) t.after.push_back(in_task(r.swap_in));
  }
  const auto wait = [&](sim::Task& t, const Ready& r) {
    if (r.op >= 0) t.after.push_back(r.op);
    if (r.swap_out >= 0) t.after.push_back(out_task(r.swap_out));
  };
  for (int j = 0; j < nin; ++j) {
    const SwapIn& s = plan.swap_ins[static_cast<size_t>(j)];
    sim::Task& t = tasks[static_cast<size_t>(in_task(j))];
    t.stream = kSwapIn;
    t.work = static_cast<double>(p.tensors()[static_cast<size_t>(s.tensor)].bytes);
    t.resources = {kToDevice, kLink};
    wait(t, s.after);
    if (s.issued >= 0 && s.issued != s.after.op) t.after.push_back(s.issued);
    tasks[static_cast<size_t>(s.position)].after.push_back(in_task(j));
  }
  for (int j = 0; j < nout; ++j) {
    const SwapOut& s = plan.swap_outs[static_cast<size_t>(j)];
    sim::Task& t = tasks[static_cast<size_t>(out_task(j))];
    t.stream = kSwapOut;
    t.work = static_cast<double>(p.tensors()[static_cast<size_t>(s.tensor)].bytes);
    t.resources = {kToHost, kLink};
    if (s.after >= 0) t.after.push_back(s.after);
    if (s.issued > s.after) t.after.push_back(s.issued);
  }
  return tasks;
}

/// The same timeline without the general machinery. Each stream runs in order, so every control edge
/// "task i of stream X ended" means "X has ended its first i + 1 tasks": a task's dependencies are one
/// count per stream, and at most three tasks (one per stream) run at once — no event heap, no task
/// list. The arithmetic is the general simulator's, step for step (sim/simulator.cpp: a copy's rate is
/// min(one_way, both_ways / copies running), its end re-derived only when that rate changes, ends at
/// one instant handled before the rates are shared again), so the times are equal to the last bit
/// (tested against it). False on a dependency cycle (the caller asks the general one to name it).
class Streams {
 public:
  bool run(const Problem& p, const SwapPlan& plan, sim::Timeline& tl) {
    const int n = static_cast<int>(plan.schedule.size());
    count_[kCompute] = n;
    count_[kSwapIn] = static_cast<int>(plan.swap_ins.size());
    count_[kSwapOut] = static_cast<int>(plan.swap_outs.size());
    const size_t total = static_cast<size_t>(count_[0] + count_[1] + count_[2]);
    // needs_[s][i]: per other stream, how many of its tasks must have ended before task i of s starts.
    for (int s = 0; s < 3; ++s) needs_[s].assign(static_cast<size_t>(count_[s]), Needs{});
    for (int k = 0; k < n; ++k) {
      const Ready& r = plan.outputs_ready[static_cast<size_t>(k)];
      Needs& d = needs_[kCompute][static_cast<size_t>(k)];
      d.of[kSwapOut] = r.swap_out + 1;
      d.of[kSwapIn] = r.swap_in + 1;
    }
    for (int j = 0; j < count_[kSwapIn]; ++j) {
      const SwapIn& s = plan.swap_ins[static_cast<size_t>(j)];
      Needs& d = needs_[kSwapIn][static_cast<size_t>(j)];
      d.of[kCompute] = std::max(s.after.op, s.issued) + 1;
      d.of[kSwapOut] = s.after.swap_out + 1;
      Needs& op = needs_[kCompute][static_cast<size_t>(s.position)];
      op.of[kSwapIn] = std::max(op.of[kSwapIn], j + 1);
    }
    for (int j = 0; j < count_[kSwapOut]; ++j) {
      const SwapOut& s = plan.swap_outs[static_cast<size_t>(j)];
      needs_[kSwapOut][static_cast<size_t>(j)].of[kCompute] = std::max(s.after, s.issued) + 1;
    }
    tl.start.assign(total, 0);
    tl.end.assign(total, 0);
    base_[kCompute] = 0;
    base_[kSwapIn] = n;
    base_[kSwapOut] = n + count_[kSwapIn];
    const double one_way = p.host().one_way, both_ways = p.host().both_ways;
    int done[3] = {0, 0, 0};
    bool running[3] = {false, false, false};
    double end[3] = {0, 0, 0}, remaining[3] = {0, 0, 0}, since[3] = {0, 0, 0}, rate[3] = {0, 0, 0}, work[3] = {0, 0, 0};
    double now = 0;
    bool copies_changed = false;  // a copy started or ended at `now`: share the link again
    for (;;) {
      // Start what can start now; an op of zero seconds ends at once and may let more start.
      for (bool moved = true; moved;) {
        moved = false;
        for (int s = 0; s < 3; ++s) {
          if (running[s] || done[s] == count_[s]) continue;
          const Needs& d = needs_[s][static_cast<size_t>(done[s])];
          if (done[0] < d.of[0] || done[1] < d.of[1] || done[2] < d.of[2]) continue;
          const size_t task = static_cast<size_t>(base_[s] + done[s]);
          tl.start[task] = now;
          moved = true;
          if (s == kCompute) {
            end[s] = now + p.ops()[static_cast<size_t>(plan.schedule[static_cast<size_t>(done[s])])].seconds;
            if (end[s] == now) {
              tl.end[task] = now;
              ++done[s];
            } else {
              running[s] = true;
            }
          } else {
            const int tensor = s == kSwapIn ? plan.swap_ins[static_cast<size_t>(done[s])].tensor
                                            : plan.swap_outs[static_cast<size_t>(done[s])].tensor;
            work[s] = static_cast<double>(p.tensors()[static_cast<size_t>(tensor)].bytes);
            remaining[s] = work[s];
            since[s] = now;
            rate[s] = 0;
            running[s] = true;
            copies_changed = true;
          }
        }
      }
      if (copies_changed) {
        const double copies = static_cast<double>((running[kSwapIn] ? 1 : 0) + (running[kSwapOut] ? 1 : 0));
        for (int s = kSwapIn; s <= kSwapOut; ++s) {
          if (!running[s]) continue;
          const double r = std::min(one_way, both_ways / copies);
          if (r == rate[s]) continue;
          remaining[s] -= rate[s] * (now - since[s]);
          if (remaining[s] <= kDoneFraction * work[s]) remaining[s] = 0;
          since[s] = now;
          rate[s] = r;
          end[s] = now + remaining[s] / r;
        }
        copies_changed = false;
      }
      double next = std::numeric_limits<double>::infinity();
      for (int s = 0; s < 3; ++s)
        if (running[s]) next = std::min(next, end[s]);
      if (next == std::numeric_limits<double>::infinity()) break;
      now = next;
      for (int s = 0; s < 3; ++s)
        if (running[s] && end[s] == now) {
          tl.end[static_cast<size_t>(base_[s] + done[s])] = now;
          ++done[s];
          running[s] = false;
          copies_changed |= s != kCompute;
        }
    }
    if (done[0] != count_[0] || done[1] != count_[1] || done[2] != count_[2]) return false;
    tl.stream_busy.assign(3, 0);
    tl.makespan = 0;
    for (size_t i = 0; i < total; ++i) {
      const int s = i < static_cast<size_t>(base_[kSwapIn]) ? 0 : i < static_cast<size_t>(base_[kSwapOut]) ? 1 : 2;
      tl.stream_busy[static_cast<size_t>(s)] += tl.end[i] - tl.start[i];
      tl.makespan = std::max(tl.makespan, tl.end[i]);
    }
    return true;
  }

 private:
  static constexpr double kDoneFraction = 1e-12;  // sim/simulator.cpp's
  struct Needs {
    int of[3] = {0, 0, 0};
  };
  int count_[3] = {0, 0, 0}, base_[3] = {0, 0, 0};
  std::vector<Needs> needs_[3];
};

}  // namespace

sim::Timeline plan_timeline(const Problem& p, const SwapPlan& plan, bool general) {
  sim::Timeline tl;
  if (!general && Streams().run(p, plan, tl)) return tl;
  const std::vector<sim::Resource> resources = {
      {"host->device", p.host().one_way}, {"device->host", p.host().one_way}, {"host link", p.host().both_ways}};
  return sim::simulate(plan_tasks(p, plan), 3, resources);  // on a cycle, throws naming it
}

PlanTimes simulate_plan(const Problem& p, const SwapPlan& plan, bool details) {
  const int n = static_cast<int>(plan.schedule.size());
  const int nin = static_cast<int>(plan.swap_ins.size());
  // The search's fitness runs this millions of times: per thread, the buffers are reused.
  thread_local Streams streams;
  thread_local sim::Timeline scratch;
  sim::Timeline& tl = scratch;
  if (!streams.run(p, plan, tl)) tl = plan_timeline(p, plan, true);

  PlanTimes out;
  out.makespan = tl.makespan;
  out.stream_busy = tl.stream_busy;
  if (!details) return out;
  out.op_start.assign(tl.start.begin(), tl.start.begin() + n);
  out.op_end.assign(tl.end.begin(), tl.end.begin() + n);
  out.in_start.assign(tl.start.begin() + n, tl.start.begin() + n + nin);
  out.in_end.assign(tl.end.begin() + n, tl.end.begin() + n + nin);
  out.out_start.assign(tl.start.begin() + n + nin, tl.start.end());
  out.out_end.assign(tl.end.begin() + n + nin, tl.end.end());
  const auto when = [&](Stay::Edge e, int i) {
    switch (e) {
      case Stay::kIterationStart: return 0.0;
      case Stay::kOpStart: return out.op_start[static_cast<size_t>(i)];
      case Stay::kOpEnd: return out.op_end[static_cast<size_t>(i)];
      case Stay::kSwapInStart: return out.in_start[static_cast<size_t>(i)];
      case Stay::kSwapInEnd: return out.in_end[static_cast<size_t>(i)];
      case Stay::kSwapOutEnd: return out.out_end[static_cast<size_t>(i)];
      case Stay::kIterationEnd: break;
    }
    return out.makespan;
  };
  // Memory: +bytes when a stay begins, -bytes when it ends; frees first at one instant (an object
  // handed from one tensor to the next is never counted twice).
  std::vector<std::tuple<double, int64_t, int64_t>> events;
  for (const Stay& st : plan.stays) {
    const double a = when(st.from, st.from_index), b = when(st.to, st.to_index);
    out.stay_start.push_back(a);
    out.stay_end.push_back(b);
    const int64_t ob = plan.objects[static_cast<size_t>(st.object)].bytes;
    const int64_t tb = p.tensors()[static_cast<size_t>(st.tensor)].bytes;
    events.emplace_back(a, ob, tb);
    events.emplace_back(b, -ob, -tb);
  }
  std::sort(events.begin(), events.end());
  int64_t objects = 0, tensors = 0;
  for (const auto& [time, ob, tb] : events) {
    objects += ob;
    tensors += tb;
    out.peak_memory = std::max(out.peak_memory, objects);
    out.peak_tensor_bytes = std::max(out.peak_tensor_bytes, tensors);
  }
  return out;
}

TimedPlan timed(const Problem& p, SwapPlan plan) {
  TimedPlan out;
  out.times = simulate_plan(p, plan);
  out.plan = std::move(plan);
  return out;
}

}  // namespace tilewise::swap

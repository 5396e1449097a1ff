// The augmented graph as simulator tasks, and the memory sweep over the simulated stays (simulate.h).
#include "swap/simulate.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "sim/simulator.h"

namespace tilewise::swap {

namespace {

enum Resource : int { kToDevice = 0, kToHost = 1, kLink = 2 };

}  // namespace

PlanTimes simulate_plan(const Problem& p, const SwapPlan& plan, bool details) {
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
  const std::vector<sim::Resource> resources = {
      {"host->device", p.host().one_way}, {"device->host", p.host().one_way}, {"host link", p.host().both_ways}};
  const sim::Timeline tl = sim::simulate(tasks, 3, resources);

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

// Swapped execution below Python: a swap plan (cpp/swap) lowered onto a two-conv graph's one-device
// program (exec/swap_lowering.h), run in the pool (exec/swap_runtime.h) against the unswapped
// executor, its misfits rejected, and its swaps priced on the host link (sim/program_sim.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "exec/swap_runtime.h"
#include "sim/program_sim.h"
#include "swap/planner.h"
#include "swap/pool.h"
#include "tdl_fixtures.h"

namespace tilewise::exec {
namespace {

using graph::Role;

// x -> conv(w1) -> y -> conv(w2) -> z, all float32.
struct TwoConvs {
  graph::Graph g;
  int x, w1, w2, y, z;
  TwoConvs() {
    auto conv = std::make_shared<tdl::OpDesc>(tdl::testing::conv1d());
    x = g.add_tensor("x", {4, 16, 34}, Role::kInput);
    w1 = g.add_tensor("w1", {16, 16, 3}, Role::kParameter);
    w2 = g.add_tensor("w2", {16, 16, 3}, Role::kParameter);
    y = g.op(g.add_op("conv1d", "conv1", "{}", {x, w1}, conv, "y", Role::kActivation)).output;
    z = g.op(g.add_op("conv1d", "conv2", "{}", {y, w2}, conv, "z", Role::kActivation)).output;
  }
  int64_t bytes(int t) const { return g.tensor(t).elements() * 4; }
};

// The swap problem of the graph (tensors in graph order, ops in graph order) and its plan in
// `capacity` bytes (0: the least pool, where every op's working set only just fits).
swap::SwapPlan plan_for(const TwoConvs& m, int64_t capacity) {
  std::vector<swap::Tensor> ts = {{"x", m.bytes(m.x), swap::TensorKind::kParameter, false},
                                  {"w1", m.bytes(m.w1), swap::TensorKind::kParameter, false},
                                  {"w2", m.bytes(m.w2), swap::TensorKind::kParameter, false},
                                  {"y", m.bytes(m.y), swap::TensorKind::kActivation, false},
                                  {"z", m.bytes(m.z), swap::TensorKind::kActivation, true}};
  std::vector<swap::Op> ops = {{"conv1", {0, 1}, {3}, 1e-3}, {"conv2", {3, 2}, {4}, 1e-3}};
  if (capacity == 0) {
    const swap::Problem roomy = swap::Problem::make(ts, ops, 1 << 30, {1e9, 2e9});
    const swap::LeastPool least = roomy.least_pool();
    const swap::Problem p = swap::Problem::make(ts, ops, least.bytes, {1e9, 2e9});
    return swap::plan_swaps(p, {0, 1}, {least.cls, swap::least_counts(p, least.cls)}, true);
  }
  const swap::Problem p = swap::Problem::make(ts, ops, capacity, {1e9, 2e9});
  return swap::plan_swaps(p, {0, 1}, swap::default_pool(p), true);
}

// As the bindings convert it: problem tensor i is graph tensor i, whose buffer is its tile's.
SwapSchedule schedule_of(const TwoConvs& m, const swap::SwapPlan& p) {
  const Lowered base = one_device_base(m.g, {m.z});
  auto buf = [&](int t) { return base.programs[0].tile_of[t]; };
  SwapSchedule s;
  s.order = p.schedule;
  s.memory_bytes = p.memory_bytes;
  for (const auto& o : p.objects) s.objects.emplace_back(o.offset, o.bytes);
  for (const auto& in : p.swap_ins)
    s.swap_ins.push_back({buf(in.tensor), in.object, in.position, {in.after.op, in.after.swap_out, in.after.swap_in}, in.issued});
  for (const auto& o : p.swap_outs) s.swap_outs.push_back({buf(o.tensor), o.object, o.after, o.issued});
  for (const auto& r : p.outputs_ready) s.outputs_ready.push_back({r.op, r.swap_out, r.swap_in});
  for (const auto& st : p.stays)
    s.stays.push_back({buf(st.tensor), st.object, static_cast<StayEdge>(st.from), static_cast<StayEdge>(st.to),
                       st.from_index, st.to_index});
  return s;
}

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 101 - 50) / 50.0f;
  return v;
}

TEST(SwapExec, RunsInTheSmallestPoolAsTheUnswappedExecutorDoes) {
  TwoConvs m;
  // Room for one op's working set at a time: every iteration evicts and brings back.
  const swap::SwapPlan plan = plan_for(m, 0);
  const int64_t capacity = plan.memory_bytes;
  ASSERT_FALSE(plan.swap_ins.empty());
  SwapExecutable swapped(m.g, schedule_of(m, plan), capacity, {m.z});
  cost::Placement one;
  one.assignment.tilings.assign(m.g.tensors().size(), {});
  one.assignment.splits.assign(m.g.ops().size(), {});
  Executable plain(m.g, one, 0, {m.z});
  for (int t : {m.x, m.w1, m.w2}) {
    const auto v = ramp(m.g.tensor(t).elements(), 1.0f + t);
    swapped.set_tensor(t, v.data());
    plain.set_tensor(t, v.data());
  }
  for (int step = 0; step < 2; ++step) {
    swapped.step();
    plain.step();
    EXPECT_EQ(swapped.get_tensor(m.z), plain.get_tensor(m.z)) << "step " << step;
  }
  const RunStats& s = swapped.stats();
  EXPECT_EQ(s.peak_bytes, std::vector<int64_t>{plan.memory_bytes});
  EXPECT_LE(s.pool_peak_bytes, plan.memory_bytes);
  int64_t in = 0;
  for (const auto& i : plan.swap_ins) in += m.bytes(i.tensor);  // problem tensor i is graph tensor i
  EXPECT_EQ(s.swapped_in_bytes, in);
  EXPECT_EQ(swapped.lowered().swap_in_bytes, in);
}

// Expects lower_swapped(s) to throw ExecError mentioning `part`.
void expect_misfit(const TwoConvs& m, const SwapSchedule& s, const std::string& part) {
  try {
    lower_swapped(m.g, s, {m.z});
    FAIL() << "no error; expected one mentioning '" << part << "'";
  } catch (const ExecError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(SwapExec, RejectsPlansThatDoNotFitTheGraph) {
  TwoConvs m;
  const SwapSchedule good = schedule_of(m, plan_for(m, 1 << 20));
  EXPECT_NO_THROW(lower_swapped(m.g, good, {m.z}));
  SwapSchedule s = good;
  s.order = {1, 0};
  expect_misfit(m, s, "which produces its input 'y'");
  s = good;
  s.order = {0};
  expect_misfit(m, s, "another graph");
  s = good;
  s.objects[0].second = 4;
  expect_misfit(m, s, "does not fit object 0");
  s = good;
  s.objects[0].first = s.memory_bytes;
  expect_misfit(m, s, "not inside the pool");
  s = good;
  s.stays.pop_back();
  expect_misfit(m, s, "does not hold in memory");
  s = good;
  for (auto& st : s.stays) st.object = 0, st.to = StayEdge::kIterationEnd;  // everything in object 0, never leaving
  for (auto& o : s.objects) o.second = s.memory_bytes - o.first;
  expect_misfit(m, s, "at once");
  s = schedule_of(m, plan_for(m, 0));
  ASSERT_FALSE(s.swap_ins.empty());
  s.swap_ins[0].after.op = s.swap_ins[0].position;  // waits for the op that waits for it
  expect_misfit(m, s, "cycle");
  s = good;
  s.memory_bytes = 1 << 30;
  EXPECT_THROW(SwapExecutable(m.g, s, 1 << 20, {m.z}), OutOfMemory);
}

TEST(SwapExec, SwapsArePricedOnTheHostLinkBesideCompute) {
  TwoConvs m;
  const SwappedLowered low = lower_swapped(m.g, schedule_of(m, plan_for(m, 0)), {m.z});
  sim::Cluster c;
  c.name = "one";
  c.device.kernels["interpreter"] = sim::KernelRate{sim::Profile{{1}, {1e9}}, 0};
  c.host.name = "host";
  c.host.bandwidth = sim::Profile{{1}, {1e9}};
  const sim::Prediction p = sim::simulate_programs(m.g, low.low, c);
  EXPECT_EQ(p.host_bytes, low.swap_in_bytes + low.swap_out_bytes);
  double swaps = 0, busy = 0;
  for (size_t i = 0; i < p.tasks.size(); ++i) {
    const double span = p.timeline.end[i] - p.timeline.start[i];
    busy += span;
    if (p.info[i].kind == "swap_in" || p.info[i].kind == "swap_out") {
      EXPECT_NEAR(span, static_cast<double>(p.info[i].bytes) / 1e9, 1e-12);
      swaps += span;
    }
  }
  EXPECT_GT(swaps, 0);
  EXPECT_LT(p.step_seconds, busy);  // the copy streams overlap compute
  c.host = sim::Link{};
  EXPECT_THROW(sim::simulate_programs(m.g, low.low, c), std::invalid_argument);
}

}  // namespace
}  // namespace tilewise::exec

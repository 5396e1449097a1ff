// The thread executor on several devices below Python: one persistent worker per device exchanging
// tiles through the mailbox, against the one-device executor. Mostly here for ThreadSanitizer
// (scripts/test_all.sh, build/cpp-tsan): the Python tests drive the same pool, but only this suite
// is built with -fsanitize=thread.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "exec/runtime.h"
#include "partition/plan.h"
#include "tdl_fixtures.h"

namespace tilewise::exec {
namespace {

using graph::Role;

// x -> conv(w1) -> y -> conv(w2) -> z; extents that 2-4 devices do not all divide.
struct TwoConvs {
  graph::Graph g;
  int x, w1, w2, z;
  TwoConvs() {
    auto conv = std::make_shared<tdl::OpDesc>(tdl::testing::conv1d());
    x = g.add_tensor("x", {6, 5, 17}, Role::kInput);
    w1 = g.add_tensor("w1", {5, 7, 3}, Role::kParameter);
    w2 = g.add_tensor("w2", {7, 4, 3}, Role::kParameter);
    const int y = g.op(g.add_op("conv1d", "conv1", "{}", {x, w1}, conv, "y", Role::kActivation)).output;
    z = g.op(g.add_op("conv1d", "conv2", "{}", {y, w2}, conv, "z", Role::kActivation)).output;
  }
};

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 101 - 50) / 50.0f;
  return v;
}

void feed(const TwoConvs& m, Executable& exe) {
  for (int t : {m.x, m.w1, m.w2}) exe.set_tensor(t, ramp(m.g.tensor(t).elements(), 1.0f + t).data());
}

class ThreadExecutor : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(ThreadExecutor, StepsOnSeveralDevicesAsOnOne) {
  const auto& [algorithm, devices] = GetParam();
  TwoConvs m;
  cost::Placement one;
  one.assignment.tilings.assign(m.g.tensors().size(), {});
  one.assignment.splits.assign(m.g.ops().size(), {});
  Executable plain(m.g, one, 0, {m.z});
  const partition::Plan plan = partition::partition(m.g, devices, algorithm);
  Executable many(m.g, plan, 0, {m.z}, {}, 30.0);
  many.set_atomic(devices % 2 == 1);  // atomic steps copy before writing: their own path through the pool
  feed(m, plain);
  feed(m, many);
  for (int step = 0; step < 3; ++step) {
    plain.step();
    many.step();
    const std::vector<float> want = plain.get_tensor(m.z), got = many.get_tensor(m.z);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << "step " << step << " element " << i;
    }
  }
  EXPECT_EQ(many.devices(), devices);
  EXPECT_EQ(many.stats().steps, 3);
  EXPECT_EQ(many.stats().bytes_moved, plan.comm_bytes);
  if (algorithm == "tofu") EXPECT_GT(many.stats().bytes_moved, 0);  // tiles do cross between the workers
}

INSTANTIATE_TEST_SUITE_P(Planners, ThreadExecutor,
                         ::testing::Combine(::testing::Values("tofu", "data_parallel", "spartan"),
                                            ::testing::Values(2, 3, 4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace tilewise::exec

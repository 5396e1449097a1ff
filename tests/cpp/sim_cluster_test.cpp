// The cluster description (cpp/sim/cluster.h): profiles interpolated in log2(size) (TensorOpt §3.2)
// checked against hand values at, between and outside the measured points; validation naming the
// field; transfer and kernel times; devices grouped into machines.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "sim/cluster.h"

namespace tilewise::sim {
namespace {

// 1 GB/s at 1 KiB, 3 GB/s at 4 KiB, 4 GB/s at 1 MiB.
Profile three_points() { return Profile{{1024, 4096, 1 << 20}, {1e9, 3e9, 4e9}}; }

Link link(const std::string& name, double bandwidth, double latency = 0) {
  Link l;
  l.name = name;
  l.bandwidth = Profile{{1}, {bandwidth}};
  l.latency = latency;
  return l;
}

Cluster two_machines() {
  Cluster c;
  c.name = "two";
  c.devices = 6;
  c.devices_per_machine = 4;
  c.intra = link("intra", 50e9);
  c.inter = link("inter", 10e9);
  c.device.name = "dev";
  c.device.kernels["gemm"] = KernelRate{Profile{{1}, {1e12}}, 5e-6};
  return c;
}

// Expects `f` to throw std::invalid_argument whose message contains `part`.
template <class F>
void expect_invalid(F f, const std::string& part) {
  try {
    f();
    FAIL() << "no exception; expected one naming '" << part << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(ClusterProfile, ValuesAtTheMeasuredPoints) {
  const Profile p = three_points();
  EXPECT_DOUBLE_EQ(p.at(1024), 1e9);
  EXPECT_DOUBLE_EQ(p.at(4096), 3e9);
  EXPECT_DOUBLE_EQ(p.at(1 << 20), 4e9);
}

TEST(ClusterProfile, LinearInLog2BetweenPoints) {
  const Profile p = three_points();
  // 2048 is halfway from 1024 to 4096 in log2 (10 -> 11 of 10 -> 12): halfway in value.
  EXPECT_DOUBLE_EQ(p.at(2048), 2e9);
  // 2^14 is a quarter of the way from 2^12 to 2^20 in log2: (14 - 12) / (20 - 12).
  EXPECT_DOUBLE_EQ(p.at(1 << 14), 3e9 + 0.25 * 1e9);
  // Not linear in size: 3072 is 2/3 of the way from 1024 to 4096 in bytes, (log2(3072) - 10) / 2 ~ 0.79
  // of the way in log2.
  EXPECT_NEAR(p.at(3072), 1e9 + (std::log2(3072.0) - 10) / 2 * 2e9, 1e-3);
  EXPECT_GT(p.at(3072), 1e9 + 2.0 / 3 * 2e9 + 1e8);
}

TEST(ClusterProfile, EndPointsHoldOutside) {
  const Profile p = three_points();
  EXPECT_DOUBLE_EQ(p.at(1), 1e9);
  EXPECT_DOUBLE_EQ(p.at(0), 1e9);
  EXPECT_DOUBLE_EQ(p.at(-5), 1e9);
  EXPECT_DOUBLE_EQ(p.at(1e15), 4e9);
  EXPECT_DOUBLE_EQ(p.at(std::numeric_limits<double>::infinity()), 4e9);
  const Profile one{{64}, {7}};
  EXPECT_DOUBLE_EQ(one.at(1), 7);
  EXPECT_DOUBLE_EQ(one.at(1e9), 7);
}

TEST(ClusterProfile, EmptyAndNaNThrow) {
  EXPECT_THROW(Profile{}.at(1), std::logic_error);
  EXPECT_THROW(three_points().at(std::nan("")), std::invalid_argument);
}

TEST(ClusterProfile, ValidationNamesWhatIsWrong) {
  expect_invalid([] { Profile{{1, 2}, {1}}.validate("bw"); }, "bw: 2 sizes but 1 values");
  expect_invalid([] { Profile{}.validate("bw"); }, "bw: no measured points");
  expect_invalid([] { Profile{{0}, {1}}.validate("bw"); }, "not positive and finite");
  expect_invalid([] { Profile{{4, 2}, {1, 1}}.validate("bw"); }, "not strictly ascending");
  expect_invalid([] { Profile{{2, 2}, {1, 1}}.validate("bw"); }, "not strictly ascending");
  expect_invalid([] { Profile{{2}, {-1}}.validate("bw"); }, "value -1");
  expect_invalid([] { Profile{{2}, {std::nan("")}}.validate("bw"); }, "not positive and finite");
  EXPECT_NO_THROW(three_points().validate("bw"));
}

TEST(ClusterLink, TransferSecondsIsLatencyPlusBytesOverBandwidth) {
  Link l = link("l", 1e9, 2e-6);
  EXPECT_DOUBLE_EQ(l.transfer_seconds(1e6), 2e-6 + 1e-3);
  EXPECT_DOUBLE_EQ(l.transfer_seconds(0), 0);  // nothing to send: no latency either
  l.bandwidth = three_points();
  EXPECT_DOUBLE_EQ(l.transfer_seconds(2048), 2e-6 + 2048 / 2e9);
}

TEST(ClusterDevice, KernelSecondsIsOverheadPlusWorkOverRate) {
  DeviceProfile d;
  d.name = "dev";
  d.kernels["gemm"] = KernelRate{Profile{{1e6, 1e9}, {1e10, 1e12}}, 5e-6};
  d.kernels["copy"] = KernelRate{Profile{{1}, {1e10}}, 0};
  EXPECT_DOUBLE_EQ(d.kernel_seconds("gemm", 1e9), 5e-6 + 1e9 / 1e12);
  EXPECT_DOUBLE_EQ(d.kernel_seconds("gemm", 1e6), 5e-6 + 1e6 / 1e10);
  EXPECT_DOUBLE_EQ(d.kernel_seconds("gemm", 0), 5e-6);  // a call with no work still pays its launch
  EXPECT_DOUBLE_EQ(d.kernel_seconds("copy", 5e9), 0.5);
  expect_invalid([&] { d.kernel_seconds("conv", 1); }, "no rate for kernel kind 'conv' (it has: copy, gemm)");
}

TEST(ClusterKinds, ListsEveryKindOnce) {
  const auto& kinds = kernel_kinds();
  EXPECT_EQ(kinds.size(), 11u);
  EXPECT_EQ(kinds.front(), "gemm");
  EXPECT_EQ(kinds.back(), "send");  // a message packed and handed over (program_sim.cpp)
  for (size_t i = 0; i < kinds.size(); ++i)
    for (size_t j = i + 1; j < kinds.size(); ++j) EXPECT_NE(kinds[i], kinds[j]);
}

TEST(ClusterShape, MachinesAndLinks) {
  const Cluster c = two_machines();
  EXPECT_EQ(c.machines(), 2);
  EXPECT_EQ(c.machine_of(0), 0);
  EXPECT_EQ(c.machine_of(3), 0);
  EXPECT_EQ(c.machine_of(4), 1);
  EXPECT_EQ(c.machine_of(5), 1);
  EXPECT_EQ(c.link(0, 3).name, "intra");
  EXPECT_EQ(c.link(4, 5).name, "intra");
  EXPECT_EQ(c.link(3, 4).name, "inter");
  EXPECT_EQ(&c.link(5, 0), &c.inter);
  EXPECT_NO_THROW(c.validate());
}

TEST(ClusterShape, MachinesDoNotOverflowNearIntMax) {
  Cluster c = two_machines();
  c.devices = std::numeric_limits<int>::max();
  c.devices_per_machine = 8;
  EXPECT_EQ(c.machines(), std::numeric_limits<int>::max() / 8 + 1);
}

TEST(ClusterValidate, NamesTheFirstFieldOutOfRange) {
  expect_invalid([] { auto c = two_machines(); c.devices = 0; c.validate(); }, "devices must be at least 1");
  expect_invalid([] { auto c = two_machines(); c.devices_per_machine = 0; c.validate(); }, "devices_per_machine");
  expect_invalid([] { auto c = two_machines(); c.concurrent_devices = -1; c.validate(); }, "concurrent_devices");
  expect_invalid([] { auto c = two_machines(); c.device.memory = -1; c.validate(); }, "device memory");
  expect_invalid([] { auto c = two_machines(); c.device.kernels["gemm"].overhead = -1; c.validate(); },
                 "kernel kind 'gemm' overhead");
  expect_invalid([] { auto c = two_machines(); c.device.kernels["gemm"].rate.values = {0}; c.validate(); },
                 "kernel kind 'gemm' rate");
  expect_invalid([] { auto c = two_machines(); c.intra.latency = -1; c.validate(); }, "link 'intra' latency");
  expect_invalid([] { auto c = two_machines(); c.inter.duplex_bandwidth = std::nan(""); c.validate(); },
                 "link 'inter' duplex_bandwidth");
  expect_invalid([] { auto c = two_machines(); c.inter.bandwidth = Profile{}; c.validate(); },
                 "the inter link has no bandwidth");
  expect_invalid([] { auto c = two_machines(); c.intra.bandwidth = Profile{}; c.validate(); },
                 "the intra link has no bandwidth");
  // Errors start with the cluster's name.
  expect_invalid([] { auto c = two_machines(); c.devices = 0; c.validate(); }, "cluster 'two': ");
}

TEST(ClusterValidate, UnusedLevelsMayBeEmpty) {
  Cluster one = two_machines();
  one.devices = 4;  // one machine: no inter link needed
  one.inter.bandwidth = Profile{};
  one.host.bandwidth = Profile{};
  EXPECT_NO_THROW(one.validate());
  Cluster singles = two_machines();
  singles.devices_per_machine = 1;  // one device per machine: no intra link needed
  singles.intra.bandwidth = Profile{};
  EXPECT_NO_THROW(singles.validate());
}

}  // namespace
}  // namespace tilewise::sim

// The stream-race check (stream_races.h) on hand-made launch plans: a cross-stream access to the same
// bytes is a race unless a Record/Wait pair orders it, including two buffers the arena placed on the
// same bytes at different times (the executor's Free issues nothing).
#include <gtest/gtest.h>

#include <vector>

#include "exec/cuda/stream_races.h"

namespace tilewise::exec::cuda {
namespace {

struct Builder {
  Lowered low;
  LaunchPlan plan;
  Builder(int buffers, std::vector<int64_t> offsets) {
    low.devices = 1;
    low.programs.resize(1);
    Program& p = low.programs[0];
    p.streams = {"compute", "comm"};
    for (int b = 0; b < buffers; ++b) {
      BufferDesc d;
      d.name = "b" + std::to_string(b);
      d.box = tdl::Box{{tdl::Range{0, 15}}};  // 64 bytes
      p.buffers.push_back(d);
    }
    plan.offset = std::move(offsets);
  }
  void add(InstrKind kind, int stream, int buffer, std::vector<int> inputs = {}, int event = -1) {
    Instr in;
    in.kind = kind, in.stream = stream, in.buffer = buffer, in.inputs = std::move(inputs), in.event = event;
    low.programs[0].instrs.push_back(in);
    Launch l;
    l.kind = kind, l.stream = stream, l.event = event;
    plan.launches.push_back(l);
  }
  std::vector<StreamRace> races() const { return stream_races(low, plan, 0); }
};

TEST(StreamRaces, ASendOfAComputedBufferNeedsAnEvent) {
  Builder b(1, {0});
  b.add(InstrKind::kCompute, 0, 0);
  b.add(InstrKind::kSend, 1, 0);
  const auto r = b.races();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].first, 0u);
  EXPECT_EQ(r[0].second, 1u);
  EXPECT_NE(r[0].what.find("'b0'"), std::string::npos) << r[0].what;

  Builder ordered(1, {0});
  ordered.add(InstrKind::kCompute, 0, 0);
  ordered.add(InstrKind::kRecord, 0, -1, {}, 0);
  ordered.add(InstrKind::kWait, 1, -1, {}, 0);
  ordered.add(InstrKind::kSend, 1, 0);
  EXPECT_TRUE(ordered.races().empty());
}

TEST(StreamRaces, ReusedArenaBytesNeedTheEarlierReaderOrderedFirst) {
  // b0 and b1 share bytes [0, 64): b0 is sent on the comm stream, then freed, and b1 computed there.
  auto build = [](bool wait_back) {
    Builder b(2, {0, 0});
    b.add(InstrKind::kCompute, 0, 0);
    b.add(InstrKind::kRecord, 0, -1, {}, 0);
    b.add(InstrKind::kWait, 1, -1, {}, 0);
    b.add(InstrKind::kSend, 1, 0);
    if (wait_back) {
      b.add(InstrKind::kRecord, 1, -1, {}, 1);
      b.add(InstrKind::kWait, 0, -1, {}, 1);
    }
    b.add(InstrKind::kFree, 0, 0);
    b.add(InstrKind::kAlloc, 0, 1);
    b.add(InstrKind::kCompute, 0, 1);
    return b;
  };
  const auto r = build(false).races();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_NE(r[0].what.find("reads 'b0'"), std::string::npos) << r[0].what;
  EXPECT_NE(r[0].what.find("writes 'b1'"), std::string::npos) << r[0].what;
  EXPECT_TRUE(build(true).races().empty());
}

TEST(StreamRaces, AWaitOrdersOnlyWhatItsRecordFollowed) {
  // The Record is issued before the compute that writes b0: waiting for it does not order the Send.
  Builder b(1, {0});
  b.add(InstrKind::kRecord, 0, -1, {}, 0);
  b.add(InstrKind::kCompute, 0, 0);
  b.add(InstrKind::kWait, 1, -1, {}, 0);
  b.add(InstrKind::kSend, 1, 0);
  EXPECT_EQ(b.races().size(), 1u);
}

TEST(StreamRaces, ReadsOnTwoStreamsAndSeparateBytesAreNoRaces) {
  Builder b(2, {0, 64});
  b.add(InstrKind::kCompute, 0, 0, {1});
  b.add(InstrKind::kSend, 1, 1);  // both read b1
  b.add(InstrKind::kRecv, 1, 1);  // writes b1 ...
  b.add(InstrKind::kCompute, 0, 0);  // ... while the compute stream writes b0, other bytes
  const auto r = b.races();
  ASSERT_EQ(r.size(), 1u);  // the Recv's write of b1 against the first compute's read of it
  EXPECT_EQ(r[0].first, 0u);
  EXPECT_EQ(r[0].second, 2u);
}

}  // namespace
}  // namespace tilewise::exec::cuda

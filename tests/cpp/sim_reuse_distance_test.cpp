// Reuse distances (cpp/sim/program_sim.h): an LRU stack distance over buffers, the step repeating.
// Hand-checked on small programs: a buffer touched many times in between counts once, a copy's
// destination is no read, and the previous step's touches give the first instructions theirs.
#include <gtest/gtest.h>

#include "sim/program_sim.h"

namespace tilewise::sim {
namespace {

using exec::BufferRole;
using exec::Instr;
using exec::InstrKind;
using exec::Program;

// A float32 buffer of `elements` (4 bytes each).
void buffer(Program& p, const std::string& name, int64_t elements) {
  p.buffers.push_back({name, BufferRole::kTile, -1, exec::Box{{{0, elements - 1}}}, false});
}

Instr compute(std::vector<int> inputs, int output, int64_t bytes) {
  Instr in;
  in.kind = InstrKind::kCompute, in.op = 0, in.inputs = std::move(inputs), in.buffer = output, in.bytes = bytes;
  return in;
}

Instr copy(int src, int dst, int64_t bytes) {
  Instr in;
  in.kind = InstrKind::kCopy, in.op = 0, in.src = src, in.buffer = dst, in.bytes = bytes;
  return in;
}

TEST(SimReuseDistance, CountsEachBufferOnceHoweverOftenItWasTouched) {
  Program p;
  buffer(p, "w", 1 << 18);  // 1 MiB, read at the start and the end of the step
  buffer(p, "h", 256);      // 1 KiB, read and written 100 times in between
  buffer(p, "y", 1024);     // 4 KiB
  p.instrs.push_back(compute({0}, 1, (1 << 20) + 1024));
  for (int i = 0; i < 100; ++i) p.instrs.push_back(compute({1}, 1, 2048));
  p.instrs.push_back(compute({0, 1}, 2, (1 << 20) + 1024 + 4096));
  const std::vector<double> d = reuse_distances(p);
  ASSERT_EQ(d.size(), p.instrs.size());
  // The last call reads w: since w's last touch only h was touched (the traffic was 200 KiB).
  EXPECT_EQ(d.back(), 1024.0);
  // h, read by the loop, was last touched by the instruction before: nothing in between.
  EXPECT_EQ(d[50], 0.0);
  // The first call reads w, last touched by the previous step's last call, which then touched h
  // (read after w) and y (written): 1 KiB + 4 KiB.
  EXPECT_EQ(d[0], 5120.0);
}

TEST(SimReuseDistance, ACopyReadsItsSourceNotItsDestination) {
  Program p;
  buffer(p, "w", 1 << 18);     // 1 MiB source, read at every step
  buffer(p, "fresh", 1 << 18); // a destination nothing reads
  buffer(p, "big", 1 << 22);   // 16 MiB touched between two steps' copies
  p.instrs.push_back(copy(0, 1, 1 << 20));
  p.instrs.push_back(compute({2}, 2, 2 << 22));
  const std::vector<double> d = reuse_distances(p);
  // Since the copy last read w: the copy's own destination (1 MiB) and big (16 MiB); the
  // destination's own history plays no part (it used to make every copy into a fresh buffer cold).
  EXPECT_EQ(d[0], static_cast<double>((1 << 20) + (1 << 24)));
  EXPECT_EQ(d[1], static_cast<double>(1 << 20) * 2);  // big: since its last touch, w and fresh
}

TEST(SimReuseDistance, InstructionsThatReadNothingOrMoveNoBytesHaveNone) {
  Program p;
  buffer(p, "x", 16);
  Instr recv;
  recv.kind = InstrKind::kRecv, recv.buffer = 0, recv.bytes = 64, recv.peer = 1, recv.tag = 1;
  Instr alloc;
  alloc.kind = InstrKind::kAlloc, alloc.buffer = 0, alloc.bytes = 64;
  p.instrs = {alloc, recv, compute({0}, 0, 0)};
  EXPECT_EQ(reuse_distances(p), (std::vector<double>{0.0, 0.0, 0.0}));
}

}  // namespace
}  // namespace tilewise::sim

// Reuse distances (cpp/sim/program_sim.h): an LRU stack distance over buffers, the step repeating.
// Hand-checked on small programs: a buffer touched many times in between counts once, a copy's
// destination is no read, and the previous step's touches give the first instructions theirs.
#include <gtest/gtest.h>

#include <random>
#include <set>

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

// The same distances by brute force: every touch logged over two passes of the step, and for each read
// the distinct buffers touched since that buffer's previous touch summed.
std::vector<double> brute_force_distances(const Program& p) {
  struct Touch {
    int buffer;
    size_t instr;
    bool read;
  };
  std::vector<Touch> log;
  auto touches = [](const Instr& in) {
    return in.bytes > 0 && (in.kind == InstrKind::kCompute || in.kind == InstrKind::kCopy ||
                            in.kind == InstrKind::kCombine || in.kind == InstrKind::kSend ||
                            in.kind == InstrKind::kRecv);
  };
  for (int pass = 0; pass < 2; ++pass)
    for (size_t k = 0; k < p.instrs.size(); ++k) {
      const Instr& in = p.instrs[k];
      if (!touches(in)) continue;
      std::vector<int> reads, writes;
      if (in.kind == InstrKind::kCompute) reads = in.inputs, writes = {in.buffer};
      if (in.kind == InstrKind::kCopy) reads = {in.src}, writes = {in.buffer};
      if (in.kind == InstrKind::kCombine) reads = {in.src, in.buffer}, writes = {in.buffer};
      if (in.kind == InstrKind::kSend) reads = {in.buffer};
      if (in.kind == InstrKind::kRecv) writes = {in.buffer};
      for (int b : reads) log.push_back({b, pass == 1 ? k : SIZE_MAX, true});
      for (int b : writes) log.push_back({b, SIZE_MAX, false});
    }
  std::vector<double> out(p.instrs.size(), 0.0);
  for (size_t t = 0; t < log.size(); ++t) {
    if (!log[t].read || log[t].instr == SIZE_MAX) continue;
    // The reads of one instruction come first in the log; distances are taken before any of them.
    size_t first = t;
    while (first > 0 && log[first - 1].read && log[first - 1].instr == log[t].instr) --first;
    size_t prev = first;
    while (prev > 0 && log[prev - 1].buffer != log[t].buffer) --prev;
    std::set<int> since;
    for (size_t u = prev; u < first; ++u)
      if (log[u].buffer != log[t].buffer) since.insert(log[u].buffer);
    double bytes = 0;
    for (int b : since) bytes += static_cast<double>(p.buffers[static_cast<size_t>(b)].bytes());
    out[log[t].instr] = std::max(out[log[t].instr], bytes);
  }
  return out;
}

TEST(SimReuseDistance, EqualsBruteForceOnRandomPrograms) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    Program p;
    const int nb = 1 + static_cast<int>(rng() % 8);
    for (int b = 0; b < nb; ++b) buffer(p, "b" + std::to_string(b), 1 + static_cast<int64_t>(rng() % 4096));
    const int ni = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < ni; ++i) {
      const int kind = static_cast<int>(rng() % 5);
      const int a = static_cast<int>(rng() % nb), b = static_cast<int>(rng() % nb);
      Instr in;
      in.bytes = static_cast<int64_t>(rng() % 3) * 64;  // some move nothing
      in.buffer = a;
      if (kind == 0) {
        in.kind = InstrKind::kCompute;
        for (int j = static_cast<int>(rng() % 3); j > 0; --j) in.inputs.push_back(static_cast<int>(rng() % nb));
      } else if (kind == 1) {
        in.kind = InstrKind::kCopy, in.src = b;
      } else if (kind == 2) {
        in.kind = InstrKind::kCombine, in.src = b;
      } else if (kind == 3) {
        in.kind = InstrKind::kSend;
      } else {
        in.kind = InstrKind::kRecv;
      }
      p.instrs.push_back(in);
    }
    const std::vector<double> want = brute_force_distances(p), got = reuse_distances(p);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k)
      ASSERT_EQ(got[k], want[k]) << "trial " << trial << " instruction " << k << "\n" << p.text();
  }
}

}  // namespace
}  // namespace tilewise::sim

// The arena's static planner: offsets of buffers alive at the same time never overlap, replayed
// steps get the same addresses, and capacities hold.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "exec/arena.h"

namespace tilewise::exec {
namespace {

// The arena hands out bytes; these tests fill float buffers.
float* alloc(Arena& a, int64_t floats, const std::string& what) {
  return reinterpret_cast<float*>(a.allocate(floats * 4, what));
}
void release(Arena& a, float* p, int64_t floats) { a.release(reinterpret_cast<std::byte*>(p), floats * 4); }

// One "step": allocate/release a fixed pseudo-random sequence; returns the buffers in order.
std::vector<std::pair<float*, int64_t>> run_step(Arena& a, std::vector<float*>* seen) {
  std::mt19937 rng(7);
  std::vector<std::pair<float*, int64_t>> live, all;
  for (int i = 0; i < 200; ++i) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t k = rng() % live.size();
      release(a, live[k].first, live[k].second);
      live.erase(live.begin() + static_cast<long>(k));
      continue;
    }
    int64_t n = 1 + static_cast<int64_t>(rng() % 500);
    float* p = alloc(a, n, "buffer " + std::to_string(i));
    for (int64_t e = 0; e < n; ++e) p[e] = static_cast<float>(i);  // ownership marker
    live.push_back({p, n});
    all.push_back({p, n});
    if (seen) seen->push_back(p);
    // Every live buffer still holds its marker: nothing alive overlaps.
    for (const auto& [q, m] : live) {
      float v = q[0];
      for (int64_t e = 0; e < m; ++e) EXPECT_EQ(q[e], v);
    }
  }
  for (const auto& [p, n] : live) release(a, p, n);
  return all;
}

TEST(Arena, PlannedBuffersAliveTogetherNeverOverlap) {
  Arena a(0, 0);
  a.begin_step();
  run_step(a, nullptr);
  a.end_step();
  ASSERT_TRUE(a.planned());
  EXPECT_GT(a.block_bytes(), 0);
  std::vector<float*> first, second;
  a.begin_step();
  run_step(a, &first);
  a.end_step();
  a.begin_step();
  run_step(a, &second);
  a.end_step();
  EXPECT_EQ(first, second);  // the same addresses every step
  EXPECT_EQ(a.in_use(), 0);
}

TEST(Arena, CapacityIsEnforcedBeforeAndAfterPlanning) {
  Arena a(3, 1000);
  a.begin_step();
  float* p = alloc(a, 200, "x");
  EXPECT_THROW(alloc(a, 100, "y"), OutOfMemory);
  try {
    alloc(a, 100, "y");
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.device, 3);
    EXPECT_EQ(e.tensor, "y");
    EXPECT_EQ(e.bytes, 400);
  }
  release(a, p, 200);
  a.end_step();
  EXPECT_LE(a.footprint(), 1000);
}

TEST(Arena, BuffersOfAnyElementSizeAreSixteenByteAlignedAndCountedInBytes) {
  // Bool masks (1 byte), float32 (4), int64 ids (8): odd byte counts still start 16-byte aligned.
  Arena a(0, 0);
  for (int step = 0; step < 2; ++step) {
    a.begin_step();
    std::vector<std::pair<std::byte*, int64_t>> held;
    for (int64_t bytes : {3, 17, 8, 1, 40, 5}) {
      std::byte* p = a.allocate(bytes, "b");
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << bytes << " bytes, step " << step;
      held.push_back({p, bytes});
    }
    EXPECT_EQ(a.in_use(), 3 + 17 + 8 + 1 + 40 + 5);
    for (const auto& [p, n] : held) a.release(p, n);
    a.end_step();
  }
  EXPECT_EQ(a.in_use(), 0);
}

}  // namespace
}  // namespace tilewise::exec

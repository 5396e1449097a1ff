// The searches' thread pool (cpp/partition/work_pool.*): every started call returns before the loop
// does, work shared dynamically is done once whatever joins, exceptions come back to the caller,
// and loops from several threads at once or from inside a loop neither deadlock nor mix.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "partition/work_pool.h"

namespace tilewise::partition {
namespace {

// Sums 0..n-1 over `participants` calls that pull chunks from a counter; each item counted once.
int64_t pooled_sum(int participants, int64_t n, std::vector<std::atomic<int>>* seen = nullptr) {
  std::atomic<int64_t> next{0}, total{0};
  run_on_pool(participants, [&](int) {
    for (int64_t i; (i = next.fetch_add(1)) < n;) {
      total += i;
      if (seen) ++(*seen)[static_cast<size_t>(i)];
    }
  });
  return total.load();
}

TEST(WorkPool, EveryItemOnceWhateverJoins) {
  for (int participants : {1, 2, 3, 8}) {
    std::vector<std::atomic<int>> seen(5000);
    EXPECT_EQ(pooled_sum(participants, 5000, &seen), int64_t{5000} * 4999 / 2);
    for (const auto& s : seen) ASSERT_EQ(s.load(), 1);
  }
}

TEST(WorkPool, SlotsAreDistinctAndTheCallersIsZero) {
  std::vector<std::atomic<int>> slots(4);
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> zero_here{false};
  run_on_pool(4, [&](int slot) {
    ASSERT_GE(slot, 0);
    ASSERT_LT(slot, 4);
    ++slots[static_cast<size_t>(slot)];
    if (slot == 0) zero_here = std::this_thread::get_id() == caller;
  });
  EXPECT_EQ(slots[0].load(), 1);
  EXPECT_TRUE(zero_here.load());
  for (const auto& s : slots) EXPECT_LE(s.load(), 1);
}

TEST(WorkPool, ExceptionsReachTheCallerAndThePoolStaysUsable) {
  EXPECT_THROW(run_on_pool(2, [&](int) { throw std::runtime_error("caller"); }), std::runtime_error);
  // A worker's exception: the caller's call returns normally once the worker has started (an idle
  // pool starts it; after a second without it the caller throws in its place).
  std::atomic<bool> worker_started{false}, worker_threw{false};
  try {
    run_on_pool(2, [&](int slot) {
      if (slot == 1) {
        worker_started = true;
        worker_threw = true;
        throw std::runtime_error("worker");
      }
      for (int i = 0; i < 1000 && !worker_started; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!worker_started) throw std::runtime_error("worker");
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "worker");
  }
  EXPECT_TRUE(worker_threw.load());
  EXPECT_EQ(pooled_sum(3, 1000), int64_t{1000} * 999 / 2);
}

TEST(WorkPool, ConcurrentAndNestedLoopsFinish) {
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        if (pooled_sum(3, 300) != int64_t{300} * 299 / 2) ++wrong;
        // A loop inside a loop: its caller is a pool worker or the outer caller.
        std::atomic<int64_t> inner{0};
        run_on_pool(2, [&](int) { inner += pooled_sum(2, 100); });
        if (inner.load() % (int64_t{100} * 99 / 2) != 0 || inner.load() == 0) ++wrong;
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace tilewise::partition

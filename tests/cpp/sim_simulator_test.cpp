// The discrete-event simulator (cpp/sim/simulator.h) on hand-checked cases: stream order, `after`
// across streams, processor sharing of links and cores (ends computed by hand below each case),
// max_rate caps, peak memory, and the errors for bad input and dependency cycles.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/simulator.h"

namespace tilewise::sim {
namespace {

Task fixed(const std::string& name, int stream, double seconds, std::vector<int> after = {}) {
  Task t;
  t.name = name;
  t.stream = stream;
  t.seconds = seconds;
  t.after = std::move(after);
  return t;
}

Task transfer(const std::string& name, int stream, double bytes, double bandwidth, std::vector<int> resources,
              double latency = 0) {
  Task t = fixed(name, stream, latency);
  t.work = bytes;
  t.max_rate = bandwidth;
  t.resources = std::move(resources);
  return t;
}

std::string error_of(const std::vector<Task>& tasks, int streams, const std::vector<Resource>& resources = {}) {
  try {
    simulate(tasks, streams, resources);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SimSimulator, ChainSums) {
  const Timeline tl = simulate({fixed("a", 0, 1), fixed("b", 0, 2), fixed("c", 0, 3)}, 1, {});
  EXPECT_EQ(tl.start, (std::vector<double>{0, 1, 3}));
  EXPECT_EQ(tl.end, (std::vector<double>{1, 3, 6}));
  EXPECT_EQ(tl.makespan, 6);
  EXPECT_EQ(tl.stream_busy, (std::vector<double>{6}));
}

TEST(SimSimulator, IndependentStreamsOverlap) {
  const Timeline tl = simulate({fixed("a", 0, 2), fixed("b", 1, 3)}, 2, {});
  EXPECT_EQ(tl.start, (std::vector<double>{0, 0}));
  EXPECT_EQ(tl.makespan, 3);
  EXPECT_EQ(tl.stream_busy, (std::vector<double>{2, 3}));
}

TEST(SimSimulator, StreamOrderIsListOrder) {
  // c follows a on stream 0 and does not wait for b (stream 1), listed between them.
  const Timeline tl = simulate({fixed("a", 0, 1), fixed("b", 1, 5), fixed("c", 0, 1)}, 2, {});
  EXPECT_EQ(tl.start[2], 1);
  EXPECT_EQ(tl.end[2], 2);
  EXPECT_EQ(tl.makespan, 5);
}

TEST(SimSimulator, AfterAcrossStreamsAndForwardInTheList) {
  // b (stream 1) waits for a (stream 0); a waits for c, listed after it on stream 2.
  const Timeline tl = simulate({fixed("a", 0, 2, {2}), fixed("b", 1, 1, {0}), fixed("c", 2, 4)}, 3, {});
  EXPECT_EQ(tl.start, (std::vector<double>{4, 6, 0}));
  EXPECT_EQ(tl.end, (std::vector<double>{6, 7, 4}));
  EXPECT_EQ(tl.stream_busy, (std::vector<double>{2, 1, 4}));
}

TEST(SimSimulator, StartIsTheLatestOfStreamPredecessorAndAfter) {
  const Timeline tl = simulate({fixed("a", 0, 1), fixed("b", 1, 3), fixed("c", 0, 1, {1})}, 2, {});
  EXPECT_EQ(tl.start[2], 3);
}

TEST(SimSimulator, SharedLinkHalvesBandwidth) {
  const std::vector<Resource> link{{"pcie", 100}};
  // Alone: 100 bytes at 100 B/s take 1 s. Two at once: 50 B/s each, 2 s each.
  const Timeline alone = simulate({transfer("x", 0, 100, 100, {0})}, 1, link);
  EXPECT_EQ(alone.end[0], 1);
  const Timeline two = simulate({transfer("x", 0, 100, 100, {0}), transfer("y", 1, 100, 100, {0})}, 2, link);
  EXPECT_EQ(two.end, (std::vector<double>{2, 2}));
}

TEST(SimSimulator, TransferSpeedsUpWhenTheOtherEnds) {
  const std::vector<Resource> link{{"pcie", 100}};
  // x: 100 B, y: 300 B. Both at 50 B/s until x ends at 2 (y has 200 B left), then y alone at
  // 100 B/s: 2 s more, ends at 4 (alone it would end at 3).
  const Timeline tl = simulate({transfer("x", 0, 100, 100, {0}), transfer("y", 1, 300, 100, {0})}, 2, link);
  EXPECT_DOUBLE_EQ(tl.end[0], 2);
  EXPECT_DOUBLE_EQ(tl.end[1], 4);
}

TEST(SimSimulator, LatencyIsNotShared) {
  const std::vector<Resource> link{{"pcie", 100}};
  // x: latency 1 then 100 B; y: 300 B at once. y alone on [0, 1): 100 B done. Then 50 B/s each:
  // x ends at 1 + 2 = 3; y has 300 - 100 - 100 = 100 B left at 100 B/s: ends at 4.
  const Timeline tl =
      simulate({transfer("x", 0, 100, 100, {0}, /*latency=*/1), transfer("y", 1, 300, 100, {0})}, 2, link);
  EXPECT_DOUBLE_EQ(tl.end[0], 3);
  EXPECT_DOUBLE_EQ(tl.end[1], 4);
}

TEST(SimSimulator, StaggeredArrivalsOnOneLink) {
  const std::vector<Resource> link{{"link", 6}};
  // 12 units each, arriving at 0, 1, 2 (fixed parts). [0,1): a at 6 -> 6 left. [1,2): a, b at 3 ->
  // a 3, b 9 left. [2,3.5): three at 2 -> a ends at 3.5; b 6, c 9 left. [3.5,5.5): two at 3 -> b
  // ends at 5.5; c 3 left. [5.5,6): c alone at 6 -> ends at 6.
  const Timeline tl = simulate({transfer("a", 0, 12, 0, {0}), transfer("b", 1, 12, 0, {0}, 1),
                                transfer("c", 2, 12, 0, {0}, 2)},
                               3, link);
  EXPECT_DOUBLE_EQ(tl.end[0], 3.5);
  EXPECT_DOUBLE_EQ(tl.end[1], 5.5);
  EXPECT_DOUBLE_EQ(tl.end[2], 6);
}

TEST(SimSimulator, ThreeTasksOnTwoCoresGetTwoThirdsEach) {
  const std::vector<Resource> cpu{{"cpu", 2}};
  // One core each at most (max_rate 1); three tasks on two cores: 2/3 core each; 2 units: 3 s.
  std::vector<Task> tasks;
  for (int s = 0; s < 3; ++s) tasks.push_back(transfer("k" + std::to_string(s), s, 2, 1, {0}));
  const Timeline three = simulate(tasks, 3, cpu);
  for (double e : three.end) EXPECT_DOUBLE_EQ(e, 3);
  tasks.pop_back();  // two tasks on two cores: each at its cap, 1 core: 2 s
  const Timeline two = simulate(tasks, 2, cpu);
  EXPECT_EQ(two.end, (std::vector<double>{2, 2}));
}

TEST(SimSimulator, MaxRateCapsAndTheStatedApproximation) {
  const std::vector<Resource> link{{"link", 10}};
  const Timeline alone = simulate({transfer("a", 0, 4, 2, {0})}, 1, link);
  EXPECT_EQ(alone.end[0], 2);  // capped at 2 on a link of 10
  // a capped at 2, b uncapped: b gets 10/2 = 5, not the 8 max-min fairness would give. b ends at 2
  // (10 units); a has done 4 by then, 6 left at its cap 2: ends at 5.
  const Timeline both = simulate({transfer("a", 0, 10, 2, {0}), transfer("b", 1, 10, 0, {0})}, 2, link);
  EXPECT_DOUBLE_EQ(both.end[1], 2);
  EXPECT_DOUBLE_EQ(both.end[0], 5);
}

TEST(SimSimulator, BusiestResourceBoundsTheRate) {
  const std::vector<Resource> res{{"wide", 10}, {"narrow", 4}};
  // a uses both, b only narrow: a's rate is min(10/1, 4/2) = 2; 4 units: 2 s. b: 4/2 = 2 too,
  // 8 units: 4 left at 2 s, then alone at 4: ends at 3.
  const Timeline tl = simulate({transfer("a", 0, 4, 0, {0, 1}), transfer("b", 1, 8, 0, {1})}, 2, res);
  EXPECT_DOUBLE_EQ(tl.end[0], 2);
  EXPECT_DOUBLE_EQ(tl.end[1], 3);
}

TEST(SimSimulator, UnsharedWorkRunsAtMaxRate) {
  const Timeline tl = simulate({transfer("a", 0, 300, 100, {}, 0.5), transfer("b", 1, 300, 100, {})}, 2, {});
  EXPECT_EQ(tl.end, (std::vector<double>{3.5, 3}));
}

TEST(SimSimulator, ZeroDurationTasks) {
  const Timeline tl = simulate({fixed("a", 0, 0), fixed("b", 0, 2), fixed("c", 1, 0, {1}), fixed("d", 1, 0)}, 2, {});
  EXPECT_EQ(tl.start, (std::vector<double>{0, 0, 2, 2}));
  EXPECT_EQ(tl.end, (std::vector<double>{0, 2, 2, 2}));
  EXPECT_EQ(tl.makespan, 2);
  const Timeline empty = simulate({}, 0, {});
  EXPECT_EQ(empty.makespan, 0);
}

TEST(SimSimulator, PeakMemoryFreesBeforeAllocationsAtOneTime) {
  auto mem = [](Task t, int64_t bytes, int pool) {
    t.memory = bytes;
    t.memory_pool = pool;
    return t;
  };
  // Pool 0: +100 at 0; at 1, -100 (free) and +50 at once: peak 100, not 150. Pool 2: +7 at 0.
  const Timeline tl = simulate({mem(fixed("alloc", 0, 1), 100, 0), mem(fixed("free", 0, 0), -100, 0),
                                mem(fixed("alloc2", 1, 1, {0}), 50, 0), mem(fixed("other", 2, 1), 7, 2)},
                               3, {});
  EXPECT_EQ(tl.peak_memory, (std::vector<int64_t>{100, 0, 7}));
}

TEST(SimSimulator, CycleThroughStreamOrderNamesItsTasks) {
  // a runs before b on stream 0 (list order), but a waits for b.
  const std::string msg = error_of({fixed("a", 0, 1, {1}), fixed("b", 0, 1)}, 1);
  EXPECT_NE(msg.find("dependency cycle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("task 0 ('a') -> task 1 ('b') -> task 0 ('a')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("stream 0 runs task 0 ('a') before task 1 ('b')"), std::string::npos) << msg;
}

TEST(SimSimulator, CycleThroughAfterOnly) {
  // x is fine; c -> d -> e -> c across streams; f waits behind the cycle and is not named.
  const std::string msg = error_of(
      {fixed("x", 0, 1), fixed("c", 1, 1, {4}), fixed("d", 2, 1, {1}), fixed("f", 0, 1, {2}), fixed("e", 3, 1, {2})},
      4);
  EXPECT_NE(msg.find("task 1 ('c') -> task 2 ('d') -> task 4 ('e') -> task 1 ('c')"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("'f'"), std::string::npos) << msg;
  EXPECT_NE(error_of({fixed("self", 0, 1, {0})}, 1).find("task 0 ('self') -> task 0 ('self')"), std::string::npos);
}

TEST(SimSimulator, LongCycleNamesItsEnds) {
  // t0 waits for t99, the last of a 100-task stream: a 101-edge cycle, shown by its ends.
  std::vector<Task> tasks;
  for (int i = 0; i < 100; ++i) tasks.push_back(fixed("t" + std::to_string(i), 0, 1));
  tasks[0].after = {99};
  const std::string msg = error_of(tasks, 1);
  EXPECT_NE(msg.find("dependency cycle: task 0 ('t0') -> task 1 ('t1')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("task 9 ('t9') -> ... (80 more tasks) -> task 90 ('t90')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("task 99 ('t99') -> task 0 ('t0') (each"), std::string::npos) << msg;
}

TEST(SimSimulator, BadInputThrowsNamingTheTask) {
  const std::vector<Resource> link{{"link", 1}};
  EXPECT_NE(error_of({fixed("a", 1, 1)}, 1).find("task 0 ('a'): stream 1 is not one of 0..0"), std::string::npos);
  EXPECT_NE(error_of({fixed("a", -1, 1)}, 1).find("stream -1"), std::string::npos);
  EXPECT_NE(error_of({fixed("a", 0, 1, {3})}, 1).find("task 0 ('a'): after index 3 is not a task"), std::string::npos);
  EXPECT_NE(error_of({transfer("t", 0, 1, 1, {1})}, 1, link).find("task 0 ('t'): resource index 1"), std::string::npos);
  EXPECT_NE(error_of({transfer("t", 0, 1, 1, {0, 0})}, 1, link).find("listed twice"), std::string::npos);
  EXPECT_NE(error_of({fixed("a", 0, -1)}, 1).find("task 0 ('a'): seconds must be a finite number >= 0"),
            std::string::npos);
  EXPECT_NE(error_of({transfer("t", 0, NAN, 1, {})}, 1).find("work must be"), std::string::npos);
  EXPECT_NE(error_of({transfer("t", 0, 1, INFINITY, {})}, 1).find("max_rate must be"), std::string::npos);
  EXPECT_NE(error_of({transfer("t", 0, 1, 0, {})}, 1).find("needs a max_rate > 0 or resources"), std::string::npos);
  EXPECT_NE(error_of({transfer("t", 0, 1, 1, {0})}, 1, {{"dead", 0}}).find("resource 0 ('dead'): capacity"),
            std::string::npos);
  Task pool = fixed("p", 0, 1);
  pool.memory_pool = -2;
  EXPECT_NE(error_of({pool}, 1).find("memory_pool must be -1"), std::string::npos);
  EXPECT_NE(error_of({}, -1).find("streams must be >= 0"), std::string::npos);
}

}  // namespace
}  // namespace tilewise::sim

// The copy plan a GPU pack/unpack kernel follows (exec/copy_plan.h) against the CPU's box copy
// (exec/box_copy.h): on random boxes of rank 0-5 the plan, run element by element, writes exactly
// what copy_box writes, and merges whole dimensions into runs as copy_box does.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "exec/box_copy.h"
#include "exec/copy_plan.h"

namespace tilewise::exec {
namespace {

using tdl::Box;

// A random box inside `outer` (each dimension a sub-range; whole with probability 1/3).
Box random_inside(const Box& outer, std::mt19937& rng) {
  Box b = outer;
  for (auto& r : b.dims) {
    if (rng() % 3 == 0) continue;
    const int64_t n = r.size();
    const int64_t lo = r.lo + static_cast<int64_t>(rng() % n);
    const int64_t hi = lo + static_cast<int64_t>(rng() % (r.hi - lo + 1));
    r = {lo, hi};
  }
  return b;
}

TEST(CopyPlan, MatchesCopyBoxOnRandomBoxes) {
  std::mt19937 rng(18);
  for (int trial = 0; trial < 2000; ++trial) {
    const size_t rank = rng() % 6;
    Box tensor;
    for (size_t d = 0; d < rank; ++d) tensor.dims.push_back({0, 1 + static_cast<int64_t>(rng() % 6)});
    const Box src_box = random_inside(tensor, rng);
    // dst holds a box that also contains `what`: the bounding box of `what` and a random box.
    const Box what = random_inside(src_box, rng);
    const Box dst_box = what.include(random_inside(tensor, rng));
    std::vector<float> src(static_cast<size_t>(src_box.volume()));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
    std::vector<float> want(static_cast<size_t>(dst_box.volume()), -1.f), got = want;
    copy_box(src.data(), src_box, want.data(), dst_box, what);
    const CopyPlan plan = plan_copy(src_box, dst_box, what);
    EXPECT_EQ(plan.elements(), what.volume());
    run_copy_plan(plan, src.data(), got.data());
    ASSERT_EQ(got, want) << "trial " << trial << ", rank " << rank;
  }
}

TEST(CopyPlan, WholeRowsAreOneRun) {
  // A batch slice of a [8, 4, 5] tensor: rows 2..5 whole; one contiguous run of 4*4*5 floats.
  const Box src = Box::whole({8, 4, 5});
  const Box dst{{{2, 5}, {0, 3}, {0, 4}}};
  const CopyPlan plan = plan_copy(src, dst, dst);
  EXPECT_EQ(plan.run_length, 80);
  EXPECT_TRUE(plan.extents.empty());
  EXPECT_EQ(plan.src_base, 2 * 20);
  EXPECT_EQ(plan.dst_base, 0);
}

TEST(CopyPlan, ColumnBlockHasOneRunPerRow) {
  // Columns 1..2 of a [3, 4] matrix into a [3, 2] buffer: 3 runs of 2, source stride 4.
  const Box src = Box::whole({3, 4});
  const Box dst{{{0, 2}, {1, 2}}};
  const CopyPlan plan = plan_copy(src, dst, dst);
  EXPECT_EQ(plan.run_length, 2);
  EXPECT_EQ(plan.extents, std::vector<int64_t>{3});
  EXPECT_EQ(plan.src_strides, std::vector<int64_t>{4});
  EXPECT_EQ(plan.dst_strides, std::vector<int64_t>{2});
  EXPECT_EQ(plan.src_base, 1);
}

TEST(CopyPlan, RankZeroAndEmpty) {
  const CopyPlan one = plan_copy(Box{}, Box{}, Box{});
  EXPECT_EQ(one.elements(), 1);
  const Box src = Box::whole({3});
  const CopyPlan none = plan_copy(src, src, Box{{{2, 1}}});
  EXPECT_EQ(none.elements(), 0);
}

}  // namespace
}  // namespace tilewise::exec

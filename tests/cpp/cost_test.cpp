// The communication cost model (cpp/cost): factorised device grids, array_split tiles, the fetch
// of inputs and the two-phase output conversion, each checked against hand-computed counts
// (SoyBean §4.2.1 aligned tilings) and against an element-by-element oracle on random boxes.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "cost/class_count.h"
#include "cost/comm_cost.h"
#include "cost/count_memo.h"
#include "cost/memory.h"
#include "cost/tiling.h"
#include "cost/transfers.h"
#include "graph/graph.h"
#include "tdl/op_desc.h"
#include "tdl/strategy.h"

namespace tilewise::cost {
namespace {

using tdl::Reducer;
using tdl::Strategy;
using tdl::StrategyKind;

Strategy out_split(int var) { return {StrategyKind::kOutput, var, Reducer::kSum}; }
Strategy reduce_split(int var) { return {StrategyKind::kReduce, var, Reducer::kSum}; }
Strategy replicate() { return {StrategyKind::kReplicate, -1, Reducer::kSum}; }

Box box(std::vector<Range> dims) { return Box{std::move(dims)}; }

// ---------------------------------------------------------------------------------------------
// Independent oracles: every element of a small tensor enumerated, sets of devices built.

std::vector<std::vector<int64_t>> all_points(const Shape& shape) {
  std::vector<std::vector<int64_t>> out;
  std::vector<int64_t> p(shape.size(), 0);
  for (int64_t s : shape)
    if (s == 0) return out;
  while (true) {
    out.push_back(p);
    size_t k = 0;
    for (; k < shape.size(); ++k) {
      if (++p[k] < shape[k]) break;
      p[k] = 0;
    }
    if (k == shape.size()) break;
  }
  return out;
}

bool holds(const Box& b, const std::vector<int64_t>& p) {
  for (size_t d = 0; d < p.size(); ++d)
    if (p[d] < b.dims[d].lo || p[d] > b.dims[d].hi) return false;
  return true;
}

// sum over devices of |reads_d \ tiles_d|, one element at a time.
int64_t oracle_fetch(const Shape& shape, const std::vector<Box>& reads, const std::vector<Box>& tiles) {
  int64_t n = 0;
  for (const auto& p : all_points(shape))
    for (size_t d = 0; d < reads.size(); ++d)
      if (holds(reads[d], p) && !holds(tiles[d], p)) ++n;
  return n;
}

// The conversion rule as DESIGN.md words it, one element at a time; `received` per device.
int64_t oracle_conversion(const Shape& shape, const std::vector<Box>& computed, const std::vector<int>& classes,
                          const std::vector<Box>& tiles, std::vector<int64_t>& received) {
  const size_t n = computed.size();
  received.assign(n, 0);
  int64_t total = 0;
  for (const auto& p : all_points(shape)) {
    std::vector<int> computers, holders;
    std::set<int> cls;
    for (size_t d = 0; d < n; ++d) {
      if (holds(computed[d], p)) computers.push_back(static_cast<int>(d)), cls.insert(classes[d]);
      if (holds(tiles[d], p)) holders.push_back(static_cast<int>(d));
    }
    if (computers.empty()) continue;  // nobody computed it: nothing to move
    int owner = -1;
    for (int d : computers)
      if (std::find(holders.begin(), holders.end(), d) != holders.end()) {
        owner = d;
        break;
      }
    if (owner < 0) owner = computers.front();
    const int64_t partials = static_cast<int64_t>(cls.size()) - 1;
    total += partials;
    received[owner] += partials;
    for (int d : holders) {
      if (d == owner) continue;
      bool computed_final = cls.size() == 1 && std::find(computers.begin(), computers.end(), d) != computers.end();
      if (!computed_final) ++total, ++received[d];
    }
  }
  return total;
}

// numpy.array_split composed: the indices of one dimension kept after each cut of it.
Box oracle_tile(const Shape& shape, const Tiling& cuts, const std::vector<int>& parts, const std::vector<int>& coords) {
  std::vector<std::vector<int64_t>> kept(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    for (int64_t i = 0; i < shape[d]; ++i) kept[d].push_back(i);
  for (size_t s = 0; s < coords.size(); ++s) {
    if (cuts[s] == kReplicated) continue;
    auto& idx = kept[cuts[s]];
    const int64_t n = static_cast<int64_t>(idx.size()), k = parts[s];
    // array_split: the first n % k sections get one extra element.
    int64_t start = 0;
    for (int w = 0; w < coords[s]; ++w) start += n / k + (w < n % k ? 1 : 0);
    int64_t len = n / k + (coords[s] < n % k ? 1 : 0);
    idx = std::vector<int64_t>(idx.begin() + start, idx.begin() + start + len);
  }
  Box b;
  for (const auto& idx : kept) b.dims.push_back(idx.empty() ? Range::nothing() : Range{idx.front(), idx.back()});
  return b;
}

Box random_box(std::mt19937& rng, const Shape& shape) {
  Box b;
  const int mode = std::uniform_int_distribution<int>(0, 9)(rng);
  for (int64_t s : shape) {
    if (mode == 0) {  // the whole tensor
      b.dims.push_back({0, s - 1});
      continue;
    }
    int64_t lo = std::uniform_int_distribution<int64_t>(0, s - 1)(rng);
    // Now and then an empty range (hi = lo - 1).
    int64_t hi = std::uniform_int_distribution<int64_t>(lo - (mode == 1 ? 1 : 0), s - 1)(rng);
    b.dims.push_back({lo, hi});
  }
  return b;
}

// ---------------------------------------------------------------------------------------------
// Descriptions.

tdl::IndexExpr v(int i) { return tdl::index_var(i); }

/// lambda i, j: Sum(k: a[i, k] * b[k, j]). Variables i=0, j=1, k=2.
std::shared_ptr<tdl::OpDesc> matmul() {
  auto op = std::make_shared<tdl::OpDesc>();
  op->name = "matmul";
  op->inputs = {{"a", 2}, {"b", 2}};
  op->vars = {{"i", true, {}}, {"j", true, {}}, {"k", false, {}}};
  op->output_vars = {0, 1};
  op->body = tdl::make_reduce(Reducer::kSum, {2},
                              tdl::make_binary(tdl::BinaryOp::kMul, tdl::make_access(0, {v(0), v(2)}),
                                               tdl::make_access(1, {v(2), v(1)})));
  tdl::validate(*op);
  return op;
}

/// lambda: Sum(i: x[i]) (a 0-d output).
std::shared_ptr<tdl::OpDesc> total_sum() {
  auto op = std::make_shared<tdl::OpDesc>();
  op->name = "total_sum";
  op->inputs = {{"x", 1}};
  op->vars = {{"i", false, {}}};
  op->output_vars = {};
  op->body = tdl::make_reduce(Reducer::kSum, {0}, tdl::make_access(0, {v(0)}));
  tdl::validate(*op);
  return op;
}

/// lambda i: A[i + 2] (Tofu §4.2's halo example).
std::shared_ptr<tdl::OpDesc> shift_two() {
  auto op = std::make_shared<tdl::OpDesc>();
  op->name = "shift_two";
  op->inputs = {{"A", 1}};
  op->vars = {{"i", true, {}}};
  op->output_vars = {0};
  op->body = tdl::make_access(0, {tdl::index_add(v(0), tdl::index_const(2))});
  tdl::validate(*op);
  return op;
}

OpView view(const tdl::OpDesc& d, std::vector<Shape> inputs, Shape out) {
  OpView o;
  o.desc = &d;
  o.input_shapes = std::move(inputs);
  o.output_shape = std::move(out);
  o.extents = tdl::infer_extents(d, o.input_shapes, o.output_shape);
  return o;
}

// ---------------------------------------------------------------------------------------------
// Device grids and tiles.

TEST(CostTiling, FactorizeGivesPrimesLargestFirst) {
  EXPECT_EQ(factorize(1), std::vector<int>{});
  EXPECT_EQ(factorize(2), (std::vector<int>{2}));
  EXPECT_EQ(factorize(7), (std::vector<int>{7}));
  EXPECT_EQ(factorize(8), (std::vector<int>{2, 2, 2}));
  EXPECT_EQ(factorize(12), (std::vector<int>{3, 2, 2}));
  EXPECT_EQ(factorize(60), (std::vector<int>{5, 3, 2, 2}));
  EXPECT_EQ(factorize(49), (std::vector<int>{7, 7}));
  for (int k = 1; k <= 300; ++k) {
    auto f = factorize(k);
    EXPECT_EQ(device_count(f), k) << k;
    EXPECT_TRUE(std::is_sorted(f.rbegin(), f.rend())) << k;
    for (int p : f) {
      EXPECT_GE(p, 2) << k;
      for (int q = 2; q * q <= p; ++q) EXPECT_NE(p % q, 0) << p << " is not prime (k = " << k << ")";
    }
  }
}

TEST(CostTiling, DeviceCoordsAreMixedRadixFirstStepMostSignificant) {
  const std::vector<int> parts = {3, 2, 2};
  EXPECT_EQ(device_count(parts), 12);
  EXPECT_EQ(device_count(parts, 1), 3);
  EXPECT_EQ(device_count(parts, 0), 1);
  EXPECT_EQ(device_coords(0, parts, 3), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(device_coords(5, parts, 3), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(device_coords(11, parts, 3), (std::vector<int>{2, 1, 1}));
  EXPECT_EQ(device_coords(5, parts, 2), (std::vector<int>{2, 1}));
  EXPECT_EQ(device_coords(0, parts, 0), std::vector<int>{});
  for (int d = 0; d < 12; ++d) {
    auto c = device_coords(d, parts, 3);
    EXPECT_EQ((c[0] * 2 + c[1]) * 2 + c[2], d);
  }
}

TEST(CostTiling, TileBoxComposesArraySplitCuts) {
  const std::vector<int> parts = {3, 2};
  // 10 into 3: [0,3] [4,6] [7,9]; then each into 2: [4,6] -> [4,5] [6,6].
  EXPECT_EQ(tile_box({10}, {0, 0}, parts, {1, 1}).dims[0], (Range{6, 6}));
  EXPECT_EQ(tile_box({10}, {0, 0}, parts, {1, 0}).dims[0], (Range{4, 5}));
  EXPECT_EQ(tile_box({10}, {0, 0}, parts, {0, 1}).dims[0], (Range{2, 3}));
  EXPECT_EQ(tile_box({10}, {0, 0}, parts, {2, 0}).dims[0], (Range{7, 8}));
  // Only the first `coords.size()` cuts apply.
  EXPECT_EQ(tile_box({10}, {0, 0}, parts, {2}).dims[0], (Range{7, 9}));
  // A replicated cut keeps the range.
  EXPECT_EQ(tile_box({10}, {kReplicated, 0}, parts, {2, 1}).dims[0], (Range{5, 9}));
  EXPECT_EQ(tile_box({10}, {0, kReplicated}, parts, {2, 1}).dims[0], (Range{7, 9}));
  // Two dimensions: rows by 3, then columns by 2.
  Box b = tile_box({5, 7}, {0, 1}, parts, {2, 0});
  EXPECT_EQ(b.dims[0], (Range{4, 4}));
  EXPECT_EQ(b.dims[1], (Range{0, 3}));
  EXPECT_EQ(b.volume(), 4);
  // More parts than elements: empty tiles.
  EXPECT_TRUE(tile_box({2}, {0}, {3}, {2}).empty());
  // A scalar has nothing to cut.
  EXPECT_EQ(tile_box({}, {kReplicated}, {2}, {1}).volume(), 1);
}

TEST(CostTiling, RandomTilesMatchArraySplitAndCoverEveryElementOncePerReplica) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(std::uniform_int_distribution<int64_t>(1, 7)(rng));
    const int steps = std::uniform_int_distribution<int>(1, 3)(rng);
    std::vector<int> parts;
    Tiling cuts;
    int64_t replicas = 1;
    for (int s = 0; s < steps; ++s) {
      parts.push_back(std::uniform_int_distribution<int>(2, 3)(rng));
      cuts.push_back(std::uniform_int_distribution<int>(-1, rank - 1)(rng));
      if (cuts.back() == kReplicated) replicas *= parts.back();
    }
    auto tiles = device_tiles(shape, cuts, parts, steps);
    ASSERT_EQ(static_cast<int64_t>(tiles.size()), device_count(parts));
    for (size_t d = 0; d < tiles.size(); ++d) {
      Box want = oracle_tile(shape, cuts, parts, device_coords(static_cast<int64_t>(d), parts, steps));
      for (int k = 0; k < rank; ++k) EXPECT_EQ(tiles[d].dims[k], want.dims[k]) << "trial " << trial << " device " << d;
    }
    for (const auto& p : all_points(shape)) {
      int64_t owners = 0;
      for (const auto& t : tiles) owners += holds(t, p) ? 1 : 0;
      EXPECT_EQ(owners, replicas) << "trial " << trial;
    }
  }
}

TEST(CostTiling, TilingStrNamesRowsColumnsAndReplication) {
  EXPECT_EQ(tiling_str({0, 1, kReplicated}, 2), "R C r");
  EXPECT_EQ(tiling_str({0, 2}, 3), "P0 P2");
  EXPECT_EQ(tiling_str({}, 2), "");
}

TEST(CostTiling, PartialClassesNumberTheReduceSteps) {
  const std::vector<int> parts = {2, 3};
  EXPECT_EQ(partial_classes({out_split(0), out_split(1)}, parts, 2), (std::vector<int>{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(partial_classes({reduce_split(2), out_split(0)}, parts, 2), (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(partial_classes({out_split(0), reduce_split(2)}, parts, 2), (std::vector<int>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(partial_classes({reduce_split(2), reduce_split(3)}, parts, 2), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(partial_classes({reduce_split(2), out_split(0)}, parts, 1), (std::vector<int>{0, 1}));
}

// ---------------------------------------------------------------------------------------------
// Fetch and conversion: hand-computed cases.

TEST(CostConversion, ReduceIntoReplicatedIsAllReduceIntoSplitIsReduceScatter) {
  // |O| = 4 x 6 = 24, computed whole by every device as partial sums of different addends.
  const Shape o = {4, 6};
  const int64_t size = 24;
  for (int k : {2, 3, 4, 6}) {
    std::vector<Box> computed(k, box({{0, 3}, {0, 5}}));
    std::vector<int> classes(k);
    for (int d = 0; d < k; ++d) classes[d] = d;
    std::vector<int64_t> received;
    auto replicated = device_tiles(o, {kReplicated}, {k}, 1);
    EXPECT_EQ(conversion_elements(computed, classes, replicated, &received), 2 * (k - 1) * size) << k;
    // The owner (device 0) gathers k-1 partials, then every other device fetches the sum.
    EXPECT_EQ(received[0], (k - 1) * size);
    for (int d = 1; d < k; ++d) EXPECT_EQ(received[d], size);
    auto rows = device_tiles(o, {1}, {k}, 1);  // columns: 6 splits into 2, 3 and 6 evenly
    EXPECT_EQ(conversion_elements(computed, classes, rows, &received), (k - 1) * size) << k;
    if (6 % k == 0)
      for (int d = 0; d < k; ++d) EXPECT_EQ(received[d], (k - 1) * size / k) << k;
  }
  // Two steps (2 x 2 devices), reducing only over the second: all-reduce within each row group.
  std::vector<Box> computed;
  for (int c1 = 0; c1 < 2; ++c1)
    for (int c2 = 0; c2 < 2; ++c2) computed.push_back(box({{2 * c1, 2 * c1 + 1}, {0, 5}}));
  std::vector<int> classes = {0, 1, 0, 1};
  EXPECT_EQ(conversion_elements(computed, classes, device_tiles(o, {0, kReplicated}, {2, 2}, 2)), 2 * size);
  EXPECT_EQ(conversion_elements(computed, classes, device_tiles(o, {0, 1}, {2, 2}, 2)), size);
  EXPECT_EQ(conversion_elements(computed, classes, device_tiles(o, {0, 0}, {2, 2}, 2)), size);
}

TEST(CostConversion, FinalValuesMoveOnlyWhenMisplaced) {
  const Shape o = {4, 6};
  // Rows computed, rows held: nothing moves.
  auto row_tiles = device_tiles(o, {0}, {2}, 1);
  EXPECT_EQ(conversion_elements(row_tiles, {0, 0}, row_tiles), 0);
  // Rows computed, columns held: each device lacks the quarter the other computed.
  auto col_tiles = device_tiles(o, {1}, {2}, 1);
  std::vector<int64_t> received;
  EXPECT_EQ(conversion_elements(row_tiles, {0, 0}, col_tiles, &received), 12);
  EXPECT_EQ(received, (std::vector<int64_t>{6, 6}));
  // Rows computed, replicated: each fetches the other half (an all-gather).
  EXPECT_EQ(conversion_elements(row_tiles, {0, 0}, device_tiles(o, {kReplicated}, {2}, 1)), 24);
  // Replicated computation of final values: everyone already has everything.
  std::vector<Box> whole(2, box({{0, 3}, {0, 5}}));
  EXPECT_EQ(conversion_elements(whole, {0, 0}, row_tiles), 0);
  EXPECT_EQ(conversion_elements(whole, {0, 0}, device_tiles(o, {kReplicated}, {2}, 1)), 0);
  // Uneven: 5 computed as 2/2/1 on three devices, held as 3/2 on the first two: elements 2 and 4 move.
  auto r2 = device_tiles({5}, {0}, {2}, 1);
  std::vector<Box> r3 = {box({{0, 1}}), box({{2, 3}}), box({{4, 4}})};
  EXPECT_EQ(conversion_elements(r3, {0, 0, 0}, {r2[0], r2[1], box({Range::nothing()})}), 2);
  EXPECT_EQ(conversion_elements({}, {}, {}), 0);
}

TEST(CostConversion, ScalarOutput) {
  std::vector<Box> scalar(3, Box{});
  std::vector<int64_t> received;
  // Three partial sums into a scalar every device holds: 2 partials to device 0, 2 results out.
  EXPECT_EQ(conversion_elements(scalar, {0, 1, 2}, scalar, &received), 4);
  EXPECT_EQ(received, (std::vector<int64_t>{2, 1, 1}));
  EXPECT_EQ(conversion_elements(scalar, {0, 0, 0}, scalar), 0);
  EXPECT_EQ(conversion_elements(scalar, {0, 0, 1}, scalar), 3);
  EXPECT_EQ(fetch_elements(scalar, scalar), 0);
}

TEST(CostFetch, CountsWhatEachDeviceReadsAndDoesNotOwn) {
  EXPECT_EQ(fetch_elements({box({{0, 9}}), box({{0, 9}})}, {box({{0, 4}}), box({{5, 9}})}), 10);
  EXPECT_EQ(fetch_elements({box({{0, 4}}), box({{5, 9}})}, {box({{0, 4}}), box({{5, 9}})}), 0);
  EXPECT_EQ(fetch_elements({box({{2, 5}, {0, 3}})}, {box({{0, 3}, {2, 7}})}), 16 - 4);
  EXPECT_EQ(fetch_elements({box({{3, 2}})}, {box({{0, 1}})}), 0);  // reads nothing
  EXPECT_EQ(fetch_elements({box({{0, 3}})}, {box({{3, 2}})}), 4);  // owns nothing
}

// ---------------------------------------------------------------------------------------------
// Oracle comparisons on random boxes.

TEST(CostOracle, FetchAndConversionMatchElementByElementCounts) {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = std::uniform_int_distribution<int>(0, 3)(rng);
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(std::uniform_int_distribution<int64_t>(1, 5)(rng));
    const int n = std::uniform_int_distribution<int>(1, 6)(rng);
    const int nclasses = std::uniform_int_distribution<int>(1, 3)(rng);
    std::vector<Box> computed, tiles, reads;
    std::vector<int> classes;
    for (int d = 0; d < n; ++d) {
      computed.push_back(random_box(rng, shape));
      tiles.push_back(random_box(rng, shape));
      reads.push_back(random_box(rng, shape));
      classes.push_back(std::uniform_int_distribution<int>(0, nclasses - 1)(rng));
    }
    std::vector<int64_t> got_received, want_received;
    const int64_t want = oracle_conversion(shape, computed, classes, tiles, want_received);
    EXPECT_EQ(conversion_elements(computed, classes, tiles, &got_received), want) << "trial " << trial;
    EXPECT_EQ(got_received, want_received) << "trial " << trial;
    EXPECT_EQ(conversion_elements(computed, classes, tiles), want) << "trial " << trial;
    EXPECT_EQ(fetch_elements(reads, tiles), oracle_fetch(shape, reads, tiles)) << "trial " << trial;
  }
}

// The enumeration the runtime materialises (boxes) adds up to the counts the planners use: every
// remote box counted once, every box inside its source's buffer and its destination's region.
TEST(Transfers, EnumeratedBoxesAddUpToTheCounts) {
  std::mt19937 rng(20261124);
  const std::vector<int> parts = {2, 2};
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = std::uniform_int_distribution<int>(1, 3)(rng);
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(std::uniform_int_distribution<int64_t>(1, 6)(rng));
    auto random_cuts = [&] {
      Tiling cuts;
      for (size_t i = 0; i < parts.size(); ++i) cuts.push_back(std::uniform_int_distribution<int>(-1, rank - 1)(rng));
      return cuts;
    };
    const auto tiles = device_tiles(shape, random_cuts(), parts, 2);  // covers the tensor
    std::vector<Box> computed, reads;
    std::vector<int> classes;
    for (int d = 0; d < 4; ++d) {
      computed.push_back(random_box(rng, shape));
      reads.push_back(random_box(rng, shape));
      classes.push_back(std::uniform_int_distribution<int>(0, 1)(rng));
    }
    int64_t fetched = 0;
    for (int d = 0; d < 4; ++d)
      for_each_fetch(reads[d], tiles, d, [&](TransferKind, int src, int dst, const Box& b) {
        EXPECT_TRUE(tdl::inside(b, tiles[src]) && tdl::inside(b, reads[dst])) << "trial " << trial;
        if (src != dst) fetched += b.volume();
      });
    EXPECT_EQ(fetched, fetch_elements(reads, tiles)) << "trial " << trial;

    int64_t moved = 0;
    std::vector<int64_t> received(4, 0), want_received;
    for_each_conversion(computed, classes, tiles, false, [&](TransferKind kind, int src, int dst, const Box& b) {
      EXPECT_TRUE(tdl::inside(b, computed[src])) << "trial " << trial;
      if (kind == TransferKind::kResult) EXPECT_TRUE(tdl::inside(b, tiles[dst])) << "trial " << trial;
      if (src != dst) moved += b.volume(), received[dst] += b.volume();
    });
    EXPECT_EQ(moved, conversion_elements(computed, classes, tiles, &want_received)) << "trial " << trial;
    EXPECT_EQ(received, want_received) << "trial " << trial;

    // Disjoint final values (an output-only split): the counting shortcut agrees with the boxes.
    const auto own = device_tiles(shape, random_cuts(), parts, 2);
    const std::vector<int> one_class(4, 0);
    int64_t moved_disjoint = 0;
    for_each_conversion(own, one_class, tiles, true, [&](TransferKind, int src, int dst, const Box& b) {
      if (src != dst) moved_disjoint += b.volume();
    });
    EXPECT_EQ(moved_disjoint, output_elements(own, one_class, tiles, true)) << "trial " << trial;
  }
}

TEST(CostOracle, ConversionMatchesOracleOnGridTilings) {
  // Computed regions and tiles both from device grids, as the planners produce them.
  std::mt19937 rng(777);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = std::uniform_int_distribution<int>(0, 3)(rng);
    Shape shape;
    for (int d = 0; d < rank; ++d) shape.push_back(std::uniform_int_distribution<int64_t>(1, 6)(rng));
    const int k = std::uniform_int_distribution<int>(1, 6)(rng);
    std::vector<int> parts = factorize(k);
    const int steps = static_cast<int>(parts.size());
    Tiling a, b;
    std::vector<int> classes(k, 0);
    for (int s = 0; s < steps; ++s) {
      a.push_back(std::uniform_int_distribution<int>(-1, rank - 1)(rng));
      b.push_back(std::uniform_int_distribution<int>(-1, rank - 1)(rng));
    }
    // A replicated step of the computation is a reduce step half of the time.
    std::vector<bool> reduce_step(steps);
    for (int s = 0; s < steps; ++s) reduce_step[s] = a[s] == kReplicated && (rng() & 1);
    for (int d = 0; d < k; ++d) {
      auto c = device_coords(d, parts, steps);
      for (int s = 0; s < steps; ++s)
        if (reduce_step[s]) classes[d] = classes[d] * parts[s] + c[s];
    }
    auto computed = device_tiles(shape, a, parts, steps);
    auto tiles = device_tiles(shape, b, parts, steps);
    std::vector<int64_t> got, want;
    const int64_t expected = oracle_conversion(shape, computed, classes, tiles, want);
    EXPECT_EQ(conversion_elements(computed, classes, tiles, &got), expected) << "trial " << trial;
    EXPECT_EQ(got, want) << "trial " << trial;
  }
}

// ---------------------------------------------------------------------------------------------
// op_comm on whole ops (SoyBean §4.2.1: aligned tilings move nothing).

TEST(CostOpComm, MatmulTwoDevices) {
  auto mm = matmul();
  // C(4, 8) = A(4, 6) @ B(6, 8); vars i=0, j=1, k=2.
  OpView op = view(*mm, {{4, 6}, {6, 8}}, {4, 8});
  ASSERT_EQ(op.extents, (std::vector<int64_t>{4, 8, 6}));
  const std::vector<int> parts = {2};
  const Tiling R = {0}, C = {1}, r = {kReplicated};
  auto comm = [&](Strategy s, Tiling a, Tiling b, Tiling c) { return op_comm(op, {s}, {a, b}, c, parts, 1); };

  // Aligned: split i, A rows, B replicated, C rows.
  OpComm c1 = comm(out_split(0), R, r, R);
  EXPECT_EQ(c1.input_elements, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(c1.output_elements, 0);
  EXPECT_EQ(c1.total(), 0);
  // Aligned: split j, A replicated, B columns, C columns.
  EXPECT_EQ(comm(out_split(1), r, C, C).total(), 0);
  // Split k: A columns, B rows; partial C. Replicated C: all-reduce (2|C|); row C: reduce-scatter (|C|).
  OpComm c2 = comm(reduce_split(2), C, R, r);
  EXPECT_EQ(c2.input_elements, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(c2.output_elements, 2 * 32);
  EXPECT_EQ(comm(reduce_split(2), C, R, R).output_elements, 32);
  EXPECT_EQ(comm(reduce_split(2), C, R, C).output_elements, 32);
  // Split i with A cut by columns: each device reads 2 rows x 6 and owns 4 x 3, sharing 2 x 3.
  EXPECT_EQ(comm(out_split(0), C, r, R).input_elements[0], 2 * (12 - 6));
  // Split i with B cut: each device reads all of B and owns half.
  EXPECT_EQ(comm(out_split(0), R, R, R).input_elements[1], 2 * 24);
  EXPECT_EQ(comm(out_split(0), R, C, R).input_elements[1], 2 * 24);
  // Split i, C held by columns: half of each device's rows belong to the other.
  EXPECT_EQ(comm(out_split(0), R, r, C).output_elements, 16);
  // Split i, C replicated: an all-gather.
  EXPECT_EQ(comm(out_split(0), R, r, r).output_elements, 32);
  // Split k with A cut by rows (misaligned): each reads 4 x 3, owns 2 x 6, shares 2 x 3.
  EXPECT_EQ(comm(reduce_split(2), R, R, R).input_elements[0], 2 * 6);
  // Replicated work: every device reads everything and computes final values.
  OpComm c3 = comm(replicate(), R, C, R);
  EXPECT_EQ(c3.input_elements, (std::vector<int64_t>{24, 48}));
  EXPECT_EQ(c3.output_elements, 0);
  EXPECT_EQ(c3.total(), 72);
}

TEST(CostOpComm, MatmulFourDevicesTwoSteps) {
  auto mm = matmul();
  OpView op = view(*mm, {{4, 6}, {6, 8}}, {4, 8});
  const std::vector<int> parts = {2, 2};
  // Split i then k; A by rows then columns, B replicated then rows: every device owns what it reads.
  OpSplit split = {out_split(0), reduce_split(2)};
  OpComm c = op_comm(op, split, {{0, 1}, {kReplicated, 0}}, {0, kReplicated}, parts, 2);
  EXPECT_EQ(c.input_elements, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(c.output_elements, 2 * 32);  // all-reduce of each half within its pair
  EXPECT_EQ(op_comm(op, split, {{0, 1}, {kReplicated, 0}}, {0, 1}, parts, 2).output_elements, 32);
  // Only the first step counted: split i, A rows, B replicated, C rows.
  EXPECT_EQ(op_comm(op, split, {{0, 1}, {kReplicated, 0}}, {0, 1}, parts, 1).total(), 0);
  // Split i then j with matching tilings: nothing moves.
  OpSplit ij = {out_split(0), out_split(1)};
  EXPECT_EQ(op_comm(op, ij, {{0, kReplicated}, {kReplicated, 1}}, {0, 1}, parts, 2).total(), 0);
}

TEST(CostOpComm, ScalarReductionAndHalo) {
  auto sum = total_sum();
  OpView s = view(*sum, {{10}}, {});
  ASSERT_EQ(s.extents, std::vector<int64_t>{10});
  // x split 2 ways, each adds its half: one partial to device 0, the sum back to device 1.
  OpComm c = op_comm(s, {reduce_split(0)}, {{0}}, {kReplicated}, {2}, 1);
  EXPECT_EQ(c.input_elements, std::vector<int64_t>{0});
  EXPECT_EQ(c.output_elements, 2);
  // Over 2 x 2 devices: 3 partials to device 0, the sum to the 3 others.
  OpSplit twice = {reduce_split(0), reduce_split(0)};
  EXPECT_EQ(op_comm(s, twice, {{0, 0}}, {kReplicated, kReplicated}, {2, 2}, 2).output_elements, 2 * 3);
  // Replicated sum over a split x: each fetches the other half, nothing to convert.
  OpComm r = op_comm(s, {replicate()}, {{0}}, {kReplicated}, {2}, 1);
  EXPECT_EQ(r.input_elements, std::vector<int64_t>{10});
  EXPECT_EQ(r.output_elements, 0);

  auto shift = shift_two();
  OpView h = view(*shift, {{10}}, {8});
  // Device 0 computes [0, 3] and reads A[2, 5], owning A[0, 4]; device 1 reads A[6, 9], owns A[5, 9].
  EXPECT_EQ(op_comm(h, {out_split(0)}, {{0}}, {0}, {2}, 1).total(), 1);
  EXPECT_EQ(op_comm(h, {out_split(0)}, {{kReplicated}}, {0}, {2}, 1).total(), 0);
}

// ---------------------------------------------------------------------------------------------
// Memory of a one-op graph: x(8, 4) and w(4, 4) resident, y(8, 4) alive while the op runs.

struct OneMatmul {
  graph::Graph g;
  std::vector<OpView> ops;
  OneMatmul() {
    int x = g.add_tensor("x", {8, 4}, graph::Role::kInput);
    int w = g.add_tensor("w", {4, 4}, graph::Role::kParameter);
    g.add_op("matmul", "mm", "", {x, w}, matmul(), "y", graph::Role::kActivation);
    const auto& op = g.op(0);
    ops.push_back(view(*op.desc, {{8, 4}, {4, 4}}, {8, 4}));
  }
  MemoryEstimate run(const Tiling& x, const Tiling& w, const Tiling& y, Strategy s) const {
    return estimate_memory(g, ops, {x, w, y}, {{s}}, {2});
  }
};

TEST(CostMemory, TilesFetchesAndConversionBuffers) {
  OneMatmul m;
  const Tiling R = {0}, C = {1}, r = {kReplicated};
  // Split i, x and y by rows, w replicated: x 64 B + w 64 B resident, y's tile 64 B, no buffers.
  MemoryEstimate a = m.run(R, r, R, out_split(0));
  EXPECT_EQ(a.resident, (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(a.peak, (std::vector<int64_t>{192, 192}));
  EXPECT_EQ(a.peak_op, (std::vector<int>{0, 0}));
  // Same, w by rows: 64 + 32 B resident, y 64 B, and all of w assembled in a 64 B region buffer
  // (a region that is not exactly the tile is assembled; the tile itself is read in place).
  MemoryEstimate c = m.run(R, R, R, out_split(0));
  EXPECT_EQ(c.resident, (std::vector<int64_t>{96, 96}));
  EXPECT_EQ(c.peak, (std::vector<int64_t>{224, 224}));
  // Split k, x by columns, w by rows, y replicated: 64 + 32 B resident, y 128 B, a 128 B buffer of
  // partial sums; device 0 (the owner) also stages the other partial (128 B) before adding it.
  MemoryEstimate b = m.run(C, R, r, reduce_split(2));
  EXPECT_EQ(b.resident, (std::vector<int64_t>{96, 96}));
  EXPECT_EQ(b.peak, (std::vector<int64_t>{480, 352}));
}

TEST(CostMemory, ReplicatedWorkIntoAReplicatedOutputNeedsNoBuffer) {
  OneMatmul m;
  const Tiling r = {kReplicated};
  EXPECT_EQ(m.run(r, r, r, replicate()).peak, (std::vector<int64_t>{320, 320}));
}


// ---------------------------------------------------------------------------------------------
// Counting by classes of devices (class_count.h) equals the per-device count, whatever the split
// and tilings: uneven array_split shares, halos, padding that clips, reductions, replication.

/// lambda b, o, y: Sum(c, k: x[b, c, y + k - 1] * w[o, c, k]): a padded 1-D convolution.
std::shared_ptr<tdl::OpDesc> conv1d() {
  auto op = std::make_shared<tdl::OpDesc>();
  op->name = "conv1d";
  op->inputs = {{"x", 3}, {"w", 3}};
  op->vars = {{"b", true, {}}, {"o", true, {}}, {"y", true, {}}, {"c", false, {}}, {"k", false, {}}};
  op->output_vars = {0, 1, 2};
  auto pos = tdl::index_add(tdl::index_add(v(2), v(4)), tdl::index_const(-1));
  op->body = tdl::make_reduce(Reducer::kSum, {3, 4},
                              tdl::make_binary(tdl::BinaryOp::kMul, tdl::make_access(0, {v(0), v(3), pos}),
                                               tdl::make_access(1, {v(1), v(3), v(4)})));
  tdl::validate(*op);
  return op;
}

TEST(CostClasses, ClassCountEqualsThePerDeviceCount) {
  std::mt19937 rng(7);
  auto mm = matmul();
  auto sum = total_sum();
  auto shift = shift_two();
  auto conv = conv1d();
  std::vector<OpView> ops = {view(*mm, {{12, 7}, {7, 10}}, {12, 10}), view(*sum, {{13}}, {}),
                             view(*shift, {{14}}, {12}), view(*conv, {{6, 5, 9}, {4, 5, 3}}, {6, 4, 9})};
  const std::vector<std::vector<int>> grids = {{2}, {3}, {2, 2}, {3, 2}, {2, 2, 2}, {3, 2, 2}, {2, 2, 2, 2}};
  int by_class = 0, cases = 0;
  for (const auto& op : ops)
    for (const auto& parts : grids)
      for (int rep = 0; rep < 40; ++rep) {
        const int steps = static_cast<int>(parts.size());
        auto strategies = tdl::enumerate_strategies(*op.desc);
        OpSplit split;
        for (int i = 0; i < steps; ++i) split.push_back(strategies[rng() % strategies.size()]);
        auto tiling = [&](const Shape& shape) {
          Tiling t;
          for (int i = 0; i < steps; ++i) {
            int c = static_cast<int>(rng() % (shape.size() + 1)) - 1;
            t.push_back(c < 0 ? kReplicated : c);
          }
          return t;
        };
        std::vector<Tiling> in;
        for (const auto& s : op.input_shapes) in.push_back(tiling(s));
        Tiling out = tiling(op.output_shape);
        OpComm want = op_comm(op, split, in, out, parts, steps);
        OpComm got = op_comm_by_class(op, split, in, out, parts, steps);
        ASSERT_EQ(got.input_elements, want.input_elements) << op.desc->name << " rep " << rep;
        ASSERT_EQ(got.output_elements, want.output_elements) << op.desc->name << " rep " << rep;
        SplitReads reads(op, split, parts, steps);
        by_class += fetch_by_class(reads, 0, op.input_shapes[0], in[0]).has_value() +
                    output_by_class(op, split, out, parts, steps).has_value();
        cases += 2;
      }
  // Most random cases are valid plans, counted by classes (the rest fell back to devices).
  EXPECT_GT(by_class, cases / 3);
}

TEST(CostMemo, SharedCountsEqualTheDirectCount) {
  // Ops alike share a memo: whatever the op, split and tilings, a count looked up equals op_comm's,
  // and keys tell apart kinds, slots, steps, strategies and cuts.
  std::mt19937 rng(11);
  auto mm = matmul();
  auto conv = conv1d();
  std::vector<OpView> ops = {view(*mm, {{12, 7}, {7, 10}}, {12, 10}), view(*conv, {{6, 5, 9}, {4, 5, 3}}, {6, 4, 9}),
                             view(*mm, {{5, 9}, {9, 3}}, {5, 3})};
  const std::vector<int> parts = {3, 2, 2};
  CountMemo memo;
  int hits = 0;
  for (int rep = 0; rep < 600; ++rep) {
    const int kind = static_cast<int>(rng() % ops.size());
    const OpView& op = ops[kind];
    const int steps = 1 + static_cast<int>(rng() % parts.size());
    auto strategies = tdl::enumerate_strategies(*op.desc);
    OpSplit split;
    for (int i = 0; i < steps; ++i) split.push_back(strategies[rng() % strategies.size()]);
    auto tiling = [&](const Shape& shape) {
      Tiling t;
      for (int i = 0; i < steps; ++i) {
        int c = static_cast<int>(rng() % (shape.size() + 1)) - 1;
        t.push_back(c < 0 ? kReplicated : c);
      }
      return t;
    };
    std::vector<Tiling> in;
    for (const auto& s : op.input_shapes) in.push_back(tiling(s));
    Tiling out = tiling(op.output_shape);
    OpComm want = op_comm(op, split, in, out, parts, steps);
    for (size_t t = 0; t < in.size(); ++t) hits += memo.find(*CountMemo::key(kind, static_cast<int>(t), split, in[t], steps)) != nullptr;
    SplitCounter counter(op, kind, split, parts, steps, &memo);
    for (size_t t = 0; t < in.size(); ++t)
      ASSERT_EQ(counter.elements(static_cast<int>(t), in[t]), want.input_elements[t]) << op.desc->name << " rep " << rep;
    ASSERT_EQ(counter.elements(static_cast<int>(in.size()), out), want.output_elements) << op.desc->name << " rep " << rep;
  }
  EXPECT_GT(hits, 100);  // the random choices recur: lookups were tested, not only fresh counts
  auto mm_strategies = tdl::enumerate_strategies(*mm);
  OpSplit split = {mm_strategies[0], mm_strategies[1]};
  Tiling t = {0, 1};
  auto base = CountMemo::key(0, 0, split, t, 2);
  EXPECT_NE(base, CountMemo::key(1, 0, split, t, 2));
  EXPECT_NE(base, CountMemo::key(0, 1, split, t, 2));
  EXPECT_NE(base, CountMemo::key(0, 0, split, t, 1));
  EXPECT_NE(base, CountMemo::key(0, 0, split, Tiling{0, kReplicated}, 2));
  EXPECT_NE(base, CountMemo::key(0, 0, OpSplit{split[1], split[0]}, t, 2));
}

}  // namespace
}  // namespace tilewise::cost

// Native tile kernels for broadcasts, layouts (concat, stack, slices, reshape, upsampling), the sums
// that are their gradients and the GRU cell, against the TDL formulas as double loops
// (tile_oracle.h): random shapes, random uneven sub-ranges of every variable (partial reductions
// included), inputs given as exactly the regions the oracle read, sometimes widened.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/tile_kernels.h"
#include "tile_oracle.h"

namespace tilewise::kernels {
namespace {

using namespace oracle;  // NOLINT(google-build-using-namespace): the test harness

std::string json_list(const std::vector<int64_t>& v) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
  s << "]";
  return s.str();
}

// A random shape broadcast against `out` (right-aligned, of rank <= out's): the axes it reads at 0.
struct Broadcast {
  Index shape;
  std::vector<int64_t> bcast;
};

Broadcast broadcast_against(const Index& out, std::mt19937& rng) {
  Broadcast b;
  const int rank = static_cast<int>(uniform(rng, 0, static_cast<int64_t>(out.size())));
  const size_t off = out.size() - rank;
  for (int d = 0; d < rank; ++d) {
    const bool one = out[off + d] > 1 && uniform(rng, 0, 2) == 0;
    b.shape.push_back(one ? 1 : out[off + d]);
    if (one) b.bcast.push_back(d);
  }
  return b;
}

// t read at the output index v (right-aligned), its axes in bcast at 0.
double read_aligned(Tensor& t, const Index& v, size_t rank, const std::vector<int64_t>& bcast) {
  Index at;
  const size_t off = rank - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const bool b = std::find(bcast.begin(), bcast.end(), static_cast<int64_t>(d)) != bcast.end();
    at.push_back(b ? 0 : v[off + d]);
  }
  return t(at);
}

Index without(Index v, size_t axis) {
  v.erase(v.begin() + static_cast<int64_t>(axis));
  return v;
}

TEST(TileKernelBroadcast, BinaryOpsRightAligned) {
  struct Op {
    const char* type;
    double (*f)(double, double);
  };
  const std::vector<Op> ops = {
      {"broadcast_add", [](double a, double b) { return a + b; }},
      {"broadcast_sub", [](double a, double b) { return a - b; }},
      {"broadcast_mul", [](double a, double b) { return a * b; }},
      {"broadcast_div", [](double a, double b) { return a / b; }},
      {"broadcast_maximum", [](double a, double b) { return std::max(a, b); }},
      {"broadcast_minimum", [](double a, double b) { return std::min(a, b); }},
  };
  std::mt19937 rng(31);
  for (const Op& op : ops) {
    for (int trial = 0; trial < 12; ++trial) {
      const int rank = static_cast<int>(uniform(rng, 1, 4));
      const Index out = random_shape(rng, rank);
      const Broadcast a = broadcast_against(out, rng), b = broadcast_against(out, rng);
      const std::string attrs = R"({"a_bcast": )" + json_list(a.bcast) + R"(, "b_bcast": )" + json_list(b.bcast) + "}";
      OpCase c = make_case(op.type, numbered("i", rank), iota(rank), out, {a.shape, b.shape}, rng, -1, attrs);
      if (std::string(op.type) == "broadcast_div") {
        for (double& d : c.inputs[1].data) d = static_cast<double>(static_cast<float>(0.5 + std::fabs(d)));
      }
      expect_native(c, [&](OpCase& c, Index& v) {
        const size_t r = v.size();
        return op.f(read_aligned(c.inputs[0], v, r, a.bcast), read_aligned(c.inputs[1], v, r, b.bcast));
      }, rng);
    }
  }
}

TEST(TileKernelBroadcast, ExpandMaskedFillAndSizeOneAxes) {
  std::mt19937 rng(32);
  for (int trial = 0; trial < 20; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 1, 4));
    const Index out = random_shape(rng, rank);
    const Broadcast x = broadcast_against(out, rng);
    OpCase e = make_case("expand", numbered("i", rank), iota(rank), out, {x.shape}, rng, -1,
                         R"({"shape": )" + json_list(out) + R"(, "bcast": )" + json_list(x.bcast) + "}");
    expect_native(e, [&](OpCase& c, Index& v) { return read_aligned(c.inputs[0], v, v.size(), x.bcast); }, rng);

    const Broadcast m = broadcast_against(out, rng);
    OpCase f = make_case("masked_fill", numbered("i", rank), iota(rank), out, {out, m.shape}, rng, -1,
                         R"({"value": -7.5, "mask_bcast": )" + json_list(m.bcast) + "}");
    for (double& d : f.inputs[1].data) d = d > 0 ? 1.0 : 0.0;
    expect_native(f, [&](OpCase& c, Index& v) {
      const double x = c.inputs[0](v);  // read wherever the mask is (the description's where reads both)
      return read_aligned(c.inputs[1], v, v.size(), m.bcast) != 0 ? -7.5 : x;
    }, rng);

    // unsqueeze / reduce_mean_grad: the input is the output without `axis`; squeeze the reverse.
    const int64_t axis = uniform(rng, 0, rank - 1);
    Index one = out;
    one[axis] = 1;
    OpCase u = make_case("unsqueeze", numbered("i", rank), iota(rank), one, {without(one, axis)}, rng, -1,
                         R"({"axis": )" + std::to_string(axis) + "}");
    expect_native(u, [&](OpCase& c, Index& v) { return c.inputs[0](without(v, axis)); }, rng);
    OpCase g = make_case("reduce_mean_grad", numbered("i", rank), iota(rank), out, {without(out, axis)}, rng, -1,
                         R"({"axis": )" + std::to_string(axis) + R"(, "size": )" + std::to_string(out[axis]) + "}");
    expect_native(g, [&](OpCase& c, Index& v) { return c.inputs[0](without(v, axis)) / out[axis]; }, rng);
    OpCase s = make_case("squeeze", numbered("i", rank - 1), iota(rank - 1), without(one, axis), {one}, rng, -1,
                         R"({"axis": )" + std::to_string(axis - rank) + "}");
    expect_native(s, [&](OpCase& c, Index& v) {
      Index at = v;
      at.insert(at.begin() + axis, 0);
      return c.inputs[0](at);
    }, rng);
  }
}

// ------------------------------------------------------------------------------- along an axis

TEST(TileKernelLayout, ConcatStackAndUnselect) {
  std::mt19937 rng(33);
  for (int trial = 0; trial < 20; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 1, 4));
    const int64_t axis = uniform(rng, 0, rank - 1);
    const int n = static_cast<int>(uniform(rng, 1, 4));
    const Index base = random_shape(rng, rank);
    std::vector<Index> shapes;
    Index out = base;
    out[axis] = 0;
    for (int k = 0; k < n; ++k) {
      shapes.push_back(base);
      shapes.back()[axis] = uniform(rng, 1, 4);
      out[axis] += shapes.back()[axis];
    }
    OpCase c = make_case("concat_" + std::to_string(n), numbered("i", rank), iota(rank), out, shapes, rng, -1,
                         R"({"axis": )" + std::to_string(axis) + "}");
    expect_native(c, [&](OpCase& c, Index& v) {
      int64_t t = v[axis];
      for (Tensor& x : c.inputs) {
        if (t < x.shape[axis]) {
          Index at = v;
          at[axis] = t;
          return x(at);
        }
        t -= x.shape[axis];
      }
      return 0.0;
    }, rng);

    // stack_<n> and unselect: the output has a new axis; the inputs are `base`.
    Index stacked = base;
    stacked.insert(stacked.begin() + axis, n);
    const std::string inner = std::to_string(base.back());
    OpCase s = make_case("stack_" + std::to_string(n), numbered("i", rank + 1), iota(rank + 1), stacked,
                         std::vector<Index>(n, base), rng, -1,
                         R"({"axis": )" + std::to_string(axis) + R"(, "inner": )" + inner + "}");
    expect_native(s, [&](OpCase& c, Index& v) { return c.inputs[v[axis]](without(v, axis)); }, rng);
    const int64_t index = uniform(rng, 0, n - 1);
    OpCase u = make_case("unselect", numbered("i", rank + 1), iota(rank + 1), stacked, {base}, rng, -1,
                         R"({"axis": )" + std::to_string(axis) + R"(, "index": )" + std::to_string(index) +
                             R"(, "size": )" + std::to_string(n) + R"(, "inner": )" + inner + "}");
    expect_native(u, [&](OpCase& c, Index& v) { return v[axis] == index ? c.inputs[0](without(v, axis)) : 0.0; },
                  rng);
  }
}

TEST(TileKernelLayout, SliceAndItsGradient) {
  std::mt19937 rng(34);
  for (int trial = 0; trial < 30; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 1, 4));
    const int64_t axis = uniform(rng, 0, rank - 1);
    Index x = random_shape(rng, rank);
    x[axis] = uniform(rng, 1, 12);
    const int64_t start = uniform(rng, 0, x[axis] - 1), step = uniform(rng, 1, 3);
    const int64_t count = (x[axis] - start + step - 1) / step;
    Index out = x;
    out[axis] = count;
    const std::string attrs = R"({"axis": )" + std::to_string(axis) + R"(, "start": )" + std::to_string(start) +
                              R"(, "step": )" + std::to_string(step);
    OpCase s = make_case("slice_axis", numbered("i", rank), iota(rank), out, {x}, rng, -1, attrs + R"(, "stop": 0})");
    expect_native(s, [&](OpCase& c, Index& v) {
      Index at = v;
      at[axis] = start + step * v[axis];
      return c.inputs[0](at);
    }, rng);
    // The gradient: dy (out) scattered back into x's shape, zeros between and around the hits.
    OpCase g = make_case("slice_axis_grad", numbered("i", rank), iota(rank), x, {out}, rng, -1,
                         attrs + R"(, "size": )" + std::to_string(x[axis]) + "}");
    expect_native(g, [&](OpCase& c, Index& v) {
      const int64_t k = v[axis] - start;
      if (k < 0 || k % step != 0) return 0.0;
      Index at = v;
      at[axis] = k / step;
      return c.inputs[0](at);
    }, rng);
  }
}

TEST(TileKernelLayout, ReshapeReadsAnyBoxOfTheInput) {
  const std::vector<std::pair<Index, Index>> pairs = {
      {{2, 3, 4}, {6, 4}}, {{6, 4}, {2, 3, 4}}, {{2, 12}, {4, 6}},  {{4, 6}, {2, 3, 2, 2}},
      {{3, 4, 5}, {5, 12}}, {{2, 3, 1, 4}, {24}}, {{24}, {2, 3, 4}}, {{2, 8, 6}, {1, 2, 8, 2, 3}}};
  std::mt19937 rng(35);
  for (const auto& [in, out] : pairs) {
    for (int trial = 0; trial < 8; ++trial) {
      const int rank = static_cast<int>(out.size());
      OpCase c = make_case("reshape", numbered("i", rank), iota(rank), out, {in}, rng);
      expect_native(c, [&](OpCase& c, Index& v) {
        int64_t flat = 0;
        for (int d = 0; d < rank; ++d) flat = flat * out[d] + v[d];
        Index at(in.size());
        for (int d = static_cast<int>(in.size()) - 1; d >= 0; --d) at[d] = flat % in[d], flat /= in[d];
        return c.inputs[0](at);
      }, rng);
    }
  }
}

TEST(TileKernelLayout, PadAndUnpadTheLeadingAxes) {
  std::mt19937 rng(39);
  for (int trial = 0; trial < 30; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 1, 4)), padded = static_cast<int>(uniform(rng, 0, rank));
    const Index x = random_shape(rng, rank);
    Index out = x, before(rank, 0);
    std::ostringstream pads;
    pads << R"({"pads": [)";
    for (int d = 0; d < padded; ++d) {
      const int64_t lo = uniform(rng, 0, 2), hi = uniform(rng, 0, 2);
      before[d] = lo;
      out[d] += lo + hi;
      pads << (d ? ", " : "") << "[" << lo << ", " << hi << "]";
    }
    pads << "]}";
    auto shifted = [&](const Index& v, int sign) {
      Index at = v;
      for (int d = 0; d < rank; ++d) at[d] += sign * before[d];
      return at;
    };
    OpCase p = make_case("pad", numbered("i", rank), iota(rank), out, {x}, rng, -1, pads.str());
    expect_native(p, [&](OpCase& c, Index& v) { return c.inputs[0](shifted(v, -1)); }, rng);
    OpCase u = make_case("unpad", numbered("i", rank), iota(rank), x, {out}, rng, -1, pads.str());
    expect_native(u, [&](OpCase& c, Index& v) { return c.inputs[0](shifted(v, 1)); }, rng);
  }
  // pads must be a list of pairs.
  for (const char* attrs : {R"({"pads": [1, 2]})", R"({"pads": [[1, 2], [0]]})", R"({"pads": [[[1, 2]]]})"}) {
    OpCase p = make_case("pad", {"i0", "i1"}, {0, 1}, {5, 4}, {{2, 4}}, rng, -1, attrs);
    Prepared prepared = prepare(p, rng);
    EXPECT_FALSE(run_native(prepared.call)) << attrs;
  }
}

// ------------------------------------------------------------------------------------- sums

TEST(TileKernelSum, SumToSumLeadingAndMeanPartially) {
  std::mt19937 rng(36);
  for (int trial = 0; trial < 20; ++trial) {
    // sum_to: x (lead..., shape with 1 at bcast) summed down to shape.
    const int rank = static_cast<int>(uniform(rng, 1, 3)), lead = static_cast<int>(uniform(rng, 0, 2));
    Index x = random_shape(rng, lead + rank), out(x.begin() + lead, x.end());
    std::vector<int64_t> bcast;
    for (int d = 0; d < rank; ++d) {
      if (uniform(rng, 0, 1)) bcast.push_back(d), out[d] = 1;
    }
    std::vector<std::string> names = numbered("i", rank);
    const int summed = lead + static_cast<int>(bcast.size());
    for (const std::string& k : numbered("k", summed)) names.push_back(k);
    Index extents = out;
    for (int d = 0; d < lead; ++d) extents.push_back(x[d]);
    for (int64_t d : bcast) extents.push_back(x[lead + d]);
    OpCase c = make_case("sum_to", names, iota(rank), extents, {x}, rng, -1,
                         R"({"shape": )" + json_list(out) + R"(, "bcast": )" + json_list(bcast) + "}");
    std::vector<int> red = iota(summed, rank);
    expect_native(c, [&](OpCase& c, Index& v) {
      return sum_over(c, red, v, [&] {
        Index at;
        for (int d = 0; d < lead; ++d) at.push_back(v[rank + d]);
        for (int d = 0, b = 0; d < rank; ++d) {
          const bool is_b = std::find(bcast.begin(), bcast.end(), d) != bcast.end();
          at.push_back(is_b ? v[rank + lead + b++] : v[d]);
        }
        return c.inputs[0](at);
      });
    }, rng);

    // sum_leading: Sum over the first `lead` axes; reduce_mean over one axis.
    const int nd = static_cast<int>(uniform(rng, 2, 4)), first = static_cast<int>(uniform(rng, 1, nd - 1));
    Index y = random_shape(rng, nd);
    std::vector<std::string> ln = numbered("r", nd - first);
    for (const std::string& k : numbered("k", first)) ln.push_back(k);
    Index le(y.begin() + first, y.end());
    le.insert(le.end(), y.begin(), y.begin() + first);
    OpCase l = make_case("sum_leading", ln, iota(nd - first), le, {y}, rng, -1,
                         R"({"lead": )" + std::to_string(first) + "}");
    std::vector<int> lred = iota(first, nd - first);
    expect_native(l, [&](OpCase& c, Index& v) {
      return sum_over(c, lred, v, [&] {
        Index at(v.begin() + (nd - first), v.end());
        at.insert(at.end(), v.begin(), v.begin() + (nd - first));
        return c.inputs[0](at);
      });
    }, rng);

    const int64_t axis = uniform(rng, 0, nd - 1);
    Index me = without(y, axis);
    me.push_back(y[axis]);
    OpCase m = make_case("reduce_mean", numbered("i", nd), iota(nd - 1), me, {y}, rng, -1,
                         R"({"axis": )" + std::to_string(axis - nd) + "}");
    expect_native(m, [&](OpCase& c, Index& v) {
      return sum_over(c, {nd - 1}, v, [&] {
        Index at(v.begin(), v.end() - 1);
        at.insert(at.begin() + axis, v[nd - 1]);
        return c.inputs[0](at);
      }) / y[axis];
    }, rng);
  }
}

TEST(TileKernelSum, AlongAnAxisAndGlobalPooling) {
  std::mt19937 rng(40);
  const double inf = std::numeric_limits<double>::infinity();
  for (int trial = 0; trial < 20; ++trial) {
    const int nd = static_cast<int>(uniform(rng, 1, 4));
    const Index x = random_shape(rng, nd);
    const int64_t axis = uniform(rng, 0, nd - 1);
    Index extents = without(x, axis);
    extents.push_back(x[axis]);
    auto at = [&](const Index& v) {
      Index a(v.begin(), v.end() - 1);
      a.insert(a.begin() + axis, v[nd - 1]);
      return a;
    };
    const std::string attrs = R"({"axis": )" + std::to_string(axis) + "}";
    OpCase s = make_case("reduce_sum", numbered("i", nd), iota(nd - 1), extents, {x}, rng, -1, attrs);
    expect_native(s, [&](OpCase& c, Index& v) { return sum_over(c, {nd - 1}, v, [&] { return c.inputs[0](at(v)); }); },
                  rng);
    for (bool is_max : {true, false}) {
      OpCase m = make_case(is_max ? "reduce_max" : "reduce_min", numbered("i", nd), iota(nd - 1), extents, {x}, rng,
                           -1, attrs);
      expect_native(m, [&](OpCase& c, Index& v) {
        double best = is_max ? -inf : inf;
        for (v[nd - 1] = c.vars[nd - 1].lo; v[nd - 1] <= c.vars[nd - 1].hi; ++v[nd - 1]) {
          const double e = c.inputs[0](at(v));
          best = is_max ? std::max(best, e) : std::min(best, e);
        }
        return best;
      }, rng);
    }
  }
  for (int trial = 0; trial < 10; ++trial) {
    const Index x = random_shape(rng, 4);
    OpCase a = make_case("global_avg_pool2d", {"b", "c", "h", "w"}, {0, 1}, x, {x}, rng);
    expect_native(a, [&](OpCase& c, Index& v) {
      return sum_over(c, {2, 3}, v, [&] { return c.inputs[0](v); }) / static_cast<double>(x[2] * x[3]);
    }, rng);
    OpCase m = make_case("global_max_pool2d", {"b", "c", "h", "w"}, {0, 1}, x, {x}, rng);
    expect_native(m, [&](OpCase& c, Index& v) {
      double best = -inf;
      for (v[2] = c.vars[2].lo; v[2] <= c.vars[2].hi; ++v[2])
        for (v[3] = c.vars[3].lo; v[3] <= c.vars[3].hi; ++v[3]) best = std::max(best, c.inputs[0](v));
      return best;
    }, rng);
    OpCase g = make_case("global_avg_pool2d_grad", {"b", "c", "h", "w"}, iota(4), x, {{x[0], x[1]}}, rng, -1,
                         R"({"in_h": )" + std::to_string(x[2]) + R"(, "in_w": )" + std::to_string(x[3]) + "}");
    expect_native(g, [&](OpCase& c, Index& v) { return c.inputs[0]({v[0], v[1]}) / (x[2] * x[3]); }, rng);
  }
}

TEST(TileKernelLayout, TransposeSplitAndFlip) {
  std::mt19937 rng(41);
  for (int trial = 0; trial < 20; ++trial) {
    const Index m = random_shape(rng, 2);
    OpCase t = make_case("transpose", {"i", "j"}, {0, 1}, {m[1], m[0]}, {m}, rng);
    expect_native(t, [](OpCase& c, Index& v) { return c.inputs[0]({v[1], v[0]}); }, rng);

    const int rank = static_cast<int>(uniform(rng, 1, 4));
    const int64_t axis = uniform(rng, 0, rank - 1), sections = uniform(rng, 1, 3);
    Index x = random_shape(rng, rank);
    x[axis] *= sections;
    const int64_t index = uniform(rng, 0, sections - 1), piece = x[axis] / sections;
    Index out = x;
    out[axis] = piece;
    OpCase s = make_case("split", numbered("i", rank), iota(rank), out, {x}, rng, -1,
                         R"({"axis": )" + std::to_string(axis) + R"(, "sections": )" + std::to_string(sections) +
                             R"(, "index": )" + std::to_string(index) + "}");
    expect_native(s, [&](OpCase& c, Index& v) {
      Index a = v;
      a[axis] += index * piece;
      return c.inputs[0](a);
    }, rng);
    OpCase f = make_case("flip", numbered("i", rank), iota(rank), x, {x}, rng, -1,
                         R"({"axis": )" + std::to_string(axis - rank) + "}");
    expect_native(f, [&](OpCase& c, Index& v) {
      Index a = v;
      a[axis] = x[axis] - 1 - v[axis];
      return c.inputs[0](a);
    }, rng);
  }
}

TEST(TileKernelSum, PrefixAndSuffixSums) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 20; ++trial) {
    const Index x = random_shape(rng, 2, 8);
    for (bool suffix : {false, true}) {
      OpCase c = make_case(suffix ? "cumsum_grad" : "cumsum", {"i", "j", "k"}, {0, 1}, {x[0], x[1], x[1]}, {x}, rng);
      expect_native(c, [&](OpCase& c, Index& v) {
        return sum_over(c, {2}, v, [&] {
          const bool in = suffix ? v[2] >= v[1] : v[2] <= v[1];
          const double e = c.inputs[0]({v[0], v[2]});  // read as the description does, then masked
          return in ? e : 0.0;
        });
      }, rng);
    }
  }
}

TEST(TileKernelElementwise, OneHotAndRunningStatistics) {
  std::mt19937 rng(43);
  for (int trial = 0; trial < 15; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 0, 2));
    const Index ids = random_shape(rng, rank);
    const int64_t depth = uniform(rng, 1, 6);
    Index out = ids;
    out.push_back(depth);
    OpCase c = make_case("one_hot", numbered("i", rank + 1), iota(rank + 1), out, {ids}, rng, -1,
                         R"({"depth": )" + std::to_string(depth) + "}");
    for (double& v : c.inputs[0].data) v = std::floor((v + 1.0) * depth / 2.0);  // some ids outside [0, depth)
    expect_native(c, [&](OpCase& c, Index& v) {
      const Index at(v.begin(), v.end() - 1);
      return c.inputs[0](at) == static_cast<double>(v.back()) ? 1.0 : 0.0;
    }, rng);
    OpCase r = make_case("running_stat_update", numbered("i", rank + 1), iota(rank + 1), out, {out, out}, rng, -1,
                         R"({"momentum": 0.25})");
    expect_native(r, [](OpCase& c, Index& v) { return 0.75 * c.inputs[0](v) + 0.25 * c.inputs[1](v); }, rng);
  }
}

// Reductions whose formula needs the whole row first: logsumexp, argmax, argmin, the variance and its
// gradient, softmax-minus-target, the channel mean; ties split by the global max pool's gradient.
TEST(TileKernelSum, WholeRowReductions) {
  std::mt19937 rng(44);
  for (int trial = 0; trial < 20; ++trial) {
    const int nd = static_cast<int>(uniform(rng, 1, 3));
    const Index x = random_shape(rng, nd);
    const int64_t axis = uniform(rng, 0, nd - 1), n = x[axis];
    Index extents = without(x, axis);
    extents.push_back(n);
    extents.push_back(n);
    // The row of input 0 through output index v (its first nd - 1 entries), as a function of k.
    auto row = [&](OpCase& c, const Index& v, int64_t k) {
      Index at(v.begin(), v.begin() + (nd - 1));
      at.insert(at.begin() + axis, k);
      return c.inputs[0](at);
    };
    const std::string attrs = R"({"axis": )" + std::to_string(axis) + "}";
    OpCase l = make_case("logsumexp", numbered("i", nd + 1), iota(nd - 1), extents, {x}, rng, nd - 1, attrs);
    expect_native(l, [&](OpCase& c, Index& v) {
      double m = -kInf, s = 0;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, row(c, v, k));
      for (int64_t k = 0; k < n; ++k) s += std::exp(row(c, v, k) - m);
      return m + std::log(s);
    }, rng);
    OpCase a = make_case("argmax", numbered("i", nd + 1), iota(nd - 1), extents, {x}, rng, -1, attrs);
    a.vars[nd - 1] = {0, n - 1};  // the max is whole; the index search may be a part
    for (double& e : a.inputs[0].data) e = std::round(e);  // ties: the first one wins
    expect_native(a, [&](OpCase& c, Index& v) {
      double m = -kInf;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, row(c, v, k));
      for (int64_t k = c.vars[nd].lo; k <= c.vars[nd].hi; ++k)
        if (row(c, v, k) == m) return static_cast<double>(k);
      return kInf;
    }, rng);
    OpCase am = a;
    am.type = "argmin";
    expect_native(am, [&](OpCase& c, Index& v) {
      double m = kInf;
      for (int64_t k = 0; k < n; ++k) m = std::min(m, row(c, v, k));
      for (int64_t k = c.vars[nd].lo; k <= c.vars[nd].hi; ++k)
        if (row(c, v, k) == m) return static_cast<double>(k);
      return kInf;
    }, rng);
    OpCase r = make_case("reduce_var", numbered("i", nd + 1), iota(nd - 1), extents, {x}, rng, -1, attrs);
    r.vars[nd - 1] = {0, n - 1};
    expect_native(r, [&](OpCase& c, Index& v) {
      double mu = 0, s = 0;
      for (int64_t k = 0; k < n; ++k) mu += row(c, v, k);
      mu /= n;
      for (int64_t k = c.vars[nd].lo; k <= c.vars[nd].hi; ++k) s += (row(c, v, k) - mu) * (row(c, v, k) - mu);
      return s / n;
    }, rng);
    Index gx = x;
    gx.push_back(n);
    OpCase g = make_case("reduce_var_grad", numbered("i", nd + 1), iota(nd), gx, {without(x, axis), x}, rng, nd, attrs);
    expect_native(g, [&](OpCase& c, Index& v) {
      Index at(v.begin(), v.begin() + nd), j = without(at, axis);
      double mu = 0;
      for (int64_t k = 0; k < n; ++k) {
        Index t = at;
        t[axis] = k;
        mu += c.inputs[1](t);
      }
      mu /= n;
      return 2.0 * c.inputs[0](j) * (c.inputs[1](at) - mu) / n;
    }, rng);
    OpCase e = make_case("logsumexp_grad", numbered("i", nd), iota(nd), x, {without(x, axis), x, without(x, axis)}, rng,
                         -1, attrs);
    expect_native(e, [&](OpCase& c, Index& v) {
      const Index j = without(v, axis);
      return c.inputs[0](j) * std::exp(c.inputs[1](v) - c.inputs[2](j));
    }, rng);
  }
  for (int trial = 0; trial < 10; ++trial) {
    const Index x = random_shape(rng, 4);
    OpCase ce = make_case("cross_entropy_grad", {"b", "k", "j", "j'"}, {0, 1}, {x[0], x[1], x[1], x[1]},
                          {{x[0], x[1]}, {x[0], x[1]}}, rng, 2);
    expect_native(ce, [&](OpCase& c, Index& v) {
      double m = -kInf, s = 0;
      for (int64_t j = 0; j < x[1]; ++j) m = std::max(m, c.inputs[0]({v[0], j}));
      for (int64_t j = 0; j < x[1]; ++j) s += std::exp(c.inputs[0]({v[0], j}) - m);
      return (std::exp(c.inputs[0]({v[0], v[1]}) - m) / s - c.inputs[1]({v[0], v[1]})) / x[0];
    }, rng);
    OpCase bm = make_case("batch_norm_mean", {"c", "n", "y", "z"}, {0}, {x[1], x[0], x[2], x[3]}, {x}, rng);
    expect_native(bm, [&](OpCase& c, Index& v) {
      return sum_over(c, {1, 2, 3}, v, [&] { return c.inputs[0]({v[1], v[0], v[2], v[3]}); }) /
             static_cast<double>(x[0] * x[2] * x[3]);
    }, rng);
    OpCase mg = make_case("global_max_pool2d_grad", {"b", "c", "h", "w", "i", "j", "q", "r"}, iota(4),
                          {x[0], x[1], x[2], x[3], x[2], x[3], x[2], x[3]}, {x, {x[0], x[1]}, {x[0], x[1]}}, rng, 4);
    for (double& d : mg.inputs[0].data) d = std::round(d);  // ties: the first maximum gets dy
    if (trial % 3 == 2) mg.inputs[0].data[uniform(rng, 0, mg.inputs[0].numel() - 1)] = std::nan("");
    for (int64_t b = 0; b < x[0]; ++b)
      for (int64_t ch = 0; ch < x[1]; ++ch) {
        double m = -kInf;
        for (int64_t t = 0; t < x[2] * x[3]; ++t) {
          const double e = mg.inputs[0].data[(b * x[1] + ch) * x[2] * x[3] + t];
          m = std::isnan(e) || std::isnan(m) ? std::nan("") : std::max(m, e);
        }
        mg.inputs[1].data[b * x[1] + ch] = m;
      }
    expect_native(mg, [&](OpCase& c, Index& v) {
      const double y = c.inputs[1]({v[0], v[1]});
      int64_t winner = -1;
      for (int64_t i = 0; i < x[2]; ++i)
        for (int64_t j = 0; j < x[3]; ++j) {
          const double e = c.inputs[0]({v[0], v[1], i, j});
          if (std::isnan(y) ? std::isnan(e) : (e == y && winner < 0)) winner = i * x[3] + j;
        }
      const double dy = c.inputs[2]({v[0], v[1]});  // read for every element, as the kernel reads it
      return winner == v[2] * x[3] + v[3] ? dy : 0.0;
    }, rng);
    OpCase bg = make_case("batch_norm_mean_grad", {"b", "c", "h", "w"}, iota(4), x, {{x[1]}, x}, rng);
    expect_native(bg, [&](OpCase& c, Index& v) {
      return c.inputs[0]({v[1]}) / static_cast<double>(x[0] * x[2] * x[3]);
    }, rng);
    OpCase sp = make_case("sum_product", {"_", "r0", "r1"}, {0}, {1, x[0], x[1]}, {{x[0], x[1]}, {x[0], x[1]}}, rng);
    expect_native(sp, [&](OpCase& c, Index& v) {
      return sum_over(c, {1, 2}, v, [&] { return c.inputs[0]({v[1], v[2]}) * c.inputs[1]({v[1], v[2]}); });
    }, rng);
    OpCase d = make_case("batch_diagonal", {"b", "i"}, {0, 1}, {x[0], x[1]}, {{x[0], x[1], x[1]}}, rng);
    expect_native(d, [](OpCase& c, Index& v) { return c.inputs[0]({v[0], v[1], v[1]}); }, rng);
    OpCase dg = make_case("batch_diagonal_grad", {"b", "i", "j"}, {0, 1, 2}, {x[0], x[1], x[1]}, {{x[0], x[1]}}, rng);
    expect_native(dg, [](OpCase& c, Index& v) {
      const double e = c.inputs[0]({v[0], v[1]});  // read as the description does, then masked
      return v[1] == v[2] ? e : 0.0;
    }, rng);
  }
}

TEST(TileKernelSum, RmsNormGammaGradientPartialOverRows) {
  std::mt19937 rng(45);
  for (int trial = 0; trial < 15; ++trial) {
    const int lead = static_cast<int>(uniform(rng, 1, 2));
    const Index x = random_shape(rng, lead + 1);
    const int64_t n = x[lead];
    std::vector<std::string> names = {"j"};
    for (const std::string& r : numbered("r", lead)) names.push_back(r);
    names.push_back("k");
    Index extents = {n};
    extents.insert(extents.end(), x.begin(), x.begin() + lead);
    extents.push_back(n);
    OpCase c = make_case("rms_norm_grad_gamma", names, {0}, extents, {x, x}, rng, 1 + lead, R"({"eps": 0.001})");
    expect_native(c, [&](OpCase& c, Index& v) {
      return sum_over(c, iota(lead, 1), v, [&] {
        Index row(v.begin() + 1, v.begin() + 1 + lead), at = row;
        double ms = 0;
        for (int64_t k = 0; k < n; ++k) {
          Index t = row;
          t.push_back(k);
          ms += c.inputs[1](t) * c.inputs[1](t);
        }
        at.push_back(v[0]);
        return c.inputs[0](at) * c.inputs[1](at) / std::sqrt(ms / n + 0.001);
      });
    }, rng);
  }
}

TEST(TileKernelSum, ProductsAndBatchNormVariance) {
  std::mt19937 rng(46);
  for (int trial = 0; trial < 15; ++trial) {
    const int nd = static_cast<int>(uniform(rng, 1, 3));
    const Index x = random_shape(rng, nd);
    const int64_t axis = uniform(rng, 0, nd - 1), n = x[axis];
    Index extents = without(x, axis);
    extents.push_back(n);
    const std::string attrs = R"({"axis": )" + std::to_string(axis) + "}";
    OpCase p = make_case("reduce_prod", numbered("i", nd), iota(nd - 1), extents, {x}, rng, -1, attrs);
    expect_native(p, [&](OpCase& c, Index& v) {
      double prod = 1;
      Index at(v.begin(), v.end() - 1);
      at.insert(at.begin() + axis, 0);
      for (int64_t k = c.vars[nd - 1].lo; k <= c.vars[nd - 1].hi; ++k) {
        at[axis] = k;
        prod *= c.inputs[0](at);
      }
      return prod;
    }, rng);
    Index gx = x;
    gx.push_back(n);
    OpCase g = make_case("reduce_prod_grad", numbered("i", nd + 1), iota(nd), gx, {without(x, axis), x}, rng, nd, attrs);
    for (double& e : g.inputs[1].data)
      if (uniform(rng, 0, 4) == 0) e = 0.0;  // zeros: the product of the others stays exact
    expect_native(g, [&](OpCase& c, Index& v) {
      Index at(v.begin(), v.begin() + nd);
      const Index j = without(at, axis);
      double prod = 1;
      for (int64_t k = 0; k < n; ++k) {
        Index t = at;
        t[axis] = k;
        const double e = c.inputs[1](t);
        if (k != at[axis]) prod *= e;
      }
      return c.inputs[0](j) * prod;
    }, rng);
  }
  for (int trial = 0; trial < 10; ++trial) {
    const Index x = random_shape(rng, 4);
    const double count = static_cast<double>(x[0] * x[2] * x[3]);
    auto mean = [&](OpCase& c, int input, int64_t ch) {
      double s = 0;
      for (int64_t b = 0; b < x[0]; ++b)
        for (int64_t h = 0; h < x[2]; ++h)
          for (int64_t w = 0; w < x[3]; ++w) s += c.inputs[input]({b, ch, h, w});
      return s / count;
    };
    OpCase v = make_case("batch_norm_var", {"c", "m", "y", "z", "n", "y'", "z'"}, {0},
                         {x[1], x[0], x[2], x[3], x[0], x[2], x[3]}, {x}, rng, 1);
    expect_native(v, [&](OpCase& c, Index& at) {
      double s2 = 0;
      for (int64_t b = 0; b < x[0]; ++b)
        for (int64_t h = 0; h < x[2]; ++h)
          for (int64_t w = 0; w < x[3]; ++w) s2 += c.inputs[0]({b, at[0], h, w}) * c.inputs[0]({b, at[0], h, w});
      const double mu = mean(c, 0, at[0]);
      return s2 / count - mu * mu;
    }, rng);
    OpCase g = make_case("batch_norm_var_grad", {"b", "c", "h", "w", "n", "y", "z"}, iota(4),
                         {x[0], x[1], x[2], x[3], x[0], x[2], x[3]}, {{x[1]}, x}, rng, 4);
    expect_native(g, [&](OpCase& c, Index& at) {
      return 2.0 * c.inputs[0]({at[1]}) * (c.inputs[1]({at[0], at[1], at[2], at[3]}) - mean(c, 1, at[1])) / count;
    }, rng);
  }
}

// ------------------------------------------------------------------------- upsampling and GRU

TEST(TileKernelLayout, NearestUpsamplingAndItsGradient) {
  std::mt19937 rng(37);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t sh = uniform(rng, 1, 3), sw = uniform(rng, 1, 3);
    const Index x = random_shape(rng, 4, 4), up = {x[0], x[1], x[2] * sh, x[3] * sw};
    const bool square = sh == sw && trial % 2 == 0;
    const std::string attrs = square ? R"({"scale": )" + std::to_string(sh) + "}"
                                     : R"({"sh": )" + std::to_string(sh) + R"(, "sw": )" + std::to_string(sw) + "}";
    const std::string type = square ? "upsample_nearest2d" : "upsample_nearest2d_hw";
    OpCase f = make_case(type, {"b", "c", "y", "x"}, iota(4), up, {x}, rng, -1, attrs);
    expect_native(f, [&](OpCase& c, Index& v) { return c.inputs[0]({v[0], v[1], v[2] / sh, v[3] / sw}); }, rng);
    OpCase g = make_case(type + "_grad", {"b", "c", "y", "x", "i", "j"}, iota(4), {x[0], x[1], x[2], x[3], sh, sw},
                         {up}, rng, -1, attrs);
    expect_native(g, [&](OpCase& c, Index& v) {
      return sum_over(c, {4, 5}, v, [&] { return c.inputs[0]({v[0], v[1], sh * v[2] + v[4], sw * v[3] + v[5]}); });
    }, rng);
  }
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(TileKernelElementwise, GruCellAndItsGradients) {
  std::mt19937 rng(38);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t b = uniform(rng, 1, 4), n = uniform(rng, 1, 5);
    // The gates at column k of row r: r, z, new state, and gh's third part.
    struct Gates {
      double r, z, nn, ghn;
    };
    auto gates = [n](OpCase& c, int gi, int64_t row, int64_t k) {
      Tensor &x = c.inputs[gi], &y = c.inputs[gi + 1];
      const double r = sigmoid(x({row, k}) + y({row, k})), z = sigmoid(x({row, k + n}) + y({row, k + n}));
      return Gates{r, z, std::tanh(x({row, k + 2 * n}) + r * y({row, k + 2 * n})), y({row, k + 2 * n})};
    };
    OpCase f = make_case("gru_cell", {"b", "j"}, {0, 1}, {b, n}, {{b, 3 * n}, {b, 3 * n}, {b, n}}, rng);
    expect_native(f, [&](OpCase& c, Index& v) {
      const Gates g = gates(c, 0, v[0], v[1]);
      return (1 - g.z) * g.nn + g.z * c.inputs[2](v);
    }, rng);
    OpCase h = make_case("gru_cell_grad_h", {"b", "j"}, {0, 1}, {b, n}, {{b, n}, {b, 3 * n}, {b, 3 * n}}, rng);
    expect_native(h, [&](OpCase& c, Index& v) { return c.inputs[0](v) * gates(c, 1, v[0], v[1]).z; }, rng);
    for (bool times_r : {false, true}) {
      OpCase d = make_case(times_r ? "gru_cell_grad_gh" : "gru_cell_grad_gi", {"b", "j"}, {0, 1}, {b, 3 * n},
                           {{b, n}, {b, 3 * n}, {b, 3 * n}, {b, n}}, rng);
      expect_native(d, [&](OpCase& c, Index& v) {
        const int64_t third = v[1] / n, k = v[1] % n;
        const Gates g = gates(c, 1, v[0], k);
        const double dy = c.inputs[0]({v[0], k});
        const double dn = dy * (1 - g.z) * (1 - g.nn * g.nn);
        if (third == 0) return dn * g.ghn * g.r * (1 - g.r);
        if (third == 1) return dy * (c.inputs[3]({v[0], k}) - g.nn) * g.z * (1 - g.z);
        return times_r ? dn * g.r : dn;
      }, rng, 1e-4);
    }
  }
}

}  // namespace
}  // namespace tilewise::kernels

// The convolution kernels' two paths against the oracle on the shapes the window kernels
// (conv_direct.h) care about: planes 8, 16 and 32 wide (masked rows: every lane a kept position,
// 1, 2 or 4 vectors a row), odd widths (padded rows), stride 2 (phase-split images), dilation, and
// the partial boxes a plan gives a device. Each case runs with the window kernels (where the CPU has
// AVX-512F) and with im2col + BLAS, in exactly the scratch it states.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/tile_kernels.h"
#include "tile_oracle.h"

namespace tilewise::kernels {
namespace {

using namespace oracle;  // NOLINT(google-build-using-namespace): the test harness

struct Geometry {
  int64_t n, ci, h, w, co, k, s, p, d;
  int64_t out(int64_t size) const { return (size + 2 * p - d * (k - 1) - 1) / s + 1; }
  std::string attrs(const std::string& extra = "") const {
    return "{\"dilation\": " + std::to_string(d) + extra + ", \"padding\": " + std::to_string(p) +
           ", \"stride\": " + std::to_string(s) + "}";
  }
};

const Geometry kShapes[] = {
    {2, 5, 16, 16, 7, 3, 1, 1, 1},   // masked, one vector a row
    {2, 3, 8, 8, 5, 3, 1, 1, 1},     // masked, two rows a vector
    {1, 4, 32, 32, 6, 3, 1, 1, 1},   // masked, two vectors a row
    {1, 2, 6, 64, 3, 3, 1, 1, 1},    // masked, four vectors a row
    {2, 3, 16, 16, 4, 3, 1, 2, 2},   // masked, dilated
    {3, 4, 12, 12, 5, 3, 1, 1, 1},   // padded rows
    {2, 6, 16, 16, 9, 3, 2, 1, 1},   // stride 2: four phases
    {2, 8, 16, 16, 7, 1, 2, 0, 1},   // 1x1 stride 2: one phase
    {2, 3, 9, 11, 4, 5, 1, 2, 1},    // 5x5, odd sizes
    {1, 2, 10, 11, 3, 3, 3, 2, 2},   // stride 3, dilation 2
};

// Runs every case of `check` with the window kernels and again with im2col + BLAS.
template <class F>
void both_paths(F check) {
  for (bool windows : {true, false}) {
    SCOPED_TRACE(windows ? "window kernels" : "im2col + BLAS");
    tile::set_direct_enabled(windows);
    check();
  }
  tile::set_direct_enabled(true);
}

TEST(ConvWindows, ForwardMatchesTheOracle) {
  std::mt19937 rng(41);
  both_paths([&] {
    for (const Geometry& g : kShapes) {
      for (int splittable : {0, -1, -1}) {
        OpCase c = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3},
                             {g.n, g.co, g.out(g.h), g.out(g.w), g.ci, g.k, g.k},
                             {{g.n, g.ci, g.h, g.w}, {g.co, g.ci, g.k, g.k}}, rng, splittable, g.attrs());
        expect_native(c, [g](OpCase& c, Index& v) {
          return sum_over(c, {4, 5, 6}, v, [&] {
            return c.inputs[0]({v[0], v[4], g.s * v[2] + g.d * v[5] - g.p, g.s * v[3] + g.d * v[6] - g.p}) *
                   c.inputs[1]({v[1], v[4], v[5], v[6]});
          });
        }, rng);
      }
    }
  });
}

TEST(ConvWindows, DataGradientMatchesTheOracle) {
  std::mt19937 rng(42);
  both_paths([&] {
    for (const Geometry& g : kShapes) {
      for (int splittable : {0, -1, -1}) {
        const std::string extra = ", \"in_h\": " + std::to_string(g.h) + ", \"in_w\": " + std::to_string(g.w);
        OpCase c = make_case("conv2d_backward_data", {"b", "ci", "h", "w", "co", "kh", "kw"}, {0, 1, 2, 3},
                             {g.n, g.ci, g.h, g.w, g.co, g.k, g.k},
                             {{g.n, g.co, g.out(g.h), g.out(g.w)}, {g.co, g.ci, g.k, g.k}}, rng, splittable,
                             g.attrs(extra));
        const int64_t oh = g.out(g.h), ow = g.out(g.w);
        expect_native(c, [g, oh, ow](OpCase& c, Index& v) {
          return sum_over(c, {4, 5, 6}, v, [&] {
            const int64_t th = v[2] + g.p - g.d * v[5], tw = v[3] + g.p - g.d * v[6];
            if (th < 0 || tw < 0 || th % g.s != 0 || tw % g.s != 0 || th / g.s >= oh || tw / g.s >= ow) return 0.0;
            return c.inputs[0]({v[0], v[4], th / g.s, tw / g.s}) * c.inputs[1]({v[4], v[1], v[5], v[6]});
          });
        }, rng);
      }
    }
  });
}

TEST(ConvWindows, FilterGradientMatchesTheOracle) {
  std::mt19937 rng(43);
  both_paths([&] {
    for (Geometry g : kShapes) {
      // the window kernels take a filter gradient summed over 1024 positions or more
      g.n = std::max<int64_t>(g.n, (1024 + g.out(g.h) * g.out(g.w) - 1) / (g.out(g.h) * g.out(g.w)));
      for (int splittable : {0, -1, -1}) {
        const std::string extra = ", \"kernel_h\": " + std::to_string(g.k) + ", \"kernel_w\": " + std::to_string(g.k);
        OpCase c = make_case("conv2d_backward_filter", {"co", "ci", "kh", "kw", "b", "y", "x"}, {0, 1, 2, 3},
                             {g.co, g.ci, g.k, g.k, g.n, g.out(g.h), g.out(g.w)},
                             {{g.n, g.ci, g.h, g.w}, {g.n, g.co, g.out(g.h), g.out(g.w)}}, rng, splittable,
                             g.attrs(extra));
        expect_native(c, [g](OpCase& c, Index& v) {
          return sum_over(c, {4, 5, 6}, v, [&] {
            return c.inputs[1]({v[4], v[0], v[5], v[6]}) *
                   c.inputs[0]({v[4], v[1], g.s * v[5] + g.d * v[2] - g.p, g.s * v[6] + g.d * v[3] - g.p});
          });
        }, rng, 1e-4);
      }
    }
  });
}

// The window image multiplies dy's zero padding by the filters; with an Inf filter that is NaN where
// the im2col path (and torch, and the oracle) skip the term, so such a call takes the im2col path.
TEST(ConvWindows, DataGradientWithAnInfiniteFilterSkipsThePadding) {
  std::mt19937 rng(44);
  const Geometry g{1, 2, 8, 8, 3, 3, 1, 1, 1};
  OpCase c = make_case("conv2d_backward_data", {"b", "ci", "h", "w", "co", "kh", "kw"}, {0, 1, 2, 3},
                       {g.n, g.ci, g.h, g.w, g.co, g.k, g.k}, {{1, 3, 8, 8}, {3, 2, 3, 3}}, rng, 0,
                       g.attrs(", \"in_h\": 8, \"in_w\": 8"));
  c.inputs[1].data[0] = std::numeric_limits<double>::infinity();  // co 0, ci 0, kh 0, kw 0
  expect_native(c, [g](OpCase& c, Index& v) {
    return sum_over(c, {4, 5, 6}, v, [&] {
      const int64_t th = v[2] + g.p - v[5], tw = v[3] + g.p - v[6];
      if (th < 0 || tw < 0 || th >= 8 || tw >= 8) return 0.0;  // padding: no term
      return c.inputs[0]({v[0], v[4], th, tw}) * c.inputs[1]({v[4], v[1], v[5], v[6]});
    });
  }, rng);
}

}  // namespace
}  // namespace tilewise::kernels

// Native tile kernels for reductions, normalisation, pooling, losses and convolutions against the
// TDL formulas as double loops (tile_oracle.h): random shapes and attributes (stride, padding,
// dilation), random uneven sub-ranges of every variable (partial reductions over channels, kernel
// offsets, batch and positions included), regions as tight as the reads with zero-padded borders.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/tile_kernels.h"
#include "tile_oracle.h"

namespace tilewise::kernels {
namespace {

using namespace oracle;  // NOLINT(google-build-using-namespace): the test harness

Index without_axis(Index v, int64_t axis) {
  v.erase(v.begin() + axis);
  return v;
}

// ------------------------------------------------------------------------------------- reductions

TEST(TileKernelReduction, SumAxesPartialOverEveryAxisChoice) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 60; ++trial) {
    const int nd = static_cast<int>(uniform(rng, 1, 4));
    Index shape = random_shape(rng, nd, 7);
    std::vector<bool> red(nd, false);
    red[uniform(rng, 0, nd - 1)] = true;
    for (int d = 0; d < nd; ++d) red[d] = red[d] || uniform(rng, 0, 2) == 0;
    std::string axes;
    std::vector<int> kept_axes, red_axes;
    for (int d = 0; d < nd; ++d) {
      if (red[d]) {
        axes += (axes.empty() ? "" : ", ") + std::to_string(uniform(rng, 0, 1) ? d - nd : d);  // negative axes too
        red_axes.push_back(d);
      } else {
        kept_axes.push_back(d);
      }
    }
    std::vector<std::string> names = numbered("i", static_cast<int>(kept_axes.size()));
    for (auto& n : numbered("r", static_cast<int>(red_axes.size()))) names.push_back(n);
    Index extents;
    for (int d : kept_axes) extents.push_back(shape[d]);
    for (int d : red_axes) extents.push_back(shape[d]);
    OpCase c = make_case("sum_axes", names, iota(static_cast<int>(kept_axes.size())), extents, {shape}, rng, -1,
                         "{\"axes\": [" + axes + "]}");
    const int nk = static_cast<int>(kept_axes.size());
    expect_native(c, [=](OpCase& c, Index& v) {
      return sum_over(c, iota(static_cast<int>(red_axes.size()), nk), v, [&] {
        Index x(nd);
        for (int t = 0; t < nk; ++t) x[kept_axes[t]] = v[t];
        for (size_t t = 0; t < red_axes.size(); ++t) x[red_axes[t]] = v[nk + t];
        return c.inputs[0](x);
      });
    }, rng);
  }
}

TEST(TileKernelReduction, MaxPool2dPaddedAndPartialWindows) {
  std::mt19937 rng(14);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t k = uniform(rng, 1, 3), s = uniform(rng, 1, 3), p = uniform(rng, 0, k / 2);
    const int64_t n = uniform(rng, 1, 2), ch = uniform(rng, 1, 3), h = uniform(rng, k, 9), w = uniform(rng, k, 9);
    const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    char attrs[96];
    std::snprintf(attrs, sizeof attrs, R"({"kernel": %lld, "padding": %lld, "stride": %lld})", (long long)k,
                  (long long)p, (long long)s);
    OpCase c = make_case("max_pool2d", {"b", "c", "y", "xx", "i", "j"}, {0, 1, 2, 3}, {n, ch, oh, ow, k, k},
                         {{n, ch, h, w}}, rng, -1, attrs);
    expect_native(c, [=](OpCase& c, Index& v) {
      double m = -kInf;
      for (int64_t i = c.vars[4].lo; i <= c.vars[4].hi; ++i) {
        for (int64_t j = c.vars[5].lo; j <= c.vars[5].hi; ++j) {
          int64_t hh = s * v[2] + i - p, ww = s * v[3] + j - p;
          bool inside = hh >= 0 && hh < h && ww >= 0 && ww < w;
          m = std::max(m, inside ? c.inputs[0]({v[0], v[1], hh, ww}) : (p > 0 ? -kInf : 0.0));
        }
      }
      return m;
    }, rng);
  }
}

// y = max_pool2d(x) (so that x == y happens), dy random: each window's dy goes to one input, the one
// torch's indices name: the first maximum in row-major order (x rounded to a few values half the time,
// so windows tie), the last NaN when the window holds NaN (a NaN now and then).
TEST(TileKernelReduction, MaxPool2dGradRoutesToTheFirstMaximum) {
  std::mt19937 rng(26);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t k = uniform(rng, 1, 3), s = uniform(rng, 1, 3), p = uniform(rng, 0, k / 2);
    const int64_t n = uniform(rng, 1, 2), ch = uniform(rng, 1, 3), h = uniform(rng, k, 9), w = uniform(rng, k, 9);
    const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    char attrs[96];
    std::snprintf(attrs, sizeof attrs, R"({"kernel": %lld, "padding": %lld, "stride": %lld})", (long long)k,
                  (long long)p, (long long)s);
    OpCase c = make_case("max_pool2d_grad", {"b", "c", "h", "w", "i", "j", "u", "v", "q", "r"}, {0, 1, 2, 3},
                         {n, ch, h, w, k, k, k, k, k, k}, {{n, ch, h, w}, {n, ch, oh, ow}, {n, ch, oh, ow}}, rng, 6,
                         attrs);
    Tensor &x = c.inputs[0], &y = c.inputs[1];
    if (trial % 2 == 1) {
      for (double& e : x.data) e = std::round(e);
    }
    if (trial % 5 == 4) x.data[uniform(rng, 0, x.numel() - 1)] = std::nan("");
    for (int64_t e = 0; e < y.numel(); ++e) {
      int64_t xx = e % ow, yy = (e / ow) % oh, cc = (e / (ow * oh)) % ch, bb = e / (ow * oh * ch);
      double m = -kInf;
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t j = 0; j < k; ++j) {
          int64_t hh = s * yy + i - p, ww = s * xx + j - p;
          if (hh < 0 || hh >= h || ww < 0 || ww >= w) continue;
          const double v = x.data[((bb * ch + cc) * h + hh) * w + ww];
          m = std::isnan(v) || std::isnan(m) ? std::nan("") : std::max(m, v);
        }
      }
      y.data[e] = m;
    }
    expect_native(c, [=](OpCase& c, Index& v) {
      return sum_over(c, {4, 5}, v, [&] {
        int64_t th = v[2] + p - v[4], tw = v[3] + p - v[5];
        if (th < 0 || tw < 0 || th % s != 0 || tw % s != 0 || th / s >= oh || tw / s >= ow) return 0.0;
        Index at = {v[0], v[1], th / s, tw / s};
        const double m = c.inputs[1](at);
        int64_t winner = -1;  // row-major offset in the window
        for (int64_t a = 0; a < k; ++a) {
          for (int64_t e = 0; e < k; ++e) {
            int64_t hh = s * at[2] + a - p, ww = s * at[3] + e - p;
            if (hh < 0 || hh >= h || ww < 0 || ww >= w) continue;
            const double xv = c.inputs[0]({v[0], v[1], hh, ww});
            if (std::isnan(m) ? std::isnan(xv) : (xv == m && winner < 0)) winner = a * k + e;
          }
        }
        const double dy = c.inputs[2](at);  // every window reaching the tile, as the kernel reads them
        return winner == v[4] * k + v[5] ? dy : 0.0;
      });
    }, rng);
  }
}

TEST(TileKernelReduction, AdaptiveAvgPoolAndItsGradient) {
  std::mt19937 rng(27);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t kh = uniform(rng, 1, 4), kw = uniform(rng, 1, 4), n = uniform(rng, 1, 2), ch = uniform(rng, 1, 3);
    const int64_t oh = uniform(rng, 1, 3), ow = uniform(rng, 1, 3);
    const std::string attrs = "{\"kernel_h\": " + std::to_string(kh) + ", \"kernel_w\": " + std::to_string(kw) + "}";
    OpCase c = make_case("adaptive_avg_pool2d", {"b", "c", "y", "z", "i", "j"}, {0, 1, 2, 3}, {n, ch, oh, ow, kh, kw},
                         {{n, ch, oh * kh, ow * kw}}, rng, -1, attrs);
    expect_native(c, [=](OpCase& c, Index& v) {
      return sum_over(c, {4, 5}, v, [&] { return c.inputs[0]({v[0], v[1], kh * v[2] + v[4], kw * v[3] + v[5]}); }) /
             static_cast<double>(kh * kw);
    }, rng);
    OpCase g = make_case("adaptive_avg_pool2d_grad", {"b", "c", "y", "z"}, {0, 1, 2, 3}, {n, ch, oh * kh, ow * kw},
                         {{n, ch, oh, ow}}, rng, -1, attrs);
    expect_native(g, [=](OpCase& c, Index& v) {
      return c.inputs[0]({v[0], v[1], v[2] / kh, v[3] / kw}) / static_cast<double>(kh * kw);
    }, rng);
  }
}

// E[x] and 1 / sqrt(E[x^2] - E[x]^2 + eps) of channel c over the whole tensor, as the TDL writes it.
std::pair<double, double> bn_stats(Tensor& x, int64_t c, double eps) {
  double s = 0, s2 = 0;
  for (int64_t a = 0; a < x.shape[0]; ++a) {
    for (int64_t h = 0; h < x.shape[2]; ++h) {
      for (int64_t w = 0; w < x.shape[3]; ++w) {
        double v = x({a, c, h, w});
        s += v;
        s2 += v * v;
      }
    }
  }
  const double n = static_cast<double>(x.shape[0] * x.shape[2] * x.shape[3]), mean = s / n;
  return {mean, 1.0 / std::sqrt(s2 / n - mean * mean + eps)};
}

TEST(TileKernelReduction, BatchNormTrainAndGrads) {
  std::mt19937 rng(15);
  for (int trial = 0; trial < 15; ++trial) {
    Index x = {uniform(rng, 1, 3), uniform(rng, 1, 4), uniform(rng, 1, 5), uniform(rng, 1, 5)};
    const double eps = 1e-3;
    std::vector<std::string> fwd = {"b", "c", "h", "w"};
    fwd.insert(fwd.end(), kBnStats.begin(), kBnStats.end());
    Index ext = x;
    for (size_t t = 0; t < kBnStats.size(); ++t) ext.push_back(x[t % 3 == 0 ? 0 : (t % 3 == 1 ? 2 : 3)]);
    OpCase c = make_case("batch_norm_train", fwd, {0, 1, 2, 3}, ext, {x, {x[1]}, {x[1]}}, rng, 4, R"({"eps": 0.001})");
    expect_native(c, [eps](OpCase& c, Index& v) {
      auto [mean, rstd] = bn_stats(c.inputs[0], v[1], eps);
      return (c.inputs[0]({v[0], v[1], v[2], v[3]}) - mean) * rstd * c.inputs[1]({v[1]}) + c.inputs[2]({v[1]});
    }, rng);

    std::vector<std::string> gi = fwd;
    for (const char* n : {"p", "q", "r", "p'", "q'", "r'"}) gi.push_back(n);
    Index gext = ext;
    for (int t = 0; t < 6; ++t) gext.push_back(x[t % 3 == 0 ? 0 : (t % 3 == 1 ? 2 : 3)]);
    OpCase g = make_case("batch_norm_grad_input", gi, {0, 1, 2, 3}, gext, {x, x, {x[1]}}, rng, 4, R"({"eps": 0.001})");
    expect_native(g, [eps](OpCase& c, Index& v) {
      Tensor &dy = c.inputs[0], &xx = c.inputs[1];
      auto [mean, rstd] = bn_stats(xx, v[1], eps);
      double sdy = 0, sdyx = 0;
      for (int64_t a = 0; a < xx.shape[0]; ++a) {
        for (int64_t h = 0; h < xx.shape[2]; ++h) {
          for (int64_t w = 0; w < xx.shape[3]; ++w) {
            sdy += dy({a, v[1], h, w});
            sdyx += dy({a, v[1], h, w}) * (xx({a, v[1], h, w}) - mean);
          }
        }
      }
      const double n = static_cast<double>(xx.shape[0] * xx.shape[2] * xx.shape[3]);
      Index at = {v[0], v[1], v[2], v[3]};
      return c.inputs[2]({v[1]}) * rstd * (dy(at) - sdy / n - (xx(at) - mean) * rstd * rstd * sdyx / n);
    }, rng);

    std::vector<std::string> gg = {"c", "p", "q", "r"};
    gg.insert(gg.end(), kBnStats.begin(), kBnStats.end());
    Index ggext = {x[1], x[0], x[2], x[3]};
    ggext.insert(ggext.end(), ext.begin() + 4, ext.end());
    OpCase gm = make_case("batch_norm_grad_gamma", gg, {0}, ggext, {x, x}, rng, 4, R"({"eps": 0.001})");
    expect_native(gm, [eps](OpCase& c, Index& v) {  // partial over the restricted p, q, r
      auto [mean, rstd] = bn_stats(c.inputs[1], v[0], eps);
      return rstd * sum_over(c, {1, 2, 3}, v, [&] {
        Index at = {v[1], v[0], v[2], v[3]};
        return c.inputs[0](at) * (c.inputs[1](at) - mean);
      });
    }, rng);
  }
}

// The losses torch.nn.functional offers beside mse and cross-entropy, partial over every axis, and
// their gradients (a rank-0 dy).
TEST(TileKernelReduction, PairLossesAndTheirGradients) {
  std::mt19937 rng(24);
  struct Loss {
    const char* type;
    const char* attrs;
    double (*term)(double, double);
    double (*grad)(double, double);
  };
  const std::vector<Loss> losses = {
      {"l1_loss", "{}", [](double a, double b) { return std::fabs(a - b); },
       [](double a, double b) { return static_cast<double>((a > b) - (a < b)); }},
      {"smooth_l1_loss", R"({"beta": 0.5})",
       [](double a, double b) {
         const double d = std::fabs(a - b);
         return d < 0.5 ? d * d : d - 0.25;
       },
       [](double a, double b) {
         const double d = a - b;
         return std::fabs(d) < 0.5 ? d / 0.5 : static_cast<double>((d > 0) - (d < 0));
       }},
      {"bce_with_logits", "{}",
       [](double x, double t) { return std::max(x, 0.0) - x * t + std::log(1.0 + std::exp(-std::fabs(x))); },
       [](double x, double t) { return 1.0 / (1.0 + std::exp(-x)) - t; }},
  };
  for (const Loss& loss : losses) {
    for (int trial = 0; trial < 10; ++trial) {
      const int rank = static_cast<int>(uniform(rng, 1, 3));
      const Index shape = random_shape(rng, rank);
      OpCase f = make_case(loss.type, numbered("r", rank), {}, shape, {shape, shape}, rng, -1, loss.attrs);
      const double numel = static_cast<double>(f.inputs[0].numel());
      expect_native(f, [&](OpCase& c, Index& v) {
        return sum_over(c, iota(rank), v, [&] { return loss.term(c.inputs[0](v), c.inputs[1](v)); }) / numel;
      }, rng);
      OpCase g = make_case(std::string(loss.type) + "_backward", numbered("i", rank), iota(rank), shape,
                           {shape, shape, {}}, rng, -1, loss.attrs);
      expect_native(g, [&](OpCase& c, Index& v) {
        return loss.grad(c.inputs[0](v), c.inputs[1](v)) * c.inputs[2]({}) / numel;
      }, rng);
    }
  }
  for (int trial = 0; trial < 10; ++trial) {
    const int64_t b = uniform(rng, 1, 5), k = uniform(rng, 1, 6);
    OpCase n = make_case("nll_loss", {"b", "k"}, {}, {b, k}, {{b, k}, {b, k}}, rng);
    expect_native(n, [&](OpCase& c, Index& v) {
      return -sum_over(c, {0, 1}, v, [&] { return c.inputs[1](v) * c.inputs[0](v); }) / static_cast<double>(b);
    }, rng);
    OpCase g = make_case("nll_loss_backward", {"b", "k"}, {0, 1}, {b, k}, {{b, k}, {}}, rng);
    expect_native(g, [&](OpCase& c, Index& v) { return -c.inputs[0](v) * c.inputs[1]({}) / static_cast<double>(b); },
                  rng);
  }
}

TEST(TileKernelReduction, MaxPool1dAndItsGradient) {
  std::mt19937 rng(25);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t k = uniform(rng, 1, 3), n = uniform(rng, 1, 3), ch = uniform(rng, 1, 3), len = uniform(rng, k, 9);
    const int64_t windows = len / k;
    OpCase f = make_case("max_pool1d", {"b", "c", "i", "k"}, {0, 1, 2}, {n, ch, windows, k}, {{n, ch, len}}, rng, -1,
                         R"({"kernel": )" + std::to_string(k) + "}");
    expect_native(f, [k](OpCase& c, Index& v) {
      double m = -kInf;
      for (v[3] = c.vars[3].lo; v[3] <= c.vars[3].hi; ++v[3]) m = std::max(m, c.inputs[0]({v[0], v[1], k * v[2] + v[3]}));
      return m;
    }, rng);
    OpCase g = make_case("max_pool1d_grad", {"b", "c", "i", "u", "q"}, {0, 1, 2}, {n, ch, len, k, k},
                         {{n, ch, len}, {n, ch, windows}, {n, ch, windows}}, rng, 3,
                         R"({"kernel": )" + std::to_string(k) + "}");
    // y: the window maxima of x (x rounded half the time, so windows tie; a NaN now and then), dy random:
    // each window's dy goes to its first maximum, or its last NaN.
    if (trial % 2 == 1)
      for (double& e : g.inputs[0].data) e = std::round(e);
    if (trial % 5 == 4) g.inputs[0].data[uniform(rng, 0, n * ch * len - 1)] = std::nan("");
    for (int64_t b = 0; b < n; ++b)
      for (int64_t cc = 0; cc < ch; ++cc)
        for (int64_t w = 0; w < windows; ++w) {
          double m = -kInf;
          for (int64_t t = 0; t < k; ++t) {
            const double e = g.inputs[0].data[(b * ch + cc) * len + w * k + t];
            m = std::isnan(e) || std::isnan(m) ? std::nan("") : std::max(m, e);
          }
          g.inputs[1].data[(b * ch + cc) * windows + w] = m;
        }
    expect_native(g, [k, windows](OpCase& c, Index& v) {
      const int64_t o = v[2] / k;
      if (o >= windows) return 0.0;
      const double y = c.inputs[1]({v[0], v[1], o});
      int64_t winner = -1;
      for (int64_t u = 0; u < k; ++u) {
        const double x = c.inputs[0]({v[0], v[1], k * o + u});
        if (std::isnan(y) ? std::isnan(x) : (x == y && winner < 0)) winner = u;
      }
      const double dy = c.inputs[2]({v[0], v[1], o});  // read for every element, as the kernel reads it
      return winner == v[2] - k * o ? dy : 0.0;
    }, rng);
  }
}

TEST(TileKernelReduction, BatchNormWithRunningStatistics) {
  std::mt19937 rng(26);
  for (int trial = 0; trial < 15; ++trial) {
    const Index x = random_shape(rng, 4);
    const Index ch = {x[1]};
    OpCase f = make_case("batch_norm_inference", {"b", "c", "h", "w"}, iota(4), x, {x, ch, ch, ch, ch}, rng, -1,
                         R"({"eps": 0.001})");
    for (double& v : f.inputs[2].data) v = static_cast<double>(static_cast<float>(0.5 + std::fabs(v)));
    expect_native(f, [](OpCase& c, Index& v) {
      const Index at = {v[1]};
      return (c.inputs[0](v) - c.inputs[1](at)) / std::sqrt(c.inputs[2](at) + 0.001) * c.inputs[3](at) +
             c.inputs[4](at);
    }, rng, 1e-4);
    OpCase d = make_case("batch_norm_inference_grad_input", {"b", "c", "h", "w"}, iota(4), x, {x, ch, ch}, rng, -1,
                         R"({"eps": 0.001})");
    for (double& v : d.inputs[1].data) v = static_cast<double>(static_cast<float>(0.5 + std::fabs(v)));
    expect_native(d, [](OpCase& c, Index& v) {
      return c.inputs[0](v) * c.inputs[2]({v[1]}) / std::sqrt(c.inputs[1]({v[1]}) + 0.001);
    }, rng, 1e-4);
    OpCase g = make_case("batch_norm_inference_grad_gamma", {"c", "p", "q", "r"}, {0}, {x[1], x[0], x[2], x[3]},
                         {x, x, ch, ch}, rng, -1, R"({"eps": 0.001})");
    for (double& v : g.inputs[3].data) v = static_cast<double>(static_cast<float>(0.5 + std::fabs(v)));
    expect_native(g, [](OpCase& c, Index& v) {
      return sum_over(c, {1, 2, 3}, v, [&] {
               const Index at = {v[1], v[0], v[2], v[3]};
               return c.inputs[0](at) * (c.inputs[1](at) - c.inputs[2]({v[0]}));
             }) / std::sqrt(c.inputs[3]({v[0]}) + 0.001);
    }, rng, 1e-4);
  }
}

TEST(TileKernelReduction, BiasSumsScalarScaleAndExtremumGradient) {
  std::mt19937 rng(27);
  for (int trial = 0; trial < 15; ++trial) {
    const Index dy = random_shape(rng, 4);
    OpCase b = make_case("conv2d_bias_grad", {"co", "b", "y", "x"}, {0}, {dy[1], dy[0], dy[2], dy[3]}, {dy}, rng);
    expect_native(b, [](OpCase& c, Index& v) {
      return sum_over(c, {1, 2, 3}, v, [&] { return c.inputs[0]({v[1], v[0], v[2], v[3]}); });
    }, rng);
    OpCase r = make_case("sum_rows", {"j", "b"}, {0}, {dy[1], dy[0]}, {{dy[0], dy[1]}}, rng);
    expect_native(r, [](OpCase& c, Index& v) { return sum_over(c, {1}, v, [&] { return c.inputs[0]({v[1], v[0]}); }); },
                  rng);
    OpCase m = make_case("mul_scalar_tensor", numbered("i", 3), iota(3), {dy[0], dy[1], dy[2]},
                         {{dy[0], dy[1], dy[2]}, {1}}, rng);
    expect_native(m, [](OpCase& c, Index& v) { return c.inputs[0](v) * c.inputs[1]({0}); }, rng);

    // reduce_extremum_grad along a random axis, with ties: x from few distinct values, y its max.
    const int nd = static_cast<int>(uniform(rng, 1, 3));
    const Index x = random_shape(rng, nd);
    const int64_t axis = uniform(rng, 0, nd - 1);
    const Index ys = without_axis(x, axis);
    Index extents = x;
    extents.push_back(x[axis]);
    OpCase e = make_case("reduce_extremum_grad", numbered("i", nd + 1), iota(nd), extents, {ys, x, ys}, rng, nd,
                         R"({"axis": )" + std::to_string(axis) + "}");
    for (double& v : e.inputs[1].data) v = std::round(v * 2);
    std::vector<int64_t> stride(nd, 1);
    for (int d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * x[d + 1];
    for (int64_t f = 0; f < e.inputs[2].numel(); ++f) {
      // y at flat index f of ys: the max of x along the axis.
      Index at(nd - 1);
      int64_t rest = f;
      for (int d = nd - 2; d >= 0; --d) at[d] = rest % ys[d], rest /= ys[d];
      Index full = at;
      full.insert(full.begin() + axis, 0);
      double best = -kInf;
      for (int64_t t = 0; t < x[axis]; ++t) {
        full[axis] = t;
        int64_t off = 0;
        for (int d = 0; d < nd; ++d) off += full[d] * stride[d];
        best = std::max(best, e.inputs[1].data[off]);
      }
      e.inputs[2].data[f] = best;
    }
    expect_native(e, [&](OpCase& c, Index& v) {
      Index j(v.begin(), v.begin() + nd);
      j.erase(j.begin() + axis);
      const double y = c.inputs[2](j);
      double count = 0;
      Index at(v.begin(), v.begin() + nd);
      for (int64_t t = 0; t < x[axis]; ++t) {
        at[axis] = t;
        count += c.inputs[1](at) == y;
      }
      Index here(v.begin(), v.begin() + nd);
      return (c.inputs[1](here) == y ? 1.0 : 0.0) * c.inputs[0](j) / count;
    }, rng);

    // reduce_first_extremum_grad on the same tied rows: all of dy to the first tie, none to the rest.
    OpCase first = e;
    first.type = "reduce_first_extremum_grad";
    expect_native(first, [&](OpCase& c, Index& v) {
      Index j(v.begin(), v.begin() + nd);
      j.erase(j.begin() + axis);
      const double y = c.inputs[2](j);
      Index at(v.begin(), v.begin() + nd);
      int64_t winner = -1;
      for (int64_t t = 0; t < x[axis]; ++t) {  // the whole row read: the kernel needs it all
        at[axis] = t;
        if (c.inputs[1](at) == y && winner < 0) winner = t;
      }
      const double dy = c.inputs[0](j);
      return winner == v[axis] ? dy : 0.0;
    }, rng);
  }
}

TEST(TileKernelReduction, LossesPartialOverTheBatch) {
  std::mt19937 rng(16);
  for (int trial = 0; trial < 15; ++trial) {
    const int rank = static_cast<int>(uniform(rng, 1, 3));
    Index shape = random_shape(rng, rank);
    OpCase mse = make_case("mse_loss", numbered("r", rank), {}, shape, {shape, shape}, rng);
    const double numel = static_cast<double>(mse.inputs[0].numel());
    expect_native(mse, [rank, numel](OpCase& c, Index& v) {
      return sum_over(c, iota(rank), v, [&] {
               double d = c.inputs[0](v) - c.inputs[1](v);
               return d * d;
             }) / numel;
    }, rng);

    int64_t b = uniform(rng, 1, 5), k = uniform(rng, 1, 9);
    auto log_softmax = [](Tensor& logits, int64_t bb, int64_t kk) {
      double m = -kInf, s = 0;
      for (int64_t j = 0; j < logits.shape[1]; ++j) m = std::max(m, logits({bb, j}));
      for (int64_t j = 0; j < logits.shape[1]; ++j) s += std::exp(logits({bb, j}) - m);
      return logits({bb, kk}) - m - std::log(s);
    };
    OpCase ce = make_case("cross_entropy", {"b", "k", "j", "j'"}, {}, {b, k, k, k}, {{b, k}, {b, k}}, rng, 2);
    expect_native(ce, [&](OpCase& c, Index& v) {
      return -sum_over(c, {0, 1}, v, [&] { return c.inputs[1]({v[0], v[1]}) * log_softmax(c.inputs[0], v[0], v[1]); }) /
             static_cast<double>(c.inputs[0].shape[0]);
    }, rng);

    OpCase cb = make_case("cross_entropy_backward", {"b", "k", "j", "j'", "j''"}, {0, 1}, {b, k, k, k, k},
                          {{b, k}, {b, k}, {}}, rng, 2);
    expect_native(cb, [&](OpCase& c, Index& v) {
      double t = 0;
      for (int64_t j = 0; j < k; ++j) t += c.inputs[1]({v[0], j});
      return (std::exp(log_softmax(c.inputs[0], v[0], v[1])) * t - c.inputs[1]({v[0], v[1]})) * c.inputs[2]({}) /
             static_cast<double>(c.inputs[0].shape[0]);
    }, rng);
  }
}

// ---------------------------------------------------------------------------------- convolutions

struct ConvShape {
  int64_t n, ci, h, w, co, kh, kw, s, p, d, oh, ow;
  std::string attrs(const std::string& extra = "") const {
    return "{\"dilation\": " + std::to_string(d) + extra + ", \"padding\": " + std::to_string(p) +
           ", \"stride\": " + std::to_string(s) + "}";
  }
};

ConvShape random_conv(std::mt19937& rng) {
  while (true) {
    ConvShape c{};
    c.n = uniform(rng, 1, 3);
    c.ci = uniform(rng, 1, 5);
    c.co = uniform(rng, 1, 5);
    c.h = uniform(rng, 1, 9);
    c.w = uniform(rng, 1, 9);
    c.kh = uniform(rng, 1, 3);
    c.kw = uniform(rng, 1, 3);
    c.s = uniform(rng, 1, 3);
    c.p = uniform(rng, 0, 2);
    c.d = uniform(rng, 1, 2);
    int64_t nh = c.h + 2 * c.p - c.d * (c.kh - 1) - 1, nw = c.w + 2 * c.p - c.d * (c.kw - 1) - 1;
    if (nh < 0 || nw < 0) continue;
    c.oh = nh / c.s + 1;
    c.ow = nw / c.s + 1;
    return c;
  }
}

TEST(TileKernelConv, Conv2dPartialOverChannelsAndKernelOffsets) {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 80; ++trial) {
    ConvShape g = random_conv(rng);
    OpCase c = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3},
                         {g.n, g.co, g.oh, g.ow, g.ci, g.kh, g.kw},
                         {{g.n, g.ci, g.h, g.w}, {g.co, g.ci, g.kh, g.kw}}, rng,
                         -1, g.attrs());
    expect_native(c, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        return c.inputs[0]({v[0], v[4], g.s * v[2] + g.d * v[5] - g.p, g.s * v[3] + g.d * v[6] - g.p}) *
               c.inputs[1]({v[1], v[4], v[5], v[6]});
      });
    }, rng);
  }
}

// 1x1 kernels at stride 1 without padding take the direct path (no im2col) when the region fits.
TEST(TileKernelConv, Conv2dPointwise) {
  std::mt19937 rng(18);
  for (int trial = 0; trial < 20; ++trial) {
    int64_t n = uniform(rng, 1, 3), ci = uniform(rng, 1, 8), co = uniform(rng, 1, 8), h = uniform(rng, 1, 7),
            w = uniform(rng, 1, 7);
    OpCase c = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3}, {n, co, h, w, ci, 1, 1},
                         {{n, ci, h, w}, {co, ci, 1, 1}}, rng, -1, R"({"dilation": 1, "padding": 0, "stride": 1})");
    expect_native(c, [](OpCase& c, Index& v) {
      return sum_over(c, {4}, v, [&] {
        return c.inputs[0]({v[0], v[4], v[2], v[3]}) * c.inputs[1]({v[1], v[4], 0, 0});
      });
    }, rng);
  }
}

TEST(TileKernelConv, Conv2dBackwardDataStridedAndDilated) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 80; ++trial) {
    ConvShape g = random_conv(rng);
    std::string extra = ", \"in_h\": " + std::to_string(g.h) + ", \"in_w\": " + std::to_string(g.w);
    OpCase c = make_case("conv2d_backward_data", {"b", "ci", "h", "w", "co", "kh", "kw"}, {0, 1, 2, 3},
                         {g.n, g.ci, g.h, g.w, g.co, g.kh, g.kw}, {{g.n, g.co, g.oh, g.ow}, {g.co, g.ci, g.kh, g.kw}},
                         rng, -1, g.attrs(extra));
    expect_native(c, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        int64_t th = v[2] + g.p - g.d * v[5], tw = v[3] + g.p - g.d * v[6];
        if (th % g.s != 0 || tw % g.s != 0) return 0.0;
        return c.inputs[0]({v[0], v[4], th / g.s, tw / g.s}) * c.inputs[1]({v[4], v[1], v[5], v[6]});
      });
    }, rng);
  }
}

TEST(TileKernelConv, Conv2dBackwardFilterPartialOverBatchAndPositions) {
  std::mt19937 rng(20);
  for (int trial = 0; trial < 80; ++trial) {
    ConvShape g = random_conv(rng);
    std::string extra = ", \"kernel_h\": " + std::to_string(g.kh) + ", \"kernel_w\": " + std::to_string(g.kw);
    OpCase c = make_case("conv2d_backward_filter", {"co", "ci", "kh", "kw", "b", "y", "x"}, {0, 1, 2, 3},
                         {g.co, g.ci, g.kh, g.kw, g.n, g.oh, g.ow}, {{g.n, g.ci, g.h, g.w}, {g.n, g.co, g.oh, g.ow}},
                         rng, -1, g.attrs(extra));
    expect_native(c, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        return c.inputs[1]({v[4], v[0], v[5], v[6]}) *
               c.inputs[0]({v[4], v[1], g.s * v[5] + g.d * v[2] - g.p, g.s * v[6] + g.d * v[3] - g.p});
      });
    }, rng);
  }
}

// A larger conv: every kernel offset range and channel split at once, wider than the unit cases.
TEST(TileKernelConv, Conv2dLargerBlocks) {
  std::mt19937 rng(21);
  ConvShape g{2, 16, 14, 13, 24, 3, 3, 2, 1, 1, 0, 0};
  g.oh = (g.h + 2 * g.p - g.d * (g.kh - 1) - 1) / g.s + 1;
  g.ow = (g.w + 2 * g.p - g.d * (g.kw - 1) - 1) / g.s + 1;
  for (int trial = 0; trial < 4; ++trial) {
    OpCase c = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3},
                         {g.n, g.co, g.oh, g.ow, g.ci, g.kh, g.kw},
                         {{g.n, g.ci, g.h, g.w}, {g.co, g.ci, g.kh, g.kw}}, rng,
                         -1, g.attrs());
    expect_native(c, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        return c.inputs[0]({v[0], v[4], g.s * v[2] + g.d * v[5] - g.p, g.s * v[3] + g.d * v[6] - g.p}) *
               c.inputs[1]({v[1], v[4], v[5], v[6]});
      });
    }, rng);
  }
}

// Depthwise convolutions: the conv shapes with one channel count, filters (c, 1, kh, kw).
TEST(TileKernelConv, DepthwiseForwardAndGradients) {
  std::mt19937 rng(22);
  for (int trial = 0; trial < 60; ++trial) {
    const ConvShape g = random_conv(rng);
    const int64_t ch = g.ci;
    OpCase f = make_case("depthwise_conv2d", {"b", "c", "y", "x", "dy", "dx"}, {0, 1, 2, 3},
                         {g.n, ch, g.oh, g.ow, g.kh, g.kw}, {{g.n, ch, g.h, g.w}, {ch, 1, g.kh, g.kw}}, rng, -1,
                         g.attrs());
    expect_native(f, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5}, v, [&] {
        return c.inputs[0]({v[0], v[1], g.s * v[2] + g.d * v[4] - g.p, g.s * v[3] + g.d * v[5] - g.p}) *
               c.inputs[1]({v[1], 0, v[4], v[5]});
      });
    }, rng);

    const std::string in_hw = ", \"in_h\": " + std::to_string(g.h) + ", \"in_w\": " + std::to_string(g.w);
    OpCase d = make_case("depthwise_conv2d_backward_data", {"b", "c", "h", "w", "kh", "kw"}, {0, 1, 2, 3},
                         {g.n, ch, g.h, g.w, g.kh, g.kw}, {{g.n, ch, g.oh, g.ow}, {ch, 1, g.kh, g.kw}}, rng, -1,
                         g.attrs(in_hw));
    expect_native(d, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5}, v, [&] {
        const double w = c.inputs[1]({v[1], 0, v[4], v[5]});  // read for every offset, as the description does
        const int64_t th = v[2] + g.p - g.d * v[4], tw = v[3] + g.p - g.d * v[5];
        if (th < 0 || tw < 0 || th % g.s != 0 || tw % g.s != 0) return 0.0;
        return c.inputs[0]({v[0], v[1], th / g.s, tw / g.s}) * w;
      });
    }, rng);

    const std::string k_hw = ", \"kernel_h\": " + std::to_string(g.kh) + ", \"kernel_w\": " + std::to_string(g.kw);
    OpCase w = make_case("depthwise_conv2d_backward_filter", {"c", "one", "kh", "kw", "b", "y", "x"}, {0, 1, 2, 3},
                         {ch, 1, g.kh, g.kw, g.n, g.oh, g.ow}, {{g.n, ch, g.h, g.w}, {g.n, ch, g.oh, g.ow}}, rng, -1,
                         g.attrs(k_hw));
    expect_native(w, [g](OpCase& c, Index& v) {
      return sum_over(c, {4, 5, 6}, v, [&] {
        return c.inputs[1]({v[4], v[0], v[5], v[6]}) *
               c.inputs[0]({v[4], v[0], g.s * v[5] + g.d * v[2] - g.p, g.s * v[6] + g.d * v[3] - g.p});
      });
    }, rng);
  }
}

// 1-D convolutions: the conv shapes' width axis only.
TEST(TileKernelConv, Conv1dForwardAndGradients) {
  std::mt19937 rng(28);
  for (int trial = 0; trial < 60; ++trial) {
    const ConvShape g = random_conv(rng);
    OpCase f = make_case("conv1d", {"b", "co", "x", "ci", "dx"}, {0, 1, 2}, {g.n, g.co, g.ow, g.ci, g.kw},
                         {{g.n, g.ci, g.w}, {g.co, g.ci, g.kw}}, rng, -1, g.attrs());
    expect_native(f, [g](OpCase& c, Index& v) {
      return sum_over(c, {3, 4}, v, [&] {
        return c.inputs[0]({v[0], v[3], g.s * v[2] + g.d * v[4] - g.p}) * c.inputs[1]({v[1], v[3], v[4]});
      });
    }, rng);
    OpCase d = make_case("conv1d_backward_data", {"b", "ci", "x", "co", "k"}, {0, 1, 2}, {g.n, g.ci, g.w, g.co, g.kw},
                         {{g.n, g.co, g.ow}, {g.co, g.ci, g.kw}}, rng, -1,
                         g.attrs(", \"in_w\": " + std::to_string(g.w)));
    expect_native(d, [g](OpCase& c, Index& v) {
      return sum_over(c, {3, 4}, v, [&] {
        const double w = c.inputs[1]({v[3], v[1], v[4]});  // read for every offset, as the description does
        const int64_t t = v[2] + g.p - g.d * v[4];
        if (t < 0 || t % g.s != 0) return 0.0;
        return c.inputs[0]({v[0], v[3], t / g.s}) * w;
      });
    }, rng);
    OpCase w = make_case("conv1d_backward_filter", {"co", "ci", "k", "b", "x"}, {0, 1, 2}, {g.co, g.ci, g.kw, g.n, g.ow},
                         {{g.n, g.ci, g.w}, {g.n, g.co, g.ow}}, rng, -1,
                         g.attrs(", \"kernel\": " + std::to_string(g.kw)));
    expect_native(w, [g](OpCase& c, Index& v) {
      return sum_over(c, {3, 4}, v, [&] {
        return c.inputs[1]({v[3], v[0], v[4]}) * c.inputs[0]({v[3], v[1], g.s * v[4] + g.d * v[2] - g.p});
      });
    }, rng);
  }
}

// Average pooling, zero padding counted; its gradient spreads each window's dy evenly over it.
TEST(TileKernelReduction, AvgPool2dPaddedAndItsGradient) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t k = uniform(rng, 1, 3), s = uniform(rng, 1, 3), p = uniform(rng, 0, k / 2);
    const int64_t n = uniform(rng, 1, 2), ch = uniform(rng, 1, 3), h = uniform(rng, k, 8), w = uniform(rng, k, 8);
    const int64_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    const std::string attrs = "{\"kernel\": " + std::to_string(k) + ", \"stride\": " + std::to_string(s) +
                              ", \"padding\": " + std::to_string(p);
    OpCase f = make_case("avg_pool2d", {"b", "c", "y", "x", "i", "j"}, {0, 1, 2, 3}, {n, ch, oh, ow, k, k},
                         {{n, ch, h, w}}, rng, -1, attrs + "}");
    expect_native(f, [=](OpCase& c, Index& v) {
      return sum_over(c, {4, 5}, v, [&] {
        return c.inputs[0]({v[0], v[1], s * v[2] + v[4] - p, s * v[3] + v[5] - p});
      }) / static_cast<double>(k * k);
    }, rng);
    OpCase g = make_case("avg_pool2d_grad", {"b", "c", "h", "w", "i", "j"}, {0, 1, 2, 3}, {n, ch, h, w, k, k},
                         {{n, ch, oh, ow}}, rng, -1,
                         attrs + ", \"in_h\": " + std::to_string(h) + ", \"in_w\": " + std::to_string(w) + "}");
    expect_native(g, [=](OpCase& c, Index& v) {
      return sum_over(c, {4, 5}, v, [&] {
        const int64_t th = v[2] + p - v[4], tw = v[3] + p - v[5];
        if (th < 0 || tw < 0 || th % s != 0 || tw % s != 0) return 0.0;
        return c.inputs[0]({v[0], v[1], th / s, tw / s});
      }) / static_cast<double>(k * k);
    }, rng);
  }
}

// A call given no scratch (or too little) takes what it misses from the heap and says so: the same
// output, heap_scratch_bytes grown by exactly the scratch it states.
TEST(TileKernelScratch, WithoutScratchTheHeapAndTheSameOutput) {
  std::mt19937 rng(31);
  ConvShape g{2, 5, 9, 8, 6, 3, 3, 1, 1, 1, 0, 0};
  g.oh = (g.h + 2 * g.p - g.d * (g.kh - 1) - 1) / g.s + 1;
  g.ow = (g.w + 2 * g.p - g.d * (g.kw - 1) - 1) / g.s + 1;
  OpCase c = make_case("conv2d", {"b", "co", "y", "x", "ci", "dy", "dx"}, {0, 1, 2, 3},
                       {g.n, g.co, g.oh, g.ow, g.ci, g.kh, g.kw}, {{g.n, g.ci, g.h, g.w}, {g.co, g.ci, g.kh, g.kw}},
                       rng, -1, g.attrs());
  expected_tile(c, [g](OpCase& c, Index& v) {
    return sum_over(c, {4, 5, 6}, v, [&] {
      return c.inputs[0]({v[0], v[4], g.s * v[2] + g.d * v[5] - g.p, g.s * v[3] + g.d * v[6] - g.p}) *
             c.inputs[1]({v[1], v[4], v[5], v[6]});
    });
  });
  Prepared p = prepare(c, rng);
  const int64_t need = scratch_bytes(p.call);
  // im2col: (ci kh kw) x (y x) floats at least.
  EXPECT_GE(need, c.vars[4].size() * c.vars[5].size() * c.vars[6].size() * c.vars[2].size() * c.vars[3].size() * 4);
  std::vector<float> scratch(static_cast<size_t>(need / 4));
  p.call.scratch = reinterpret_cast<std::byte*>(scratch.data());
  p.call.scratch_size = need;
  const int64_t before = heap_scratch_bytes();
  ASSERT_TRUE(run_native(p.call));
  EXPECT_EQ(heap_scratch_bytes(), before);
  const std::vector<float> planned = p.out;
  p.call.scratch = nullptr, p.call.scratch_size = 0;
  ASSERT_TRUE(run_native(p.call));
  EXPECT_EQ(heap_scratch_bytes() - before, need);
  EXPECT_EQ(p.out, planned);
}

}  // namespace
}  // namespace tilewise::kernels

// The oracle harness of the native tile kernel tests: an op case (variables restricted to random
// sub-ranges, random inputs), its expected output from the TDL formula written as a double loop,
// and the TileCall that hands the kernel only the regions the oracle read (sometimes widened by a
// random margin). Inputs are float-representable, so the kernels see exactly the oracle's values.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/tile_kernels.h"

namespace tilewise::kernels::oracle {

using Index = std::vector<int64_t>;
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A full input tensor in double precision that records the bounding box of its in-tensor reads.
struct Tensor {
  Index shape;
  std::vector<double> data;
  std::vector<Span> touched;  ///< per dimension, valid once any_read
  bool any_read = false;

  explicit Tensor(Index s = {}) : shape(std::move(s)), touched(shape.size()) {
    data.assign(static_cast<size_t>(numel()), 0.0);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    return n;
  }
  /// The element at idx, or 0 outside the tensor (TDL padding).
  double operator()(const Index& idx) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (idx[d] < 0 || idx[d] >= shape[d]) return 0.0;
      off = off * shape[d] + idx[d];
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      Span& t = touched[d];
      if (!any_read) {
        t = {idx[d], idx[d]};
      } else {
        t.lo = std::min(t.lo, idx[d]);
        t.hi = std::max(t.hi, idx[d]);
      }
    }
    any_read = true;
    return data[off];
  }
};

inline Tensor random_tensor(Index shape, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  Tensor t(std::move(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (double& v : t.data) v = static_cast<double>(static_cast<float>(u(rng)));
  return t;
}

inline int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

/// A random non-empty sub-range of [0, extent); the full range a quarter of the time.
inline Span random_span(int64_t extent, std::mt19937& rng) {
  if (uniform(rng, 0, 3) == 0) return {0, extent - 1};
  int64_t a = uniform(rng, 0, extent - 1), b = uniform(rng, 0, extent - 1);
  return {std::min(a, b), std::max(a, b)};
}

/// One device's share of an op, before the regions are known.
struct OpCase {
  std::string type;
  std::string attrs = "{}";
  std::vector<std::string> names;
  std::vector<int> outs;
  Index extents;
  std::vector<Span> vars;
  std::vector<Tensor> inputs;

  std::string describe() const {
    std::ostringstream s;
    s << type << " " << attrs << " vars";
    for (size_t v = 0; v < names.size(); ++v) {
      s << " " << names[v] << "=[" << vars[v].lo << "," << vars[v].hi << "]/" << extents[v];
    }
    s << " inputs";
    for (const Tensor& t : inputs) {
      s << " (";
      for (int64_t e : t.shape) s << e << ",";
      s << ")";
    }
    return s.str();
  }
};

/// The kernel an op type declares in tdl_ops (the n-ary add_<k>, concat_<k> and stack_<k> declare
/// "add_n", "concat" and "stack").
inline std::string kernel_of(const std::string& type) {
  for (const std::string family : {"add", "concat", "stack"}) {
    const size_t n = family.size() + 1;
    if (type.size() > n && type.compare(0, n, family + "_") == 0 &&
        type.find_first_not_of("0123456789", n) == std::string::npos)
      return family == "add" ? "add_n" : family;
  }
  return type;
}

/// An op case with random inputs; the first `splittable` variables get random sub-ranges, the
/// others (nested reductions) their full extent.
inline OpCase make_case(std::string type, std::vector<std::string> names, std::vector<int> outs, Index extents,
                 std::vector<Index> shapes, std::mt19937& rng, int splittable = -1, std::string attrs = "{}") {
  OpCase c;
  c.type = std::move(type);
  c.attrs = std::move(attrs);
  c.names = std::move(names);
  c.outs = std::move(outs);
  c.extents = std::move(extents);
  if (splittable < 0) splittable = static_cast<int>(c.extents.size());
  for (size_t v = 0; v < c.extents.size(); ++v) {
    c.vars.push_back(static_cast<int>(v) < splittable ? random_span(c.extents[v], rng) : Span{0, c.extents[v] - 1});
  }
  for (Index& s : shapes) c.inputs.push_back(random_tensor(std::move(s), rng));
  return c;
}

/// An output element's value; v holds every variable's value, the output variables already set
/// (the oracle sets the reduction variables itself, over their restricted ranges).
using Elem = std::function<double(OpCase&, Index& v)>;

/// sum of f() over the restricted ranges of the variables `red`.
template <class F>
double sum_over(const OpCase& c, const std::vector<int>& red, Index& v, F f) {
  double s = 0;
  std::function<void(size_t)> rec = [&](size_t r) {
    if (r == red.size()) {
      s += f();
      return;
    }
    for (v[red[r]] = c.vars[red[r]].lo; v[red[r]] <= c.vars[red[r]].hi; ++v[red[r]]) rec(r + 1);
  };
  rec(0);
  return s;
}

/// The oracle's output tile, row-major over the output variables' ranges.
inline std::vector<double> expected_tile(OpCase& c, const Elem& elem) {
  std::vector<double> out;
  Index v(c.names.size(), 0);
  std::function<void(size_t)> rec = [&](size_t p) {
    if (p == c.outs.size()) {
      out.push_back(elem(c, v));
      return;
    }
    int var = c.outs[p];
    for (v[var] = c.vars[var].lo; v[var] <= c.vars[var].hi; ++v[var]) rec(p + 1);
  };
  rec(0);
  return out;
}

/// Float buffers of the inputs' regions, and the call that reads them.
struct Prepared {
  std::vector<std::vector<float>> buffers;
  TileCall call;
  std::vector<float> out;
};

// Regions: what the oracle read, widened by a random margin (clipped to the tensor) half the time.
inline Prepared prepare(const OpCase& c, std::mt19937& rng) {
  Prepared p;
  p.buffers.resize(c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& t = c.inputs[i];
    TileIn in;
    in.shape = t.shape;
    const bool widen = uniform(rng, 0, 1) == 1;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (!t.any_read) {
        in.region.push_back({0, -1});
        continue;
      }
      Span r = t.touched[d];
      if (widen) {
        r.lo = std::max<int64_t>(0, r.lo - uniform(rng, 0, 2));
        r.hi = std::min<int64_t>(t.shape[d] - 1, r.hi + uniform(rng, 0, 2));
      }
      in.region.push_back(r);
    }
    int64_t n = 1;
    for (const Span& r : in.region) n *= r.size();
    std::vector<float>& buf = p.buffers[i];
    buf.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
    // Row-major walk of the region box.
    Index idx(t.shape.size());
    for (int64_t e = 0; e < n; ++e) {
      int64_t rest = e, off = 0;
      for (int d = static_cast<int>(t.shape.size()) - 1; d >= 0; --d) {
        idx[d] = in.region[d].lo + rest % in.region[d].size();
        rest /= in.region[d].size();
      }
      for (size_t d = 0; d < t.shape.size(); ++d) off = off * t.shape[d] + idx[d];
      buf[e] = static_cast<float>(t.data[off]);
    }
    in.data = n > 0 ? buf.data() : nullptr;
    p.call.inputs.push_back(in);
  }
  TileCall& call = p.call;
  call.type = c.type;
  call.kernel = kernel_of(c.type);
  call.attrs = kernels::OpAttrs::parse(c.attrs);
  call.var_names = c.names;
  call.output_vars = c.outs;
  call.extents = c.extents;
  call.vars = c.vars;
  int64_t n = 1;
  for (int v : c.outs) {
    call.output_shape.push_back(c.extents[v]);
    n *= c.vars[v].size();
  }
  p.out.assign(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
  call.out = p.out.data();
  return p;
}

inline bool close(double got, double want, double tol) {
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

/// Runs the case natively and compares with the oracle.
inline void expect_native(OpCase c, const Elem& elem, std::mt19937& rng, double tol = 1e-5) {
  SCOPED_TRACE(c.describe());
  std::vector<double> want = expected_tile(c, elem);
  Prepared p = prepare(c, rng);
  // The kernel runs in the scratch it states, filled with NaN bits (it may not rely on zeros) and
  // followed by guard words it must not touch; it takes nothing from the heap.
  const int64_t need = scratch_bytes(p.call);
  ASSERT_EQ(need % 16, 0) << "scratch comes in 16-byte pieces";
  constexpr int64_t kGuard = 16;
  std::vector<float> scratch(static_cast<size_t>(need / 4 + kGuard), std::numeric_limits<float>::quiet_NaN());
  p.call.scratch = reinterpret_cast<std::byte*>(scratch.data());
  p.call.scratch_size = need;
  const int64_t heap_before = heap_scratch_bytes_this_thread();
  ASSERT_TRUE(run_native(p.call)) << "declined";
  EXPECT_EQ(heap_scratch_bytes_this_thread(), heap_before) << "took scratch beyond the " << need << " bytes it states";
  for (int64_t g = 0; g < kGuard; ++g)
    ASSERT_TRUE(std::isnan(scratch[static_cast<size_t>(need / 4 + g)])) << "wrote past its " << need << " scratch bytes";
  ASSERT_EQ(p.out.size(), want.size());
  int bad = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    if (!close(p.out[e], want[e], tol) && ++bad <= 5) {
      ADD_FAILURE() << "element " << e << ": got " << p.out[e] << ", want " << want[e];
    }
  }
  EXPECT_EQ(bad, 0);
}

/// Expects the call to be declined with the output untouched.
inline void expect_declined(const TileCall& call) {
  std::vector<float> before(call.out, call.out + 1);
  EXPECT_FALSE(run_native(call)) << call.type;
  EXPECT_TRUE(std::isnan(call.out[0]) || call.out[0] == before[0]);
}

inline std::vector<std::string> numbered(const char* prefix, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(prefix + std::to_string(i));
  return names;
}

inline std::vector<int> iota(int n, int from = 0) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

inline Index random_shape(std::mt19937& rng, int rank, int64_t max_extent = 6) {
  Index s;
  for (int d = 0; d < rank; ++d) s.push_back(uniform(rng, 1, max_extent));
  return s;
}

/// The nested statistics' variables of batch_norm_train / batch_norm_grad_gamma (after their own).
inline const std::vector<std::string> kBnStats = {"n", "y", "z", "m", "y'", "z'", "n'", "y''", "z''"};

}  // namespace tilewise::kernels::oracle

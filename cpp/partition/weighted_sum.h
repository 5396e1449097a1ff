// The scalar semiring of the weighted-sum searches that give the frontier search its incumbents
// (pareto.cpp): memory folded into time with a weight, min of sums, N weights at once. A frontier of
// one point would do, but each entry then goes through the frontier merge: 8-10x slower on the zoo's
// tables.
#pragma once
#include <array>
#include <cstdint>
#include <limits>

namespace tilewise::partition {

// N weighted sums in one search over one plan: per entry N minima, each the one a search of that
// weight alone finds with the same plan (the same sums in the same order, the same first minimising
// value). Reading each table entry once for all N is what makes it cheaper than N searches: the
// strided reads of the factors cost more than the additions (transformer-48-2048-16: 0.79 s for nine
// weights against 1.8 s of CPU one by one).
// "Point" w of a value is weight w's minimum: assignment(w) unrolls weight w's solution.
template <int N>
struct WeightedSums {
  using Value = std::array<double, N>;
  using Back = std::array<int32_t, N>;
  static constexpr bool kTracksSizes = false;
  static constexpr bool kBounds = false;
  static Value unit() { return Value{}; }
  static int64_t size(const Value&) { return N; }
  static int64_t bytes(const Value&, const Back&) { return sizeof(Value) + sizeof(Back); }
  static double score(const Value& v) { return v[N / 2]; }

  template <class At>
  void eliminate(int k, int dv, const At& at, Value& out, Back& back) const {
    out.fill(std::numeric_limits<double>::infinity());
    back.fill(0);
    for (int x = 0; x < dv; ++x) {
      Value sum{};
      for (int i = 0; i < k; ++i) {
        const Value& a = at(i, x);
        for (int w = 0; w < N; ++w) sum[w] += a[w];
      }
      for (int w = 0; w < N; ++w)
        if (sum[w] < out[w]) out[w] = sum[w], back[w] = x;
    }
  }
  static int unroll(const Back& back, int point, int k, int* inputs) {
    for (int i = 0; i < k; ++i) inputs[i] = point;
    return back[point];
  }
};

}  // namespace tilewise::partition

#include "partition/exact_sum.h"

#include <cmath>
#include <utility>

namespace tilewise::partition {

double exact_sum(const std::vector<double>& terms) {
  // Non-overlapping partials, increasing in magnitude, whose exact sum is the sum so far.
  std::vector<double> partials;
  for (double x : terms) {
    size_t kept = 0;
    for (double y : partials) {
      if (std::fabs(x) < std::fabs(y)) std::swap(x, y);
      const double hi = x + y;
      const double lo = y - (hi - x);  // exact error of hi (|x| >= |y|)
      if (lo != 0) partials[kept++] = lo;
      x = hi;
    }
    partials.resize(kept);
    partials.push_back(x);
  }
  if (partials.empty()) return 0;
  // Add from the largest down until a rounding error appears; that error decides a half-way tie.
  size_t n = partials.size();
  double hi = partials[--n];
  double lo = 0;
  while (n > 0) {
    const double x = hi;
    const double y = partials[--n];
    hi = x + y;
    lo = y - (hi - x);
    if (lo != 0) break;
  }
  // hi + lo is exact and lo is half an ulp of hi at most; when it is exactly half and the rest of
  // the partials pushes the same way, round away from hi.
  if (n > 0 && ((lo < 0 && partials[n - 1] < 0) || (lo > 0 && partials[n - 1] > 0))) {
    const double y = lo * 2;
    const double x = hi + y;
    if (y == x - hi) hi = x;
  }
  return hi;
}

}  // namespace tilewise::partition

#include "cost/tiling.h"

#include <algorithm>

#include "tdl/errors.h"

namespace tilewise::cost {

std::vector<int> factorize(int k) {
  TW_ASSERT(k >= 1, "device count must be positive");
  std::vector<int> f;
  for (int p = 2; static_cast<int64_t>(p) * p <= k; ++p)
    while (k % p == 0) f.push_back(p), k /= p;
  if (k > 1) f.push_back(k);
  std::sort(f.rbegin(), f.rend());
  return f;
}

int64_t device_count(const std::vector<int>& parts, int steps) {
  if (steps < 0) steps = static_cast<int>(parts.size());
  int64_t n = 1;
  for (int i = 0; i < steps; ++i) n *= parts[i];
  return n;
}

std::vector<int> device_coords(int64_t d, const std::vector<int>& parts, int steps) {
  std::vector<int> c(steps);
  for (int i = steps - 1; i >= 0; --i) c[i] = static_cast<int>(d % parts[i]), d /= parts[i];
  return c;
}

Box tile_box(const Shape& shape, const Tiling& cuts, const std::vector<int>& parts, const std::vector<int>& coords) {
  Box b{std::vector<Range>(shape.size())};
  for (size_t d = 0; d < shape.size(); ++d) b.dims[d] = {0, shape[d] - 1};
  for (size_t i = 0; i < coords.size(); ++i) {
    int dim = cuts[i];
    if (dim == kReplicated) continue;
    Range& r = b.dims[dim];
    Range sub = tdl::split_range(r.size(), parts[i], coords[i]);
    r = {r.lo + sub.lo, r.lo + sub.hi};
  }
  return b;
}

std::vector<Range> var_ranges(const std::vector<int64_t>& extents, const OpSplit& split, const std::vector<int>& parts,
                              const std::vector<int>& coords) {
  std::vector<Range> v(extents.size());
  for (size_t i = 0; i < extents.size(); ++i) v[i] = {0, extents[i] - 1};
  for (size_t i = 0; i < coords.size(); ++i) {
    const tdl::Strategy& s = split[i];
    if (s.kind == tdl::StrategyKind::kReplicate) continue;
    Range& r = v[s.var];
    Range sub = tdl::split_range(r.size(), parts[i], coords[i]);
    r = {r.lo + sub.lo, r.lo + sub.hi};
  }
  return v;
}

std::string tiling_str(const Tiling& cuts, int rank) {
  std::string s;
  for (int c : cuts) {
    if (!s.empty()) s += ' ';
    if (c == kReplicated) s += 'r';
    else if (rank == 2) s += c == 0 ? 'R' : 'C';
    else s += "P" + std::to_string(c);
  }
  return s;
}

}  // namespace tilewise::cost

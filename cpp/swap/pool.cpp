// Pools: sizes of classes, least counts, validation, repairs, crossover and mutation (pool.h).
#include "swap/pool.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace tilewise::swap {

namespace {

std::string list_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// Sizes of class c (1-based) are cls[first..last]; classes are contiguous ranges of sizes.
template <typename F>
void for_each_class(const std::vector<int>& cls, F f) {
  size_t a = 0;
  while (a < cls.size()) {
    size_t b = a;
    while (b + 1 < cls.size() && cls[b + 1] == cls[a]) ++b;
    f(cls[a], a, b);
    a = b + 1;
  }
}

}  // namespace

std::vector<int64_t> class_bytes(const Problem& p, const std::vector<int>& cls) {
  std::vector<int64_t> out(static_cast<size_t>(cls.empty() ? 0 : cls.back()), 0);
  for_each_class(cls, [&](int c, size_t, size_t last) { out[static_cast<size_t>(c - 1)] = p.sizes()[last]; });
  return out;
}

int64_t pool_bytes(const Problem& p, const Pool& pool) {
  const std::vector<int64_t> bytes = class_bytes(p, pool.cls);
  int64_t total = 0;
  for (size_t c = 0; c < bytes.size() && c < pool.cnt.size(); ++c) {
    // Saturating: a user's count may be absurd; anything this large exceeds every capacity.
    if (pool.cnt[c] > 0 && bytes[c] > (std::numeric_limits<int64_t>::max() - total) / pool.cnt[c])
      return std::numeric_limits<int64_t>::max();
    total += bytes[c] * pool.cnt[c];
  }
  return total;
}

std::vector<int64_t> least_counts(const Problem& p, const std::vector<int>& cls) {
  std::vector<int64_t> out(static_cast<size_t>(cls.empty() ? 0 : cls.back()), 0);
  std::vector<int> count(static_cast<size_t>(p.num_ops()), 0), touched;
  for_each_class(cls, [&](int c, size_t first, size_t last) {
    int most = 0;
    for (size_t i = first; i <= last; ++i)
      for (const auto& [o, k] : p.ops_with_size(static_cast<int>(i))) {
        if (!count[static_cast<size_t>(o)]) touched.push_back(o);
        most = std::max(most, count[static_cast<size_t>(o)] += k);
      }
    out[static_cast<size_t>(c - 1)] = most;
    for (int o : touched) count[static_cast<size_t>(o)] = 0;
    touched.clear();
  });
  return out;
}

std::vector<int64_t> tensors_per_class(const Problem& p, const std::vector<int>& cls) {
  std::vector<int64_t> out(static_cast<size_t>(cls.empty() ? 0 : cls.back()), 0);
  for (size_t i = 0; i < cls.size(); ++i) out[static_cast<size_t>(cls[i] - 1)] += p.tensors_per_size()[i];
  return out;
}

void check_pool(const Problem& p, const Pool& pool) {
  const size_t n = p.sizes().size();
  if (pool.cls.size() != n)
    throw SwapError("pool: CLS has " + std::to_string(pool.cls.size()) + " entries, one per unique tensor size is " +
                    std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    const int prev = i ? pool.cls[i - 1] : 0;
    if (pool.cls[i] != prev && pool.cls[i] != prev + 1)
      throw SwapError("pool: CLS[" + std::to_string(i) + "] is " + std::to_string(pool.cls[i]) + " after " +
                      (i ? std::to_string(prev) : std::string("the start")) + "; CLS starts at 1 and each next "
                      "entry is equal to the one before or one greater (size classes are 1-based, §4.4.3)");
  }
  const size_t k = static_cast<size_t>(pool.classes());
  if (pool.cnt.size() != k)
    throw SwapError("pool: CNT has " + std::to_string(pool.cnt.size()) + " entries, but CLS has " + std::to_string(k) +
                    " size classes (one count per class)");
  for (size_t c = 0; c < k; ++c)
    if (pool.cnt[c] < 0)
      throw SwapError("pool: CNT[" + std::to_string(c) + "] is " + std::to_string(pool.cnt[c]) + "; counts are >= 0");
  const std::vector<int64_t> least = least_counts(p, pool.cls), bytes = class_bytes(p, pool.cls);
  for (size_t c = 0; c < k; ++c) {
    if (pool.cnt[c] >= least[c]) continue;
    // Name an op that needs more objects of this class than the pool has.
    for (int o = 0; o < p.num_ops(); ++o) {
      std::string names;
      int64_t held = 0;
      for (int t : p.working_set(o))
        if (static_cast<size_t>(pool.cls[static_cast<size_t>(p.size_index(t))] - 1) == c) {
          ++held;
          names += (names.empty() ? "'" : ", '") + p.tensors()[static_cast<size_t>(t)].name + "'";
        }
      if (held > pool.cnt[c])
        throw SwapError("pool: size class " + std::to_string(c + 1) + " (" + std::to_string(bytes[c]) +
                        "-byte objects) has " + std::to_string(pool.cnt[c]) + " objects, but op '" +
                        p.ops()[static_cast<size_t>(o)].name + "' holds " + std::to_string(held) + " at once (" + names +
                        "); the least counts for this CLS are " + list_text(least));
    }
  }
  const int64_t total = pool_bytes(p, pool);
  if (total > p.capacity())
    throw SwapError("pool: its objects take " + std::to_string(total) + " bytes, more than the capacity of " +
                    std::to_string(p.capacity()) + " bytes");
}

Pool default_pool(const Problem& p) {
  Pool pool;
  for (size_t i = 0; i < p.sizes().size(); ++i) pool.cls.push_back(static_cast<int>(i) + 1);
  pool.cnt = tensors_per_class(p, pool.cls);
  return repaired(p, std::move(pool));
}

Pool needs_pool(const Problem& p, const std::vector<int>& schedule) {
  const size_t sizes = p.sizes().size(), nt = static_cast<size_t>(p.num_tensors());
  const int n = static_cast<int>(schedule.size());
  std::vector<int> first(nt, -1), last(nt, -1);
  for (int k = 0; k < n; ++k)
    for (int t : p.working_set(schedule[static_cast<size_t>(k)])) {
      if (first[static_cast<size_t>(t)] < 0) first[static_cast<size_t>(t)] = k;
      last[static_cast<size_t>(t)] = k;
    }
  // Per position, tensors arriving and leaving; a sweep counts each size's tensors alive.
  std::vector<std::vector<int>> arrive(static_cast<size_t>(n) + 1), leave(static_cast<size_t>(n) + 1);
  for (size_t t = 0; t < nt; ++t) {
    if (first[t] < 0) continue;
    const Tensor& x = p.tensors()[t];
    const int end = x.kind == TensorKind::kActivation && x.live_out ? n : last[t] + 1;
    arrive[static_cast<size_t>(first[t])].push_back(p.size_index(static_cast<int>(t)));
    leave[static_cast<size_t>(end)].push_back(p.size_index(static_cast<int>(t)));
  }
  std::vector<int64_t> alive(sizes, 0), need(sizes, 0);
  for (size_t k = 0; k <= static_cast<size_t>(n); ++k) {
    for (int i : leave[k]) --alive[static_cast<size_t>(i)];
    for (int i : arrive[k]) need[static_cast<size_t>(i)] = std::max(need[static_cast<size_t>(i)], ++alive[static_cast<size_t>(i)]);
  }
  Pool pool;
  for (size_t i = 0; i < sizes; ++i) pool.cls.push_back(static_cast<int>(i) + 1);
  const std::vector<int64_t> least = least_counts(p, pool.cls);
  const auto counts = [&](double f) {
    std::vector<int64_t> cnt(sizes);
    for (size_t i = 0; i < sizes; ++i)
      cnt[i] = std::max(least[i], static_cast<int64_t>(std::floor(f * static_cast<double>(need[i]))));
    return cnt;
  };
  double lo = 0, hi = 1;  // the largest factor that fits, by bisection
  for (int it = 0; it < 40; ++it) {
    const double mid = (lo + hi) / 2;
    pool.cnt = counts(mid);
    (pool_bytes(p, pool) <= p.capacity() ? lo : hi) = mid;
  }
  pool.cnt = counts(lo);
  return repaired(p, std::move(pool));
}

Pool unlimited_pool(const Problem& p) {
  Pool pool;
  for (size_t i = 0; i < p.sizes().size(); ++i) pool.cls.push_back(static_cast<int>(i) + 1);
  pool.cnt = tensors_per_class(p, pool.cls);
  return pool;
}

void repair_cls(std::vector<int>& cls) {
  int prev = 0, shift = 0;
  for (int& c : cls) {
    const int v = c + shift;
    const int fixed = v <= prev ? prev : prev + 1;
    shift += fixed - v;
    c = prev = fixed;
  }
  if (!cls.empty() && cls[0] != 1) {
    const int d = cls[0] - 1;
    for (int& c : cls) c -= d;
  }
}

bool repair_cnt(const Problem& p, Pool& pool) {
  const size_t k = static_cast<size_t>(pool.classes());
  pool.cnt.resize(k, 0);
  const std::vector<int64_t> least = least_counts(p, pool.cls), most = tensors_per_class(p, pool.cls),
                             bytes = class_bytes(p, pool.cls);
  int64_t total = 0, floor_total = 0;
  for (size_t c = 0; c < k; ++c) {
    pool.cnt[c] = std::clamp(pool.cnt[c], least[c], most[c]);
    total += pool.cnt[c] * bytes[c];
    floor_total += least[c] * bytes[c];
  }
  if (floor_total > p.capacity()) return false;
  while (total > p.capacity()) {
    std::vector<size_t> above;
    for (size_t c = 0; c < k; ++c)
      if (pool.cnt[c] > least[c]) above.push_back(c);
    const double share = static_cast<double>(total - p.capacity()) / static_cast<double>(above.size());
    for (size_t c : above) {
      const int64_t want = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(share / static_cast<double>(bytes[c]))));
      const int64_t d = std::min(want, pool.cnt[c] - least[c]);
      pool.cnt[c] -= d;
      total -= d * bytes[c];
    }
  }
  return true;
}

Pool repaired(const Problem& p, Pool pool) {
  const std::vector<int64_t> ext = extend(pool);  // per size: survives any change of the classes
  repair_cls(pool.cls);
  pool.cnt = contract(pool.cls, ext);
  if (repair_cnt(p, pool)) return pool;
  pool.cls = p.least_pool().cls;
  pool.cnt = contract(pool.cls, ext);
  if (!repair_cnt(p, pool)) p.check_feasible();  // throws: not even the least pool fits
  return pool;
}

std::vector<int64_t> extend(const Pool& pool) {
  std::vector<int64_t> ext(pool.cls.size(), 0);
  for (size_t i = 0; i < pool.cls.size(); ++i) {
    const size_t c = static_cast<size_t>(pool.cls[i] - 1);
    ext[i] = c < pool.cnt.size() ? pool.cnt[c] : 0;
  }
  return ext;
}

std::vector<int64_t> contract(const std::vector<int>& cls, const std::vector<int64_t>& ext) {
  std::vector<int64_t> cnt(static_cast<size_t>(cls.empty() ? 0 : cls.back()), 0);
  for_each_class(cls, [&](int c, size_t first, size_t last) {
    double sum = 0;
    for (size_t i = first; i <= last; ++i) sum += static_cast<double>(ext[i]);
    cnt[static_cast<size_t>(c - 1)] = std::llround(sum / static_cast<double>(last - first + 1));
  });
  return cnt;
}

Pool crossover(const Problem& p, const Pool& head, const Pool& tail, int cut) {
  const std::vector<int64_t> a = extend(head), b = extend(tail);
  Pool child;
  std::vector<int64_t> ext;
  for (size_t i = 0; i < head.cls.size(); ++i) {
    const bool first = static_cast<int>(i) < cut;
    child.cls.push_back(first ? head.cls[i] : tail.cls[i]);
    ext.push_back(first ? a[i] : b[i]);
  }
  repair_cls(child.cls);
  child.cnt = contract(child.cls, ext);
  return repaired(p, std::move(child));
}

Pool mutate(const Problem& p, const Pool& pool, double probability, std::mt19937_64& rng) {
  if (probability <= 0) return pool;
  std::bernoulli_distribution flip(probability);
  std::vector<int64_t> ext = extend(pool);
  Pool out = pool;
  bool moved = false;
  for (size_t i = 1; i < out.cls.size(); ++i) {
    if (!flip(rng)) continue;
    // Equal to the previous class: split here (+1); one more: merge (-1). Later entries shift along.
    const int d = out.cls[i] == out.cls[i - 1] ? 1 : -1;
    for (size_t j = i; j < out.cls.size(); ++j) out.cls[j] += d;
    moved = true;
  }
  if (moved) out.cnt = contract(out.cls, ext);
  for (int64_t& c : out.cnt) {
    if (!flip(rng)) continue;
    const double mean = static_cast<double>(c);
    c = std::max<int64_t>(0, std::llround(std::normal_distribution<double>(mean, std::max(1.0, mean / 5))(rng)));
  }
  return repaired(p, std::move(out));
}

Pool random_pool(const Problem& p, std::mt19937_64& rng) {
  Pool pool;
  std::bernoulli_distribution step(0.5);
  for (size_t i = 0; i < p.sizes().size(); ++i) pool.cls.push_back(i == 0 ? 1 : pool.cls.back() + (step(rng) ? 1 : 0));
  const std::vector<int64_t> least = least_counts(p, pool.cls), most = tensors_per_class(p, pool.cls);
  for (size_t c = 0; c < least.size(); ++c)
    pool.cnt.push_back(std::uniform_int_distribution<int64_t>(least[c], std::max(least[c], most[c]))(rng));
  return repaired(p, std::move(pool));
}

}  // namespace tilewise::swap

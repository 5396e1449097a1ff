#include "partition/frontier.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tdl/errors.h"

namespace tilewise::partition {

namespace {

// A candidate tuple: its costs, the eliminated variable's value, and its trail (the points of the
// inputs summed so far, as a linked list through `Scratch::trails`).
struct Candidate {
  double time, memory;
  int32_t x, trail;
};
struct Trail {
  int32_t parent, point;
};
struct Key {
  double memory, time;
  int32_t index;
};

struct Scratch {
  std::vector<Candidate> all, cur, next;
  std::vector<Trail> trails;
  std::vector<Key> keys;
  std::vector<int> kept;
};

// Algorithm 1 on `n` tuples given by (memory, time) accessors: sort by (memory or its bucket,
// time, position), keep a tuple only when its time is strictly below every kept one.
template <class Memory, class Time>
void sweep(int n, double bucket, const Memory& memory, const Time& time, std::vector<Key>& keys,
           std::vector<int>& kept) {
  keys.resize(n);
  for (int i = 0; i < n; ++i) {
    double m = memory(i);
    keys[i] = {bucket > 0 ? std::floor(m / bucket) : m, time(i), i};
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    if (a.memory != b.memory) return a.memory < b.memory;
    if (a.time != b.time) return a.time < b.time;
    return a.index < b.index;
  });
  kept.clear();
  double v = std::numeric_limits<double>::infinity();
  for (const Key& k : keys)
    if (k.time < v) kept.push_back(k.index), v = k.time;
}

// Reduces `c` in place exactly (no bucket), keeping generation order among ties.
void reduce_candidates(std::vector<Candidate>& c, Scratch& s) {
  sweep(
      static_cast<int>(c.size()), 0, [&](int i) { return c[i].memory; }, [&](int i) { return c[i].time; }, s.keys,
      s.kept);
  s.next.clear();
  for (int i : s.kept) s.next.push_back(c[i]);
  c.swap(s.next);
}

// True when `c` is still a frontier (a shift by one tuple keeps the order but rounding can make
// neighbours equal).
bool is_frontier(const std::vector<Candidate>& c) {
  for (size_t i = 1; i < c.size(); ++i)
    if (!(c[i - 1].memory < c[i].memory && c[i - 1].time > c[i].time)) return false;
  return true;
}

}  // namespace

std::vector<int> reduce_indices(const std::vector<Point>& c, double memory_bucket) {
  std::vector<Key> keys;
  std::vector<int> kept;
  sweep(
      static_cast<int>(c.size()), memory_bucket, [&](int i) { return c[i].memory; },
      [&](int i) { return c[i].time; }, keys, kept);
  return kept;
}

double FrontierSum::score(const Value& v) const {
  double best = std::numeric_limits<double>::infinity();
  for (const Point& p : v) best = std::min(best, time_weight_ * p.time + memory_weight_ * p.memory);
  return best;
}

void FrontierSum::eliminate_frontiers(int k, int dv, const Frontier* const* ops, Frontier& out, Back& back) const {
  thread_local Scratch s;
  s.all.clear();
  s.trails.clear();
  auto push_trail = [&](int32_t parent, int32_t point) {
    s.trails.push_back({parent, point});
    return static_cast<int32_t>(s.trails.size() - 1);
  };
  for (int x = 0; x < dv; ++x) {
    s.cur.assign(1, Candidate{0, 0, x, -1});
    for (int i = 0; i < k && !s.cur.empty(); ++i) {
      const Frontier& f = *ops[static_cast<size_t>(x) * k + i];
      if (f.empty()) {
        s.cur.clear();  // impossible at this value
      } else if (f.size() == 1) {
        // A shift keeps a frontier a frontier, up to rounding.
        for (Candidate& c : s.cur)
          c.time += f[0].time, c.memory += f[0].memory, c.trail = push_trail(c.trail, 0);
        if (!is_frontier(s.cur)) reduce_candidates(s.cur, s);
      } else {
        // Product: every pairwise sum, in (kept point, input point) order, then reduced exactly.
        std::vector<Candidate> pairs;
        pairs.reserve(s.cur.size() * f.size());
        for (const Candidate& c : s.cur)
          for (size_t j = 0; j < f.size(); ++j)
            pairs.push_back({c.time + f[j].time, c.memory + f[j].memory, x,
                             push_trail(c.trail, static_cast<int32_t>(j))});
        reduce_candidates(pairs, s);
        s.cur.swap(pairs);
      }
    }
    s.all.insert(s.all.end(), s.cur.begin(), s.cur.end());
  }
  // Union over the variable's values, reduced (with the bucket, if any).
  sweep(
      static_cast<int>(s.all.size()), bucket_, [&](int i) { return s.all[i].memory; },
      [&](int i) { return s.all[i].time; }, s.keys, s.kept);
  out.clear();
  out.reserve(s.kept.size());
  back.assign(s.kept.size() * (k + 1), 0);
  for (size_t p = 0; p < s.kept.size(); ++p) {
    const Candidate& c = s.all[s.kept[p]];
    out.push_back({c.time, c.memory});
    int32_t* r = back.data() + p * (k + 1);
    r[0] = c.x;
    int32_t t = c.trail;
    for (int i = k - 1; i >= 0; --i) {
      TW_ASSERT(t >= 0, "a candidate's trail names a point of every input");
      r[1 + i] = s.trails[t].point;
      t = s.trails[t].parent;
    }
  }
}

}  // namespace tilewise::partition

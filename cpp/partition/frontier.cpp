#include "partition/frontier.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tdl/errors.h"

namespace tilewise::partition {

namespace {

struct Key {
  double memory, time;
  int32_t index;
};

// Algorithm 1 on `n` tuples given by accessors: sort by (memory, time, position), keep a tuple
// only when its time is strictly below every kept one.
template <class Memory, class Time>
void sweep(int64_t n, const Memory& memory, const Time& time, std::vector<Key>& keys, std::vector<int32_t>& kept) {
  keys.resize(n);
  for (int64_t i = 0; i < n; ++i) keys[i] = {memory(i), time(i), static_cast<int32_t>(i)};
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

// The candidates for one value x of the eliminated variable: `base[j] + shift` for j < size,
// where `shift` sums the inputs with a single point. `multi` is the one input with several
// points whose frontier `base` is (-1: none, base is {0, 0}; -2: several, multiplied out into
// Scratch::product from `offset` on). Each list is a frontier up to rounding.
struct List {
  int32_t x, multi, size;
  int64_t offset;
  Point shift;
  const Point* base;
};

// A point of a product of several inputs and its trail: the points of those inputs it sums, as
// a linked list through Scratch::trails (last input first).
struct Trail {
  int32_t parent, point;
};

struct Head {
  double memory, time;
  int32_t list, pos;
};
// Min-heap order: (memory, time, generation); generation = (list, position) = (x, position).
bool after(const Head& a, const Head& b) {
  if (a.memory != b.memory) return a.memory > b.memory;
  if (a.time != b.time) return a.time > b.time;
  if (a.list != b.list) return a.list > b.list;
  return a.pos > b.pos;
}

struct Scratch {
  std::vector<List> lists;
  std::vector<int> multis;
  std::vector<Point> product, pairs;
  std::vector<int32_t> product_trail, pair_trail;
  std::vector<Trail> trails;
  std::vector<Key> keys;
  std::vector<int32_t> kept;
  std::vector<Head> heap;
  std::vector<std::pair<int32_t, int32_t>> chosen;  // (list, position) of every kept candidate
};

const Point kZero = FrontierSum::unit()[0];

Point candidate(const List& l, int32_t j) {
  return {l.base[j].time + l.shift.time, l.base[j].memory + l.shift.memory};
}

// The frontier of the product of the inputs `multis` at x (each with several points), into
// s.product with one trail per point, exactly reduced after each product.
void multiply_out(const Frontier* const* in, const std::vector<int>& multis, Scratch& s) {
  s.pairs.clear(), s.pair_trail.clear();
  const Frontier& first = *in[multis[0]];
  for (size_t j = 0; j < first.size(); ++j) {
    s.pairs.push_back(first[j]);
    s.trails.push_back({-1, static_cast<int32_t>(j)});
    s.pair_trail.push_back(static_cast<int32_t>(s.trails.size() - 1));
  }
  std::vector<Point> cur;
  std::vector<int32_t> cur_trail;
  for (size_t m = 1; m < multis.size(); ++m) {
    cur.swap(s.pairs), cur_trail.swap(s.pair_trail);
    s.pairs.clear(), s.pair_trail.clear();
    const Frontier& f = *in[multis[m]];
    for (size_t c = 0; c < cur.size(); ++c)
      for (size_t j = 0; j < f.size(); ++j) {
        s.pairs.push_back({cur[c].time + f[j].time, cur[c].memory + f[j].memory});
        s.trails.push_back({cur_trail[c], static_cast<int32_t>(j)});
        s.pair_trail.push_back(static_cast<int32_t>(s.trails.size() - 1));
      }
    sweep(
        static_cast<int64_t>(s.pairs.size()), [&](int64_t i) { return s.pairs[i].memory; },
        [&](int64_t i) { return s.pairs[i].time; }, s.keys, s.kept);
    cur.clear(), cur_trail.clear();
    for (int32_t i : s.kept) cur.push_back(s.pairs[i]), cur_trail.push_back(s.pair_trail[i]);
    s.pairs.swap(cur), s.pair_trail.swap(cur_trail);
  }
  s.product.insert(s.product.end(), s.pairs.begin(), s.pairs.end());
  s.product_trail.insert(s.product_trail.end(), s.pair_trail.begin(), s.pair_trail.end());
}

// Algorithm 1 over the union of the lists without materialising it: a k-way merge in (memory,
// time, generation) order. A popped head no faster than the best kept time is dominated, and so
// is every later point of its list until the first faster one (times fall along a list), which
// a galloping search finds. Rounding can give a list two equal memories with the faster second; the
// faster then replaces the first, as sorting would have ordered them.
void merge_lists(Scratch& s) {
  s.heap.clear();
  s.chosen.clear();
  for (size_t l = 0; l < s.lists.size(); ++l) {
    Point p = candidate(s.lists[l], 0);
    s.heap.push_back({p.memory, p.time, static_cast<int32_t>(l), 0});
  }
  std::make_heap(s.heap.begin(), s.heap.end(), after);
  double v = std::numeric_limits<double>::infinity(), last_memory = 0;
  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), after);
    Head h = s.heap.back();
    s.heap.pop_back();
    const List& l = s.lists[h.list];
    int32_t next = h.pos + 1;
    if (h.time < v) {
      if (!s.chosen.empty() && h.memory == last_memory) s.chosen.back() = {h.list, h.pos};
      else s.chosen.push_back({h.list, h.pos});
      v = h.time, last_memory = h.memory;
    } else {
      // The first position with time < v, galloping from `next`: it is usually close, and the
      // list is long (a binary search over all of it misses the cache at every step).
      int32_t lo = next, hi = next;
      for (int64_t step = 1; hi < l.size && candidate(l, hi).time >= v; step *= 2)
        lo = hi + 1, hi = static_cast<int32_t>(std::min<int64_t>(l.size, hi + step));
      while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (candidate(l, mid).time >= v) lo = mid + 1;
        else hi = mid;
      }
      next = lo;
    }
    if (next < l.size) {
      Point p = candidate(l, next);
      s.heap.push_back({p.memory, p.time, h.list, next});
      std::push_heap(s.heap.begin(), s.heap.end(), after);
    }
  }
}

}  // namespace

std::vector<int> reduce_indices(const std::vector<Point>& c, double memory_bucket) {
  std::vector<Key> keys;
  std::vector<int32_t> kept;
  sweep(
      static_cast<int64_t>(c.size()), [&](int64_t i) { return c[i].memory; }, [&](int64_t i) { return c[i].time; },
      keys, kept);
  std::vector<int> out;
  for (size_t p = 0; p < kept.size(); ++p) {
    // With buckets, per bucket only the fastest point: the last of its bucket on the frontier.
    if (memory_bucket > 0 && p + 1 < kept.size() &&
        std::floor(c[kept[p + 1]].memory / memory_bucket) == std::floor(c[kept[p]].memory / memory_bucket))
      continue;
    out.push_back(kept[p]);
  }
  return out;
}

double FrontierSum::score(const Value& v) const {
  double best = std::numeric_limits<double>::infinity();
  for (const Point& p : v) best = std::min(best, time_weight_ * p.time + memory_weight_ * p.memory);
  return best;
}

void FrontierSum::eliminate_frontiers(int k, int dv, const Frontier* const* ops, Frontier& out, Back& back) const {
  thread_local Scratch s;
  s.lists.clear(), s.product.clear(), s.product_trail.clear(), s.trails.clear();
  for (int x = 0; x < dv; ++x) {
    const Frontier* const* in = ops + static_cast<size_t>(x) * k;
    List l{x, -1, 1, 0, kZero, &kZero};  // the shift starts at the unit
    s.multis.clear();
    bool possible = true;
    for (int i = 0; i < k && possible; ++i) {
      if (in[i]->empty()) possible = false;  // impossible at this value
      else if (in[i]->size() == 1) l.shift.time += (*in[i])[0].time, l.shift.memory += (*in[i])[0].memory;
      else s.multis.push_back(i);
    }
    if (!possible) continue;
    if (s.multis.size() == 1) {
      l.multi = s.multis[0], l.base = in[l.multi]->data(), l.size = static_cast<int32_t>(in[l.multi]->size());
    } else if (s.multis.size() > 1) {
      l.multi = -2, l.offset = static_cast<int64_t>(s.product.size());
      multiply_out(in, s.multis, s);
      l.size = static_cast<int32_t>(s.product.size() - l.offset);
    }
    s.lists.push_back(l);
  }
  for (List& l : s.lists)
    if (l.multi == -2) l.base = s.product.data() + l.offset;  // product no longer grows

  merge_lists(s);
  if (bucket_ > 0) {
    // Per bucket only the fastest point, the last of its bucket on the frontier.
    size_t kept = 0;
    for (size_t p = 0; p < s.chosen.size(); ++p) {
      auto bucket_of = [&](size_t q) {
        return std::floor(candidate(s.lists[s.chosen[q].first], s.chosen[q].second).memory / bucket_);
      };
      if (p + 1 < s.chosen.size() && bucket_of(p + 1) == bucket_of(p)) continue;
      s.chosen[kept++] = s.chosen[p];
    }
    s.chosen.resize(kept);
  }

  // Back: [dv | multi per x | start per x, and the total | extra per x | candidate per point | extra].
  const size_t header = 2 + 3 * static_cast<size_t>(dv);
  back.assign(header + s.chosen.size(), -1);
  back[0] = dv;
  std::vector<int32_t> start(dv + 1, 0);
  for (const List& l : s.lists) start[l.x + 1] = l.size;
  for (int x = 0; x < dv; ++x) start[x + 1] += start[x];
  for (int x = 0; x <= dv; ++x) back[1 + dv + x] = start[x];
  for (const List& l : s.lists) {
    back[1 + l.x] = l.multi;
    if (l.multi != -2) continue;
    // The input points of every candidate of a product, k per candidate.
    back[2 + 2 * dv + l.x] = static_cast<int32_t>(back.size());
    const Frontier* const* in = ops + static_cast<size_t>(l.x) * k;
    for (int32_t j = 0; j < l.size; ++j) {
      const size_t at = back.size();
      back.resize(at + k, 0);  // inputs with one point stay at point 0
      int32_t t = s.product_trail[l.offset + j];
      for (int i = k - 1; i >= 0; --i) {
        if (in[i]->size() < 2) continue;
        TW_ASSERT(t >= 0, "a product's trail names a point of every input with several");
        back[at + i] = s.trails[t].point;
        t = s.trails[t].parent;
      }
    }
  }
  out.clear();
  out.reserve(s.chosen.size());
  for (size_t p = 0; p < s.chosen.size(); ++p) {
    const auto [li, j] = s.chosen[p];
    const List& l = s.lists[li];
    out.push_back(candidate(l, j));
    back[header + p] = start[l.x] + j;
  }
}

int FrontierSum::unroll(const Back& back, int point, int k, int* inputs) {
  const int32_t dv = back[0];
  const int32_t index = back[2 + 3 * static_cast<size_t>(dv) + point];
  const int32_t* start = back.data() + 1 + dv;
  // The value whose range of candidates holds `index` (values without candidates have empty ranges).
  const int x = static_cast<int>(std::upper_bound(start, start + dv + 1, index) - start) - 1;
  const int32_t j = index - start[x], multi = back[1 + x];
  for (int i = 0; i < k; ++i) inputs[i] = 0;
  if (multi >= 0) inputs[multi] = j;
  else if (multi == -2)
    for (int i = 0; i < k; ++i) inputs[i] = back[back[2 + 2 * dv + x] + static_cast<size_t>(j) * k + i];
  return x;
}

}  // namespace tilewise::partition

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

// Sorted lists of candidates `base[j] + shift`, j < size: for one value x of the eliminated
// variable, `shift` sums the inputs with a single point and `base` is the one input with several
// points ({0, 0} when there is none). With two or more such inputs the product is not multiplied
// out: the last one is `base`, and there is one list per point `outer` of the product of the others
// (its costs added to `shift`): a chain of `count` lists, made only as the merge reaches them. Each
// list is a frontier up to rounding, and the lists' shifts increase in memory along the chain.
struct Chain {
  int32_t x, input, size;  // input: the one whose frontier `base` is (-1: none, or a fold's last)
  int32_t fold;            // the fold (product of the others) the outer points are of, or -1
  int32_t count;           // lists: the outer points, or 1 without a fold
  Point shift;
  const Point* base;
  const Point* outers;  // the outer points (null: one list, shifted by `shift` alone)
  Point list_shift(int32_t outer) const {
    return outers ? Point{shift.time + outers[outer].time, shift.memory + outers[outer].memory} : shift;
  }
};

struct Head {
  double memory, time;
  int32_t chain, outer, pos;
};
// Min-heap order: (memory, time, generation); generation = (chain, outer point, position).
bool after(const Head& a, const Head& b) {
  if (a.memory != b.memory) return a.memory > b.memory;
  if (a.time != b.time) return a.time > b.time;
  if (a.chain != b.chain) return a.chain > b.chain;
  if (a.outer != b.outer) return a.outer > b.outer;
  return a.pos > b.pos;
}

Point candidate(const Chain& c, const Point& shift, int32_t j) {
  return {c.base[j].time + shift.time, c.base[j].memory + shift.memory};
}

// A kept candidate: list `outer` of `chain`, position `pos`.
struct Pick {
  int32_t chain, outer, pos;
};

// Incumbents to prune against inside a merge (FrontierSum::kBounds): a candidate c is beaten
// when an incumbent of memory at most c.memory + rest.memory has time below (c.time + rest.time)
// (1 - 1e-9). Candidates come in memory order, so the incumbents qualifying only grow: a cursor.
struct Prune {
  const Frontier* incumbents = nullptr;
  Point rest;
  size_t at = 0;  // incumbents with memory <= the current candidate's + rest.memory
  void reach(double memory) {
    while (at < incumbents->size() && (*incumbents)[at].memory <= memory + rest.memory) ++at;
  }
  bool beaten(double time) const {
    return at > 0 && (*incumbents)[at - 1].time < (time + rest.time) * (1 - 1e-9);
  }
};

// Algorithm 1's sweep over heads taken in (memory, time, generation) order: the best kept time and
// the picks. Rounding can give two candidates equal memories with the faster second; the faster then
// replaces the first, as sorting would have ordered them.
struct Sweep {
  double v = std::numeric_limits<double>::infinity(), last_memory = 0;
  const Prune* prune = nullptr;
  // Whether a candidate at the current memory is dominated or beaten.
  bool skipped(double time) const { return time >= v || (prune && prune->beaten(time)); }
  void keep(const Head& h, std::vector<Pick>& chosen) {
    if (!chosen.empty() && h.memory == last_memory) chosen.back() = {h.chain, h.outer, h.pos};
    else chosen.push_back({h.chain, h.outer, h.pos});
    v = h.time, last_memory = h.memory;
  }
};

// A binary min-heap in `after` order with a replace-top: most pops put the same list's next head
// back at once (one sift instead of two).
void sift_down(std::vector<Head>& heap, size_t i) {
  const size_t n = heap.size();
  const Head h = heap[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && after(heap[c], heap[c + 1])) ++c;
    if (!after(h, heap[c])) break;
    heap[i] = heap[c];
    i = c;
  }
  heap[i] = h;
}
void sift_up(std::vector<Head>& heap, size_t i) {
  const Head h = heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!after(heap[parent], h)) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = h;
}

// Algorithm 1 over the union of the chains' lists without materialising it: a k-way merge in
// (memory, time, generation) order into `chosen`. A popped head no faster than the best kept time
// is dominated, and so is every later point of its list until the first faster one (times fall
// along a list), which a galloping search finds; a list whose fastest (last) point is dominated is
// dropped whole. With `prune`, a head an incumbent beats is skipped alike (later points are
// heavier, so the incumbents that qualify only get faster). Rounding can give two candidates equal
// memories with the faster second; the faster then replaces the first, as sorting would have ordered
// them. A chain's list enters the heap only when its predecessor's first point leaves it: its head
// comes no earlier (rounding is monotone), so the heap holds the lists under way, not every point
// of a product's outer frontier, and a list already dominated then passes its turn on at once.
void merge_lists(const std::vector<Chain>& chains, std::vector<Head>& heap, std::vector<Pick>& chosen,
                 Prune* prune = nullptr) {
  heap.clear();
  chosen.clear();
  auto head = [&](int32_t c, int32_t outer, const Point& shift, int32_t pos) {
    Point p = candidate(chains[c], shift, pos);
    return Head{p.memory, p.time, c, outer, pos};
  };
  for (size_t c = 0; c < chains.size(); ++c)
    heap.push_back(head(static_cast<int32_t>(c), 0, chains[c].list_shift(0), 0));
  std::make_heap(heap.begin(), heap.end(), after);
  Sweep sweep{std::numeric_limits<double>::infinity(), 0, prune};
  auto skipped = [&](double time) { return sweep.skipped(time); };
  // A list whose fastest (last) point is skipped now is skipped whole, now and later: v only falls,
  // and its later points are heavier, so more incumbents qualify.
  auto dead = [&](const Chain& c, const Point& shift) { return skipped(candidate(c, shift, c.size - 1).time); };
  // The top leaves; up to two heads enter (the first takes the top's place).
  Head enter[2];
  while (!heap.empty()) {
    const Head h = heap[0];
    int entering = 0;
    const Chain& c = chains[h.chain];
    const Point shift = c.list_shift(h.outer);
    if (prune) prune->reach(h.memory);
    if (h.pos == 0 && h.outer + 1 < c.count) {
      // The chain's next list enters now; a dead one passes its turn on at once.
      int32_t n = h.outer + 1;
      Point sn = c.list_shift(n);
      bool gone = dead(c, sn);
      while (gone && n + 1 < c.count) sn = c.list_shift(++n), gone = dead(c, sn);
      if (!gone) enter[entering++] = head(h.chain, n, sn, 0);
    }
    int32_t next = h.pos + 1;
    if (!skipped(h.time)) {
      sweep.keep(h, chosen);
    } else if (dead(c, shift)) {
      next = c.size;
    } else {
      // The first position not skipped, galloping from `next`: it is usually close, and the
      // list is long (a binary search over all of it misses the cache at every step).
      int32_t lo = next, hi = next;
      for (int64_t step = 1; hi < c.size && skipped(candidate(c, shift, hi).time); step *= 2)
        lo = hi + 1, hi = static_cast<int32_t>(std::min<int64_t>(c.size, hi + step));
      while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (skipped(candidate(c, shift, mid).time)) lo = mid + 1;
        else hi = mid;
      }
      next = lo;
    }
    if (next < c.size) enter[entering++] = head(h.chain, h.outer, shift, next);
    if (entering == 0) {
      heap[0] = heap.back();
      heap.pop_back();
      if (!heap.empty()) sift_down(heap, 0);
    } else {
      heap[0] = enter[0];
      sift_down(heap, 0);
      if (entering == 2) heap.push_back(enter[1]), sift_up(heap, heap.size() - 1);
    }
  }
}

// merge_lists where every list is one point (most entries of wide tables: every input a single point
// at every value): the same picks in the same order, by sorting at most dv heads instead of a heap.
void merge_points(const std::vector<Chain>& chains, std::vector<Head>& heads, std::vector<Pick>& chosen,
                  Prune* prune) {
  heads.clear();
  chosen.clear();
  for (size_t c = 0; c < chains.size(); ++c) {
    const Point p = candidate(chains[c], chains[c].shift, 0);
    heads.push_back({p.memory, p.time, static_cast<int32_t>(c), 0, 0});
  }
  std::sort(heads.begin(), heads.end(), [](const Head& a, const Head& b) { return after(b, a); });
  Sweep sweep{std::numeric_limits<double>::infinity(), 0, prune};
  for (const Head& h : heads) {
    if (prune) prune->reach(h.memory);
    if (!sweep.skipped(h.time)) sweep.keep(h, chosen);
  }
}

// Per value x with several multi-point inputs: the product of all but the base (the last of
// `multis`), as a frontier with, per point, the point of each input it sums (k ints, inputs not in
// the product at 0).
struct Fold {
  int32_t last = -1;               // the base: the input every list is over
  std::vector<Point> points;       // the product of the others (a frontier)
  std::vector<int32_t> inputs;     // k per point
};

struct Scratch {
  std::vector<Chain> chains, fold_chain;
  std::vector<int> multis;
  std::vector<Fold> folds;  // the folds of one elimination (first `num_folds`; reused, not freed)
  int32_t num_folds = 0;
  std::vector<Point> next_points, kept_points;
  std::vector<int32_t> next_inputs;
  std::vector<Head> heap;
  std::vector<Pick> chosen;
  std::vector<int32_t> fold_at;  // per fold, where its table is in the record
};

const Point kZero = FrontierSum::unit()[0];

// The frontier of the product of the inputs `multis[0..m-2]` at one value (each with several
// points) into `fold`, each further input merged in lazily as lists (exact: Algorithm 1 after
// every product, no candidate pairs materialised).
void fold_product(const Frontier* const* in, int k, const std::vector<int>& multis, Scratch& s, Fold& fold) {
  fold.last = multis.back();
  fold.points.assign(in[multis[0]]->begin(), in[multis[0]]->end());
  fold.inputs.assign(fold.points.size() * k, 0);
  for (size_t j = 0; j < fold.points.size(); ++j) fold.inputs[j * k + multis[0]] = static_cast<int32_t>(j);
  for (size_t m = 1; m + 1 < multis.size(); ++m) {
    const Frontier& f = *in[multis[m]];
    s.fold_chain.assign(1, {0, multis[m], static_cast<int32_t>(f.size()), -1,
                            static_cast<int32_t>(fold.points.size()), kZero, f.data(), fold.points.data()});
    merge_lists(s.fold_chain, s.heap, s.chosen);
    s.next_points.clear(), s.next_inputs.clear();
    for (const Pick& pick : s.chosen) {
      s.next_points.push_back(candidate(s.fold_chain[0], s.fold_chain[0].list_shift(pick.outer), pick.pos));
      const int32_t* from = fold.inputs.data() + static_cast<size_t>(pick.outer) * k;
      s.next_inputs.insert(s.next_inputs.end(), from, from + k);
      s.next_inputs[s.next_inputs.size() - k + multis[m]] = pick.pos;
    }
    fold.points.swap(s.next_points), fold.inputs.swap(s.next_inputs);
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
    // With buckets, per bucket only the fastest point (the last of its bucket on the frontier), and
    // the lightest point.
    if (memory_bucket > 0 && p > 0 && p + 1 < kept.size() &&
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

FrontierSum::Bound FrontierSum::lower_of(const std::vector<Value>& table) {
  Bound b{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  for (const Value& v : table)
    if (!v.empty()) b.time = std::min(b.time, v.back().time), b.memory = std::min(b.memory, v.front().memory);
  if (!std::isfinite(b.time)) b = {};
  return b;
}

FrontierSum::Bound FrontierSum::loosen(const Bound& b, const Bound& largest, int64_t operations) {
  const double error = static_cast<double>(operations) * std::ldexp(1.0, -52);
  return {std::max(0.0, b.time - error * largest.time), std::max(0.0, b.memory - error * largest.memory)};
}

void FrontierSum::eliminate_frontiers(int k, int dv, const Frontier* const* ops, Frontier& out, Back& back,
                                      const Bound* rest) const {
  thread_local Scratch s;
  s.chains.clear();
  s.num_folds = 0;
  for (int x = 0; x < dv; ++x) {
    const Frontier* const* in = ops + static_cast<size_t>(x) * k;
    Point shift = kZero;  // the sum starts at the unit
    s.multis.clear();
    bool possible = true;
    for (int i = 0; i < k && possible; ++i) {
      if (in[i]->empty()) possible = false;  // impossible at this value
      else if (in[i]->size() == 1) shift.time += (*in[i])[0].time, shift.memory += (*in[i])[0].memory;
      else s.multis.push_back(i);
    }
    if (!possible) continue;
    if (s.multis.empty()) {
      s.chains.push_back({x, -1, 1, -1, 1, shift, &kZero, nullptr});
    } else if (s.multis.size() == 1) {
      const Frontier& f = *in[s.multis[0]];
      s.chains.push_back({x, s.multis[0], static_cast<int32_t>(f.size()), -1, 1, shift, f.data(), nullptr});
    } else {
      if (s.multis.size() >= 3) {
        // The fold (the product of all but the base) is materialised, the base is not: the input with
        // the most points (the first of equals) is the base, the others fold in input order. rnn-12-16k's
        // joins (a cumulative frontier of hundreds of points and two of 5-10) took 0.43 -> 0.36 s.
        // With two inputs nothing is materialised; which makes the lists is left in input order (the
        // larger as the base was 1.5x faster on the RNN's joins, 1.3x slower on wresnet-152-6's).
        auto most = std::max_element(s.multis.begin(), s.multis.end(),
                                     [&](int a, int b) { return in[a]->size() < in[b]->size(); });
        std::rotate(most, most + 1, s.multis.end());
      }
      if (s.num_folds == static_cast<int32_t>(s.folds.size())) s.folds.emplace_back();
      const int32_t fi = s.num_folds++;
      Fold& fold = s.folds[fi];
      fold_product(in, k, s.multis, s, fold);
      const Frontier& last = *in[fold.last];
      s.chains.push_back({x, fold.last, static_cast<int32_t>(last.size()), fi,
                          static_cast<int32_t>(fold.points.size()), shift, last.data(), fold.points.data()});
    }
  }

  Prune prune{&incumbents_, rest ? *rest : Point{}};
  const bool points_only =
      std::all_of(s.chains.begin(), s.chains.end(), [](const Chain& c) { return c.size == 1 && c.count == 1; });
  if (points_only) merge_points(s.chains, s.heap, s.chosen, rest ? &prune : nullptr);
  else merge_lists(s.chains, s.heap, s.chosen, rest ? &prune : nullptr);
  // The kept points, each computed once (the bucket's thinning compares them, the entry keeps them).
  std::vector<Point>& points = s.kept_points;
  points.clear();
  for (const Pick& pick : s.chosen) {
    const Chain& c = s.chains[pick.chain];
    points.push_back(candidate(c, c.list_shift(pick.outer), pick.pos));
  }
  if (bucket_ > 0) {
    // Per bucket only the fastest point, the last of its bucket on the frontier, and the lightest
    // point of all (so the least-memory end stays exact).
    size_t kept = 0;
    for (size_t p = 0; p < s.chosen.size(); ++p) {
      if (p > 0 && p + 1 < s.chosen.size() &&
          std::floor(points[p + 1].memory / bucket_) == std::floor(points[p].memory / bucket_))
        continue;
      s.chosen[kept] = s.chosen[p], points[kept] = points[p];
      ++kept;
    }
    s.chosen.resize(kept), points.resize(kept);
  }
  out.assign(points.begin(), points.end());  // its own size: the byte budget counts capacity
  // Back: two ints per kept point, then the records of folds. A point of a value x without a fold
  // records (x * (k + 1) + multi + 1, position in multi's frontier), multi being the input with
  // several points (-1: none); one of a fold records (-1 - at, position in the last input), where
  // back[at..at+3) = (x, outer point, where the fold's table is), and the table holds the last input
  // then k input points per outer point (written once per fold, when a kept point needs it). No
  // per-value header: entries of wide tables mostly keep a few points.
  TW_ASSERT(static_cast<int64_t>(dv) * (k + 1) + k < (int64_t{1} << 31), "a point's record fits an int");
  s.fold_at.assign(s.num_folds, -1);  // -1: not written yet
  // The record's size first (one allocation of the right size: growing it was a twentieth of a search).
  size_t record = 2 * s.chosen.size();
  for (const Pick& pick : s.chosen) {
    const int32_t fold = s.chains[pick.chain].fold;
    if (fold < 0) continue;
    record += 3;
    if (s.fold_at[fold] < 0) s.fold_at[fold] = 0, record += 1 + s.folds[fold].inputs.size();
  }
  s.fold_at.assign(s.num_folds, -1);
  back.clear();
  back.reserve(record);
  back.resize(2 * s.chosen.size(), 0);
  for (size_t p = 0; p < s.chosen.size(); ++p) {
    const Pick& pick = s.chosen[p];
    const Chain& c = s.chains[pick.chain];
    back[2 * p + 1] = pick.pos;
    if (c.fold < 0) {
      back[2 * p] = c.x * (k + 1) + c.input + 1;
      continue;
    }
    if (s.fold_at[c.fold] < 0) {
      const Fold& fold = s.folds[c.fold];
      s.fold_at[c.fold] = static_cast<int32_t>(back.size());
      back.push_back(fold.last);
      back.insert(back.end(), fold.inputs.begin(), fold.inputs.end());
    }
    back[2 * p] = -1 - static_cast<int32_t>(back.size());
    back.push_back(c.x), back.push_back(pick.outer), back.push_back(s.fold_at[c.fold]);
  }
}

int FrontierSum::unroll(const Back& back, int point, int k, int* inputs) {
  const int32_t code = back[2 * static_cast<size_t>(point)], j = back[2 * static_cast<size_t>(point) + 1];
  for (int i = 0; i < k; ++i) inputs[i] = 0;
  if (code >= 0) {
    const int multi = code % (k + 1) - 1;
    if (multi >= 0) inputs[multi] = j;
    return code / (k + 1);
  }
  const int32_t* rec = back.data() + (-1 - static_cast<int64_t>(code));
  const int32_t* fold = back.data() + rec[2];
  for (int i = 0; i < k; ++i) inputs[i] = fold[1 + static_cast<size_t>(rec[1]) * k + i];
  inputs[fold[0]] = j;
  return rec[0];
}

}  // namespace tilewise::partition

// Memory pools (SwapAdvisor §4.3.1, §4.4.3): size classes of fixed-size objects, configured before the
// iteration, as MXNet's pool is. Encoded as two lists over TS, the problem's sorted unique tensor sizes:
// CLS[i] is the (1-based) class of size TS[i], monotone with steps of 0 or 1 (the paper's restriction
// of the search space from O(N^N) to O(2^N)); CNT[c-1] is the number of objects of class c, each as
// large as the largest size the class holds. The genetic search crosses and mutates pools here.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "swap/problem.h"

namespace tilewise::swap {

/// A pool: `cls` (one class per unique size, 1-based) and `cnt` (objects per class).
struct Pool {
  std::vector<int> cls;
  std::vector<int64_t> cnt;
  int classes() const { return cls.empty() ? 0 : cls.back(); }
  bool operator==(const Pool& o) const { return cls == o.cls && cnt == o.cnt; }
};

/// Object bytes of each class: the largest size mapped to it.
std::vector<int64_t> class_bytes(const Problem& p, const std::vector<int>& cls);
/// Bytes of all objects together.
int64_t pool_bytes(const Problem& p, const Pool& pool);
/// Per class, the most of its tensors one op holds at once: fewer objects and that op cannot run.
std::vector<int64_t> least_counts(const Problem& p, const std::vector<int>& cls);
/// Per class, how many tensors map to it: more objects than that are never used.
std::vector<int64_t> tensors_per_class(const Problem& p, const std::vector<int>& cls);

/// Throws SwapError for a CLS of the wrong length, not starting at 1 or not monotone by steps of 0 or
/// 1; a CNT of the wrong length or with a negative count; a class with fewer objects than some op
/// holds at once (naming the op and the counts that would do); a pool larger than the capacity.
void check_pool(const Problem& p, const Pool& pool);

/// Each size its own class, as many objects as tensors of that size, repaired to the capacity: the
/// pool `plan(pool=None)` uses, the schedule-only search keeps and the GA seeds with.
Pool default_pool(const Problem& p);
/// Each size its own class, counts in proportion to what `schedule` needs: per size the most of its
/// tensors alive at once (from first to last use; live-out activations to the end), all scaled by one
/// factor (never below the least counts) so that the pool fits the capacity; repaired. A GA seed.
Pool needs_pool(const Problem& p, const std::vector<int>& schedule);
/// Each size its own class and one object per tensor: memory as if unlimited (the ideal baseline).
Pool unlimited_pool(const Problem& p);

/// Fig. 4.6(a): CLS made monotone again by clamping every step to 0 or 1 (later classes shift along).
void repair_cls(std::vector<int>& cls);
/// §4.4.3: counts clamped to [least count, tensors of the class], then, while the pool exceeds the
/// capacity, every class above its least count gives up an equal share of the excess bytes (the paper
/// decreases counts "inverse-proportionally" to the class size). False when even the least counts
/// exceed the capacity.
bool repair_cnt(const Problem& p, Pool& pool);
/// A pool that fits: CLS and CNT repaired; a CLS whose least counts exceed the capacity is replaced by
/// the least pool's (Problem::least_pool), counts carried over through CNT_EXT.
Pool repaired(const Problem& p, Pool pool);

/// CNT_EXT (§4.4.3): per size, the count of its class.
std::vector<int64_t> extend(const Pool& pool);
/// CNT from CNT_EXT under `cls`: per class, the rounded mean of its sizes' entries.
std::vector<int64_t> contract(const std::vector<int>& cls, const std::vector<int64_t>& ext);

/// Fig. 4.6: CLS and CNT_EXT cut after `cut` sizes; the child takes `head`'s first part and `tail`'s
/// rest, then is repaired.
Pool crossover(const Problem& p, const Pool& head, const Pool& tail, int cut);
/// §4.4.3 mutation: each CLS step, with probability `probability`, flips between 0 and 1 (later
/// classes shift along; counts follow through CNT_EXT); each count, with the same probability, is
/// drawn from a Gaussian around it (sigma = max(1, count / 5)). Repaired.
Pool mutate(const Problem& p, const Pool& pool, double probability, std::mt19937_64& rng);
/// A random pool: each CLS step 0 or 1 with probability 1/2, each count uniform between its least
/// count and its tensors, repaired.
Pool random_pool(const Problem& p, std::mt19937_64& rng);

}  // namespace tilewise::swap

// ODSwap (odswap.h): an online LRU executor over a buddy allocator, recorded as an augmented graph.
#include "swap/odswap.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "swap/buddy.h"

namespace tilewise::swap {

namespace {

/// The allocator's unit: 256-byte alignment as CUDA's allocator, smaller when tensors are smaller.
int64_t unit_for(const Problem& p) {
  int64_t unit = 256;
  while (unit > 1 && unit > p.sizes().front()) unit /= 2;
  return unit;
}

class Executor {
 public:
  Executor(const Problem& p, const Schedule& s)
      : p_(p), s_(s), n_(static_cast<int>(s.size())), buddy_(p.capacity(), unit_for(p)) {
    const size_t nt = static_cast<size_t>(p.num_tensors());
    remaining_.assign(nt, 0);
    for (int o : s)
      for (int t : p.working_set(o)) ++remaining_[static_cast<size_t>(t)];
    uses_per_iteration_ = remaining_;
    offset_.assign(nt, -1);
    object_.assign(nt, -1);
    dirty_.assign(nt, 0);
    recent_.assign(nt, -1);
    stay_of_.assign(nt, -1);
    placed_at_.assign(nt, -1);
  }

  /// One iteration recorded into `out`; what stays in memory carries into the next call.
  void run(SwapPlan& out) {
    out = SwapPlan{};
    out.method = "odswap";
    out.schedule = s_;
    out.double_pass = true;
    out.memory_bytes = buddy_.capacity();
    out.outputs_ready.assign(static_cast<size_t>(n_), Ready{});
    remaining_ = uses_per_iteration_;
    copied_.assign(offset_.size(), -1);
    arrival_.assign(offset_.size(), -1);
    lru_.clear();
    // What the last iteration left: its parameters stay (new objects, same blocks), the rest is freed.
    for (size_t t = 0; t < offset_.size(); ++t) {
      if (offset_[t] < 0) continue;
      if (p_.tensors()[t].kind != TensorKind::kParameter) {
        buddy_.release(offset_[t], order(static_cast<int>(t)), Ready{});
        offset_[t] = -1;
        continue;
      }
      recent_[t] = -1;
      const int o = new_object(static_cast<int>(t), out);
      object_[t] = o;
      stay_of_[t] = static_cast<int>(out.stays.size());
      out.stays.push_back({static_cast<int>(t), o, Stay::kIterationStart, Stay::kIterationEnd, -1, -1});
      out.initial_residents.push_back(static_cast<int>(t));
      lru_.insert({recent_[t], static_cast<int>(t)});
    }
    buddy_.clear_ready();
    for (int k = 0; k < n_; ++k) step(k, out);
  }

 private:
  int order(int t) const { return buddy_.order_for(p_.tensors()[static_cast<size_t>(t)].bytes); }

  int new_object(int t, SwapPlan& out) {
    out.objects.push_back({offset_[static_cast<size_t>(t)], buddy_.block_bytes(order(t)), 0});
    return static_cast<int>(out.objects.size()) - 1;
  }

  /// Puts `t` into memory for the op at `k`, evicting LRU tensors when `evict`; false when it does not fit.
  bool place(int t, int k, bool evict, Ready& ready, SwapPlan& out) {
    const auto ts = static_cast<size_t>(t);
    for (;;) {
      const int64_t at = buddy_.allocate(order(t), ready);
      if (at >= 0) {
        offset_[ts] = at;
        object_[ts] = new_object(t, out);
        placed_at_[ts] = k;
        return true;
      }
      if (!evict) return false;
      // The least recently used tensor that this op does not hold and that has been used since it came;
      // failing that, a prefetched one, the one needed last.
      int victim = -1;
      for (const auto& [recent, v] : lru_)
        if (recent < k && !pinned(v)) {
          victim = v;
          break;
        }
      for (auto it = lru_.rbegin(); victim < 0 && it != lru_.rend(); ++it)
        if (!pinned(it->second)) victim = it->second;
      // Last: a smaller input of this op, which fragments the blocks the rest needs; it goes and comes
      // back (step() swaps it in again). One placed before this step first; never one the op writes.
      const Op& op = p_.ops()[static_cast<size_t>(s_[static_cast<size_t>(k)])];
      const int64_t bytes = p_.tensors()[ts].bytes;
      for (int pass = 0; pass < 2 && victim < 0; ++pass)
        for (const auto& [recent, v] : lru_) {
          const auto vs = static_cast<size_t>(v);
          if (pinned(v) && (pass || placed_at_[vs] != k) && p_.tensors()[vs].bytes < bytes &&
              std::find(op.outputs.begin(), op.outputs.end(), v) == op.outputs.end()) {
            victim = v;
            break;
          }
        }
      if (victim < 0) fail(k);
      evict_tensor(victim, k, t, out);
    }
  }

  bool pinned(int t) const {
    if (pinned_ == nullptr) return false;
    for (int u : *pinned_)
      if (u == t) return true;
    return false;
  }

  [[noreturn]] void fail(int k) const {
    const int op = s_[static_cast<size_t>(k)];
    std::string sizes;
    int64_t total = 0;
    for (int t : p_.working_set(op)) {
      const int64_t b = buddy_.block_bytes(order(t));
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
      total += b;
    }
    throw SwapError("ODSwap cannot run op '" + p_.ops()[static_cast<size_t>(op)].name + "': its inputs and outputs "
                    "take buddy blocks of " + sizes + " bytes (" + std::to_string(total) + " together), which a "
                    "buddy allocator over the capacity of " + std::to_string(p_.capacity()) +
                    " bytes cannot place even with everything else evicted");
  }

  void remove(int t, SwapPlan& out, Stay::Edge to, int to_index, const Ready& freed) {
    const auto ts = static_cast<size_t>(t);
    lru_.erase({recent_[ts], t});
    buddy_.release(offset_[ts], order(t), freed);
    offset_[ts] = -1;
    object_[ts] = -1;
    Stay& st = out.stays[static_cast<size_t>(stay_of_[ts])];
    st.to = to;
    st.to_index = to_index;
  }

  void evict_tensor(int v, int k, int newcomer, SwapPlan& out) {
    const auto vs = static_cast<size_t>(v);
    const int used = recent_[vs];
    if (used < 0) {  // resident since the last iteration, unused: nothing waits, nothing to copy
      out.evictions.push_back({v, newcomer, k, -1});
      remove(v, out, Stay::kIterationStart, -1, Ready{});
    } else if (used >= k) {  // prefetched for a later op: dropped once its copy in has landed
      const int j = arrival_[vs];
      out.evictions.push_back({v, newcomer, k, -1});
      remove(v, out, Stay::kSwapInEnd, j, Ready{-1, -1, j});
    } else if (dirty_[vs]) {
      const int j = static_cast<int>(out.swap_outs.size());
      out.swap_outs.push_back({v, object_[vs], used, k - 1});
      out.evictions.push_back({v, newcomer, k, j});
      dirty_[vs] = 0;
      copied_[vs] = j;
      remove(v, out, Stay::kSwapOutEnd, j, Ready{-1, j, -1});
    } else {
      out.evictions.push_back({v, newcomer, k, -1});
      remove(v, out, Stay::kOpEnd, used, Ready{used, -1, -1});
    }
  }

  void arrive(int t, int recent, SwapPlan& out, Stay::Edge from, int from_index) {
    const auto ts = static_cast<size_t>(t);
    recent_[ts] = recent;
    lru_.insert({recent, t});
    stay_of_[ts] = static_cast<int>(out.stays.size());
    out.stays.push_back({t, object_[ts], from, Stay::kIterationEnd, from_index, -1});
  }

  void swap_in(int t, int k, int position, Ready ready, SwapPlan& out) {
    const int j = static_cast<int>(out.swap_ins.size());
    ready.merge(Ready{-1, copied_[static_cast<size_t>(t)], -1});  // the host copy must be complete
    out.swap_ins.push_back({t, object_[static_cast<size_t>(t)], position, ready, k - 1});
    arrival_[static_cast<size_t>(t)] = j;
    dirty_[static_cast<size_t>(t)] = 0;
    // Prefetched: counts as used at its op, so LRU leaves it alone until then.
    arrive(t, position, out, Stay::kSwapInStart, j);
  }

  void step(int k, SwapPlan& out) {
    const int op = s_[static_cast<size_t>(k)];
    pinned_ = &p_.working_set(op);
    const std::vector<int>& inputs = p_.ops()[static_cast<size_t>(op)].inputs;
    const std::vector<int>& outputs = p_.ops()[static_cast<size_t>(op)].outputs;
    Ready ready;
    // Largest first, so that small blocks do not split the large ones the op still needs; again while
    // an input made room for a larger tensor (sizes shrink each round, so it ends).
    std::vector<int> missing;
    for (int round = 0;; ++round) {
      missing.clear();
      for (int t : *pinned_)
        if (offset_[static_cast<size_t>(t)] < 0) missing.push_back(t);
      if (missing.empty()) break;
      if (round > 4 * static_cast<int>(pinned_->size())) fail(k);
      std::stable_sort(missing.begin(), missing.end(), [&](int a, int b) {
        return p_.tensors()[static_cast<size_t>(a)].bytes > p_.tensors()[static_cast<size_t>(b)].bytes;
      });
      for (int t : missing) {
        if (offset_[static_cast<size_t>(t)] >= 0) continue;
        place(t, k, true, ready, out);
        if (std::find(inputs.begin(), inputs.end(), t) != inputs.end()) {
          swap_in(t, k, k, ready, out);
        } else {
          out.outputs_ready[static_cast<size_t>(k)].merge(ready);
          arrive(t, k, out, Stay::kOpStart, k);
        }
      }
    }
    for (int t : outputs) dirty_[static_cast<size_t>(t)] = 1;
    for (int t : *pinned_) {
      const auto ts = static_cast<size_t>(t);
      lru_.erase({recent_[ts], t});
      recent_[ts] = k;
      lru_.insert({k, t});
      const Tensor& x = p_.tensors()[ts];
      if (--remaining_[ts] == 0 && x.kind == TensorKind::kActivation && !x.live_out)
        remove(t, out, Stay::kOpEnd, k, Ready{k, -1, -1});
    }
    // The prefetcher, while this op runs: the next ops' inputs, in order, as long as they fit.
    for (int q = k + 1; q <= k + kOdswapLookahead && q < n_; ++q)
      for (int t : p_.ops()[static_cast<size_t>(s_[static_cast<size_t>(q)])].inputs) {
        const auto ts = static_cast<size_t>(t);
        // Only what the host holds: a parameter, or an activation copied out (not one yet to be made).
        if (offset_[ts] >= 0 || (p_.tensors()[ts].kind == TensorKind::kActivation && copied_[ts] < 0)) continue;
        if (!place(t, k, false, ready, out)) return;
        swap_in(t, k, q, ready, out);
      }
  }

  const Problem& p_;
  const Schedule& s_;
  const int n_;
  Buddy buddy_;
  const std::vector<int>* pinned_ = nullptr;
  std::vector<int> remaining_, uses_per_iteration_, object_, recent_, stay_of_;
  std::vector<int> copied_;  ///< per tensor: its last swap-out in this iteration, -1 none
  std::vector<int> arrival_;  ///< per tensor: the swap-in that brought it, for a prefetch dropped unused
  std::vector<int> placed_at_;  ///< per tensor: the step that last placed it
  std::vector<int64_t> offset_;
  std::vector<char> dirty_;
  std::set<std::pair<int, int>> lru_;  ///< (last use, tensor) of every tensor in memory
};

}  // namespace

SwapPlan odswap_plan(const Problem& p, const Schedule& schedule) {
  check_schedule(p, schedule);
  Executor executor(p, schedule);
  SwapPlan plan;
  executor.run(plan);  // the first iteration, from an empty device
  executor.run(plan);  // the second, timed
  std::vector<Stay> kept;
  for (const Stay& st : plan.stays)
    if (!(st.from == Stay::kIterationStart && st.to == Stay::kIterationStart)) kept.push_back(st);
  plan.stays = std::move(kept);
  return plan;
}

}  // namespace tilewise::swap

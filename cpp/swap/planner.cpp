// The swap planner (planner.h; SwapAdvisor §4.3.2): one scan of the schedule per pass, choosing
// victims by estimated stall and Belady's rule, recording the augmented graph as it goes.
#include "swap/planner.h"

#include <deque>
#include <limits>
#include <stdexcept>
#include <tuple>

namespace tilewise::swap {

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

/// A parameter in memory at a pass boundary.
struct Resident {
  int tensor = -1, object = -1;
  bool dirty = false;
};

/// What a pass leaves behind: the parameters in memory, and which of its initial residents it evicted
/// before using them (they were never needed in memory at the start).
struct PassEnd {
  std::vector<Resident> params;
  std::vector<char> removed;  ///< per tensor
};

class Planner {
 public:
  Planner(const Problem& p, const Schedule& s, const Pool& pool, bool double_pass)
      : p_(p), s_(s), double_pass_(double_pass), n_(static_cast<int>(s.size())) {
    const std::vector<int64_t> bytes = class_bytes(p, pool.cls);
    int64_t offset = 0;
    for (size_t c = 0; c < pool.cnt.size(); ++c)
      for (int64_t k = 0; k < pool.cnt[c]; ++k) {
        objects_.push_back({offset, bytes[c], static_cast<int>(c) + 1});
        offset += bytes[c];
      }
    memory_bytes_ = offset;
    classes_ = pool.classes();
    const size_t nt = static_cast<size_t>(p.num_tensors());
    class_of_.resize(nt);
    for (size_t t = 0; t < nt; ++t) class_of_[t] = pool.cls[static_cast<size_t>(p.size_index(static_cast<int>(t)))] - 1;
    // Uses per tensor in schedule order (CSR), and the compute time before each position.
    use_offset_.assign(nt + 1, 0);
    for (int o : s)
      for (int t : p.working_set(o)) ++use_offset_[static_cast<size_t>(t) + 1];
    for (size_t t = 0; t < nt; ++t) use_offset_[t + 1] += use_offset_[t];
    uses_.resize(static_cast<size_t>(use_offset_[nt]));
    std::vector<int> fill(use_offset_.begin(), use_offset_.end() - 1);
    before_.assign(static_cast<size_t>(n_) + 1, 0);
    for (int k = 0; k < n_; ++k) {
      const int o = s[static_cast<size_t>(k)];
      for (int t : p.working_set(o)) uses_[static_cast<size_t>(fill[static_cast<size_t>(t)]++)] = k;
      before_[static_cast<size_t>(k) + 1] = before_[static_cast<size_t>(k)] + p.ops()[static_cast<size_t>(o)].seconds;
    }
  }

  void start(SwapPlan& out) const {
    out.objects = objects_;
    out.memory_bytes = memory_bytes_;
    out.double_pass = double_pass_;
    out.schedule = s_;
  }

  /// One scan of the schedule from `initial` (parameters in memory at the start), recorded into `out`.
  PassEnd run(const std::vector<Resident>& initial, SwapPlan& out) {
    reset(initial, out);
    for (int k = 0; k < n_; ++k) step(k, out);
    PassEnd end;
    end.removed = removed_;
    for (size_t t = 0; t < object_of_.size(); ++t)
      if (object_of_[t] >= 0 && p_.tensors()[t].kind == TensorKind::kParameter)
        end.params.push_back({static_cast<int>(t), object_of_[t], dirty_[t] != 0});
    // Initial residents evicted unused never stayed: drop their empty stays.
    std::vector<Stay> kept;
    for (const Stay& st : out.stays)
      if (!(st.from == Stay::kIterationStart && st.to == Stay::kIterationStart)) kept.push_back(st);
    out.stays = std::move(kept);
    return end;
  }

  /// Makes the second pass's plan repeatable (planner.h, double pass): `start` are the parameters the
  /// pass began with, `end` what it left.
  void close_iteration(const std::vector<Resident>& start, const PassEnd& end, SwapPlan& out) const {
    std::vector<int> end_object(object_of_.size(), -1);
    for (const Resident& r : end.params) end_object[static_cast<size_t>(r.tensor)] = r.object;
    std::vector<char> kept(object_of_.size(), 0);
    std::vector<SwapIn> head;
    for (const Resident& r : start) {
      const auto t = static_cast<size_t>(r.tensor);
      if (end.removed[t]) continue;
      if (end_object[t] == r.object) {
        kept[t] = 1;
        out.initial_residents.push_back(r.tensor);
        continue;
      }
      // Not back in its object at the end: it starts on the host and comes in before its first use.
      // Its object held nothing else before it left, so the copy waits for nothing.
      head.push_back({r.tensor, r.object, uses_[static_cast<size_t>(use_offset_[t])], Ready{}, -1});
    }
    if (!head.empty()) {
      // Into stream order (by position, the new ones first at a tie); stays follow their swap-ins.
      std::vector<std::pair<int, int>> order;  // (position, old index), head entries as -1 - k
      for (size_t k = 0; k < head.size(); ++k) order.push_back({head[k].position, -1 - static_cast<int>(k)});
      for (size_t k = 0; k < out.swap_ins.size(); ++k) order.push_back({out.swap_ins[k].position, static_cast<int>(k)});
      std::stable_sort(order.begin(), order.end(), [](const std::pair<int, int>& a, const std::pair<int, int>& b) {
        if (a.first != b.first) return a.first < b.first;
        return a.second < 0 && b.second >= 0;
      });
      std::vector<SwapIn> merged;
      std::vector<int> new_index(out.swap_ins.size()), head_index(head.size());
      for (const auto& [pos, k] : order) {
        if (k < 0) head_index[static_cast<size_t>(-1 - k)] = static_cast<int>(merged.size());
        else new_index[static_cast<size_t>(k)] = static_cast<int>(merged.size());
        merged.push_back(k < 0 ? head[static_cast<size_t>(-1 - k)] : out.swap_ins[static_cast<size_t>(k)]);
      }
      for (Stay& st : out.stays) {
        if (st.from == Stay::kSwapInStart) {
          st.from_index = new_index[static_cast<size_t>(st.from_index)];
        } else if (st.from == Stay::kIterationStart) {
          for (size_t k = 0; k < head.size(); ++k)
            if (head[k].tensor == st.tensor) {
              st.from = Stay::kSwapInStart;
              st.from_index = head_index[k];
            }
        }
      }
      out.swap_ins = std::move(merged);
    }
    // Updated parameters in memory at the end that the next iteration does not expect there: copied out.
    for (const Resident& r : end.params) {
      const auto t = static_cast<size_t>(r.tensor);
      if (kept[t] || !r.dirty) continue;
      const int k = static_cast<int>(out.swap_outs.size());
      out.swap_outs.push_back({r.tensor, r.object, last_use_[t], -1});
      out.evictions.push_back({r.tensor, -1, n_, k});
      for (Stay& st : out.stays)
        if (st.tensor == r.tensor && st.to == Stay::kIterationEnd) {
          st.to = Stay::kSwapOutEnd;
          st.to_index = k;
        }
    }
  }

 private:
  void reset(const std::vector<Resident>& initial, SwapPlan& out) {
    const size_t nt = static_cast<size_t>(p_.num_tensors());
    start(out);
    out.swap_ins.clear();
    out.swap_outs.clear();
    out.evictions.clear();
    out.stays.clear();
    out.initial_residents.clear();
    out.outputs_ready.assign(static_cast<size_t>(n_), Ready{});
    holder_.assign(objects_.size(), -1);
    ready_.assign(objects_.size(), Ready{});
    free_.assign(static_cast<size_t>(classes_), {});
    resident_.assign(static_cast<size_t>(classes_), {});
    object_of_.assign(nt, -1);
    slot_.assign(nt, -1);
    dirty_.assign(nt, 0);
    last_use_.assign(nt, -1);
    stay_of_.assign(nt, -1);
    removed_.assign(nt, 0);
    copied_.assign(nt, -1);
    pinned_.assign(nt, -1);
    next_.assign(use_offset_.begin(), use_offset_.end() - 1);
    for (const Resident& r : initial) {
      place(r.tensor, r.object, out, Stay::kIterationStart, -1);
      dirty_[static_cast<size_t>(r.tensor)] = r.dirty;
    }
    for (size_t o = 0; o < objects_.size(); ++o)
      if (holder_[o] < 0) free_[static_cast<size_t>(objects_[o].size_class - 1)].push_back(static_cast<int>(o));
  }

  void place(int t, int object, SwapPlan& out, Stay::Edge from, int from_index) {
    const auto ts = static_cast<size_t>(t);
    holder_[static_cast<size_t>(object)] = t;
    object_of_[ts] = object;
    auto& list = resident_[static_cast<size_t>(class_of_[ts])];
    slot_[ts] = static_cast<int>(list.size());
    list.push_back(t);
    stay_of_[ts] = static_cast<int>(out.stays.size());
    out.stays.push_back({t, object, from, Stay::kIterationEnd, from_index, -1});
  }

  /// Takes `t` out of memory; its stay ends at (to, to_index).
  void unplace(int t, SwapPlan& out, Stay::Edge to, int to_index) {
    const auto ts = static_cast<size_t>(t);
    holder_[static_cast<size_t>(object_of_[ts])] = -1;
    auto& list = resident_[static_cast<size_t>(class_of_[ts])];
    const int k = slot_[ts];
    list[static_cast<size_t>(k)] = list.back();
    slot_[static_cast<size_t>(list.back())] = k;
    list.pop_back();
    object_of_[ts] = -1;
    Stay& st = out.stays[static_cast<size_t>(stay_of_[ts])];
    st.to = to;
    st.to_index = to_index;
  }

  int64_t next_use(int t) const {
    const auto ts = static_cast<size_t>(t);
    if (next_[ts] < use_offset_[ts + 1]) return uses_[static_cast<size_t>(next_[ts])];
    // Past its last use in the iteration: a parameter is next used in the next iteration.
    if (double_pass_ && p_.tensors()[ts].kind == TensorKind::kParameter)
      return n_ + uses_[static_cast<size_t>(use_offset_[ts])];
    return kNever;
  }

  /// The victim for a `newcomer` of class c at position k that brings `in_bytes` over the link.
  int choose(int c, int k, int64_t in_bytes) const {
    const double rate = p_.host().one_way;
    int best = -1;
    std::tuple<double, int64_t, int, int, int> best_key;
    for (int v : resident_[static_cast<size_t>(c)]) {
      const auto vs = static_cast<size_t>(v);
      if (pinned_[vs] == k) continue;
      const int lu = last_use_[vs];
      const double gap = before_[static_cast<size_t>(k)] - before_[static_cast<size_t>(lu + 1)];
      const bool copy = dirty_[vs] && lu >= 0;
      const int64_t moved = in_bytes + (copy ? p_.tensors()[vs].bytes : 0);
      const double stall = std::max(0.0, static_cast<double>(moved) / rate - gap);
      // Least stall; then furthest next use (Belady); unchanged first; least recently used; index.
      const auto key = std::make_tuple(stall, -next_use(v), copy ? 1 : 0, lu, v);
      if (best < 0 || key < best_key) {
        best = v;
        best_key = key;
      }
    }
    if (best < 0)
      throw std::logic_error("swap planner: no object of class " + std::to_string(c + 1) + " to evict for op '" +
                             p_.ops()[static_cast<size_t>(s_[static_cast<size_t>(k)])].name +
                             "' (the pool was not checked against its working set)");
    return best;
  }

  /// An object of `t`'s class for the op at position k: a free one, else one evicted for it.
  int acquire(int t, int k, int64_t in_bytes, SwapPlan& out) {
    const int c = class_of_[static_cast<size_t>(t)];
    auto& fifo = free_[static_cast<size_t>(c)];
    if (!fifo.empty()) {
      const int o = fifo.front();
      fifo.pop_front();
      return o;
    }
    const int v = choose(c, k, in_bytes);
    const auto vs = static_cast<size_t>(v);
    const int o = object_of_[vs];
    const int lu = last_use_[vs];
    if (lu < 0) {
      // An initial resident never used: it need not have been in memory at all.
      removed_[vs] = 1;
      unplace(v, out, Stay::kIterationStart, -1);
      ready_[static_cast<size_t>(o)] = Ready{};
      out.evictions.push_back({v, t, k, -1});
    } else if (dirty_[vs]) {
      const int j = static_cast<int>(out.swap_outs.size());
      out.swap_outs.push_back({v, o, lu, -1});
      unplace(v, out, Stay::kSwapOutEnd, j);
      ready_[static_cast<size_t>(o)] = Ready{-1, j, -1};
      dirty_[vs] = 0;
      copied_[vs] = j;
      out.evictions.push_back({v, t, k, j});
    } else {
      unplace(v, out, Stay::kOpEnd, lu);
      ready_[static_cast<size_t>(o)] = Ready{lu, -1, -1};
      out.evictions.push_back({v, t, k, -1});
    }
    return o;
  }

  void step(int k, SwapPlan& out) {
    const Op& op = p_.ops()[static_cast<size_t>(s_[static_cast<size_t>(k)])];
    const std::vector<int>& working = p_.working_set(s_[static_cast<size_t>(k)]);
    for (int t : working) pinned_[static_cast<size_t>(t)] = k;
    for (int t : op.inputs) {
      const auto ts = static_cast<size_t>(t);
      if (object_of_[ts] >= 0) continue;
      const int o = acquire(t, k, p_.tensors()[ts].bytes, out);
      const int j = static_cast<int>(out.swap_ins.size());
      Ready after = ready_[static_cast<size_t>(o)];
      after.merge(Ready{-1, copied_[ts], -1});  // its copy on the host must be complete (another object may free first)
      out.swap_ins.push_back({t, o, k, after, -1});
      place(t, o, out, Stay::kSwapInStart, j);
      dirty_[ts] = 0;
    }
    Ready& outputs = out.outputs_ready[static_cast<size_t>(k)];
    for (int t : op.outputs) {
      const auto ts = static_cast<size_t>(t);
      if (object_of_[ts] < 0) {
        const int o = acquire(t, k, 0, out);
        outputs.merge(ready_[static_cast<size_t>(o)]);
        place(t, o, out, Stay::kOpStart, k);
      }
      dirty_[ts] = 1;  // new contents the host lacks (an activation, an updated parameter)
    }
    for (int t : working) {
      const auto ts = static_cast<size_t>(t);
      last_use_[ts] = k;
      ++next_[ts];
      const Tensor& x = p_.tensors()[ts];
      if (x.kind == TensorKind::kActivation && !x.live_out && next_[ts] == use_offset_[ts + 1]) {
        // Dead: its object is free once this op ends.
        const int o = object_of_[ts];
        unplace(t, out, Stay::kOpEnd, k);
        ready_[static_cast<size_t>(o)] = Ready{k, -1, -1};
        free_[static_cast<size_t>(class_of_[ts])].push_back(o);
      }
    }
  }

  const Problem& p_;
  const Schedule& s_;
  const bool double_pass_;
  const int n_;
  std::vector<MemoryObject> objects_;
  int64_t memory_bytes_ = 0;
  int classes_ = 0;
  std::vector<int> class_of_;
  std::vector<int> use_offset_, uses_;
  std::vector<double> before_;
  // Pass state.
  std::vector<int> holder_;
  std::vector<Ready> ready_;
  std::vector<std::deque<int>> free_;
  std::vector<std::vector<int>> resident_;
  std::vector<int> object_of_, slot_, last_use_, stay_of_, pinned_, next_;
  std::vector<int> copied_;  ///< per tensor: its last swap-out in this pass, -1 none
  std::vector<char> dirty_, removed_;
};

}  // namespace

SwapPlan plan_swaps(const Problem& p, const Schedule& schedule, const Pool& pool, bool double_pass, bool checked) {
  if (checked) {
    check_schedule(p, schedule);
    check_pool(p, pool);
  }
  Planner planner(p, schedule, pool, double_pass);
  SwapPlan plan;
  plan.method = "swapadvisor";
  plan.pool = pool;
  if (!double_pass) {
    planner.run({}, plan);
    return plan;
  }
  SwapPlan first;
  std::vector<Resident> start = planner.run({}, first).params;
  const PassEnd end = planner.run(start, plan);
  planner.close_iteration(start, end, plan);
  return plan;
}

SwapPlan ideal_plan(const Problem& p, const Schedule& schedule) {
  check_schedule(p, schedule);
  SwapPlan plan = plan_swaps(p, schedule, unlimited_pool(p), true, false);
  plan.method = "ideal";
  return plan;
}

}  // namespace tilewise::swap

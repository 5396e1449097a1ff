// The swap planner (planner.h; SwapAdvisor §4.3.2): one scan of the schedule per pass, choosing
// victims by estimated stall and Belady's rule, recording the augmented graph as it goes.
//
// It is the search's fitness with the simulation, run for every individual, so its state is laid out
// for that: it reads ops and tensors from the problem's flat arrays (an op's working set, inputs and
// outputs side by side; 16-byte tensor facts), a tensor's pass state is one record, each class's
// residents are a dense array holding what choosing a victim compares (kept current as tensors are
// used), and a thread's buffers are reused from one plan to the next.
#include "swap/planner.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

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

/// A tensor's state during a pass.
struct Live {
  int object = -1;    ///< its object while in memory, else -1
  int slot = -1;      ///< its index in its class's resident list while in memory
  int last_use = -1;  ///< position of its last use so far in this pass
  int next = 0;       ///< index into uses of its next use
  int stay = -1;      ///< its current stay in the plan
  int pinned = -1;    ///< position whose op holds it
  int copied = -1;    ///< its last swap-out in this pass, -1 none
  char dirty = 0;     ///< the host's copy is not current (a new activation, an updated parameter)
  char removed = 0;   ///< an initial resident evicted before its first use
};

/// A resident tensor as choosing a victim sees it (planner.h's key), kept current while it stays.
struct Candidate {
  int tensor = -1;
  int pinned = -1;
  int last_use = -1;
  int copy = 0;          ///< evicting it copies it out (changed since it came in, and used)
  int64_t next_use = 0;  ///< Belady: the position of its next use
  double since = 0;      ///< compute time before the position after its last use
  int64_t bytes = 0;
};

/// What a thread's planner keeps between plans (sized anew, allocated once).
struct Workspace {
  std::vector<MemoryObject> objects;
  std::vector<int> class_of, use_offset, uses, fill;
  std::vector<double> before;
  std::vector<int> holder;
  std::vector<Ready> ready;
  std::vector<std::vector<int>> free;  ///< per class: a FIFO of free objects from free_head
  std::vector<size_t> free_head;
  std::vector<std::vector<Candidate>> resident;
  std::vector<Live> live;
  SwapPlan first;  ///< the first pass's record of the double pass
};

class Planner {
 public:
  Planner(const Problem& p, const Schedule& s, const Pool& pool, bool double_pass, Workspace& w)
      : p_(p), s_(s), double_pass_(double_pass), n_(static_cast<int>(s.size())), w_(w) {
    const std::vector<int64_t> bytes = class_bytes(p, pool.cls);
    int64_t offset = 0;
    w.objects.clear();
    for (size_t c = 0; c < pool.cnt.size(); ++c)
      for (int64_t k = 0; k < pool.cnt[c]; ++k) {
        w.objects.push_back({offset, bytes[c], static_cast<int>(c) + 1});
        offset += bytes[c];
      }
    memory_bytes_ = offset;
    classes_ = pool.classes();
    const size_t nt = static_cast<size_t>(p.num_tensors());
    w.class_of.resize(nt);
    for (size_t t = 0; t < nt; ++t) w.class_of[t] = pool.cls[static_cast<size_t>(p.size_index(static_cast<int>(t)))] - 1;
    // Uses per tensor in schedule order (CSR), and the compute time before each position.
    w.use_offset.assign(nt + 1, 0);
    for (int o : s)
      for (int t : p.working_flat(o)) ++w.use_offset[static_cast<size_t>(t) + 1];
    for (size_t t = 0; t < nt; ++t) w.use_offset[t + 1] += w.use_offset[t];
    w.uses.resize(static_cast<size_t>(w.use_offset[nt]));
    w.fill.assign(w.use_offset.begin(), w.use_offset.end() - 1);
    w.before.assign(static_cast<size_t>(n_) + 1, 0);
    for (int k = 0; k < n_; ++k) {
      const int o = s[static_cast<size_t>(k)];
      for (int t : p.working_flat(o)) w.uses[static_cast<size_t>(w.fill[static_cast<size_t>(t)]++)] = k;
      w.before[static_cast<size_t>(k) + 1] = w.before[static_cast<size_t>(k)] + p.op_seconds()[static_cast<size_t>(o)];
    }
  }

  /// One scan of the schedule from `initial` (parameters in memory at the start), recorded into `out`.
  PassEnd run(const std::vector<Resident>& initial, SwapPlan& out) {
    reset(initial, out);
    for (int k = 0; k < n_; ++k) step(k, out);
    PassEnd end;
    const size_t nt = w_.live.size();
    end.removed.resize(nt);
    for (size_t t = 0; t < nt; ++t) {
      const Live& x = w_.live[t];
      end.removed[t] = x.removed;
      if (x.object >= 0 && p_.facts()[t].parameter)
        end.params.push_back({static_cast<int>(t), x.object, x.dirty != 0});
    }
    // Initial residents evicted unused never stayed: drop their empty stays.
    out.stays.erase(std::remove_if(out.stays.begin(), out.stays.end(),
                                   [](const Stay& st) {
                                     return st.from == Stay::kIterationStart && st.to == Stay::kIterationStart;
                                   }),
                    out.stays.end());
    return end;
  }

  /// Makes the second pass's plan repeatable (planner.h, double pass): `start` are the parameters the
  /// pass began with, `end` what it left.
  void close_iteration(const std::vector<Resident>& start, const PassEnd& end, SwapPlan& out) const {
    const size_t nt = w_.live.size();
    std::vector<int> end_object(nt, -1);
    for (const Resident& r : end.params) end_object[static_cast<size_t>(r.tensor)] = r.object;
    std::vector<char> kept(nt, 0);
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
      head.push_back({r.tensor, r.object, w_.uses[static_cast<size_t>(w_.use_offset[t])], Ready{}, -1});
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
      std::vector<int> head_of(nt, -1);  // tensor -> its entry in head
      for (size_t k = 0; k < head.size(); ++k) head_of[static_cast<size_t>(head[k].tensor)] = static_cast<int>(k);
      for (Stay& st : out.stays) {
        if (st.from == Stay::kSwapInStart) {
          st.from_index = new_index[static_cast<size_t>(st.from_index)];
        } else if (st.from == Stay::kIterationStart && head_of[static_cast<size_t>(st.tensor)] >= 0) {
          st.from = Stay::kSwapInStart;
          st.from_index = head_index[static_cast<size_t>(head_of[static_cast<size_t>(st.tensor)])];
        }
      }
      out.swap_ins = std::move(merged);
    }
    // Updated parameters in memory at the end that the next iteration does not expect there: copied out.
    std::vector<int> copy_out(nt, -1);  // tensor -> its swap-out here
    for (const Resident& r : end.params) {
      const auto t = static_cast<size_t>(r.tensor);
      if (kept[t] || !r.dirty) continue;
      const int k = static_cast<int>(out.swap_outs.size());
      out.swap_outs.push_back({r.tensor, r.object, w_.live[t].last_use, -1});
      out.evictions.push_back({r.tensor, -1, n_, k});
      copy_out[t] = k;
    }
    for (Stay& st : out.stays)
      if (st.to == Stay::kIterationEnd && copy_out[static_cast<size_t>(st.tensor)] >= 0) {
        st.to = Stay::kSwapOutEnd;
        st.to_index = copy_out[static_cast<size_t>(st.tensor)];
      }
  }

  void start(SwapPlan& out) const {
    out.objects = w_.objects;
    out.memory_bytes = memory_bytes_;
    out.double_pass = double_pass_;
    out.schedule = s_;
  }

 private:
  void reset(const std::vector<Resident>& initial, SwapPlan& out) {
    const size_t nt = static_cast<size_t>(p_.num_tensors());
    const size_t nobj = w_.objects.size();
    start(out);
    out.swap_ins.clear();
    out.swap_outs.clear();
    out.evictions.clear();
    out.stays.clear();
    out.initial_residents.clear();
    out.outputs_ready.assign(static_cast<size_t>(n_), Ready{});
    w_.holder.assign(nobj, -1);
    w_.ready.assign(nobj, Ready{});
    if (w_.free.size() < static_cast<size_t>(classes_)) w_.free.resize(static_cast<size_t>(classes_));
    if (w_.resident.size() < static_cast<size_t>(classes_)) w_.resident.resize(static_cast<size_t>(classes_));
    for (int c = 0; c < classes_; ++c) {
      w_.free[static_cast<size_t>(c)].clear();
      w_.resident[static_cast<size_t>(c)].clear();
    }
    w_.free_head.assign(static_cast<size_t>(classes_), 0);
    w_.live.assign(nt, Live{});
    for (size_t t = 0; t < nt; ++t) w_.live[t].next = w_.use_offset[t];
    for (const Resident& r : initial) {
      Live& x = w_.live[static_cast<size_t>(r.tensor)];
      x.dirty = r.dirty;
      place(r.tensor, r.object, out, Stay::kIterationStart, -1);
    }
    for (size_t o = 0; o < nobj; ++o)
      if (w_.holder[o] < 0) w_.free[static_cast<size_t>(w_.objects[o].size_class - 1)].push_back(static_cast<int>(o));
  }

  int64_t next_use(int t) const {
    const auto ts = static_cast<size_t>(t);
    const int next = w_.live[ts].next;
    if (next < w_.use_offset[ts + 1]) return w_.uses[static_cast<size_t>(next)];
    // Past its last use in the iteration: a parameter is next used in the next iteration.
    if (double_pass_ && p_.facts()[ts].parameter)
      return n_ + w_.uses[static_cast<size_t>(w_.use_offset[ts])];
    return kNever;
  }

  /// Brings t's candidate record up to date with its pass state (it is resident).
  void refresh(int t) {
    const Live& x = w_.live[static_cast<size_t>(t)];
    Candidate& c = w_.resident[static_cast<size_t>(w_.class_of[static_cast<size_t>(t)])][static_cast<size_t>(x.slot)];
    c.pinned = x.pinned;
    c.last_use = x.last_use;
    c.copy = x.dirty && x.last_use >= 0;
    c.next_use = next_use(t);
    c.since = w_.before[static_cast<size_t>(x.last_use + 1)];
  }

  void place(int t, int object, SwapPlan& out, Stay::Edge from, int from_index) {
    const auto ts = static_cast<size_t>(t);
    Live& x = w_.live[ts];
    w_.holder[static_cast<size_t>(object)] = t;
    x.object = object;
    auto& list = w_.resident[static_cast<size_t>(w_.class_of[ts])];
    x.slot = static_cast<int>(list.size());
    Candidate c;
    c.tensor = t;
    c.bytes = p_.facts()[ts].bytes;
    list.push_back(c);
    refresh(t);
    x.stay = static_cast<int>(out.stays.size());
    out.stays.push_back({t, object, from, Stay::kIterationEnd, from_index, -1});
  }

  /// Takes `t` out of memory; its stay ends at (to, to_index).
  void unplace(int t, SwapPlan& out, Stay::Edge to, int to_index) {
    const auto ts = static_cast<size_t>(t);
    Live& x = w_.live[ts];
    w_.holder[static_cast<size_t>(x.object)] = -1;
    auto& list = w_.resident[static_cast<size_t>(w_.class_of[ts])];
    const int k = x.slot;
    list[static_cast<size_t>(k)] = list.back();
    w_.live[static_cast<size_t>(list.back().tensor)].slot = k;
    list.pop_back();
    x.object = -1;
    Stay& st = out.stays[static_cast<size_t>(x.stay)];
    st.to = to;
    st.to_index = to_index;
  }

  /// The victim for a `newcomer` of class c at position k that brings `in_bytes` over the link.
  int choose(int c, int k, int64_t in_bytes) const {
    const double rate = p_.host().one_way;
    const double now = w_.before[static_cast<size_t>(k)];
    const Candidate* best = nullptr;
    double best_stall = 0;
    // Least stall; then furthest next use (Belady); unchanged first; least recently used; index.
    for (const Candidate& v : w_.resident[static_cast<size_t>(c)]) {
      if (v.pinned == k) continue;
      const double gap = now - v.since;
      const int64_t moved = in_bytes + (v.copy ? v.bytes : 0);
      const double stall = std::max(0.0, static_cast<double>(moved) / rate - gap);
      if (best == nullptr || stall < best_stall ||
          (stall == best_stall &&
           (v.next_use != best->next_use ? v.next_use > best->next_use
            : v.copy != best->copy       ? v.copy < best->copy
            : v.last_use != best->last_use ? v.last_use < best->last_use
                                           : v.tensor < best->tensor))) {
        best = &v;
        best_stall = stall;
      }
    }
    if (best == nullptr)
      throw std::logic_error("swap planner: no object of class " + std::to_string(c + 1) + " to evict for op '" +
                             p_.ops()[static_cast<size_t>(s_[static_cast<size_t>(k)])].name +
                             "' (the pool was not checked against its working set)");
    return best->tensor;
  }

  /// An object of `t`'s class for the op at position k: a free one, else one evicted for it.
  int acquire(int t, int k, int64_t in_bytes, SwapPlan& out) {
    const int c = w_.class_of[static_cast<size_t>(t)];
    std::vector<int>& fifo = w_.free[static_cast<size_t>(c)];
    size_t& head = w_.free_head[static_cast<size_t>(c)];
    if (head < fifo.size()) {
      const int o = fifo[head++];
      if (head == fifo.size()) fifo.clear(), head = 0;
      return o;
    }
    const int v = choose(c, k, in_bytes);
    const auto vs = static_cast<size_t>(v);
    Live& x = w_.live[vs];
    const int o = x.object;
    const int lu = x.last_use;
    if (lu < 0) {
      // An initial resident never used: it need not have been in memory at all.
      x.removed = 1;
      unplace(v, out, Stay::kIterationStart, -1);
      w_.ready[static_cast<size_t>(o)] = Ready{};
      out.evictions.push_back({v, t, k, -1});
    } else if (x.dirty) {
      const int j = static_cast<int>(out.swap_outs.size());
      out.swap_outs.push_back({v, o, lu, -1});
      unplace(v, out, Stay::kSwapOutEnd, j);
      w_.ready[static_cast<size_t>(o)] = Ready{-1, j, -1};
      x.dirty = 0;
      x.copied = j;
      out.evictions.push_back({v, t, k, j});
    } else {
      unplace(v, out, Stay::kOpEnd, lu);
      w_.ready[static_cast<size_t>(o)] = Ready{lu, -1, -1};
      out.evictions.push_back({v, t, k, -1});
    }
    return o;
  }

  void step(int k, SwapPlan& out) {
    const int op = s_[static_cast<size_t>(k)];
    const IndexRange working = p_.working_flat(op);
    for (int t : working) {
      Live& x = w_.live[static_cast<size_t>(t)];
      x.pinned = k;
      if (x.object >= 0)
        w_.resident[static_cast<size_t>(w_.class_of[static_cast<size_t>(t)])][static_cast<size_t>(x.slot)].pinned = k;
    }
    for (int t : p_.inputs_flat(op)) {
      const auto ts = static_cast<size_t>(t);
      if (w_.live[ts].object >= 0) continue;
      const int o = acquire(t, k, p_.facts()[ts].bytes, out);
      const int j = static_cast<int>(out.swap_ins.size());
      Ready after = w_.ready[static_cast<size_t>(o)];
      after.merge(Ready{-1, w_.live[ts].copied, -1});  // its copy on the host must be complete (another object may free first)
      out.swap_ins.push_back({t, o, k, after, -1});
      w_.live[ts].dirty = 0;
      place(t, o, out, Stay::kSwapInStart, j);
    }
    Ready& outputs = out.outputs_ready[static_cast<size_t>(k)];
    for (int t : p_.outputs_flat(op)) {
      const auto ts = static_cast<size_t>(t);
      if (w_.live[ts].object < 0) {
        const int o = acquire(t, k, 0, out);
        outputs.merge(w_.ready[static_cast<size_t>(o)]);
        place(t, o, out, Stay::kOpStart, k);
      }
      w_.live[ts].dirty = 1;  // new contents the host lacks (an activation, an updated parameter)
    }
    for (int t : working) {
      const auto ts = static_cast<size_t>(t);
      Live& x = w_.live[ts];
      x.last_use = k;
      ++x.next;
      if (p_.facts()[ts].dies && x.next == w_.use_offset[ts + 1]) {
        // Dead: its object is free once this op ends.
        const int o = x.object;
        unplace(t, out, Stay::kOpEnd, k);
        w_.ready[static_cast<size_t>(o)] = Ready{k, -1, -1};
        w_.free[static_cast<size_t>(w_.class_of[ts])].push_back(o);
      } else {
        refresh(t);
      }
    }
  }

  const Problem& p_;
  const Schedule& s_;
  const bool double_pass_;
  const int n_;
  Workspace& w_;
  int64_t memory_bytes_ = 0;
  int classes_ = 0;
};

}  // namespace

SwapPlan plan_swaps(const Problem& p, const Schedule& schedule, const Pool& pool, bool double_pass, bool checked) {
  if (checked) {
    check_schedule(p, schedule);
    check_pool(p, pool);
  }
  // Per thread, so that the search's workers plan without allocating once warm.
  thread_local Workspace workspace;
  Planner planner(p, schedule, pool, double_pass, workspace);
  SwapPlan plan;
  plan.method = "swapadvisor";
  plan.pool = pool;
  if (!double_pass) {
    planner.run({}, plan);
    return plan;
  }
  std::vector<Resident> start = planner.run({}, workspace.first).params;
  // The second pass makes about as many records as the first: room for them at once.
  const SwapPlan& first = workspace.first;
  plan.swap_ins.reserve(first.swap_ins.size() + start.size());
  plan.swap_outs.reserve(first.swap_outs.size() + start.size());
  plan.evictions.reserve(first.evictions.size() + start.size());
  plan.stays.reserve(first.stays.size() + start.size());
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

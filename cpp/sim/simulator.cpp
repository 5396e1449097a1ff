// The discrete-event simulator (simulator.h): validation, the dependency graph (after + stream
// order), the event loop with processor sharing, and the peak memory sweep.
#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tilewise::sim {

namespace {

// Below this fraction of its work, what a task has left after a rate change is rounding error.
constexpr double kDoneFraction = 1e-12;

std::string label(const std::vector<Task>& tasks, int i) {
  const std::string& name = tasks[static_cast<size_t>(i)].name;
  return "task " + std::to_string(i) + (name.empty() ? "" : " ('" + name + "')");
}

[[noreturn]] void fail(const std::vector<Task>& tasks, int i, const std::string& what) {
  throw std::invalid_argument(label(tasks, i) + ": " + what);
}

void check_amount(const std::vector<Task>& tasks, int i, const char* field, double v) {
  if (!std::isfinite(v) || v < 0)
    fail(tasks, i, std::string(field) + " must be a finite number >= 0, got " + std::to_string(v));
}

void validate(const std::vector<Task>& tasks, int streams, const std::vector<Resource>& resources) {
  if (streams < 0) throw std::invalid_argument("streams must be >= 0, got " + std::to_string(streams));
  for (size_t r = 0; r < resources.size(); ++r) {
    const double c = resources[r].capacity;
    if (!(c > 0) || !std::isfinite(c))
      throw std::invalid_argument("resource " + std::to_string(r) + " ('" + resources[r].name +
                                  "'): capacity must be positive and finite, got " + std::to_string(c));
  }
  const int n = static_cast<int>(tasks.size());
  const int n_resources = static_cast<int>(resources.size());
  for (int i = 0; i < n; ++i) {
    const Task& t = tasks[static_cast<size_t>(i)];
    if (t.stream < 0 || t.stream >= streams)
      fail(tasks, i, "stream " + std::to_string(t.stream) + " is not one of 0.." + std::to_string(streams - 1));
    check_amount(tasks, i, "seconds", t.seconds);
    check_amount(tasks, i, "work", t.work);
    check_amount(tasks, i, "max_rate", t.max_rate);
    if (t.work > 0 && t.max_rate == 0 && t.resources.empty())
      fail(tasks, i, "work " + std::to_string(t.work) +
                         " needs a max_rate > 0 or resources to bound its rate (it has neither)");
    for (size_t k = 0; k < t.resources.size(); ++k) {
      const int r = t.resources[k];
      if (r < 0 || r >= n_resources)
        fail(tasks, i, "resource index " + std::to_string(r) + " is not one of 0.." + std::to_string(n_resources - 1));
      // Listed twice it would count twice in n_r and halve its own share.
      if (std::find(t.resources.begin(), t.resources.begin() + static_cast<std::ptrdiff_t>(k), r) !=
          t.resources.begin() + static_cast<std::ptrdiff_t>(k))
        fail(tasks, i, "resource " + std::to_string(r) + " is listed twice");
    }
    for (int a : t.after)
      if (a < 0 || a >= n)
        fail(tasks, i, "after index " + std::to_string(a) + " is not a task (0.." + std::to_string(n - 1) + ")");
    if (t.memory_pool < -1)
      fail(tasks, i, "memory_pool must be -1 (none) or a pool index >= 0, got " + std::to_string(t.memory_pool));
  }
}

/// Who waits for whom: successors in CSR form (an edge per `after` entry and per stream order).
struct Dependencies {
  std::vector<int> offset, successor;  ///< successors of i: successor[offset[i] .. offset[i+1])
  std::vector<int> waiting;            ///< per task: predecessors not ended yet
  std::vector<int> stream_prev;        ///< per task: the task before it on its stream, -1 if first
};

Dependencies dependencies(const std::vector<Task>& tasks, int streams) {
  const size_t n = tasks.size();
  Dependencies d;
  d.offset.assign(n + 1, 0);
  d.waiting.assign(n, 0);
  d.stream_prev.assign(n, -1);
  std::vector<int> last(static_cast<size_t>(streams), -1);
  for (size_t i = 0; i < n; ++i) {
    const Task& t = tasks[i];
    int& prev = last[static_cast<size_t>(t.stream)];
    d.stream_prev[i] = prev;
    if (prev >= 0) ++d.offset[static_cast<size_t>(prev) + 1];
    prev = static_cast<int>(i);
    for (int a : t.after) ++d.offset[static_cast<size_t>(a) + 1];
    d.waiting[i] = static_cast<int>(t.after.size()) + (d.stream_prev[i] >= 0 ? 1 : 0);
  }
  for (size_t i = 0; i < n; ++i) d.offset[i + 1] += d.offset[i];
  d.successor.resize(static_cast<size_t>(d.offset[n]));
  std::vector<int> fill(d.offset.begin(), d.offset.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    const int me = static_cast<int>(i);
    if (d.stream_prev[i] >= 0) d.successor[static_cast<size_t>(fill[static_cast<size_t>(d.stream_prev[i])]++)] = me;
    for (int a : tasks[i].after) d.successor[static_cast<size_t>(fill[static_cast<size_t>(a)]++)] = me;
  }
  return d;
}

/// Called when the event loop ran dry with tasks that never started: each has a predecessor that
/// never ended, so walking back through such predecessors must revisit a task — the cycle.
[[noreturn]] void throw_cycle(const std::vector<Task>& tasks, const Dependencies& deps) {
  const auto stuck = [&](int t) { return deps.waiting[static_cast<size_t>(t)] > 0; };
  int x = 0;
  while (!stuck(x)) ++x;
  std::vector<int> seen_at(tasks.size(), -1);
  std::vector<int> back;  // back[k+1] must end before back[k]
  while (seen_at[static_cast<size_t>(x)] < 0) {
    seen_at[static_cast<size_t>(x)] = static_cast<int>(back.size());
    back.push_back(x);
    const int prev = deps.stream_prev[static_cast<size_t>(x)];
    if (prev >= 0 && stuck(prev)) {
      x = prev;
      continue;
    }
    for (int a : tasks[static_cast<size_t>(x)].after)
      if (stuck(a)) {
        x = a;
        break;
      }
  }
  // Forwards: x, then the walk from its end back to x.
  std::vector<int> cycle{x};
  for (int k = static_cast<int>(back.size()) - 1; k >= seen_at[static_cast<size_t>(x)]; --k)
    cycle.push_back(back[static_cast<size_t>(k)]);
  std::string msg = "dependency cycle: ";
  std::string stream_edge;
  // A cycle through a long stream may hold 10^5 tasks: name its first and last ones.
  constexpr size_t kShown = 10;
  for (size_t k = 0; k < cycle.size(); ++k) {
    if (cycle.size() > 2 * kShown + 1 && k == kShown)
      msg += " -> ... (" + std::to_string(cycle.size() - 2 * kShown - 1) + " more tasks)";
    if (cycle.size() <= 2 * kShown + 1 || k < kShown || k > cycle.size() - kShown - 2)
      msg += (k ? " -> " : "") + label(tasks, cycle[k]);
    if (k && stream_edge.empty() && deps.stream_prev[static_cast<size_t>(cycle[k])] == cycle[k - 1])
      stream_edge = "; stream " + std::to_string(tasks[static_cast<size_t>(cycle[k])].stream) + " runs " +
                    label(tasks, cycle[k - 1]) + " before " + label(tasks, cycle[k]) + " (list order)";
  }
  throw std::invalid_argument(msg + " (each must end before the next starts, by `after` or stream order" +
                              stream_edge + ")");
}

std::vector<int64_t> peak_memory(const std::vector<Task>& tasks, const std::vector<double>& start) {
  int pools = 0;
  std::vector<size_t> order;
  for (size_t i = 0; i < tasks.size(); ++i) {
    pools = std::max(pools, tasks[i].memory_pool + 1);
    if (tasks[i].memory_pool >= 0 && tasks[i].memory != 0) order.push_back(i);
  }
  // Frees before allocations at one time (simulator.h); then task index, for a fixed order.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (start[a] != start[b]) return start[a] < start[b];
    if (tasks[a].memory != tasks[b].memory) return tasks[a].memory < tasks[b].memory;
    return a < b;
  });
  std::vector<int64_t> sum(static_cast<size_t>(pools), 0), peak(static_cast<size_t>(pools), 0);
  for (size_t i : order) {
    const auto p = static_cast<size_t>(tasks[i].memory_pool);
    sum[p] += tasks[i].memory;
    peak[p] = std::max(peak[p], sum[p]);
  }
  return peak;
}

/// The event loop. Tasks become ready, spend their fixed part, share their resources during their
/// work phase and end; each end may make successors ready at that same time.
class Engine {
 public:
  Engine(const std::vector<Task>& tasks, const std::vector<Resource>& resources, Dependencies& deps)
      : tasks_(tasks), deps_(deps), capacity_(resources.size()), active_(resources.size()),
        is_dirty_(resources.size(), 0), remaining_(tasks.size(), 0), since_(tasks.size(), 0),
        rate_(tasks.size(), 0), version_(tasks.size(), 0), stamp_(tasks.size(), 0) {
    for (size_t r = 0; r < resources.size(); ++r) capacity_[r] = resources[r].capacity;
  }

  /// Fills start/end; returns how many tasks ended (fewer than all: a cycle).
  size_t run(std::vector<double>& start, std::vector<double>& end) {
    start_ = &start;
    end_ = &end;
    std::vector<Event> storage;
    storage.reserve(tasks_.size() + 16);
    heap_ = Heap(Later(), std::move(storage));
    for (size_t i = 0; i < tasks_.size(); ++i)
      if (deps_.waiting[i] == 0) begin(static_cast<int>(i), 0.0);
    if (!dirty_.empty()) reshare(0.0);  // tasks that start sharing at once have no event before it
    while (!heap_.empty()) {
      const double t = heap_.top().time;
      // Everything at t first (zero-time chains push more at t), then one sharing update.
      while (!heap_.empty() && heap_.top().time == t) {
        const Event e = heap_.top();
        heap_.pop();
        handle(e);
      }
      if (!dirty_.empty()) reshare(t);
    }
    return ended_;
  }

 private:
  enum Kind : uint8_t { kWorkStarts, kEnds };
  struct Event {
    double time;
    int task;
    uint32_t version;  ///< kEnds of a shared task: stale once its rate has changed since
    Kind kind;
  };
  /// Earliest first; equal times by task index (the documented tie rule), then kind.
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      if (a.task != b.task) return a.task > b.task;
      return a.kind > b.kind;
    }
  };
  using Heap = std::priority_queue<Event, std::vector<Event>, Later>;

  const Task& task(int i) const { return tasks_[static_cast<size_t>(i)]; }

  void begin(int i, double t) {
    (*start_)[static_cast<size_t>(i)] = t;
    const Task& k = task(i);
    if (k.work == 0) {
      heap_.push({t + k.seconds, i, 0, kEnds});
    } else if (k.resources.empty()) {
      // Nothing shared: its rate never changes, so its end is known now.
      heap_.push({(t + k.seconds) + k.work / k.max_rate, i, 0, kEnds});
    } else if (k.seconds > 0) {
      heap_.push({t + k.seconds, i, 0, kWorkStarts});
    } else {
      enter_work(i, t);
    }
  }

  void enter_work(int i, double t) {
    const auto s = static_cast<size_t>(i);
    remaining_[s] = task(i).work;
    since_[s] = t;
    rate_[s] = 0;  // set by the reshare that follows this batch
    for (int r : task(i).resources) {
      active_[static_cast<size_t>(r)].push_back(i);
      mark_dirty(r);
    }
  }

  void handle(const Event& e) {
    const auto s = static_cast<size_t>(e.task);
    if (e.kind == kWorkStarts) {
      enter_work(e.task, e.time);
      return;
    }
    if (e.version != version_[s]) return;  // superseded by a later rate change
    if (task(e.task).work > 0) leave_work(e.task);  // work 0: it never entered a work phase
    (*end_)[s] = e.time;
    ++ended_;
    for (int k = deps_.offset[s]; k < deps_.offset[s + 1]; ++k) {
      const int next = deps_.successor[static_cast<size_t>(k)];
      if (--deps_.waiting[static_cast<size_t>(next)] == 0) begin(next, e.time);
    }
  }

  void leave_work(int i) {
    for (int r : task(i).resources) {
      auto& on = active_[static_cast<size_t>(r)];
      *std::find(on.begin(), on.end(), i) = on.back();
      on.pop_back();
      mark_dirty(r);
    }
  }

  void mark_dirty(int r) {
    if (!is_dirty_[static_cast<size_t>(r)]) {
      is_dirty_[static_cast<size_t>(r)] = 1;
      dirty_.push_back(r);
    }
  }

  double share_rate(int i) const {
    const Task& k = task(i);
    double rate = k.max_rate > 0 ? k.max_rate : std::numeric_limits<double>::infinity();
    for (int r : k.resources)
      rate = std::min(rate, capacity_[static_cast<size_t>(r)] /
                                static_cast<double>(active_[static_cast<size_t>(r)].size()));
    return rate;
  }

  /// New rates for the tasks on resources whose count changed; a new end for each whose rate moved.
  void reshare(double t) {
    ++epoch_;
    for (int r : dirty_) {
      is_dirty_[static_cast<size_t>(r)] = 0;
      for (int i : active_[static_cast<size_t>(r)]) {
        const auto s = static_cast<size_t>(i);
        if (stamp_[s] == epoch_) continue;
        stamp_[s] = epoch_;
        const double rate = share_rate(i);
        if (rate == rate_[s]) continue;
        remaining_[s] -= rate_[s] * (t - since_[s]);
        if (remaining_[s] <= kDoneFraction * task(i).work) remaining_[s] = 0;
        since_[s] = t;
        rate_[s] = rate;
        heap_.push({t + remaining_[s] / rate, i, ++version_[s], kEnds});
      }
    }
    dirty_.clear();
  }

  const std::vector<Task>& tasks_;
  Dependencies& deps_;
  std::vector<double> capacity_;
  std::vector<std::vector<int>> active_;  ///< per resource: tasks in their work phase on it
  std::vector<int> dirty_;                ///< resources whose active count changed at this time
  std::vector<char> is_dirty_;
  std::vector<double> remaining_, since_, rate_;  ///< work left as of `since_`, done at `rate_` since
  std::vector<uint32_t> version_;
  std::vector<uint64_t> stamp_;  ///< the reshare that last updated a task (once per reshare)
  uint64_t epoch_ = 0;
  size_t ended_ = 0;
  Heap heap_;
  std::vector<double>* start_ = nullptr;
  std::vector<double>* end_ = nullptr;
};

}  // namespace

Timeline simulate(const std::vector<Task>& tasks, int streams, const std::vector<Resource>& resources) {
  validate(tasks, streams, resources);
  Dependencies deps = dependencies(tasks, streams);
  Timeline out;
  out.start.assign(tasks.size(), 0);
  out.end.assign(tasks.size(), 0);
  if (Engine(tasks, resources, deps).run(out.start, out.end) != tasks.size()) throw_cycle(tasks, deps);
  out.stream_busy.assign(static_cast<size_t>(streams), 0);
  for (size_t i = 0; i < tasks.size(); ++i) {
    out.stream_busy[static_cast<size_t>(tasks[i].stream)] += out.end[i] - out.start[i];
    out.makespan = std::max(out.makespan, out.end[i]);
  }
  out.peak_memory = peak_memory(tasks, out.start);
  return out;
}

}  // namespace tilewise::sim

// Variable elimination generic over the cost type (bucket elimination over a commutative
// semiring). One engine for every search: the planners' exact min-sum over bytes (`MinSum`,
// elimination.h) and TensorOpt's frontiers of (time, memory) (`FrontierSum`, frontier.h).
//
// A semiring S supplies:
//   Value, Back            a table entry; what a bucket keeps per entry to unroll it
//   S::unit()              the cost of no factor at all, where every combination starts (0; the
//                          frontier {(0, 0)}); "impossible" is kInfinite / the empty frontier
//   s.eliminate(k, dv, at, out, back)
//                          minimise one variable out at one table entry: `at(i, x)` is input i's
//                          value when the variable takes value x; out = choose_x combine_i at(i, x)
//                          (min of sums; union of products, reduced)
//   S::unroll(back, p, k, inputs)
//                          the variable's value that produced point p of `out`, and the point of
//                          each input it came from (int64: the argmin, point 0 of every input)
//   S::size(v), s.score(v) points in a value (statistics); a scalar for the heuristic (Eq. 7)
//   S::bytes(v, back)      memory of an entry and its record (the byte budget)
//   S::kTracksSizes        whether per-elimination sizes are worth recording
//   S::kBounds             whether s.eliminate takes a lower bound on the factors left (S::Bound,
//                          S::lower_of(table), S::add(a, b), S::sub(a, b), S::loosen(b, largest, n):
//                          b less the rounding error of n additions of sums up to `largest`,
//                          S::largest(a, b)): what every other live factor adds at
//                          least, so that points no completion can bring to the optimum are dropped
//
// The order comes from elimination_order.h (scopes only); the numeric pass below follows it,
// eliminating one variable per step, the entries of its table split over threads (TensorOpt
// §3.2: entries are independent). Variables the plan conditions on are enumerated: each
// combination of their values is solved on its own and the results chosen among once more.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "partition/elimination_order.h"
#include "partition/work_pool.h"
#include "tdl/errors.h"
#include "tdl/interrupt.h"

namespace tilewise::partition {

/// A table over a few variables, row-major (the last variable varies fastest).
template <class S>
struct BasicFactor {
  std::vector<int> vars;
  std::vector<typename S::Value> table;
};

struct EngineOptions {
  OrderOptions order;
  /// Threads per elimination (0 = all cores); an elimination with fewer than `parallel_work`
  /// entries × values stays on one thread.
  int threads = 1;
  int64_t parallel_work = 256;
  /// Bytes the search may hold: the live tables' entries and every record unrolling keeps, all passes
  /// (S::bytes; semirings that track sizes), else SearchTooLarge: a search stops with an error, not
  /// by exhausting the machine's memory. 0 = no limit.
  int64_t max_bytes = 0;
  /// Called with (eliminated, total) now and then.
  std::function<void(int64_t, int64_t)> progress;
};

/// One elimination's table: its variable, entries, and the points in them (largest, total).
struct EliminationStep {
  int var = -1;
  int64_t entries = 0;
  int64_t max_points = 0;
  int64_t total_points = 0;
};

struct EngineStats {
  int64_t largest_table = 0;            ///< entries (scope × the variable's values) of the largest table
  std::vector<EliminationStep> steps;   ///< per elimination (only where S tracks sizes; max over subproblems)
  int64_t bytes = 0;                    ///< what the tables took, all passes (with a byte budget)
  std::vector<int> conditioned;         ///< variables enumerated
  std::vector<std::pair<int, int>> fixed;  ///< variables fixed by the heuristic, and their values
  int64_t subproblems = 1;              ///< combinations of conditioned values solved
};

namespace engine_detail {

// The bound type of a semiring with bounds (a placeholder otherwise).
template <class S, bool = S::kBounds>
struct BoundOf {
  using type = int;
};
template <class S>
struct BoundOf<S, true> {
  using type = typename S::Bound;
};

template <class S>
struct Bucket {
  int var = -1;
  std::vector<int> scope;
  std::vector<int> inputs;  // factor ids combined
  int output = -1;          // factor id built
  std::vector<typename S::Back> back;
};

// One numeric pass: every variable of the order eliminated, with what unrolling needs.
template <class S>
struct Pass {
  std::vector<Bucket<S>> buckets;
  std::vector<int> constants;  // factors over no variable, combined into `value`
  int num_factors = 0;
  typename S::Value value;
  typename S::Back back;
};

inline int resolve_threads(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return threads;
}

// Runs fn(begin, end) over [0, n) in contiguous chunks on up to `threads` threads (the caller and
// the pool's workers, work_pool.h). The chunks are small and handed out in order as threads come
// free: a table's entries differ in cost (a join's frontiers by hundreds of points), so halves
// fixed in advance leave one thread idle.
template <class Fn>
void parallel_chunks(int64_t n, int threads, const Fn& fn) {
  threads = static_cast<int>(std::min<int64_t>(threads, n));
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, n / (int64_t{16} * threads));
  std::atomic<int64_t> next{0};
  run_on_pool(threads, [&](int) {
    for (int64_t begin; (begin = next.fetch_add(grain)) < n;) fn(begin, std::min(n, begin + grain));
  });
}

// Restricts `f` to the values `fixed[v]` (>= 0) of its fixed variables.
template <class S>
BasicFactor<S> restrict(const BasicFactor<S>& f, const std::vector<int>& domains, const std::vector<int>& fixed) {
  bool any = false;
  for (int v : f.vars) any = any || fixed[v] >= 0;
  if (!any) return f;
  BasicFactor<S> out;
  int64_t base = 0, stride = 1;
  std::vector<int64_t> strides;  // of the kept variables, in f's order
  for (int k = static_cast<int>(f.vars.size()) - 1; k >= 0; --k) {
    int v = f.vars[k];
    if (fixed[v] >= 0) base += fixed[v] * stride;
    else out.vars.insert(out.vars.begin(), v), strides.insert(strides.begin(), stride);
    stride *= domains[v];
  }
  int64_t entries = 1;
  for (int v : out.vars) entries *= domains[v];
  out.table.reserve(entries);
  std::vector<int> idx(out.vars.size(), 0);
  int64_t at = base;
  for (int64_t e = 0; e < entries; ++e) {
    out.table.push_back(f.table[at]);
    for (int k = static_cast<int>(out.vars.size()) - 1; k >= 0; --k) {
      at += strides[k];
      if (++idx[k] < domains[out.vars[k]]) break;
      at -= strides[k] * domains[out.vars[k]];
      idx[k] = 0;
    }
  }
  return out;
}

template <class S>
Pass<S> run_pass(const S& s, const std::vector<int>& domains, std::vector<BasicFactor<S>> factors,
                 const std::vector<int>& order, const EngineOptions& options, EngineStats& stats, bool first) {
  const int n = static_cast<int>(domains.size());
  const int threads = resolve_threads(options.threads);
  std::vector<std::vector<int>> var_factors(n);
  std::vector<char> alive(factors.size(), 1);
  for (size_t f = 0; f < factors.size(); ++f)
    for (int v : factors[f].vars) var_factors[v].push_back(static_cast<int>(f));
  Pass<S> pass;
  pass.buckets.reserve(order.size());
  const int64_t total = static_cast<int64_t>(order.size());
  // With bounds: each live factor's least value over its entries (S::lower_of), kept per factor.
  // Their sum over the live factors is kept as it changes (one pass over every factor per elimination
  // was quadratic: 0.4 s of transformer-48-2048-16's 6,229 eliminations); what rounding may have added
  // is taken off before use (S::loosen), so the bound stays a lower bound.
  std::vector<typename BoundOf<S>::type> lower;
  [[maybe_unused]] typename BoundOf<S>::type live_sum{}, largest_sum{};
  [[maybe_unused]] int64_t sum_operations = 0;
  [[maybe_unused]] auto add_live = [&](const std::vector<typename S::Value>& table) {
    if constexpr (S::kBounds) {
      lower.push_back(S::lower_of(table));
      live_sum = S::add(live_sum, lower.back()), largest_sum = S::largest(largest_sum, live_sum), ++sum_operations;
    }
  };
  for (const auto& f : factors) add_live(f.table);
  // Bytes held (S::bytes): the live tables' entries and every record unrolling keeps (all passes),
  // against options.max_bytes.
  std::atomic<int64_t> held{stats.bytes};
  std::atomic<bool> too_many{false};
  const bool budget = S::kTracksSizes && options.max_bytes > 0;
  if (budget && first)
    for (const auto& f : factors)
      for (const auto& value : f.table) held += S::bytes(value, typename S::Back{});
  // Buffers reused across eliminations (thousands per search, most of them small).
  std::vector<int> fs, scope, idx_buf;
  std::vector<int64_t> scope_stride, v_stride, base_buf;
  std::vector<const typename S::Value*> tables;
  for (size_t step = 0; step < order.size(); ++step) {
    check_interrupt();
    if (std::chrono::steady_clock::now() > options.order.deadline)
      throw SearchTimeout("time limit reached after eliminating " + std::to_string(step) + " of " +
                          std::to_string(n) + " variables");
    const int v = order[step];
    // Combine the factors touching v and minimise v out.
    fs.clear();
    for (int f : var_factors[v])
      if (alive[f]) fs.push_back(f);
    std::sort(fs.begin(), fs.end());
    fs.erase(std::unique(fs.begin(), fs.end()), fs.end());
    scope.clear();
    for (int f : fs)
      for (int u : factors[f].vars)
        if (u != v) scope.push_back(u);
    std::sort(scope.begin(), scope.end());
    scope.erase(std::unique(scope.begin(), scope.end()), scope.end());
    int64_t entries = 1;
    for (int u : scope) entries *= domains[u];
    const int dv = domains[v];
    stats.largest_table = std::max(stats.largest_table, entries * dv);
    const int k = static_cast<int>(fs.size());
    // Strides of each factor's variables within (scope, v): scope_stride[j * k + i] for scope
    // variable j and factor i.
    const size_t ns = scope.size();
    scope_stride.assign(ns * k, 0);
    v_stride.assign(k, 0);
    tables.resize(k);
    for (int i = 0; i < k; ++i) {
      const auto& f = factors[fs[i]];
      tables[i] = f.table.data();
      int64_t stride = 1;
      for (int j = static_cast<int>(f.vars.size()) - 1; j >= 0; --j) {
        int u = f.vars[j];
        if (u == v) v_stride[i] = stride;
        else scope_stride[(std::lower_bound(scope.begin(), scope.end(), u) - scope.begin()) * k + i] = stride;
        stride *= domains[u];
      }
    }
    // What the factors this elimination does not touch add at least.
    [[maybe_unused]] typename BoundOf<S>::type rest{};
    if constexpr (S::kBounds) {
      for (int f : fs) live_sum = S::sub(live_sum, lower[f]), ++sum_operations;
      rest = S::loosen(live_sum, largest_sum, sum_operations);
    }
    BasicFactor<S> out{scope, std::vector<typename S::Value>(entries)};
    engine_detail::Bucket<S> bucket{v, scope, fs, -1, std::vector<typename S::Back>(entries)};
    // One elimination of large frontiers can take minutes: the deadline is also looked at every
    // 256 entries (a clock read per entry would cost the int64 path its speed).
    std::atomic<bool> late{false};
    const bool timed = options.order.deadline != std::chrono::steady_clock::time_point::max();
    auto chunk = [&](int64_t begin, int64_t end, std::vector<int>& idx, std::vector<int64_t>& base) {
      // The odometer over scope (last variable fastest), started at `begin`.
      idx.assign(ns, 0);
      base.assign(k, 0);
      for (int64_t rest = begin, j = static_cast<int64_t>(ns) - 1; j >= 0; --j) {
        idx[j] = static_cast<int>(rest % domains[scope[j]]);
        rest /= domains[scope[j]];
        for (int i = 0; i < k; ++i) base[i] += idx[j] * scope_stride[j * k + i];
      }
      auto at = [&](int i, int x) -> const typename S::Value& { return tables[i][base[i] + x * v_stride[i]]; };
      int64_t made = 0;  // bytes made since the last look at the budget
      for (int64_t e = begin; e < end; ++e) {
        if (e == begin || ((e - begin) & 255) == 255) {
          if (budget && (held += made) > options.max_bytes) too_many = true;
          made = 0;
          if (late || too_many || interrupt_requested() ||
              (timed && std::chrono::steady_clock::now() > options.order.deadline)) {
            late = true;
            return;
          }
        }
        if constexpr (S::kBounds) s.eliminate(k, dv, at, out.table[e], bucket.back[e], rest);
        else s.eliminate(k, dv, at, out.table[e], bucket.back[e]);
        if (budget) made += S::bytes(out.table[e], bucket.back[e]);
        for (int j = static_cast<int>(ns) - 1; j >= 0; --j) {
          const int64_t* st = &scope_stride[j * k];
          for (int i = 0; i < k; ++i) base[i] += st[i];
          if (++idx[j] < domains[scope[j]]) break;
          for (int i = 0; i < k; ++i) base[i] -= st[i] * domains[scope[j]];
          idx[j] = 0;
        }
      }
      if (budget) held += made;  // the rest since the last look
    };
    if (threads > 1 && entries > 1 && entries * dv >= options.parallel_work) {
      parallel_chunks(entries, threads, [&](int64_t begin, int64_t end) {
        thread_local std::vector<int> idx;
        thread_local std::vector<int64_t> base;
        chunk(begin, end, idx, base);
      });
    } else {
      chunk(0, entries, idx_buf, base_buf);
    }
    check_interrupt();
    auto too_large = [&] {
      const int64_t b = options.max_bytes;
      const std::string limit = b >= (int64_t{1} << 20) ? std::to_string(b >> 20) + " MiB" : std::to_string(b) + " bytes";
      return SearchTooLarge("the search's tables would take more than " + limit + " (eliminating variable " + std::to_string(step + 1) + " of " + std::to_string(n) +
                            "); a memory bucket, the heuristic or a larger limit would do");
    };
    if (too_many) throw too_large();
    if (late)
      throw SearchTimeout("time limit reached while eliminating variable " + std::to_string(step + 1) + " of " +
                          std::to_string(n));
    if constexpr (S::kTracksSizes) {
      EliminationStep st{v, entries, 0, 0};
      for (const auto& value : out.table) {
        int64_t p = S::size(value);
        st.max_points = std::max(st.max_points, p), st.total_points += p;
      }
      if (first) {
        stats.steps.push_back(st);
      } else {
        auto& old = stats.steps[step];
        old.max_points = std::max(old.max_points, st.max_points);
        old.total_points = std::max(old.total_points, st.total_points);
      }
    }
    if (budget) {
      // The chunks counted what they made; the inputs' entries go (their records stay with the
      // buckets that made them).
      int64_t freed = 0;
      for (int f : fs)
        for (const auto& value : factors[f].table) freed += S::bytes(value, typename S::Back{});
      held = std::max<int64_t>(held - freed, 0);
      stats.bytes = held;
      if (held > options.max_bytes) throw too_large();
    }
    for (int f : fs) alive[f] = 0, factors[f].table.clear(), factors[f].table.shrink_to_fit();
    bucket.output = static_cast<int>(factors.size());
    add_live(out.table);
    factors.push_back(std::move(out));
    alive.push_back(1);
    for (int u : scope) var_factors[u].push_back(bucket.output);
    for (int u : scope) {
      auto& list = var_factors[u];
      list.erase(std::remove_if(list.begin(), list.end(), [&](int f) { return !alive[f]; }), list.end());
    }
    pass.buckets.push_back(std::move(bucket));
    if (options.progress && (step % 256 == 0 || step + 1 == order.size()))
      options.progress(static_cast<int64_t>(step) + 1, total);
  }
  // What is left is over no variable: combine it (as eliminating a variable with one value).
  for (size_t f = 0; f < factors.size(); ++f)
    if (alive[f]) {
      TW_ASSERT(factors[f].vars.empty(), "every variable of a factor is eliminated");
      pass.constants.push_back(static_cast<int>(f));
    }
  auto at = [&](int i, int) -> const typename S::Value& { return factors[pass.constants[i]].table[0]; };
  s.eliminate(static_cast<int>(pass.constants.size()), 1, at, pass.value, pass.back);
  pass.num_factors = static_cast<int>(factors.size());
  return pass;
}

// Values of the pass's variables that produce point `point` of its value.
template <class S>
void unroll_pass(const Pass<S>& pass, int point, const std::vector<int>& domains, std::vector<int>& values) {
  std::vector<int> sel(pass.num_factors, 0);  // the point of each factor's entry in use
  std::vector<int> inputs(pass.constants.size());
  S::unroll(pass.back, point, static_cast<int>(pass.constants.size()), inputs.data());
  for (size_t i = 0; i < pass.constants.size(); ++i) sel[pass.constants[i]] = inputs[i];
  // Backwards: a bucket's scope holds only variables eliminated after it, so they have values.
  for (auto it = pass.buckets.rbegin(); it != pass.buckets.rend(); ++it) {
    int64_t e = 0;
    for (int u : it->scope) e = e * domains[u] + values[u];
    inputs.resize(it->inputs.size());
    values[it->var] = S::unroll(it->back[e], sel[it->output], static_cast<int>(it->inputs.size()), inputs.data());
    for (size_t i = 0; i < it->inputs.size(); ++i) sel[it->inputs[i]] = inputs[i];
  }
}

}  // namespace engine_detail

/// The outcome of a search: the optimum (a cost, or a frontier) and how to unroll it.
template <class S>
class Solution {
 public:
  /// The optimum over every assignment: a cost, or a frontier.
  const typename S::Value& value() const { return value_; }
  /// A value for every variable producing point `point` of value() (0 for a scalar optimum).
  std::vector<int> assignment(int point = 0) const {
    int pass = 0;
    if (passes_.size() > 1) pass = S::unroll(back_, point, 1, &point);
    std::vector<int> values = fixed_values_[pass];
    engine_detail::unroll_pass(passes_[pass], point, domains_, values);
    return values;
  }
  EngineStats stats;

 private:
  template <class T>
  friend Solution<T> eliminate_all(const T&, const std::vector<int>&, std::vector<BasicFactor<T>>,
                                   const EngineOptions&, const EliminationPlan*);
  typename S::Value value_;
  typename S::Back back_;  // which subproblem each point came from (with conditioning)
  std::vector<engine_detail::Pass<S>> passes_;
  std::vector<int> domains_;
  std::vector<std::vector<int>> fixed_values_;  // per subproblem, the values it fixed (0 elsewhere)
};

/// The plan (order, conditioned and fixed variables) eliminate_all follows for these factors: TensorOpt
/// Eq. 7 fixes a variable by its own costs, here the value whose factors' best entries score lowest
/// (S::score: the cost; for frontiers a weighted sum of time and memory).
template <class S>
EliminationPlan plan_search(const S& s, const std::vector<int>& domain_sizes, const std::vector<BasicFactor<S>>& factors,
                            const OrderOptions& options) {
  const int n = static_cast<int>(domain_sizes.size());
  for (int d : domain_sizes) TW_ASSERT(d >= 1, "every variable needs a value");
  // A variable with one value is no choice: it is in no scope.
  std::vector<std::vector<int>> scopes;
  scopes.reserve(factors.size());
  for (const auto& f : factors) {
    scopes.emplace_back();
    for (int v : f.vars)
      if (domain_sizes[v] > 1) scopes.back().push_back(v);
  }
  OrderOptions order_options = options;
  if (order_options.too_wide == TooWide::kHeuristic && !order_options.heuristic_value) {
    order_options.heuristic_value = [&](int w) {
      int best_value = 0;
      double best = 0;
      for (int c = 0; c < domain_sizes[w]; ++c) {
        std::vector<int> fixed(n, -1);
        fixed[w] = c;
        double score = 0;
        for (const auto& f : factors) {
          if (std::find(f.vars.begin(), f.vars.end(), w) == f.vars.end()) continue;
          auto r = engine_detail::restrict(f, domain_sizes, fixed);
          double m = s.score(r.table[0]);
          for (size_t e = 1; e < r.table.size(); ++e) m = std::min(m, s.score(r.table[e]));
          score += m;
        }
        if (c == 0 || score < best) best = score, best_value = c;
      }
      return best_value;
    };
  }
  return plan_elimination(domain_sizes, std::move(scopes), order_options);
}

/// Eliminates every variable of `factors` (variables with `domain_sizes` values each): the min-sum
/// for MinSum, the frontier for FrontierSum. Exact unless the plan fixed variables heuristically.
/// `plan`: one plan_search made (for these factors' scopes, perhaps under another semiring: searches
/// of one problem then share the order and the fixed values); null: plan_search's own.
template <class S>
Solution<S> eliminate_all(const S& s, const std::vector<int>& domain_sizes, std::vector<BasicFactor<S>> factors,
                          const EngineOptions& options, const EliminationPlan* given = nullptr) {
  const int n = static_cast<int>(domain_sizes.size());
  const EliminationPlan plan = given ? *given : plan_search(s, domain_sizes, factors, options.order);
  // A variable with one value is no choice: drop it from every scope (the table keeps its layout).
  for (auto& f : factors)
    f.vars.erase(std::remove_if(f.vars.begin(), f.vars.end(), [&](int v) { return domain_sizes[v] == 1; }),
                 f.vars.end());
  Solution<S> sol;
  sol.domains_ = domain_sizes;
  sol.stats.conditioned = plan.conditioned;
  sol.stats.fixed = plan.fixed;
  int64_t combos = 1;
  for (int v : plan.conditioned) {
    combos *= domain_sizes[v];
    if (combos > (int64_t{1} << 24))
      throw SearchTooLarge("conditioning would solve more than 2^24 subproblems (the graph is too wide)");
  }
  sol.stats.subproblems = combos;
  std::vector<int> fixed(n, -1);
  for (auto [v, x] : plan.fixed) fixed[v] = x;
  const bool restricting = !plan.conditioned.empty() || !plan.fixed.empty();
  std::vector<int> idx(plan.conditioned.size(), 0);
  for (int64_t c = 0; c < combos; ++c) {
    for (size_t j = 0; j < idx.size(); ++j) fixed[plan.conditioned[j]] = idx[j];
    EngineOptions pass_options = options;
    if (options.progress && combos > 1) {
      const int64_t per = static_cast<int64_t>(plan.order.size());
      pass_options.progress = [&, c, per](int64_t done, int64_t) { options.progress(c * per + done, combos * per); };
    }
    if (!restricting) {
      sol.passes_.push_back(engine_detail::run_pass(s, domain_sizes, std::move(factors), plan.order, pass_options,
                                                    sol.stats, true));
    } else {
      // The last subproblem takes the factors no fixed variable touches as they are (moved, not copied:
      // with the heuristic's fixes and no conditioning, nearly every factor).
      const bool last = c + 1 == combos;
      std::vector<BasicFactor<S>> restricted;
      restricted.reserve(factors.size());
      for (auto& f : factors) {
        const bool touched = std::any_of(f.vars.begin(), f.vars.end(), [&](int v) { return fixed[v] >= 0; });
        if (last && !touched) restricted.push_back(std::move(f));
        else restricted.push_back(engine_detail::restrict(f, domain_sizes, fixed));
      }
      sol.passes_.push_back(engine_detail::run_pass(s, domain_sizes, std::move(restricted), plan.order, pass_options,
                                                    sol.stats, c == 0));
    }
    std::vector<int> values(n, 0);
    for (int v = 0; v < n; ++v) values[v] = std::max(fixed[v], 0);
    sol.fixed_values_.push_back(std::move(values));
    for (int j = static_cast<int>(idx.size()) - 1; j >= 0; --j) {
      if (++idx[j] < domain_sizes[plan.conditioned[j]]) break;
      idx[j] = 0;
    }
  }
  if (combos == 1) {
    sol.value_ = sol.passes_[0].value;
  } else {
    // The union over the conditioned values: one more choice, over the subproblems.
    auto at = [&](int, int x) -> const typename S::Value& { return sol.passes_[x].value; };
    s.eliminate(1, static_cast<int>(combos), at, sol.value_, sol.back_);
  }
  return sol;
}

}  // namespace tilewise::partition

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <string>
#include <thread>

#include "partition/elimination.h"
#include "partition/planners.h"
#include "tdl/errors.h"
#include "tdl/interrupt.h"

namespace tilewise::partition {


namespace {

// Solves the step's min-sum problem; its pair tables move into the search (only the domains are
// needed after).
EliminationResult solve(StepProblem& sp, const std::string& what, const SearchOptions& options,
                        std::chrono::steady_clock::time_point deadline, int64_t max_table = 0) {
  std::vector<Factor> factors;
  factors.reserve(sp.pairs.size());
  for (auto& pair : sp.pairs)
    factors.push_back({{sp.op_var(pair.op_class), sp.tensor_var(pair.tensor_class)}, std::move(pair.table)});
  sp.pairs.clear();
  EliminationOptions eo;
  eo.deadline = deadline;
  if (max_table > 0) eo.max_table = max_table;
  if (options.progress) eo.progress = [&](int64_t done, int64_t total) { options.progress(what + " search", done, total); };
  return eliminate(sp.domain_sizes, std::move(factors), eo);
}

// Largest elimination table of a refinement block (entries); past it SearchTooLarge skips the block.
constexpr int64_t kRefineMaxTable = int64_t{1} << 22;

// Every ascending subset of {0..m-1} with `size` elements.
std::vector<std::vector<int>> blocks_of(int m, int size) {
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  std::function<void(int)> rec = [&](int from) {
    if (static_cast<int>(cur.size()) == size) {
      out.push_back(cur);
      return;
    }
    for (int s = from; s < m; ++s) cur.push_back(s), rec(s + 1), cur.pop_back();
  };
  rec(0);
  return out;
}

std::string block_name(const std::vector<int>& block) {
  std::string s;
  for (int b : block) s += (s.empty() ? "" : "+") + std::to_string(b + 1);
  return s;
}

void permute_steps(Assignment& a, const std::vector<int>& order) {
  for (auto& t : a.tilings) {
    cost::Tiling n;
    for (int i : order) n.push_back(t[i]);
    t = n;
  }
  for (auto& s : a.splits) {
    cost::OpSplit n;
    for (int i : order) n.push_back(s[i]);
    s = n;
  }
}

// Orders of the steps that keep part counts non-increasing (only equal counts swap).
std::vector<std::vector<int>> step_orders(const std::vector<int>& parts) {
  std::vector<int> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::vector<std::vector<int>> out;
  do {
    bool ok = true;
    for (size_t i = 0; i < order.size(); ++i) ok = ok && parts[order[i]] == parts[i];
    if (ok) out.push_back(order);
  } while (std::next_permutation(order.begin(), order.end()));
  return out;
}

// Reordering steps relabels devices, which keeps the total unless a dimension is cut at several
// of the reordered steps (its chunk order follows the step order). Of the orders (up to 4 steps)
// that keep the total, take a nondecreasing one with the smallest steps first, else the
// lexicographically smallest.
void order_steps(const Problem& p, Assignment& a, int64_t total, int threads) {
  const int m = static_cast<int>(p.parts.size());
  if (m > 4) return;
  std::vector<int> best;
  std::vector<int64_t> best_d;
  bool best_mono = false;
  for (const auto& order : step_orders(p.parts)) {
    Assignment t = a;
    permute_steps(t, order);
    auto prefix = prefix_bytes(p, t, m, threads);
    if (prefix.back() != total) continue;
    auto d = step_deltas(prefix);
    bool mono = std::is_sorted(d.begin(), d.end());
    if (best.empty() || (mono && !best_mono) || (mono == best_mono && d < best_d))
      best = order, best_d = d, best_mono = mono;
  }
  if (!best.empty()) permute_steps(a, best);
}

// Blocks sized together: enough to keep the threads busy, few enough that a revision (which
// invalidates the sizes after it) wastes little.
constexpr size_t kSizingBatch = 16;

// The table budget of a refinement block. A block's cost is its entries times the work per entry,
// which grows with the steps (each entry counts every step's classes of devices) and the number of
// blocks tried grows as 2^steps: past 6 steps (64 devices) the budget shrinks so that refinement stays within a
// small factor of the recursion (docs/PARTITION.md "Planning at scale").
double refine_budget(const SearchOptions& options, const Problem& p) {
  const int m = static_cast<int>(p.parts.size());
  return m <= 6 ? options.refine_table_budget : options.refine_table_budget * 6.0 / m;
}

// Table entries of blocks[from, from + count) under `a`, sized on up to `threads` threads: each
// block's sizing is independent of the others (the caller sizes again once the assignment changes).
// Past the deadline the blocks left are not sized (infinite entries: never revised).
std::vector<double> size_blocks(const Problem& p, const Policy& policy, const Assignment& a,
                                const std::vector<std::vector<int>>& blocks, size_t from, size_t count, double budget,
                                int threads, std::chrono::steady_clock::time_point deadline) {
  count = std::min(count, blocks.size() - from);
  std::vector<double> entries(count, std::numeric_limits<double>::infinity());
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min<int>(threads, static_cast<int>(count)));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      if (interrupt_requested() || std::chrono::steady_clock::now() > deadline) return;
      entries[i] = block_table_entries(p, policy, a, blocks[from + i], budget);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  check_interrupt();
  return entries;
}

}  // namespace

Plan plan_recursive(const Problem& p, const Policy& policy, const SearchOptions& options,
                    std::chrono::steady_clock::time_point deadline) {
  Plan plan;
  plan.parts = p.parts;
  plan.assignment = empty_assignment(p);
  const int m = static_cast<int>(p.parts.size());
  int64_t total = 0;
  // Tofu §5.2: one exact search per step, each on top of the steps before it.
  for (int step = 0; step < m; ++step) {
    const std::string what = "step " + std::to_string(step + 1) + "/" + std::to_string(m);
    if (options.progress) options.progress(what + " costing", 0, 1);
    StepProblem sp = build_step(p, policy, plan.assignment, {step}, m, options.threads, deadline);
    EliminationResult r = solve(sp, what, options, deadline);
    apply_step(p, sp, r.values, plan.assignment);
    plan.largest_table = std::max(plan.largest_table, r.largest_table);
    total = r.cost;
  }
  plan.unrefined_bytes = total;
  // Refinement (ours): a step's cost depends on the steps before it, so a tie or a cheap early cut
  // can block a better later one (Theorem 1's exchange argument assumes it cannot; see
  // docs/PARTITION.md for a one-matmul counterexample). Revise blocks of steps with all others
  // fixed, by the same exact search over whole-plan bytes, until no block improves: single steps
  // always, larger blocks while affordable (the whole plan at once makes it exact).
  // Past the deadline the plan in hand is complete (every step decided): it is returned, flagged.
  const double budget = refine_budget(options, p);
  // The plan's step figures are recounted after refinement, so refinement stops early enough for
  // that: 5 % of the limit, or 1.5 times a recount timed now (at 1024 devices a recount is seconds).
  if (options.time_limit > 0 && options.refine_rounds > 0 && m > 1) {
    auto t0 = std::chrono::steady_clock::now();
    prefix_bytes(p, plan.assignment, m, options.threads);
    double recount = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    deadline -= std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(std::max(0.05 * options.time_limit, 1.5 * recount)));
  }
  auto late = [&] { return std::chrono::steady_clock::now() > deadline; };
  try {
    for (int round = 0; round < options.refine_rounds && m > 1 && !plan.timed_out; ++round) {
      bool improved = false;
      for (int size = 1; size <= m && !plan.timed_out; ++size) {
        const auto blocks = blocks_of(m, size);
        // Larger blocks are sized a batch at a time on the search threads, against the assignment
        // in hand; a revision that changes it sends the blocks after it to be sized again.
        std::vector<double> entries;
        size_t sized_from = 0;
        for (size_t bi = 0; bi < blocks.size(); ++bi) {
          const auto& block = blocks[bi];
          check_interrupt();
          if (late()) {
            plan.timed_out = true;
            break;
          }
          if (size > 1) {
            if (bi >= sized_from + entries.size()) {
              entries = size_blocks(p, policy, plan.assignment, blocks, bi, kSizingBatch, budget, options.threads,
                                    deadline);
              sized_from = bi;
            }
            if (entries[bi - sized_from] > budget) continue;
          }
          const std::string what = "refine " + std::to_string(round + 1) + ", steps " + block_name(block);
          if (options.progress) options.progress(what + " costing", 0, 1);
          StepProblem sp = build_step(p, policy, plan.assignment, block, m, options.threads, deadline);
          EliminationResult r;
          try {
            // A revision improves a complete plan by a little: a block whose elimination would build a
            // table past kRefineMaxTable is skipped rather than solved (transformer-1-16-2 on 8
            // devices: one 3-step block's 4.3e7-entry table took 16 s to save 0.5 % of the bytes).
            r = solve(sp, what, options, deadline, kRefineMaxTable);
          } catch (const SearchTooLarge&) {
            continue;  // this block is too wide to revise jointly; smaller blocks still run
          }
          plan.largest_table = std::max(plan.largest_table, r.largest_table);
          if (r.cost < total) {
            apply_step(p, sp, r.values, plan.assignment);
            total = r.cost;
            improved = true;
            entries.clear(), sized_from = bi + 1;  // later blocks are sized against the new plan
          }
        }
      }
      if (!improved) break;
    }
  } catch (const SearchTimeout&) {
    plan.timed_out = true;  // a block was being costed or solved; the assignment is untouched
  }
  plan.comm_bytes = total;
  auto prefix = prefix_bytes(p, plan.assignment, m, options.threads);
  auto steps_now = step_deltas(prefix);
  if (!std::is_sorted(steps_now.begin(), steps_now.end()) && !late()) {
    // Put the cheapest steps first, as Tofu's Theorem 1 orders them, so that the first cut can go
    // across the slowest link.
    order_steps(p, plan.assignment, total, options.threads);
    prefix = prefix_bytes(p, plan.assignment, m, options.threads);
  }
  TW_ASSERT(m == 0 || prefix.back() == total, "the searched total and the recount of the plan agree");
  plan.step_bytes = step_deltas(prefix);
  return plan;
}

}  // namespace tilewise::partition

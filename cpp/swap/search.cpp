// The genetic search and random search (search.h): generations made on the calling thread, fitness
// evaluated by worker threads.
#include "swap/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "swap/planner.h"
#include "swap/simulate.h"
#include "tdl/interrupt.h"

namespace tilewise::swap {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kUnknown = std::numeric_limits<double>::infinity();

struct Individual {
  Schedule schedule;
  Pool pool;
  double makespan = kUnknown;  ///< infinite until evaluated (or when the time limit came first)
};

void check_options(const SearchOptions& o) {
  if (o.population < 4)
    throw SwapError("search: population must be >= 4 (one crossover makes 4 children), got " +
                    std::to_string(o.population));
  if (!(o.mutation >= 0 && o.mutation <= 1))
    throw SwapError("search: mutation probability must be in [0, 1], got " + std::to_string(o.mutation));
  if (!(o.temperature > 0) || !std::isfinite(o.temperature))
    throw SwapError("search: temperature must be positive and finite, got " + std::to_string(o.temperature));
  if (!(o.time_limit >= 0) || o.patience < 0 || o.generations < 0 || o.evaluations < 0)
    throw SwapError("search: time_limit, patience, generations and evaluations must be >= 0 (0: no bound)");
  if (o.time_limit == 0 && o.patience == 0 && o.generations == 0 && o.evaluations == 0)
    throw SwapError("search: needs a stop: a time_limit, patience, generations or evaluations");
}

class Search {
 public:
  Search(const Problem& p, const SearchOptions& o) : p_(p), o_(o), rng_(o.seed), begin_(Clock::now()) {
    check_options(o);
    p.check_feasible();
    threads_ = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    given_ = given_order(p);
    default_pool_ = default_pool(p);
    if (o.time_limit > 0)
      deadline_ = begin_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.time_limit));
  }

  /// Random search's samples and the unseeded part of the first generation: the given order with the
  /// default pool first, then random ones.
  Individual random_individual() {
    Individual x;
    const bool first = !drawn_++;
    const bool random_schedule = !first && o_.mode != SearchOptions::Mode::kPoolOnly;
    const bool random_pool = !first && o_.mode != SearchOptions::Mode::kScheduleOnly;
    x.schedule = random_schedule ? random_order(p_, rng_) : given_;
    x.pool = random_pool ? ::tilewise::swap::random_pool(p_, rng_) : default_pool_;
    return x;
  }

  /// The GA's first generation: a quarter seeded from the graph (the paper's GA starts from random
  /// individuals, §4.4.1, and SwapAdvisor from "any legitimate schedule and memory allocation based on
  /// the graph", §4.3): the given and depth-first orders with the default and needs-sized pools, then
  /// mutations of those four; the other three quarters random, as random search draws them.
  std::vector<Individual> first_generation() {
    std::vector<Individual> out;
    const bool schedules = o_.mode != SearchOptions::Mode::kPoolOnly;
    const bool pools = o_.mode != SearchOptions::Mode::kScheduleOnly;
    std::vector<Individual> bases;
    std::vector<Schedule> orders = {given_};
    if (schedules) orders.push_back(depth_first_order(p_));
    for (const Schedule& s : orders) {
      bases.push_back({s, default_pool_});
      if (pools) bases.push_back({s, needs_pool(p_, s)});
    }
    const size_t seeded = o_.seeded ? std::max<size_t>(1, static_cast<size_t>(o_.population) / 4) : 1;
    for (size_t i = 0; i < seeded; ++i) {
      Individual x = bases[i % bases.size()];
      if (i >= bases.size()) {
        if (schedules) x.schedule = mutate(p_, x.schedule, o_.mutation, rng_);
        if (pools) x.pool = mutate(p_, x.pool, o_.mutation, rng_);
      }
      out.push_back(std::move(x));
    }
    drawn_ = 1;  // the given order with the default pool is in already
    while (out.size() < static_cast<size_t>(o_.population)) out.push_back(random_individual());
    return out;
  }

  SearchResult genetic() {
    std::vector<Individual> population = first_generation();
    evaluate(population);
    keep_evaluated(population);
    note(population, 0);
    for (int g = 1;; ++g) {
      if (stop()) break;
      std::vector<Individual> children = offspring(population);
      evaluate(children);
      keep_evaluated(children);
      remember(children);  // T_best of Eq. 4.1 is the best seen so far, children included
      for (Individual& c : children) population.push_back(std::move(c));
      population = survivors(std::move(population));
      note(population, g);
    }
    return finish();
  }

  SearchResult random() {
    for (int g = 0; !(g > 0 && stop()); ++g) {
      const int64_t left = o_.evaluations > 0 ? o_.evaluations - evaluations_ : o_.population;
      std::vector<Individual> batch(static_cast<size_t>(std::min<int64_t>(o_.population, left)));
      for (Individual& x : batch) x = random_individual();
      evaluate(batch);
      keep_evaluated(batch);
      note(batch, g);
      // Random search keeps nothing: its "best" is the best so far.
      result_.history.back().best = result_.makespan;
    }
    return finish();
  }

 private:
  bool stop() {
    check_interrupt();
    if (o_.time_limit > 0 && Clock::now() >= deadline_) return stopped("time_limit");
    if (o_.evaluations > 0 && evaluations_ >= o_.evaluations) return stopped("evaluations");
    if (o_.generations > 0 && static_cast<int>(result_.history.size()) > o_.generations) return stopped("generations");
    if (o_.patience > 0 && stale_ >= o_.patience) return stopped("patience");
    return false;
  }

  bool stopped(const char* why) {
    result_.stopped = why;
    return true;
  }

  SearchResult finish() {
    if (result_.stopped.empty()) result_.stopped = "time_limit";
    result_.evaluations = evaluations_;
    result_.seconds = std::chrono::duration<double>(Clock::now() - begin_).count();
    return std::move(result_);
  }

  /// Fitness of every individual, in parallel; each writes its own slot, so the order of work does
  /// not matter. Past the deadline no new evaluation starts (those left stay unknown).
  void evaluate(std::vector<Individual>& batch) {
    std::atomic<size_t> next{0};
    std::atomic<int64_t> done{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    const auto work = [&] {
      for (;;) {
        const size_t i = next++;
        if (i >= batch.size()) return;
        // The first of a batch runs regardless, so that a search always has a result.
        if (i > 0 && (interrupt_requested() || (o_.time_limit > 0 && Clock::now() >= deadline_))) return;
        try {
          const SwapPlan plan = plan_swaps(p_, batch[i].schedule, batch[i].pool, o_.double_pass, false);
          batch[i].makespan = simulate_plan(p_, plan, false).makespan;
          ++done;
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
          next = batch.size();
        }
      }
    };
    const int helpers = std::min(threads_, static_cast<int>(batch.size())) - 1;
    std::vector<std::thread> pool;
    for (int t = 0; t < helpers; ++t) pool.emplace_back(work);
    work();
    for (std::thread& t : pool) t.join();
    if (error) std::rethrow_exception(error);
    evaluations_ += done;
  }

  static void keep_evaluated(std::vector<Individual>& v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](const Individual& x) { return !(x.makespan < kUnknown); }),
            v.end());
  }

  /// Keeps the best individual seen so far.
  void remember(const std::vector<Individual>& batch) {
    for (const Individual& x : batch)
      if (!found_ || x.makespan < result_.makespan) {
        result_.schedule = x.schedule;
        result_.pool = x.pool;
        result_.makespan = x.makespan;
        found_ = improved_ = true;
      }
  }

  /// Records a generation: its figures, the best ever, the patience count; reports progress.
  void note(const std::vector<Individual>& population, int index) {
    remember(population);
    Generation g;
    g.index = index;
    g.best = kUnknown;
    g.worst = 0;
    double sum = 0;
    for (const Individual& x : population) {
      g.best = std::min(g.best, x.makespan);
      g.worst = std::max(g.worst, x.makespan);
      sum += x.makespan;
    }
    g.mean = sum / static_cast<double>(population.size());
    g.evaluations = evaluations_;
    g.seconds = std::chrono::duration<double>(Clock::now() - begin_).count();
    stale_ = improved_ ? 0 : stale_ + 1;
    improved_ = false;
    result_.history.push_back(g);
    if (o_.progress) o_.progress(g);
  }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  /// N_p children: crossovers of random parent pairs, 4 children each, all mutated (§4.4.1).
  std::vector<Individual> offspring(const std::vector<Individual>& population) {
    const bool schedules = o_.mode != SearchOptions::Mode::kPoolOnly;
    const bool pools = o_.mode != SearchOptions::Mode::kScheduleOnly;
    const int n = p_.num_ops(), sizes = static_cast<int>(p_.sizes().size());
    std::vector<Individual> children;
    while (static_cast<int>(children.size()) < o_.population) {
      const int last = static_cast<int>(population.size()) - 1;
      const int a = uniform(0, last);
      int b = last > 0 ? uniform(0, last - 1) : 0;
      if (last > 0 && b >= a) ++b;
      const Individual& x = population[static_cast<size_t>(a)];
      const Individual& y = population[static_cast<size_t>(b)];
      Schedule s[2] = {x.schedule, y.schedule};
      if (schedules && n > 1) {
        const int cut = uniform(1, n - 1);
        s[0] = crossover(y.schedule, x.schedule, cut);  // Fig. 4.5: SCH_C1 = SCH_2[1..CR] + SCH_1's order
        s[1] = crossover(x.schedule, y.schedule, cut);
      }
      Pool q[2] = {x.pool, y.pool};
      if (pools && sizes > 1) {
        const int cut = uniform(1, sizes - 1);
        q[0] = crossover(p_, y.pool, x.pool, cut);  // Fig. 4.6: CLS_C1 = CLS_2[1..CR] + CLS_1[CR+1..N]
        q[1] = crossover(p_, x.pool, y.pool, cut);
      }
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2 && static_cast<int>(children.size()) < o_.population; ++j) {
          Individual c;
          c.schedule = schedules ? mutate(p_, s[i], o_.mutation, rng_) : s[i];
          c.pool = pools ? mutate(p_, q[j], o_.mutation, rng_) : q[j];
          children.push_back(std::move(c));
        }
    }
    return children;
  }

  /// N_p of the population and its children, drawn without replacement with probabilities
  /// softmax(t_norm / T) (Eq. 4.1) through Gumbel keys (the top N_p of t_norm / T + Gumbel noise are
  /// such a draw); with elitism the best first.
  std::vector<Individual> survivors(std::vector<Individual> all) {
    const double t_best = result_.makespan;
    std::vector<double> key(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const double u = std::uniform_real_distribution<double>(std::numeric_limits<double>::min(), 1.0)(rng_);
      const double t_norm = t_best > 0 ? (t_best - all[i].makespan) / t_best : 0.0;
      key[i] = t_norm / o_.temperature - std::log(-std::log(u));
    }
    if (o_.elitism) {
      size_t best = 0;
      for (size_t i = 1; i < all.size(); ++i)
        if (all[i].makespan < all[best].makespan) best = i;
      key[best] = std::numeric_limits<double>::infinity();
    }
    std::vector<size_t> order(all.size());
    std::iota(order.begin(), order.end(), 0);
    const size_t keep = std::min(all.size(), static_cast<size_t>(o_.population));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](size_t a, size_t b) { return key[a] != key[b] ? key[a] > key[b] : a < b; });
    std::vector<Individual> out;
    for (size_t k = 0; k < keep; ++k) out.push_back(std::move(all[order[k]]));
    return out;
  }

  const Problem& p_;
  const SearchOptions& o_;
  std::mt19937_64 rng_;
  Clock::time_point begin_, deadline_;
  int threads_ = 1;
  Schedule given_;
  Pool default_pool_;
  int64_t drawn_ = 0, evaluations_ = 0;
  int stale_ = 0;
  bool improved_ = false, found_ = false;
  SearchResult result_;
};

}  // namespace

SearchResult genetic_search(const Problem& p, const SearchOptions& options) { return Search(p, options).genetic(); }

SearchResult random_search(const Problem& p, const SearchOptions& options) {
  if (options.evaluations <= 0 && options.time_limit <= 0)
    throw SwapError("random search: needs evaluations (how many plans to draw) or a time_limit");
  SearchOptions o = options;
  o.patience = 0;
  o.generations = 0;
  return Search(p, o).random();
}

}  // namespace tilewise::swap

#include "partition/elimination.h"

#include <algorithm>
#include <set>
#include <string>

#include "tdl/errors.h"

namespace tilewise::partition {

namespace {

int64_t add_saturating(int64_t a, int64_t b) { return std::min(kInfinite, a + b); }

// A variable's elimination record: the table of its best value given the variables left.
struct Bucket {
  int var = -1;
  std::vector<int> scope;   // variables the best value depends on
  std::vector<int> argmin;  // row-major over scope
};

}  // namespace

EliminationResult eliminate(const std::vector<int>& domain_sizes, std::vector<Factor> factors,
                            const EliminationOptions& options) {
  const int n = static_cast<int>(domain_sizes.size());
  for (int d : domain_sizes) TW_ASSERT(d >= 1, "every variable needs a value");
  TW_ASSERT(options.order.empty() || options.order.size() == domain_sizes.size(),
            "an elimination order lists every variable once");
  // A variable with one value is no choice: drop it from every scope (the table keeps its layout).
  for (Factor& f : factors)
    f.vars.erase(std::remove_if(f.vars.begin(), f.vars.end(), [&](int v) { return domain_sizes[v] == 1; }),
                 f.vars.end());
  int64_t constant = 0;
  std::vector<std::vector<int>> var_factors(n);  // factor ids touching each variable (may be stale)
  std::vector<char> alive;
  for (size_t f = 0; f < factors.size(); ++f) {
    alive.push_back(factors[f].vars.empty() ? 0 : 1);
    if (factors[f].vars.empty()) constant = add_saturating(constant, factors[f].table.at(0));
    for (int v : factors[f].vars) var_factors[v].push_back(static_cast<int>(f));
  }
  std::vector<char> eliminated(n, 0);
  std::vector<Bucket> buckets;
  buckets.reserve(n);
  EliminationResult result;

  auto neighbours = [&](int v) {
    std::set<int> s;
    for (int f : var_factors[v])
      if (alive[f])
        for (int u : factors[f].vars)
          if (u != v) s.insert(u);
    return s;
  };
  // Size of the table eliminating v builds; ties go to the variable with fewer neighbours.
  auto weight = [&](int v) {
    double w = 1;
    auto ns = neighbours(v);
    for (int u : ns) w *= domain_sizes[u];
    return w * (1 + 1e-9 * static_cast<double>(ns.size()));
  };

  std::vector<double> weights(n);
  if (options.order.empty())
    for (int v = 0; v < n; ++v) weights[v] = weight(v);
  std::vector<char> dirty(n, 0);

  for (int step = 0; step < n; ++step) {
    if (std::chrono::steady_clock::now() > options.deadline)
      throw SearchTimeout("time limit reached after eliminating " + std::to_string(step) + " of " +
                          std::to_string(n) + " variables");
    int v = -1;
    if (!options.order.empty()) {
      v = options.order[step];
      TW_ASSERT(v >= 0 && v < n && !eliminated[v], "elimination order must list each variable once");
    } else {
      double best = 0;
      for (int u = 0; u < n; ++u) {
        if (eliminated[u]) continue;
        if (dirty[u]) weights[u] = weight(u), dirty[u] = 0;
        if (v < 0 || weights[u] < best) v = u, best = weights[u];
      }
    }
    // Combine the factors touching v and minimise v out.
    std::vector<int> fs;
    for (int f : var_factors[v])
      if (alive[f]) fs.push_back(f);
    std::sort(fs.begin(), fs.end());
    fs.erase(std::unique(fs.begin(), fs.end()), fs.end());
    std::set<int> scope_set;
    for (int f : fs)
      for (int u : factors[f].vars)
        if (u != v) scope_set.insert(u);
    std::vector<int> scope(scope_set.begin(), scope_set.end());
    int64_t entries = 1;
    for (int u : scope) {
      entries *= domain_sizes[u];
      if (entries > options.max_table)
        throw SearchTooLarge("exact search needs a table of more than " + std::to_string(options.max_table) +
                             " entries (the graph is too wide for this algorithm)");
    }
    result.largest_table = std::max(result.largest_table, entries * domain_sizes[v]);
    // Strides of each factor's variables within (scope, v).
    const int dv = domain_sizes[v];
    std::vector<std::vector<int64_t>> scope_stride(fs.size(), std::vector<int64_t>(scope.size(), 0));
    std::vector<int64_t> v_stride(fs.size(), 0);
    for (size_t i = 0; i < fs.size(); ++i) {
      const Factor& f = factors[fs[i]];
      int64_t stride = 1;
      for (int k = static_cast<int>(f.vars.size()) - 1; k >= 0; --k) {
        int u = f.vars[k];
        if (u == v) v_stride[i] = stride;
        else scope_stride[i][std::lower_bound(scope.begin(), scope.end(), u) - scope.begin()] = stride;
        stride *= domain_sizes[u];
      }
    }
    Factor out{scope, std::vector<int64_t>(entries)};
    Bucket bucket{v, scope, std::vector<int>(entries)};
    std::vector<int> idx(scope.size(), 0);
    std::vector<int64_t> base(fs.size(), 0);
    for (int64_t e = 0; e < entries; ++e) {
      int64_t best = kInfinite + 1;
      int arg = 0;
      for (int x = 0; x < dv; ++x) {
        int64_t sum = 0;
        for (size_t i = 0; i < fs.size(); ++i) sum = add_saturating(sum, factors[fs[i]].table[base[i] + x * v_stride[i]]);
        if (sum < best) best = sum, arg = x;
      }
      out.table[e] = std::min(best, kInfinite);
      bucket.argmin[e] = arg;
      // Advance the odometer over scope (last variable fastest).
      for (int k = static_cast<int>(scope.size()) - 1; k >= 0; --k) {
        for (size_t i = 0; i < fs.size(); ++i) base[i] += scope_stride[i][k];
        if (++idx[k] < domain_sizes[scope[k]]) break;
        for (size_t i = 0; i < fs.size(); ++i) base[i] -= scope_stride[i][k] * domain_sizes[scope[k]];
        idx[k] = 0;
      }
    }
    for (int f : fs) alive[f] = 0, factors[f].table.clear(), factors[f].table.shrink_to_fit();
    eliminated[v] = 1;
    buckets.push_back(std::move(bucket));
    if (scope.empty()) {
      constant = add_saturating(constant, out.table[0]);
    } else {
      int id = static_cast<int>(factors.size());
      factors.push_back(std::move(out));
      alive.push_back(1);
      for (int u : scope) var_factors[u].push_back(id), dirty[u] = 1;
    }
    for (int u : scope) {
      auto& list = var_factors[u];
      list.erase(std::remove_if(list.begin(), list.end(), [&](int f) { return !alive[f]; }), list.end());
    }
    if (options.progress && (step % 256 == 0 || step + 1 == n)) options.progress(step + 1, n);
  }
  // Back-substitution: the last eliminated variable depends on nothing left.
  result.values.assign(n, 0);
  for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) {
    int64_t e = 0;
    for (int u : it->scope) e = e * domain_sizes[u] + result.values[u];
    result.values[it->var] = it->argmin[e];
  }
  result.cost = constant;
  return result;
}

}  // namespace tilewise::partition

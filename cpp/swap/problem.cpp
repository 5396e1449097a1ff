// Problem validation and the derived tables (problem.h): sizes, working sets, the dependency DAG
// and the least pool.
#include "swap/problem.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <unordered_set>

namespace tilewise::swap {

const char* name_of(TensorKind k) { return k == TensorKind::kParameter ? "parameter" : "activation"; }

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string op_label(const std::vector<Op>& ops, int o) { return "op " + quoted(ops[static_cast<size_t>(o)].name); }

void check_names(const std::vector<Tensor>& tensors, const std::vector<Op>& ops) {
  std::map<std::string, int> seen;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const Tensor& x = tensors[t];
    if (x.name.empty()) throw SwapError("tensor " + std::to_string(t) + " has an empty name");
    if (!seen.emplace(x.name, static_cast<int>(t)).second)
      throw SwapError("two tensors are named " + quoted(x.name) + "; names must be unique");
    if (x.bytes < 1) throw SwapError("tensor " + quoted(x.name) + ": bytes must be >= 1, got " + std::to_string(x.bytes));
    if (x.live_out && x.kind == TensorKind::kParameter)
      throw SwapError("tensor " + quoted(x.name) + " is a parameter: parameters outlive the iteration already; "
                      "live_out applies to activations");
  }
  seen.clear();
  for (size_t o = 0; o < ops.size(); ++o) {
    const Op& op = ops[o];
    if (op.name.empty()) throw SwapError("op " + std::to_string(o) + " has an empty name");
    if (!seen.emplace(op.name, static_cast<int>(o)).second)
      throw SwapError("two ops are named " + quoted(op.name) + "; names must be unique");
    if (!std::isfinite(op.seconds) || op.seconds < 0)
      throw SwapError(op_label(ops, static_cast<int>(o)) + ": seconds must be finite and >= 0, got " +
                      std::to_string(op.seconds));
  }
}

void check_list(const std::vector<Tensor>& tensors, const std::vector<Op>& ops, int o, const std::vector<int>& list,
                const char* what) {
  std::unordered_set<int> seen;
  for (int t : list) {
    if (t < 0 || t >= static_cast<int>(tensors.size()))
      throw SwapError(op_label(ops, o) + ": " + what + " index " + std::to_string(t) + " is not a tensor (0.." +
                      std::to_string(static_cast<int>(tensors.size()) - 1) + ")");
    if (!seen.insert(t).second)
      throw SwapError(op_label(ops, o) + " lists tensor " + quoted(tensors[static_cast<size_t>(t)].name) +
                      " twice among its " + what + "s");
  }
}

/// Kahn's algorithm; on a cycle, walks back through unfinished predecessors until one repeats.
void check_acyclic(const std::vector<Op>& ops, const std::vector<std::vector<int>>& preds,
                   const std::vector<std::vector<int>>& succs) {
  const size_t n = ops.size();
  std::vector<int> waiting(n);
  std::vector<int> ready;
  for (size_t o = 0; o < n; ++o) {
    waiting[o] = static_cast<int>(preds[o].size());
    if (!waiting[o]) ready.push_back(static_cast<int>(o));
  }
  size_t done = 0;
  while (!ready.empty()) {
    const int o = ready.back();
    ready.pop_back();
    ++done;
    for (int s : succs[static_cast<size_t>(o)])
      if (--waiting[static_cast<size_t>(s)] == 0) ready.push_back(s);
  }
  if (done == n) return;
  int x = 0;
  while (!waiting[static_cast<size_t>(x)]) ++x;
  std::vector<int> seen_at(n, -1), walk;
  while (seen_at[static_cast<size_t>(x)] < 0) {
    seen_at[static_cast<size_t>(x)] = static_cast<int>(walk.size());
    walk.push_back(x);
    for (int p : preds[static_cast<size_t>(x)])
      if (waiting[static_cast<size_t>(p)]) {
        x = p;
        break;
      }
  }
  std::string msg = "dependency cycle: ";
  for (int k = static_cast<int>(walk.size()) - 1; k >= seen_at[static_cast<size_t>(x)]; --k)
    msg += op_label(ops, walk[static_cast<size_t>(k)]) + " -> ";
  throw SwapError(msg + op_label(ops, walk.back()) +
                  " (each must run before the next: it produces what the next reads, or reads a parameter "
                  "the next updates)");
}

}  // namespace

Problem Problem::make(std::vector<Tensor> tensors, std::vector<Op> ops, int64_t capacity, HostLink host) {
  check_names(tensors, ops);
  if (capacity < 1) throw SwapError("capacity must be >= 1 byte, got " + std::to_string(capacity));
  if (!(host.one_way > 0) || !std::isfinite(host.one_way) || !std::isfinite(host.both_ways) ||
      host.both_ways < host.one_way || host.both_ways > 2 * host.one_way)
    throw SwapError("host link: needs 0 < one_way <= both_ways <= 2 * one_way (bytes/s; both_ways is the two "
                    "directions together), got one_way " + std::to_string(host.one_way) + ", both_ways " +
                    std::to_string(host.both_ways));
  Problem p;
  const size_t nt = tensors.size(), no = ops.size();
  p.producer_.assign(nt, -1);
  std::vector<std::vector<int>> readers(nt), updates(nt);  // updates: an activation's in-place writers
  const auto reads = [&](int o, int t) {
    const std::vector<int>& in = ops[static_cast<size_t>(o)].inputs;
    return std::find(in.begin(), in.end(), t) != in.end();
  };
  for (size_t o = 0; o < no; ++o) {
    const int oi = static_cast<int>(o);
    check_list(tensors, ops, oi, ops[o].inputs, "input");
    check_list(tensors, ops, oi, ops[o].outputs, "output");
    for (int t : ops[o].outputs) {
      const Tensor& x = tensors[static_cast<size_t>(t)];
      int& prod = p.producer_[static_cast<size_t>(t)];
      if (prod >= 0 && x.kind == TensorKind::kActivation && reads(oi, t)) {
        updates[static_cast<size_t>(t)].push_back(oi);
        continue;
      }
      if (prod >= 0)
        throw SwapError(std::string(name_of(x.kind)) + " " + quoted(x.name) + " is written by " + op_label(ops, prod) +
                        " and " + op_label(ops, oi) + "; a tensor has at most one producer (a parameter one update; "
                        "an activation's later writers update it in place, listing it among their inputs too)");
      prod = oi;
    }
    for (int t : ops[o].inputs) readers[static_cast<size_t>(t)].push_back(oi);
  }
  for (size_t t = 0; t < nt; ++t) {
    const Tensor& x = tensors[t];
    if (x.kind == TensorKind::kActivation && p.producer_[t] < 0 && !readers[t].empty())
      throw SwapError("activation " + quoted(x.name) + " is read by " + op_label(ops, readers[t][0]) +
                      " but no op produces it; give it a producer, or make it a parameter (which starts on the host)");
  }
  // The DAG: producer -> reader; for an updated parameter, a reader listed before its update reads the
  // value it started with (reader -> update), one listed after reads the updated value (update ->
  // reader: Adam's weight update reads the new moments); for an activation updated in place, each
  // reader reads the value of the latest update listed before it (the producer's before the first):
  // that writer -> the reader -> the next update.
  p.preds_.assign(no, {});
  p.succs_.assign(no, {});
  const auto edge = [&](int a, int b) {
    if (a == b) return;
    p.succs_[static_cast<size_t>(a)].push_back(b);
    p.preds_[static_cast<size_t>(b)].push_back(a);
  };
  for (size_t t = 0; t < nt; ++t) {
    const int prod = p.producer_[t];
    if (prod < 0) continue;
    const std::vector<int>& ups = updates[t];  // listed after prod: the first writer listed produces
    for (int r : readers[t]) {
      if (r == prod && tensors[t].kind == TensorKind::kActivation)
        throw SwapError(op_label(ops, r) + " reads activation " + quoted(tensors[t].name) +
                        ", which it produces itself (only a parameter's update, or a later in-place update of an "
                        "activation, may read what it writes)");
      if (tensors[t].kind == TensorKind::kParameter) {
        if (r < prod) edge(r, prod);
        else edge(prod, r);
        continue;
      }
      // Updates listed before r (an update reading t counts the ones before itself).
      const size_t v = static_cast<size_t>(std::lower_bound(ups.begin(), ups.end(), r) - ups.begin());
      edge(v == 0 ? prod : ups[v - 1], r);
      const size_t next = v < ups.size() && ups[v] == r ? v + 1 : v;
      if (next < ups.size()) edge(r, ups[next]);
    }
  }
  for (auto* lists : {&p.preds_, &p.succs_})
    for (auto& l : *lists) {
      std::sort(l.begin(), l.end());
      l.erase(std::unique(l.begin(), l.end()), l.end());
    }
  check_acyclic(ops, p.preds_, p.succs_);

  // Sizes and working sets.
  for (const Tensor& x : tensors) p.sizes_.push_back(x.bytes);
  std::sort(p.sizes_.begin(), p.sizes_.end());
  p.sizes_.erase(std::unique(p.sizes_.begin(), p.sizes_.end()), p.sizes_.end());
  p.size_index_.resize(nt);
  p.tensors_per_size_.assign(p.sizes_.size(), 0);
  for (size_t t = 0; t < nt; ++t) {
    const int s = static_cast<int>(std::lower_bound(p.sizes_.begin(), p.sizes_.end(), tensors[t].bytes) - p.sizes_.begin());
    p.size_index_[t] = s;
    ++p.tensors_per_size_[static_cast<size_t>(s)];
    p.total_bytes_ += tensors[t].bytes;
  }
  p.working_.resize(no);
  p.ops_with_size_.assign(p.sizes_.size(), {});
  for (size_t o = 0; o < no; ++o) {
    std::vector<int>& w = p.working_[o];
    w = ops[o].inputs;
    for (int t : ops[o].outputs)
      if (std::find(w.begin(), w.end(), t) == w.end()) w.push_back(t);
    std::map<int, int> per_size;
    for (int t : w) ++per_size[p.size_index_[static_cast<size_t>(t)]];
    for (const auto& [s, c] : per_size) p.ops_with_size_[static_cast<size_t>(s)].push_back({static_cast<int>(o), c});
    p.total_seconds_ += ops[o].seconds;
  }
  for (size_t o = 0; o < no; ++o) {
    for (const std::vector<int>* part : {&p.working_[o], &ops[o].inputs, &ops[o].outputs}) {
      p.flat_at_.push_back(p.flat_.size());
      p.flat_.insert(p.flat_.end(), part->begin(), part->end());
    }
    p.flat_at_.push_back(p.flat_.size());
    p.op_seconds_.push_back(ops[o].seconds);
  }
  for (size_t t = 0; t < nt; ++t) {
    const Tensor& x = tensors[t];
    p.facts_.push_back({x.bytes, p.size_index_[t], x.kind == TensorKind::kParameter,
                        x.kind == TensorKind::kActivation && !x.live_out});
  }

  // The least pool: classes are contiguous ranges [a..b] of sizes (the monotone CLS of §4.4.3); a
  // class needs as many objects of sizes[b] as the most of its sizes one op holds at once.
  const size_t ns = p.sizes_.size();
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> best(ns + 1, kInf);
  std::vector<int> from(ns + 1, 0);
  best[0] = 0;
  std::vector<int> count(no, 0), touched;
  for (size_t a = 0; a < ns; ++a) {
    int most = 0;
    for (size_t b = a; b < ns; ++b) {
      for (const auto& [o, c] : p.ops_with_size_[b]) {
        if (!count[static_cast<size_t>(o)]) touched.push_back(o);
        most = std::max(most, count[static_cast<size_t>(o)] += c);
      }
      // Saturating: capacities are int64 bytes; a least pool that overflows cannot fit anyway.
      const int64_t cls_bytes = most > 0 && p.sizes_[b] > (kInf - best[a]) / most ? kInf : best[a] + p.sizes_[b] * most;
      if (cls_bytes < best[b + 1]) {
        best[b + 1] = cls_bytes;
        from[b + 1] = static_cast<int>(a);
      }
    }
    for (int o : touched) count[static_cast<size_t>(o)] = 0;
    touched.clear();
  }
  p.least_.bytes = best[ns];
  std::vector<std::pair<int, int>> ranges;
  for (int b = static_cast<int>(ns); b > 0; b = from[static_cast<size_t>(b)]) ranges.push_back({from[static_cast<size_t>(b)], b});
  std::reverse(ranges.begin(), ranges.end());
  p.least_.cls.assign(ns, 0);
  for (size_t c = 0; c < ranges.size(); ++c)
    for (int i = ranges[c].first; i < ranges[c].second; ++i) p.least_.cls[static_cast<size_t>(i)] = static_cast<int>(c) + 1;

  p.tensors_ = std::move(tensors);
  p.ops_ = std::move(ops);
  p.capacity_ = capacity;
  p.host_ = host;
  return p;
}

void Problem::check_feasible() const {
  if (least_.bytes <= capacity_) return;
  int worst = 0;
  int64_t worst_bytes = -1;
  for (int o = 0; o < num_ops(); ++o) {
    int64_t b = 0;
    for (int t : working_[static_cast<size_t>(o)]) b += tensors_[static_cast<size_t>(t)].bytes;
    if (b > worst_bytes) worst_bytes = b, worst = o;
  }
  throw Infeasible("no memory pool fits in the capacity of " + std::to_string(capacity_) +
                       " bytes: the least memory that works is " + std::to_string(least_.bytes) +
                       " bytes (every op's inputs and outputs resident while it runs; the largest, " +
                       op_label(ops_, worst) + ", alone holds " + std::to_string(worst_bytes) + " bytes)",
                   least_.bytes);
}

}  // namespace tilewise::swap

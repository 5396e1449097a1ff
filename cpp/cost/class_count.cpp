#include "cost/class_count.h"

#include <algorithm>
#include <numeric>

#include "tdl/errors.h"
#include "tdl/region_analysis.h"

namespace tilewise::cost {

namespace {

// Whether every device gets a non-empty share: each cut or split step leaves the smallest share of
// its dimension (variable) at least one element per part (numpy.array_split's smallest piece).
template <class Sizes, class Target>
bool shares_nonempty(Sizes sizes, const std::vector<int>& parts, int steps, Target target) {
  for (int i = 0; i < steps; ++i) {
    int x = target(i);
    if (x < 0) continue;
    if (sizes[x] < parts[i]) return false;
    sizes[x] /= parts[i];
  }
  return true;
}

bool split_nonempty(const OpView& op, const OpSplit& split, const std::vector<int>& parts, int steps) {
  return shares_nonempty(op.extents, parts, steps,
                         [&](int i) { return split[i].kind == tdl::StrategyKind::kReplicate ? -1 : split[i].var; });
}

bool tiling_nonempty(const Shape& shape, const Tiling& tiling, const std::vector<int>& parts, int steps) {
  return shares_nonempty(shape, parts, steps, [&](int i) { return tiling[i]; });
}

// One dimension's two sides for factored_sum. Side A is what a device reads or computes: either
// `ranges` indexed by the mixed-radix coordinates of `a_steps` (last fastest), or, when `ranges` is
// null, the nested array_split of [0, extent-1] at `a_steps`. Side B is the device's tile: the
// nested split of [0, extent-1] at `cut_steps`.
struct DimTerms {
  const std::vector<int>* a_steps = nullptr;
  const Range* ranges = nullptr;
  const std::vector<int>* cut_steps = nullptr;
  int64_t extent = 0;
};

// Buffers reused across calls (one set per thread): the count runs per op, strategy and tiling.
struct Scratch {
  std::vector<int> owner, group, members, group_steps, act;
  std::vector<int64_t> idx;
  std::vector<Range> a, tile;
};

// Sum over every device of prod_j |A_j| and of prod_j |A_j ∩ B_j|, where dimension j's sides depend
// only on the coordinates of its own steps. Dimensions linked by a step form a group summed over
// its own steps' coordinates (a descent that splits each range once per level rather than once per
// device); groups multiply; steps in no dimension multiply by their part count.
std::pair<int64_t, int64_t> factored_sum(const std::vector<DimTerms>& dims, const std::vector<int>& parts, int steps) {
  thread_local Scratch sc;
  const int rank = static_cast<int>(dims.size());
  sc.owner.assign(steps, -1);
  sc.group.resize(rank);
  std::iota(sc.group.begin(), sc.group.end(), 0);
  auto find = [&](int x) {
    while (sc.group[x] != x) x = sc.group[x] = sc.group[sc.group[x]];
    return x;
  };
  auto link = [&](int j, int i) {
    if (sc.owner[i] < 0) sc.owner[i] = j;
    else {
      int a = find(j), b = find(sc.owner[i]);
      if (a != b) sc.group[std::max(a, b)] = std::min(a, b);
    }
  };
  for (int j = 0; j < rank; ++j) {
    for (int i : *dims[j].a_steps) link(j, i);
    for (int i : *dims[j].cut_steps) link(j, i);
  }
  int64_t a_total = 1, b_total = 1;
  for (int i = 0; i < steps; ++i)
    if (sc.owner[i] < 0) a_total *= parts[i], b_total *= parts[i];
  for (int root = 0; root < rank; ++root) {
    if (find(root) != root) continue;
    sc.members.clear(), sc.group_steps.clear();
    for (int j = 0; j < rank; ++j)
      if (find(j) == root) sc.members.push_back(j);
    for (int i = 0; i < steps; ++i)
      if (sc.owner[i] >= 0 && find(sc.owner[i]) == root) sc.group_steps.push_back(i);
    const int nm = static_cast<int>(sc.members.size()), depth = static_cast<int>(sc.group_steps.size());
    // act[d][m]: bit 1 = the step at depth d moves member m's side A, bit 2 its tile.
    sc.act.assign(static_cast<size_t>(depth) * nm, 0);
    for (int d = 0; d < depth; ++d)
      for (int m = 0; m < nm; ++m) {
        const DimTerms& t = dims[sc.members[m]];
        int i = sc.group_steps[d];
        if (std::find(t.a_steps->begin(), t.a_steps->end(), i) != t.a_steps->end()) sc.act[d * nm + m] |= 1;
        if (std::find(t.cut_steps->begin(), t.cut_steps->end(), i) != t.cut_steps->end()) sc.act[d * nm + m] |= 2;
      }
    sc.idx.assign(static_cast<size_t>(depth + 1) * nm, 0);
    sc.a.assign(static_cast<size_t>(depth + 1) * nm, Range{});
    sc.tile.assign(static_cast<size_t>(depth + 1) * nm, Range{});
    for (int m = 0; m < nm; ++m) sc.a[m] = sc.tile[m] = {0, dims[sc.members[m]].extent - 1};
    int64_t a_sum = 0, b_sum = 0;
    auto descend = [&](auto&& self, int d) -> void {
      const size_t here = static_cast<size_t>(d) * nm;
      if (d == depth) {
        int64_t a = 1, b = 1;
        for (int m = 0; m < nm; ++m) {
          const DimTerms& t = dims[sc.members[m]];
          Range r = t.ranges ? t.ranges[sc.idx[here + m]] : sc.a[here + m];
          a *= r.size(), b *= r.intersect(sc.tile[here + m]).size();
        }
        a_sum += a, b_sum += b;
        return;
      }
      const int k = parts[sc.group_steps[d]];
      const size_t next = here + nm;
      for (int c = 0; c < k; ++c) {
        for (int m = 0; m < nm; ++m) {
          const int act = sc.act[here + m];
          sc.idx[next + m] = sc.idx[here + m];
          sc.a[next + m] = sc.a[here + m];
          sc.tile[next + m] = sc.tile[here + m];
          if (act & 1) {
            if (dims[sc.members[m]].ranges) sc.idx[next + m] = sc.idx[here + m] * k + c;
            else {
              const Range& r = sc.a[here + m];
              Range sub = tdl::split_range(r.size(), k, c);
              sc.a[next + m] = {r.lo + sub.lo, r.lo + sub.hi};
            }
          }
          if (act & 2) {
            const Range& r = sc.tile[here + m];
            Range sub = tdl::split_range(r.size(), k, c);
            sc.tile[next + m] = {r.lo + sub.lo, r.lo + sub.hi};
          }
        }
        self(self, d + 1);
      }
    };
    descend(descend, 0);
    a_total *= a_sum, b_total *= b_sum;
  }
  return {a_total, b_total};
}

}  // namespace

SplitReads::SplitReads(const OpView& op, const OpSplit& split, const std::vector<int>& parts, int steps,
                       ReadTables* cache)
    : parts_(&parts), steps_(steps), inputs_(op.input_shapes.size()) {
  if (!split_nonempty(op, split, parts, steps)) {
    for (auto& in : inputs_) in.exact = false;
    return;
  }
  std::shared_ptr<const std::vector<InputAccesses>> local;
  const auto& accesses = op.accesses ? *op.accesses : *(local = input_accesses(op));
  std::vector<int> coords(steps, 0), key, dim_steps;
  for (size_t t = 0; t < inputs_.size(); ++t) {
    Input& in = inputs_[t];
    const InputAccesses& acc = accesses[t];
    if (acc.sites.empty()) {
      in.read = false;
      continue;
    }
    const size_t rank = op.input_shapes[t].size();
    in.dims.assign(rank, nullptr);
    // Key of dimension j's table: (t, j, per step the variable it splits when that indexes j, else -1).
    std::vector<std::shared_ptr<const DimReads>*> slots(rank, nullptr);
    std::vector<std::shared_ptr<DimReads>> fresh(rank);
    std::vector<int64_t> combos(rank, 1);
    std::vector<int> used_by(steps, -1);
    bool disjoint = true, missing = false;  // disjoint: no step moves two dimensions
    for (size_t j = 0; j < rank; ++j) {
      const auto& vars = acc.dim_vars[j];
      key.assign({static_cast<int>(t), static_cast<int>(j)});
      dim_steps.clear();
      for (int i = 0; i < steps; ++i) {
        bool moves = split[i].kind != tdl::StrategyKind::kReplicate &&
                     std::find(vars.begin(), vars.end(), split[i].var) != vars.end();
        key.push_back(moves ? split[i].var : -1);
        if (!moves) continue;
        dim_steps.push_back(i);
        combos[j] *= parts[i];
        if (used_by[i] >= 0) disjoint = false;
        used_by[i] = static_cast<int>(j);
      }
      if (cache) {
        slots[j] = &cache->slot(key);
        if (*slots[j]) {
          in.dims[j] = *slots[j];
          continue;
        }
      }
      auto table = std::make_shared<DimReads>();  // only on a miss: most dimensions hit the cache
      table->steps = dim_steps;
      table->ranges.assign(combos[j], Range::nothing());
      fresh[j] = table;
      missing = true;
    }
    // Evaluation e sets every missing dimension's steps to its combination e (mod its count); a
    // dimension's range depends on its own steps only, so each combination is recorded once.
    auto evaluate = [&](int64_t e, size_t only) {
      std::fill(coords.begin(), coords.end(), 0);
      for (size_t j = 0; j < rank; ++j) {
        if (!fresh[j] || (only < rank && j != only)) continue;
        int64_t rest = e % combos[j];
        const auto& st = fresh[j]->steps;
        for (auto it = st.rbegin(); it != st.rend(); ++it)
          coords[*it] = static_cast<int>(rest % parts[*it]), rest /= parts[*it];
      }
      auto ranges = var_ranges(op.extents, split, parts, coords);
      for (const auto& one : acc.sites) {
        const Box box = tdl::input_regions(one, ranges, op.input_shapes)[t];
        for (size_t j = 0; j < rank; ++j) {
          if (!fresh[j] || (only < rank && j != only) || e >= combos[j]) continue;
          // An access reading nothing on some device leaves that device's box in every dimension at
          // once: the dimensions are no longer independent.
          if (box.dims[j].empty()) fresh[j]->nonempty = false;
          fresh[j]->ranges[e] = fresh[j]->ranges[e].include(box.dims[j]);
        }
      }
    };
    if (missing && disjoint) {
      int64_t calls = 1;
      for (size_t j = 0; j < rank; ++j)
        if (fresh[j]) calls = std::max(calls, combos[j]);
      for (int64_t e = 0; e < calls; ++e) evaluate(e, rank);
    } else if (missing) {
      for (size_t j = 0; j < rank; ++j)
        for (int64_t e = 0; fresh[j] && e < combos[j]; ++e) evaluate(e, j);
    }
    for (size_t j = 0; j < rank; ++j) {
      if (fresh[j]) {
        in.dims[j] = fresh[j];
        if (slots[j]) *slots[j] = fresh[j];
      }
      in.exact = in.exact && in.dims[j]->nonempty;
    }
  }
}

std::optional<int64_t> fetch_by_class(const SplitReads& reads, int t, const Shape& shape, const Tiling& tiling) {
  const SplitReads::Input& in = reads.inputs_[t];
  if (!in.exact) return std::nullopt;
  if (!in.read) return 0;
  const auto& parts = *reads.parts_;
  const int steps = reads.steps_;
  if (!tiling_nonempty(shape, tiling, parts, steps)) return std::nullopt;
  const int rank = static_cast<int>(shape.size());
  thread_local std::vector<std::vector<int>> cuts;
  thread_local std::vector<DimTerms> dims;
  cuts.resize(std::max<size_t>(cuts.size(), rank));
  dims.resize(rank);
  for (int j = 0; j < rank; ++j) cuts[j].clear();
  for (int i = 0; i < steps; ++i)
    if (tiling[i] != kReplicated) cuts[tiling[i]].push_back(i);
  for (int j = 0; j < rank; ++j) dims[j] = {&in.dims[j]->steps, in.dims[j]->ranges.data(), &cuts[j], shape[j]};
  auto [all, own] = factored_sum(dims, parts, steps);
  return all - own;
}

std::optional<int64_t> output_by_class(const OpView& op, const OpSplit& split, const Tiling& tiling,
                                       const std::vector<int>& parts, int steps) {
  const Shape& shape = op.output_shape;
  const auto& out_vars = op.desc->output_vars;
  const int rank = static_cast<int>(shape.size());
  if (static_cast<int>(out_vars.size()) != rank || !split_nonempty(op, split, parts, steps) ||
      !tiling_nonempty(shape, tiling, parts, steps))
    return std::nullopt;
  thread_local std::vector<int> dim_of;
  dim_of.assign(op.extents.size(), -1);
  for (int j = 0; j < rank; ++j) {
    // Each element is computed by exactly one combination of output coordinates only when the
    // output variables span the output, one per dimension.
    if (dim_of[out_vars[j]] >= 0 || op.extents[out_vars[j]] != shape[j]) return std::nullopt;
    dim_of[out_vars[j]] = j;
  }
  // Per element: its computers are one combination of output-step coordinates times every
  // coordinate of the other steps (nc classes of partials: the reduce steps' coordinates); its
  // holders one combination of cut-step coordinates times every replicated step (rq of them). The
  // element is "consistent" when some device both computes and holds it (the coordinates agree at
  // steps that are output steps and cuts), and the count of consistent elements is x below.
  // transfers.h then moves, per element: nc > 1: nc - 1 partials and rq results, one fewer when the
  // owner holds it; nc = 1: one result per holder that did not compute it (f of the holders compute
  // it when consistent: the steps that fix neither the computers nor the holders).
  int64_t n = 1, nc = 1, rq = 1, f = 1;
  for (int64_t e : shape) n *= e;
  thread_local std::vector<std::vector<int>> computed_steps, cut_steps;
  thread_local std::vector<DimTerms> dims;
  for (auto* v : {&computed_steps, &cut_steps}) {
    v->resize(std::max<size_t>(v->size(), rank));
    for (int j = 0; j < rank; ++j) (*v)[j].clear();
  }
  for (int i = 0; i < steps; ++i) {
    const bool out_step = split[i].kind == tdl::StrategyKind::kOutput;
    if (split[i].kind == tdl::StrategyKind::kReduce) nc *= parts[i];
    if (out_step) computed_steps[dim_of[split[i].var]].push_back(i);
    if (tiling[i] == kReplicated) {
      rq *= parts[i];
      if (!out_step) f *= parts[i];
    } else {
      cut_steps[tiling[i]].push_back(i);
    }
  }
  // Steps that are neither output steps nor cuts do not enter x: strip their multiplicity.
  int64_t free = 1;
  for (int i = 0; i < steps; ++i)
    if (split[i].kind != tdl::StrategyKind::kOutput && tiling[i] == kReplicated) free *= parts[i];
  dims.resize(rank);
  for (int j = 0; j < rank; ++j) dims[j] = {&computed_steps[j], nullptr, &cut_steps[j], shape[j]};
  auto sums = factored_sum(dims, parts, steps);
  const int64_t x = sums.second / free;
  return nc > 1 ? n * (nc - 1 + rq) - x : n * rq - f * x;
}

OpComm op_comm_by_class(const OpView& op, const OpSplit& split, const std::vector<Tiling>& input_tilings,
                        const Tiling& output_tiling, const std::vector<int>& parts, int steps, ReadTables* cache) {
  OpComm c;
  SplitReads reads(op, split, parts, steps, cache);
  std::vector<std::vector<Box>> by_device;  // the per-device count, only where classes do not apply
  for (size_t t = 0; t < op.input_shapes.size(); ++t) {
    auto e = fetch_by_class(reads, static_cast<int>(t), op.input_shapes[t], input_tilings[t]);
    if (!e) {
      if (by_device.empty()) by_device = device_reads(op, split, parts, steps);
      e = fetch_elements(by_device[t], device_tiles(op.input_shapes[t], input_tilings[t], parts, steps));
    }
    c.input_elements.push_back(*e);
  }
  auto out = output_by_class(op, split, output_tiling, parts, steps);
  c.output_elements = out ? *out
                          : output_elements(device_outputs(op, split, parts, steps), partial_classes(split, parts, steps),
                                            device_tiles(op.output_shape, output_tiling, parts, steps),
                                            outputs_are_disjoint(split));
  return c;
}

}  // namespace tilewise::cost

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

// The range a nested array_split of [0, n-1] gives at the listed steps' coordinates.
Range nested_range(int64_t n, const std::vector<int>& steps, const std::vector<int>& parts, const int* coords) {
  Range r{0, n - 1};
  for (int i : steps) {
    Range sub = tdl::split_range(r.size(), parts[i], coords[i]);
    r = {r.lo + sub.lo, r.lo + sub.hi};
  }
  return r;
}

// Mixed-radix index of the listed steps' coordinates (last step fastest).
int64_t combo_index(const std::vector<int>& steps, const std::vector<int>& parts, const int* coords) {
  int64_t e = 0;
  for (int i : steps) e = e * parts[i] + coords[i];
  return e;
}

// Sum over every device of prod_j a_j and of prod_j b_j, where dimension j's terms depend only on
// the coordinates of the steps in steps_of(j). Dimensions linked by a step form a group summed over
// its own steps' coordinates; groups multiply; steps in no list multiply by their part count.
// `term(j, coords)` returns {a_j, b_j} with coords indexed by step.
template <class StepsOf, class Term>
std::pair<int64_t, int64_t> factored_sum(int rank, const std::vector<int>& parts, int steps, StepsOf steps_of,
                                         Term term) {
  std::vector<int> owner(steps, -1), group(rank);
  std::iota(group.begin(), group.end(), 0);
  auto find = [&](int x) {
    while (group[x] != x) x = group[x] = group[group[x]];
    return x;
  };
  for (int j = 0; j < rank; ++j)
    steps_of(j, [&](int i) {
      if (owner[i] < 0) owner[i] = j;
      else {
        int a = find(j), b = find(owner[i]);
        if (a != b) group[std::max(a, b)] = std::min(a, b);
      }
    });
  int64_t a_total = 1, b_total = 1;
  for (int i = 0; i < steps; ++i)
    if (owner[i] < 0) a_total *= parts[i], b_total *= parts[i];
  std::vector<int> coords(steps, 0), members, group_steps;
  for (int root = 0; root < rank; ++root) {
    if (find(root) != root) continue;
    members.clear(), group_steps.clear();
    for (int j = 0; j < rank; ++j)
      if (find(j) == root) members.push_back(j);
    for (int i = 0; i < steps; ++i)
      if (owner[i] >= 0 && find(owner[i]) == root) group_steps.push_back(i);
    int64_t a_sum = 0, b_sum = 0;
    std::fill(coords.begin(), coords.end(), 0);
    for (;;) {
      int64_t a = 1, b = 1;
      for (int j : members) {
        auto [aj, bj] = term(j, coords.data());
        a *= aj, b *= bj;
      }
      a_sum += a, b_sum += b;
      int k = static_cast<int>(group_steps.size()) - 1;  // odometer, last step fastest
      for (; k >= 0; --k) {
        int i = group_steps[k];
        if (++coords[i] < parts[i]) break;
        coords[i] = 0;
      }
      if (k < 0) break;
    }
    a_total *= a_sum, b_total *= b_sum;
  }
  return {a_total, b_total};
}

}  // namespace

SplitReads::SplitReads(const OpView& op, const OpSplit& split, const std::vector<int>& parts, int steps)
    : parts_(&parts), steps_(steps), inputs_(op.input_shapes.size()) {
  if (!split_nonempty(op, split, parts, steps)) {
    for (auto& in : inputs_) in.exact = false;
    return;
  }
  std::vector<tdl::AccessSite> collected;
  if (!op.sites) collected = tdl::collect_access_sites(op.desc->body);
  const auto& sites = op.sites ? *op.sites : collected;
  std::vector<int> coords(steps, 0), vars;
  for (size_t t = 0; t < inputs_.size(); ++t) {
    Input& in = inputs_[t];
    std::vector<std::vector<tdl::AccessSite>> mine;  // one-site lists: each site's own box
    for (const auto& s : sites)
      if (s.tensor == static_cast<int>(t)) mine.push_back({s});
    if (mine.empty()) {
      in.read = false;
      continue;
    }
    const size_t rank = op.input_shapes[t].size();
    in.dims.resize(rank);
    for (size_t j = 0; j < rank && in.exact; ++j) {
      Dim& dim = in.dims[j];
      vars.clear();
      for (const auto& one : mine)
        if (one[0].dims[j]) tdl::collect_vars(*one[0].dims[j], vars);
      for (int i = 0; i < steps; ++i)
        if (split[i].kind != tdl::StrategyKind::kReplicate &&
            std::find(vars.begin(), vars.end(), split[i].var) != vars.end())
          dim.steps.push_back(i);
      int64_t combos = 1;
      for (int i : dim.steps) combos *= parts[i];
      dim.ranges.assign(combos, Range::nothing());
      std::fill(coords.begin(), coords.end(), 0);
      for (int64_t e = 0; e < combos && in.exact; ++e) {
        int64_t rest = e;
        for (auto it = dim.steps.rbegin(); it != dim.steps.rend(); ++it)
          coords[*it] = static_cast<int>(rest % parts[*it]), rest /= parts[*it];
        auto ranges = var_ranges(op.extents, split, parts, coords);
        for (const auto& one : mine) {
          Range r = tdl::input_regions(one, ranges, op.input_shapes)[t].dims[j];
          // An access reading nothing on some device leaves that device's box in every dimension at
          // once: the dimensions are no longer independent.
          if (r.empty()) in.exact = false;
          dim.ranges[e] = dim.ranges[e].include(r);
        }
      }
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
  std::vector<std::vector<int>> cuts(rank);
  for (int i = 0; i < steps; ++i)
    if (tiling[i] != kReplicated) cuts[tiling[i]].push_back(i);
  auto [all, own] = factored_sum(
      rank, parts, steps,
      [&](int j, auto&& each) {
        for (int i : in.dims[j].steps) each(i);
        for (int i : cuts[j]) each(i);
      },
      [&](int j, const int* coords) {
        const auto& dim = in.dims[j];
        Range r = dim.ranges[combo_index(dim.steps, parts, coords)];
        Range tile = nested_range(shape[j], cuts[j], parts, coords);
        return std::pair<int64_t, int64_t>{r.size(), r.intersect(tile).size()};
      });
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
  std::vector<int> dim_of(op.extents.size(), -1);
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
  std::vector<std::vector<int>> computed_steps(rank), cut_steps(rank);
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
  auto sums = factored_sum(
      rank, parts, steps,
      [&](int j, auto&& each) {
        for (int i : computed_steps[j]) each(i);
        for (int i : cut_steps[j]) each(i);
      },
      [&](int j, const int* coords) {
        Range c = nested_range(shape[j], computed_steps[j], parts, coords);
        Range t = nested_range(shape[j], cut_steps[j], parts, coords);
        return std::pair<int64_t, int64_t>{0, c.intersect(t).size()};
      });
  const int64_t x = sums.second / free;
  return nc > 1 ? n * (nc - 1 + rq) - x : n * rq - f * x;
}

OpComm op_comm_by_class(const OpView& op, const OpSplit& split, const std::vector<Tiling>& input_tilings,
                        const Tiling& output_tiling, const std::vector<int>& parts, int steps) {
  OpComm c;
  SplitReads reads(op, split, parts, steps);
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

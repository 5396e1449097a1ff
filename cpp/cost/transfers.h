// Who sends what (DESIGN.md "Cost of an op"; Tofu §6): the one enumeration of an op's transfers
// under given tilings and a split. The cost model counts it (comm_cost.h, memory.h) and the
// lowering (cpp/exec/lowering.cpp) materialises it, so the bytes the runtime moves equal the bytes
// the planners minimise by construction: there is no second copy of the rule to drift.
//
// Both enumerations are templates over a visitor so that counting, which runs in the planners'
// inner loop, neither allocates a box per cell nor pays for finding sources it does not need:
//   - a box visitor (the default) is called as visit(kind, src, dst, const Box& box) for every
//     box, local ones (src == dst: a copy within the device, no bytes) included;
//   - a count visitor declares `static constexpr bool kBoxes = false;` and is called as
//     visit(kind, src, dst, int64_t elements) for remote elements only. For fetches it gets one
//     call per device with src = -1 (sources do not change the count: every element outside the
//     device's own tile is remote); for disjoint outputs, one call per device likewise.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "tdl/errors.h"
#include "tdl/interval.h"

namespace tilewise::cost {

using tdl::Box;

/// What a transfer is for.
enum class TransferKind {
  kFetch,    ///< a cell of an input region the device's share reads (Tofu §6 MultiFetch)
  kPartial,  ///< a partial result the cell's owner combines into its computed buffer (reduction)
  kResult,   ///< a cell of the device's output tile, copied from a computed buffer
};

namespace detail {
template <class Visit, class = void>
struct WantsBoxes : std::true_type {};
template <class Visit>
struct WantsBoxes<Visit, std::void_t<decltype(std::decay_t<Visit>::kBoxes)>>
    : std::bool_constant<std::decay_t<Visit>::kBoxes> {};
}  // namespace detail

/// Whether a visitor wants boxes (the default) or remote element counts only.
template <class Visit>
constexpr bool wants_boxes = detail::WantsBoxes<Visit>::value;

/// The fetch rule: device `d` assembles `region` (what its share reads of one input) from the
/// cells of that input's `tiles` ([device]); a cell inside its own tile is read locally, any other
/// comes from the lowest device holding it.
template <class Visit>
void for_each_fetch(const Box& region, const std::vector<Box>& tiles, int d, Visit&& visit) {
  if (region.empty()) return;
  if constexpr (!wants_boxes<Visit>) {
    int64_t remote = region.volume() - tdl::intersect_volume(region, tiles[d]);
    if (remote > 0) visit(TransferKind::kFetch, -1, d, remote);
  } else {
    std::vector<const Box*> edges;
    edges.reserve(tiles.size());
    for (const Box& b : tiles) edges.push_back(&b);
    tdl::for_each_cell(region, edges, [&](const Box& cell) {
      if (tdl::inside(cell, tiles[d])) return visit(TransferKind::kFetch, d, d, cell);
      for (size_t s = 0; s < tiles.size(); ++s)
        if (tdl::inside(cell, tiles[s])) return visit(TransferKind::kFetch, static_cast<int>(s), d, cell);
      TW_ASSERT(false, "every element of a tensor has a holder");
    });
  }
}

/// The output conversion rule: turns what each device computed (`computed` [device], partial values
/// of class `classes[d]` when the split reduces) into the output tiling `tiles` [device], cell by
/// cell of the grid these boxes cut the output into. Per cell: its owner is the lowest device that
/// computed it and must hold it, else the lowest that computed it; the owner receives one partial
/// from the lowest computer of every other class (kPartial), then every device that must hold the
/// cell copies it (kResult) from its own computed buffer when it has the final value (the owner,
/// or any computer when there is one class), else from the owner's.
/// `disjoint` (outputs_are_disjoint: every device computes final values of its own region) lets a
/// count visitor skip the cells: a device then receives exactly its tile minus what it computed.
template <class Visit>
void for_each_conversion(const std::vector<Box>& computed, const std::vector<int>& classes,
                         const std::vector<Box>& tiles, bool disjoint, Visit&& visit) {
  const size_t n = computed.size();
  TW_ASSERT(tiles.size() == n, "one computed region and tile per device");
  if constexpr (!wants_boxes<Visit>) {
    if (disjoint) {
      for (size_t d = 0; d < n; ++d) {
        int64_t moved = tiles[d].empty() ? 0 : tiles[d].volume() - tdl::intersect_volume(tiles[d], computed[d]);
        if (moved > 0) visit(TransferKind::kResult, -1, static_cast<int>(d), moved);
      }
      return;
    }
  }
  TW_ASSERT(classes.size() == n, "one partial class per device");
  if (n == 0) return;
  // The cells lie in the bounding box of every region (cells outside all of them move nothing).
  std::vector<const Box*> edges;
  edges.reserve(2 * n);
  Box bounds = Box::nothing(tiles[0].dims.size());
  for (size_t d = 0; d < n; ++d)
    for (const Box* b : {&computed[d], &tiles[d]}) {
      edges.push_back(b);
      if (b->empty()) continue;
      if (bounds.empty()) bounds = *b;
      else
        for (size_t k = 0; k < b->dims.size(); ++k)
          bounds.dims[k] = {std::min(bounds.dims[k].lo, b->dims[k].lo), std::max(bounds.dims[k].hi, b->dims[k].hi)};
    }
  // Membership is constant on a cell, so a box holds the cell iff it holds the cell's first corner:
  // one comparison per dimension instead of two (this runs per device per cell in the planners).
  std::vector<char> computes(n), holds_any(n);
  for (size_t d = 0; d < n; ++d) computes[d] = !computed[d].empty(), holds_any[d] = !tiles[d].empty();
  auto covers = [](const Box& b, const Box& cell) {
    for (size_t k = 0; k < cell.dims.size(); ++k)
      if (cell.dims[k].lo < b.dims[k].lo || cell.dims[k].lo > b.dims[k].hi) return false;
    return true;
  };
  std::vector<int> computers, holders, reps;
  tdl::for_each_cell(bounds, edges, [&](const Box& cell) {
    computers.clear(), holders.clear(), reps.clear();
    for (size_t d = 0; d < n; ++d) {
      if (computes[d] && covers(computed[d], cell)) computers.push_back(static_cast<int>(d));
      if (holds_any[d] && covers(tiles[d], cell)) holders.push_back(static_cast<int>(d));
    }
    // Partials are combined even where no device must hold the cell (tilings that do not cover
    // the tensor, which real plans never have): the count has always included them.
    if (computers.empty()) return;
    auto holds = [&](int d) { return std::find(holders.begin(), holders.end(), d) != holders.end(); };
    int owner = computers[0];
    for (int d : computers)
      if (holds(d)) {
        owner = d;
        break;
      }
    for (int d : computers)  // the lowest computer of each class
      if (std::none_of(reps.begin(), reps.end(), [&](int r) { return classes[r] == classes[d]; })) reps.push_back(d);
    auto emit = [&](TransferKind kind, int src, int dst) {
      if constexpr (wants_boxes<Visit>) visit(kind, src, dst, cell);
      else if (src != dst) visit(kind, src, dst, cell.volume());
    };
    for (int r : reps)
      if (classes[r] != classes[owner]) emit(TransferKind::kPartial, r, owner);
    const bool one_class = reps.size() == 1;
    for (int q : holders) {
      bool has_final = q == owner || (one_class && std::find(computers.begin(), computers.end(), q) != computers.end());
      emit(TransferKind::kResult, has_final ? q : owner, q);
    }
  });
}

}  // namespace tilewise::cost

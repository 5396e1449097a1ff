// Tilings of tensors and op splits over a factorised device count (SoyBean §4.1, Tofu §5.2):
// k = k1*k2*...*km devices, each step i cutting every tensor and every op's iteration space
// into k_i parts (or replicating). A device is a mixed-radix coordinate (c1, ..., cm), the first
// step most significant: device id = ((c1*k2 + c2)*k3 + c3)...
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tdl/interval.h"
#include "tdl/strategy.h"

namespace tilewise::cost {

using tdl::Box;
using tdl::Range;
using tdl::Shape;

/// k = k1*k2*...*km with k1 >= k2 >= ... >= 2 (Tofu §5.2: prime factors, largest first); {} for k = 1.
std::vector<int> factorize(int k);

/// Product of `parts`, or of its first `steps` entries.
int64_t device_count(const std::vector<int>& parts, int steps = -1);

/// Coordinates of device `d` under the first `steps` of `parts` (first step most significant).
std::vector<int> device_coords(int64_t d, const std::vector<int>& parts, int steps);

/// A tensor tiling: per step, the dimension cut into k_i parts, or kReplicated.
constexpr int kReplicated = -1;
using Tiling = std::vector<int>;

/// The tile a device owns: each cut splits the current range of its dimension as
/// numpy.array_split does; replicated steps keep it. `coords` has one entry per cut used.
Box tile_box(const Shape& shape, const Tiling& cuts, const std::vector<int>& parts, const std::vector<int>& coords);

/// How an op's iteration space is split: one basic strategy per step.
using OpSplit = std::vector<tdl::Strategy>;

/// Each variable's range on a device: strategy i splits the current range of its variable.
std::vector<Range> var_ranges(const std::vector<int64_t>& extents, const OpSplit& split, const std::vector<int>& parts,
                              const std::vector<int>& coords);

/// "R C" for matrices (R = rows, C = columns), "P0 P2" for other ranks, "r" for replication.
std::string tiling_str(const Tiling& cuts, int rank);

}  // namespace tilewise::cost

// Counting an op's transfers by classes of equivalent devices rather than device by device
// (docs/PARTITION.md "Counting by classes"). The rule is transfers.h's; this is a second way to
// sum it, exact, whose cost grows with the distinct per-dimension ranges instead of the devices.
//
// A device is a coordinate per step. What it reads of an input is a box whose dimension j depends
// only on the coordinates of the steps that split a variable indexing dimension j (the TDL region
// of a dimension is a function of the ranges of the variables in its index expressions); its tile's
// dimension j only on the steps that cut j. Dimensions that share no step are independent, so
//   sum_d |R_d \ T_d| = sum_d prod_j |R_j| - sum_d prod_j |R_j ∩ T_j|
// factorises over groups of dimensions linked by shared steps: each group is summed over the
// coordinates of its own steps, and steps touching no dimension multiply. With every step aligned
// (the common case) a group has one dimension and the count costs sum_j prod_{i in j} k_i, not
// prod_i k_i. The output conversion has a closed form (see output_elements_by_class).
//
// The factorisation needs what real plans have: no device with an empty share of a variable or an
// empty tile, and no access that reads nothing on some device (its box would drop out of the
// bounding box in every dimension at once). Where that does not hold the functions say so and the
// caller counts device by device (comm_cost.h), which stays the oracle the tests compare with.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "cost/comm_cost.h"

namespace tilewise::cost {

/// One dimension of what an op reads of one input, over the devices: the steps whose split
/// variables index the dimension, and the region's range for each combination of their coordinates.
struct DimReads {
  std::vector<int> steps;     ///< ascending
  std::vector<Range> ranges;  ///< per mixed-radix combination of those steps' coordinates (last fastest)
  bool nonempty = true;       ///< no access reads nothing in this dimension on any device
};

/// Per-dimension read tables of one op, kept across splits. A dimension's table depends only on
/// which steps split the variables indexing it, so the strategies of a step, the steps of the
/// recursion and the refinement rounds share most tables. Not thread-safe: one op, one thread at a
/// time (the planners hand out ops, not splits, to threads).
class ReadTables {
 public:
  std::shared_ptr<const DimReads>& slot(const std::vector<int>& key) { return tables_[key]; }

 private:
  std::map<std::vector<int>, std::shared_ptr<const DimReads>> tables_;
};

/// What every device reads of each input under one split, kept per dimension (DimReads). Built once
/// per (op, split), then counted against any number of tilings.
class SplitReads {
 public:
  /// `cache`, if given, holds the op's tables across splits.
  SplitReads(const OpView& op, const OpSplit& split, const std::vector<int>& parts, int steps,
             ReadTables* cache = nullptr);

  /// Whether the class count applies to input `t` (else count it with fetch_elements).
  bool exact(int t) const { return inputs_[t].exact; }

 private:
  friend std::optional<int64_t> fetch_by_class(const SplitReads& reads, int t, const Shape& shape,
                                               const Tiling& tiling);
  struct Input {
    bool exact = true;
    bool read = true;  ///< false when the op never reads the input
    std::vector<std::shared_ptr<const DimReads>> dims;
  };
  const std::vector<int>* parts_;
  int steps_;
  std::vector<Input> inputs_;
};

/// sum over devices of |reads_d \ tiles_d| for input `t` (what fetch_elements counts from
/// device_reads and device_tiles), by classes; nullopt when the class count does not apply.
std::optional<int64_t> fetch_by_class(const SplitReads& reads, int t, const Shape& shape, const Tiling& tiling);

/// Elements the output conversion moves (what output_elements counts), in closed form; nullopt when
/// it does not apply (a split or tiling leaving some device an empty share, or output variables
/// that do not span the output).
std::optional<int64_t> output_by_class(const OpView& op, const OpSplit& split, const Tiling& tiling,
                                       const std::vector<int>& parts, int steps);

/// op_comm counted by classes where that applies and device by device elsewhere: equal to op_comm.
/// `cache`: the op's read tables across calls (optional).
OpComm op_comm_by_class(const OpView& op, const OpSplit& split, const std::vector<Tiling>& input_tilings,
                        const Tiling& output_tiling, const std::vector<int>& parts, int steps,
                        ReadTables* cache = nullptr);

}  // namespace tilewise::cost

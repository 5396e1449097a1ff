// Basic partition strategies of an op (Tofu §4.2): generated from the description, then
// made concrete (regions for given shapes) or symbolic (regions over extents).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tdl/region_analysis.h"

namespace tilewise::tdl {

enum class StrategyKind { kOutput, kReduce, kReplicate };
const char* name_of(StrategyKind k);

/// Split the iteration space along one variable (or replicate it).
struct Strategy {
  StrategyKind kind = StrategyKind::kReplicate;
  int var = -1;                     ///< split variable; -1 for replication
  Reducer reducer = Reducer::kSum;  ///< combines partial outputs of a kReduce strategy
};

/// Every basic strategy of the op: each splittable output variable ("output"), each
/// variable of the top-level reduction ("reduce"), then replication.
std::vector<Strategy> enumerate_strategies(const OpDesc& op);

/// Output variables that index an opaque function's result cannot be split: the opaque
/// kernel produces its whole result at once (batch_cholesky splits only along b).
std::vector<bool> splittable_output_vars(const OpDesc& op);

/// Variables along which partial outputs can be combined with a reducer: those of the
/// reducer at the top of the body (through sums of nested same-kind reducers and, for Sum,
/// scaling by factors that do not depend on them).
std::vector<std::pair<int, Reducer>> reducible_vars(const OpDesc& op);

/// Worker w's share of [0, n) split into k parts as numpy.array_split does.
Range split_range(int64_t n, int64_t k, int64_t w);

/// A strategy with concrete regions for `parts` workers.
struct ConcreteStrategy {
  Strategy strategy;
  std::vector<std::vector<Box>> input_regions;  ///< [input][worker]
  std::vector<Box> output_regions;              ///< [worker]
};
ConcreteStrategy concretize(const OpDesc& op, const Strategy& s, int64_t parts, const std::vector<int64_t>& extents,
                            const std::vector<Shape>& shapes);

/// A strategy with symbolic regions: worker w of k owns [w*X/k, (w+1)*X/k - 1].
struct SymbolicStrategy {
  Strategy strategy;
  std::vector<std::vector<std::vector<SymbolicRange>>> input_regions;  ///< [input][worker][dim]
  std::vector<std::vector<SymbolicRange>> output_regions;              ///< [worker][dim]
};
SymbolicStrategy symbolic(const OpDesc& op, const Strategy& s, int64_t parts);

/// Every input is read at exactly the output index, with no reduction.
bool is_elementwise(const OpDesc& op);

/// Per input: every read of it is at exactly the output index (`x` in `x[i, j] + b[j]`). Such an
/// input and the output tile alike under any output split, as an element-wise op's do.
std::vector<bool> aligned_inputs(const OpDesc& op);

}  // namespace tilewise::tdl

// Coarsening the frontier's problem (after Tofu §5.1, "coalescing operators"): an element-wise op
// takes the split that follows its aligned input's tiling, so that the op needs no fetch of that
// input and is no variable of its own: it joins the input's class in the search. Its output stays
// free (a re-tiling after the op is priced as usual). A restriction of the space, not an exact
// reduction: an element-wise op that fetches its input in another layout is left out. Tofu's rule
// also ties the output to the input; measured on the zoo that loses 39 % of the time at equal memory
// in the middle of the RNN's frontier (activations kept in a layout other than their op's), this
// rule at most 0.6 % (docs/FRONTIERS.md "Coarsening"). Every point found is a configuration of the
// full problem, costed exactly there.
#pragma once
#include <vector>

#include "cost/tiling.h"
#include "partition/pareto.h"
#include "partition/problem.h"

namespace tilewise::frontier {

/// Variables of the frontier problem (tensor classes 0..T-1, op classes T..T+O-1) tied into groups:
/// a tensor class and the op classes that follow it.
struct Ties {
  /// Per variable, its group (-1: free, a variable of its own).
  std::vector<int> group;
  /// Per group, its members (the tensor class first) and, per member, its configuration (index into
  /// the member's kept configurations) for each configuration of the tensor class: of[g][member][c].
  std::vector<std::vector<int>> members;
  std::vector<std::vector<std::vector<int>>> of;
  int tied_ops = 0;  ///< op classes that follow an input's tiling
};

/// Ties each op class whose member ops all read one input at exactly their output index
/// (tdl::aligned_inputs; same shape, same input class) to that input's class, where the op has a
/// kept split following every kept tiling of the input. `kept[v]`: the configurations (unpruned
/// indices) the problem keeps per variable.
Ties elementwise_ties(const partition::Problem& problem, const std::vector<std::vector<cost::Tiling>>& tensor_configs,
                      const std::vector<std::vector<cost::OpSplit>>& op_configs,
                      const std::vector<std::vector<int>>& kept);

/// The problem over groups and free variables: each group one variable with its tensor class's
/// configurations; node costs summed over members, edges inside a group folded into its node,
/// edges between the same two variables summed into one table.
struct Coarsened {
  partition::ParetoProblem problem;
  std::vector<int> variable;  ///< per coarse variable: a variable of the full problem it stands for
  std::vector<int> coarse;    ///< per full variable: its coarse variable
};
Coarsened coarsen(const partition::ParetoProblem& full, const Ties& ties);

/// The full problem's choice for a coarse choice.
std::vector<int> expand(const std::vector<int>& coarse_choice, const Coarsened& c, const Ties& ties);

}  // namespace tilewise::frontier

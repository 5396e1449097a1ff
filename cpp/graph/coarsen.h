// Graph coarsening (Tofu §5.1): group each forward op with its backward ops and each forward
// tensor with its gradients and optimizer state, coalesce element-wise ops and unrolled time
// steps, and build the coarsened graph on which the partition DP runs. The exact rules are in
// docs/ARCHITECTURE.md ("Coarsening").
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/linearity.h"

namespace tilewise::graph {

/// What a group holds: one forward op (+ its backward ops), one forward tensor (+ gradients,
/// gradient sums, optimizer updates and state), or several of these coalesced.
enum class GroupKind { kOp, kTensor, kMerged };
const char* name_of(GroupKind k);

/// A node of the coarsened graph.
struct Group {
  int id = -1;
  GroupKind kind = GroupKind::kOp;
  std::vector<int> ops;      ///< member op ids, ascending
  std::vector<int> tensors;  ///< member tensor ids, ascending
  std::string label;         ///< readable name built from the forward members
};

/// Which coalescing steps run (both by default; switch off to inspect the plain grouping).
struct CoarsenOptions {
  bool merge_elementwise = true;  ///< element-wise forward ops join their main input's group
  bool merge_timesteps = true;    ///< ops sharing an unroll key (and type) join one group
};

/// The coarsened graph: groups, the forward dataflow between them, and its linearity.
struct CoarseGraph {
  std::vector<Group> groups;                ///< ordered by first appearance in the forward graph
  std::vector<std::pair<int, int>> edges;   ///< one per connected pair, oriented producer -> consumer, sorted
  std::vector<int> op_group;                ///< group of every op of the graph
  std::vector<int> tensor_group;            ///< group of every tensor of the graph
  int elementwise_merges = 0;               ///< element-wise forward ops coalesced into their input's group
  int timestep_merges = 0;                  ///< forward ops coalesced into an earlier time step's group
  int unmirrored_pairs = 0;                 ///< group pairs linked by backward/update dataflow only
  LinearityResult linearity;                ///< pendants, terminals and series-parallel reduction

  bool is_linear() const { return linearity.linear; }
  /// Group counts by kind, members by phase, merges, linearity.
  std::string summary(const Graph& g) const;
  /// Graphviz DOT: op groups as boxes, tensor groups as ellipses, merged groups as octagons.
  std::string to_dot() const;
};

/// Coarsens `g` (Tofu §5.1). A pure function of the graph, linear in its size up to map lookups.
/// Throws GraphError when an optimizer update reads a tensor on a cycle of grad_of/updates links.
CoarseGraph coarsen(const Graph& g, const CoarsenOptions& options = {});

}  // namespace tilewise::graph

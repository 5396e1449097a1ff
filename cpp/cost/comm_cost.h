// Communication of one op under given tilings (DESIGN.md "Cost of an op"; SoyBean Eq. 2 with
// TDL regions): every device fetches what its share of the work reads and it does not own, then
// partial or misplaced outputs are converted to the output tiling. This is the single source of
// bytes for every planner, for `tw.evaluate`, and for what the runtime must move.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "cost/tiling.h"
#include "tdl/access_sites.h"
#include "tdl/op_desc.h"

namespace tilewise::cost {

/// How an op reads one input: its accesses, each alone in a list (input_regions of one list gives
/// that access's own box), and per dimension the variables any access indexes it with.
struct InputAccesses {
  std::vector<std::vector<tdl::AccessSite>> sites;
  std::vector<std::vector<int>> dim_vars;
};

/// An op with the shapes it runs on: enough to place its work on devices.
struct OpView {
  const tdl::OpDesc* desc = nullptr;
  std::vector<Shape> input_shapes;
  Shape output_shape;
  std::vector<int64_t> extents;  ///< every variable's extent (tdl::infer_extents)
  /// The description's access sites, collected once (filled by `make_view`; collected per call when null).
  std::shared_ptr<const std::vector<tdl::AccessSite>> sites;
  /// Per input, its accesses one by one (filled by `make_view`; built per call when null).
  std::shared_ptr<const std::vector<InputAccesses>> accesses;
};

/// Per input of `op`, its accesses and the variables indexing each dimension.
std::shared_ptr<const std::vector<InputAccesses>> input_accesses(const OpView& op);

/// An op view with its access sites collected.
OpView make_view(const tdl::OpDesc& desc, std::vector<Shape> input_shapes, Shape output_shape);

/// Each device's tile of a tensor, devices numbered as in device_coords.
std::vector<Box> device_tiles(const Shape& shape, const Tiling& cuts, const std::vector<int>& parts, int steps);

/// What each device reads of each input under a split: [input][device].
std::vector<std::vector<Box>> device_reads(const OpView& op, const OpSplit& split, const std::vector<int>& parts,
                                           int steps);

/// The output region each device computes (whole or partial values; empty when its share of any
/// variable is empty): [device].
std::vector<Box> device_outputs(const OpView& op, const OpSplit& split, const std::vector<int>& parts, int steps);

/// Devices whose outputs are partial values of the same addends share a class: the mixed-radix
/// number of their coordinates at the split's reduce steps (all 0 when nothing is reduced).
std::vector<int> partial_classes(const OpSplit& split, const std::vector<int>& parts, int steps);

/// Elements fetched so that every device holds what it reads: sum over d of |reads_d \ tiles_d|
/// (transfers.h `for_each_fetch`, counted).
int64_t fetch_elements(const std::vector<Box>& reads, const std::vector<Box>& tiles);

/// Elements moved to turn computed outputs into the output tiling (transfers.h
/// `for_each_conversion`, counted): the owner of each element fetches one partial from each other
/// class, then every other device that must hold it fetches the result unless it computed the final
/// value itself. Replicated computation of final values gives one class; a reduce-scatter into a
/// partitioned tiling moves (k-1)/k of the output, an all-reduce into a replicated one 2(k-1) times
/// it (as a ring all-reduce does). `disjoint`: the split's outputs_are_disjoint, which lets the
/// count skip the cells (each device then receives its tile minus what it computed).
/// `received`, if given, gets the elements each device receives; `partials`, the partial sums each
/// owner receives in the reduction (what it must stage before combining).
int64_t output_elements(const std::vector<Box>& computed, const std::vector<int>& classes,
                        const std::vector<Box>& tiles, bool disjoint, std::vector<int64_t>* received = nullptr,
                        std::vector<int64_t>* partials = nullptr);

/// `output_elements` by the cells, whatever the split (disjoint = false).
int64_t conversion_elements(const std::vector<Box>& computed, const std::vector<int>& classes,
                            const std::vector<Box>& tiles, std::vector<int64_t>* received = nullptr,
                            std::vector<int64_t>* partials = nullptr);

/// True when every step splits an output variable: each device computes final values of its own
/// region, disjoint from the others'.
bool outputs_are_disjoint(const OpSplit& split);

/// Whether some step splits a reduction variable (devices compute partial values).
bool reduces(const OpSplit& split);

/// Whether a device writes its output tile in place: it computes final values (the split reduces
/// nothing) of exactly its tile. Otherwise it computes into a buffer, which the memory estimate
/// counts and the runtime allocates.
bool writes_in_place(bool reduces, const Box& computed, const Box& tile);

/// Elements one op moves, per input and for its output.
struct OpComm {
  std::vector<int64_t> input_elements;
  int64_t output_elements = 0;
  int64_t total() const;
};

/// The whole communication of an op over the first `steps` steps of `parts`.
OpComm op_comm(const OpView& op, const OpSplit& split, const std::vector<Tiling>& input_tilings,
               const Tiling& output_tiling, const std::vector<int>& parts, int steps);

}  // namespace tilewise::cost

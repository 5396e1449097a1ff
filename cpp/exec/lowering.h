// Lowering (Tofu §6, SoyBean §5.2): a graph and a partition plan become, for every op and every
// device, the regions to assemble, the work to run and the transfers that convert its output to
// the output tiling. The transfers are cost::for_each_fetch and cost::for_each_conversion
// (cost/transfers.h) materialised: the enumeration the cost model counts, so the bytes the runtime
// moves equal plan.comm_bytes by construction; tests check it anyway.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "cost/placement.h"
#include "exec/program.h"
#include "graph/graph.h"
#include "tdl/expr.h"
#include "tdl/interval.h"

namespace tilewise::exec {

using tdl::Box;
using tdl::Range;

/// A box of a tensor a device copies from `src`'s buffer (src == the device itself: a local copy).
struct Transfer {
  int src = -1;
  Box what;
};

/// How a device gets one input of an op.
struct SlotPlan {
  Box region;                   ///< what the device's share reads (empty: nothing)
  bool use_tile = false;        ///< region == the device's own tile: read the tile in place
  std::vector<Transfer> parts;  ///< otherwise: the cells assembling `region`, local or fetched
};

/// One device's share of one op.
struct DeviceOp {
  bool active = false;              ///< its iteration space is non-empty
  std::vector<Range> vars;          ///< every variable's range
  std::vector<SlotPlan> slots;      ///< per input
  Box computed;                     ///< output region it computes (final values or partial sums)
  bool direct = false;              ///< computed == its output tile, final values: write the tile in place
  Box tile;                         ///< its tile of the output
  std::vector<Transfer> reduce_in;  ///< as owner: partials to combine into its computed buffer
  std::vector<Transfer> result_in;  ///< cells of its tile to copy from a computed buffer (own or the owner's)
};

/// One op, lowered: every device's share and what the reduce and distribute phases must do.
struct OpPlan {
  int op = -1;
  bool reduces = false;       ///< some device combines partials (phase C does something)
  bool remote_results = false;  ///< some device reads another's computed buffer (C or D)
  std::vector<int64_t> extents;               ///< every variable's full extent
  tdl::Reducer reducer = tdl::Reducer::kSum;  ///< combines partials of reduce steps
  std::vector<DeviceOp> devices;
};

/// A graph lowered under a placement: tiles of every tensor, the ops in graph order and, built from
/// them, every device's program (what executors run).
struct Lowered {
  std::vector<int> parts;
  int devices = 1;
  std::vector<std::vector<Box>> tiles;  ///< [tensor][device]
  std::vector<OpPlan> ops;              ///< in graph order
  std::vector<int> storage_of;          ///< [tensor]: the tensor whose tiles it uses (in-place updates)
  std::vector<int> last_use;            ///< [tensor]: op after which its tiles are freed (-1: never in a step)
  std::vector<int> kept;                ///< results held after a step for reading (freed before the next)
  std::vector<Program> programs;        ///< [device]
};

/// Lowers `plan` for `g`. Throws ExecError when the plan does not fit the graph.
/// `keep`: tensors to hold after a step (besides the results no op reads). `in_place`: (tensor,
/// total) pairs, each tensor computed in the storage of `total`, a computed tensor its op reads at
/// exactly its output index and nothing else reads (gradient sums written into their running total,
/// swapped execution's plans with in-place sums); ExecError otherwise.
Lowered lower(const graph::Graph& g, const cost::Placement& plan, const std::vector<int>& keep = {},
              const std::vector<std::pair<int, int>>& in_place = {});

/// The bytes each device sends and receives in a step under `plan` (the plan's prediction per
/// device), from the transfer enumeration of cost/transfers.h, independently of the programs:
/// sent [device], received [device].
std::pair<std::vector<int64_t>, std::vector<int64_t>> predicted_traffic(const graph::Graph& g,
                                                                        const cost::Placement& plan);

}  // namespace tilewise::exec

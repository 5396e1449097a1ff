// Each device's share of each op of a lowered plan timed as its native kernel runs it alone (FlexFlow
// and OptCNN measure an op once per parallel configuration; TensorOpt §3.2 takes op times from them).
// tw.measure_ops(graph, plans=...) compares a plan's shares with the whole op timed the same way: the
// simulator then prices a share at the op's measured seconds times that ratio, instead of scaling by
// work alone (a GEMM on half the rows packs the same weights: measured 0.55-0.60x the time, not 0.5x).
#pragma once
#include <string>
#include <vector>

#include "exec/lowering.h"
#include "graph/graph.h"

namespace tilewise::exec {

/// What a share's time depends on: the sizes of its variables' ranges and of its input regions. Equal
/// for equal shapes wherever they lie (a border share of a padded convolution has smaller regions).
std::string share_signature(const DeviceOp& dev);

/// One op's share as timed: the op, the share's signature, its kernel's seconds over the whole op's.
struct ShareRatio {
  int op = -1;
  std::string signature;
  double ratio = 0;
};

/// Every distinct (op, signature) of the lowered plans `lows` whose op declares a native kernel that
/// takes the share, timed alone beside the whole op's call from `whole` (a one-device lowering of the
/// same graph): inputs filled with ones (integer inputs with zeros: valid ids), each call run once to
/// warm up, then `repeats` rounds of the whole op and the op's shares in turns (in batches of at most
/// 256 MiB of buffers), each run from cold caches; the ratio of the medians. A share equal to the
/// whole op is 1 exactly. A share its kernel declines, or rejects (an input value it cannot take), is
/// left out: the simulator scales that one by work.
std::vector<ShareRatio> time_share_ratios(const graph::Graph& g, const Lowered& whole,
                                          const std::vector<const Lowered*>& lows, int repeats);

}  // namespace tilewise::exec

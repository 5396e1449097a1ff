// SwapAdvisor's swap planner (§4.3.2): for a schedule and a pool, which tensors to swap out under
// memory pressure and when every swap runs. docs/SWAP.md states the rules; in short:
//  * a tensor goes to a free object of its size class (the earliest freed first), else it evicts one
//    of that class: among the candidates (resident, not used by the running op) the planner estimates
//    each pair's stall, the time the victim's copy out (none when the host has it) plus the newcomer's
//    copy in (none for an op's output) exceed the compute since the victim's last use (op seconds at
//    the host link's one-way bandwidth). The threshold: a candidate qualifies when that stall is zero;
//    among qualifying candidates Belady's rule picks the one used furthest in the future (then
//    unchanged before changed, then least recently used). Fallback when none qualifies: the least
//    stall, then the same order;
//  * swap-ins run on their stream in the order their ops need them, each as soon as its object is free
//    (waiting for the eviction that frees it): as early as the pool allows;
//  * activations are freed after their last use unless live out; parameters stay until evicted;
//  * double pass: the first pass starts with every parameter on the host, the second with the
//    parameters the first left resident. Those evicted in the second pass before their first use were
//    never needed and start on the host; those not back in their object at the end start on the host
//    and are swapped in before their first use; updated ones resident at the end but not at the start
//    are copied out. So the parameters resident at the end of the iteration are those at its start.
#pragma once
#include "swap/plan.h"

namespace tilewise::swap {

/// Plans the swaps of `schedule` with `pool`. `checked`: validate the schedule and pool first
/// (check_schedule, check_pool; the search skips it for the ones it made itself).
SwapPlan plan_swaps(const Problem& p, const Schedule& schedule, const Pool& pool, bool double_pass, bool checked = true);

/// Unlimited memory (SwapAdvisor §5.1's ideal): one object per tensor, double pass, hence no swap.
SwapPlan ideal_plan(const Problem& p, const Schedule& schedule);

}  // namespace tilewise::swap

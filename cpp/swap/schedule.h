// Operator schedules (SwapAdvisor §4.3.1, §4.4.2): a schedule is a topological order of the ops, run
// one at a time on the compute stream. The genetic search makes new ones by crossover (Fig. 4.5) and
// by a mutation that mimics a dataflow scheduler.
#pragma once
#include <random>
#include <vector>

#include "swap/problem.h"

namespace tilewise::swap {

/// Op indices in the order they run.
using Schedule = std::vector<int>;

/// Throws SwapError unless `s` holds every op once and each after its predecessors (the message
/// names the two ops out of order and the tensor that orders them).
void check_schedule(const Problem& p, const Schedule& s);

/// The order the ops were given in when that is topological; otherwise Kahn's order with ties broken
/// by that order (the framework's default schedule).
Schedule given_order(const Problem& p);

/// Kahn's order taking the op made ready last (ties: the given order): a depth-first walk that
/// finishes a branch before starting the next, so fewer activations are alive at once (a GA seed).
Schedule depth_first_order(const Problem& p);

/// A uniformly random choice among the ready ops at every step (the GA's first generation, ODSwap's
/// "random topological order").
Schedule random_order(const Problem& p, std::mt19937_64& rng);

/// Fig. 4.5: `head[0..cut)` then the other ops in the order of `rest`. Topological when both are [43].
Schedule crossover(const Schedule& head, const Schedule& rest, int cut);

/// §4.4.2: schedules the ops again as a dataflow scheduler would, taking at each step with probability
/// `p` a random ready op and otherwise the ready op that `s` runs earliest.
Schedule mutate(const Problem& p, const Schedule& s, double probability, std::mt19937_64& rng);

}  // namespace tilewise::swap

// Threads kept for the searches' parallel loops. A frontier search eliminates hundreds of
// variables in a row, each table's entries split over threads; starting threads for each table
// cost more than the work on most of them (rnn-12-16k: 445 eliminations, a weighted-sum pass took
// 10 ms with a thread started per table and 4.7 ms on one). The pool starts its workers once and
// hands them each loop.
//
// A loop is `participants` calls of body(slot) (slot 0 on the caller's thread), each pulling work
// from a counter of its own; it returns when every call that started has returned. The caller
// never waits for a worker to start: a worker busy with another loop (another search, another
// Python thread) simply joins late or not at all, and the caller's own call does the rest. So
// nested and concurrent loops cannot deadlock, and the result never depends on how many joined.
#pragma once
#include <functional>

namespace tilewise::partition {

/// Runs body(0) here and body(1..participants-1) on pool workers that are free, returns when all
/// started calls have returned. `body` must share its work out dynamically (a call may not start).
/// In a forked child (the pool's workers are the parent's) everything runs here. The first exception
/// a call throws is rethrown here once every started call has returned.
void run_on_pool(int participants, const std::function<void(int slot)>& body);

}  // namespace tilewise::partition

// The discrete-event simulator: tasks on streams, sharing resources (links, cores) while they run.
// It is the time model of every plan and the fitness of the searches (SwapAdvisor §4.2-4.3,
// TensorOpt §3.2), so it is exact for its model and runs in O((tasks + deps) log tasks) plus the
// sharing updates (each update costs the tasks active on the resources whose count changed; at most
// one task per stream is active, so an update costs at most `streams`).
//
// The model. A task starts when the task before it on its stream and all its `after` tasks have
// ended (at the latest of those ends; at 0 without any). It spends its fixed `seconds` first, alone,
// then does `work` units at
//     rate = min(max_rate (when > 0), capacity_r / n_r for each of its resources r),
// where n_r counts the tasks in their work phase on r at that moment (processor sharing). Rates
// change only when a task enters or leaves a work phase, so the next event is always one of: a fixed
// phase ending, a work phase completing, a task becoming ready.
//
// Stated approximation: this is equal sharing, not max-min fairness. A task held below its share by
// its max_rate or by another, busier resource does not hand the slack to the other tasks on r (two
// transfers on a link of capacity 10, one capped at 2: each still gets 5, not 2 and 8).
//
// Ties. Events at the same time are handled in order of task index, all before the rates are
// recomputed; no time passes between them, so starts and ends do not depend on that order. Work
// left below 1e-12 of a task's work after a rate change counts as done (rounding, not work).
//
// Memory. A task adds `memory` (negative: frees) to its pool's running sum when it starts. Among
// starts at the same time frees count first, so a buffer freed and another allocated at one instant
// never appear together: the peak is the largest running sum after all starts at one time. A pool
// starts at 0, so its peak is at least 0.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tilewise::sim {

/// Something tasks share fairly while they use it at one time: a link, a machine's cores.
struct Resource {
  std::string name;
  double capacity = 1;  ///< work units per second in total (bytes/s for a link, cores for a CPU)
};

/// One unit of the simulation: a kernel, a transfer, an allocation.
struct Task {
  std::string name;
  int stream = 0;       ///< tasks of one stream run one at a time, in the order of the task list
  double seconds = 0;   ///< fixed part, first: not slowed by sharing (latency, a kernel's time alone)
  double work = 0;      ///< then `work` units at the shared rate (see the file comment)
  double max_rate = 0;  ///< the task's own top rate (a transfer alone); 0 = unbounded (resources bound it)
  std::vector<int> resources;  ///< indices into the resource list
  std::vector<int> after;      ///< tasks that must end before it starts (any order in the list: a DAG)
  int64_t memory = 0;          ///< bytes allocated (+) or freed (-) at its start, counted in `memory_pool`
  int memory_pool = -1;        ///< which pool (device) `memory` counts against; -1 none
};

/// When each task ran, and what that adds up to.
struct Timeline {
  double makespan = 0;                ///< the latest end (0 without tasks)
  std::vector<double> start, end;     ///< per task
  std::vector<double> stream_busy;    ///< per stream: seconds with a task running
  std::vector<int64_t> peak_memory;   ///< per memory pool 0..max used: the highest running sum
};

/// Runs `tasks` on `streams` streams sharing `resources`. Throws std::invalid_argument naming the
/// task for: a stream outside 0..streams-1, an `after`, resource or memory pool index out of range, a
/// resource listed twice by one task, negative or non-finite seconds/work/max_rate, work > 0 with
/// neither max_rate nor resources, a resource capacity not positive and finite, and a dependency
/// cycle (through `after` or stream order), naming the tasks on it.
Timeline simulate(const std::vector<Task>& tasks, int streams, const std::vector<Resource>& resources);

}  // namespace tilewise::sim

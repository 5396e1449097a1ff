// The strided copy plan of a box copy (box_copy.h), as data: what a GPU pack/unpack kernel needs to
// assemble a fetched region in one launch (Tofu §6 MultiFetch), one thread per element. Host code
// only; the CPU runtime copies with box_copy.h, whose run merging this follows exactly, and the
// tests check `run_copy_plan` (the host reference of the kernel's index arithmetic) against it.
#pragma once
#include <cstdint>
#include <vector>

#include "tdl/interval.h"

namespace tilewise::exec {

/// dst[dst_base + ...] = src[src_base + ...] over `runs` contiguous runs of `run_length` floats.
/// The runs are an odometer over `extents` (outermost first) with per-dimension strides in floats;
/// dimensions covered whole in both buffers are merged into the run, so a box of whole rows is one
/// run. No runs (extents empty, run_length 1) is a rank-0 copy of one element; an empty `what` has
/// run_length 0.
struct CopyPlan {
  int64_t src_base = 0, dst_base = 0;  ///< floats from the start of each buffer to the first element
  int64_t run_length = 0;              ///< contiguous floats per run (0: nothing to copy)
  std::vector<int64_t> extents;        ///< runs per outer dimension, outermost first
  std::vector<int64_t> src_strides, dst_strides;  ///< floats between runs, per outer dimension

  /// Number of runs (the product of extents; 1 with no outer dimension).
  int64_t runs() const;
  /// Floats copied.
  int64_t elements() const { return run_length == 0 ? 0 : runs() * run_length; }
  /// The (src, dst) offsets of flat element `i` in [0, elements()): a kernel thread's arithmetic.
  void offsets(int64_t i, int64_t* src, int64_t* dst) const;
};

/// The plan of dst[what] = src[what] with `src` holding `src_box` and `dst` holding `dst_box`
/// (row-major, global coordinates; `what` inside both), as copy_box runs it.
CopyPlan plan_copy(const tdl::Box& src_box, const tdl::Box& dst_box, const tdl::Box& what);

/// Runs a plan on the host, element by element through CopyPlan::offsets (the reference a device
/// kernel is tested against).
void run_copy_plan(const CopyPlan& plan, const float* src, float* dst);

}  // namespace tilewise::exec

// What the swap stage plans for (SwapAdvisor, thesis ch. 4): one device whose memory cannot hold an
// iteration's tensors, a host behind a duplex link, ops with known times. The planner, ODSwap, the
// simulation and the genetic search all read one validated Problem, built once and shared by threads.
//
// Tensors are of two kinds (§4.1): a *parameter* lives on the host between iterations (it starts
// there, and evicting it unchanged drops it without a copy); an *activation* is produced by an op and
// freed after its last use, unless it is live out (the backward pass of a partial graph needs it).
// A parameter may be the output of one op: its update, in place. Every other op reading it reads the
// old value, so runs before the update; evicting it once updated copies it out. An activation may be
// updated in place too (a gradient summed into its total as parts arrive, MXNet's kAddTo): ops listed
// after its producer that list it among both inputs and outputs; they run in the order listed, and an
// op that reads it reads the value of the latest update listed before it.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tilewise::swap {

/// A problem, schedule or pool the swap stage cannot take; the message names the tensor, op or
/// field and what would be valid. Python: tw.swap.SwapError (a ValueError).
struct SwapError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// No pool within the capacity holds what some op needs at once. Python: tw.swap.InfeasibleError
/// (a SwapError) with `least_memory`, the smallest capacity that would work.
class Infeasible : public SwapError {
 public:
  Infeasible(const std::string& what, int64_t least_memory) : SwapError(what), least_memory_(least_memory) {}
  int64_t least_memory() const { return least_memory_; }

 private:
  int64_t least_memory_;
};

enum class TensorKind { kParameter, kActivation };

/// "parameter" / "activation".
const char* name_of(TensorKind k);

/// One tensor of the iteration.
struct Tensor {
  std::string name;
  int64_t bytes = 0;
  TensorKind kind = TensorKind::kActivation;
  bool live_out = false;  ///< an activation kept to the end of the schedule (copied out when evicted)
};

/// One operator: reads `inputs`, writes `outputs` (tensor indices), computes for `seconds`.
struct Op {
  std::string name;
  std::vector<int> inputs, outputs;
  double seconds = 0;
};

/// The device-host link: `one_way` bytes/s for one direction alone, `both_ways` for the two together.
struct HostLink {
  double one_way = 0;
  double both_ways = 0;
};

/// The smallest pool that fits every op's working set (§4.4.3 encoding, see pool.h): its bytes and
/// its CLS (1-based size class per unique tensor size).
struct LeastPool {
  int64_t bytes = 0;
  std::vector<int> cls;
};

/// A run of tensor indices inside one of Problem's flat arrays.
struct IndexRange {
  const int* first = nullptr;
  const int* last = nullptr;
  const int* begin() const { return first; }
  const int* end() const { return last; }
};

/// What the planner's inner loop reads of a tensor, 16 bytes (Tensor holds a name besides).
struct TensorFacts {
  int64_t bytes = 0;
  int size_index = 0;
  bool parameter = false;
  bool dies = false;  ///< an activation freed after its last use (not live out)
};

/// A validated problem and what every plan needs from it. Immutable once made.
class Problem {
 public:
  /// Validates and builds; throws SwapError naming the tensor or op for: an empty name or a name used
  /// twice, bytes < 1, an index out of range, an activation no op produces (or two produce, the later
  /// one not reading it: not an in-place update; the first listed is its producer), a parameter
  /// written by two ops, an op listing a tensor twice among its inputs or its outputs,
  /// seconds negative or not finite, capacity < 1, a host link not 0 < one_way <= both_ways <=
  /// 2 * one_way, and a dependency cycle (naming its ops).
  static Problem make(std::vector<Tensor> tensors, std::vector<Op> ops, int64_t capacity, HostLink host);

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const std::vector<Op>& ops() const { return ops_; }
  int64_t capacity() const { return capacity_; }
  const HostLink& host() const { return host_; }
  int num_ops() const { return static_cast<int>(ops_.size()); }
  int num_tensors() const { return static_cast<int>(tensors_.size()); }

  /// TS: the unique tensor sizes, ascending.
  const std::vector<int64_t>& sizes() const { return sizes_; }
  /// Index into sizes() of each tensor's size.
  int size_index(int tensor) const { return size_index_[static_cast<size_t>(tensor)]; }
  /// How many tensors have each size (the most objects a size class could ever use).
  const std::vector<int>& tensors_per_size() const { return tensors_per_size_; }
  /// The distinct tensors an op reads or writes: all must be resident while it runs.
  const std::vector<int>& working_set(int op) const { return working_[static_cast<size_t>(op)]; }
  /// The same per op, laid out flat for the planner (one array, an op's working set, inputs and
  /// outputs next to each other), and each op's seconds and each tensor's facts as dense arrays.
  IndexRange working_flat(int op) const { return range(op, 0); }
  IndexRange inputs_flat(int op) const { return range(op, 1); }
  IndexRange outputs_flat(int op) const { return range(op, 2); }
  const std::vector<double>& op_seconds() const { return op_seconds_; }
  const std::vector<TensorFacts>& facts() const { return facts_; }
  /// Per size index: (op, how many tensors of that size the op's working set holds), ops ascending.
  const std::vector<std::pair<int, int>>& ops_with_size(int size) const {
    return ops_with_size_[static_cast<size_t>(size)];
  }
  /// The op producing a tensor (an activation's producer, a parameter's update), or -1.
  int producer(int tensor) const { return producer_[static_cast<size_t>(tensor)]; }
  /// Ops that must run before / after an op: dataflow, and readers of a parameter before its update.
  const std::vector<int>& predecessors(int op) const { return preds_[static_cast<size_t>(op)]; }
  const std::vector<int>& successors(int op) const { return succs_[static_cast<size_t>(op)]; }
  /// Sum of all tensors' bytes and of all ops' seconds.
  int64_t total_bytes() const { return total_bytes_; }
  double total_seconds() const { return total_seconds_; }
  /// The smallest pool any CLS allows (a DP over contiguous size ranges) and the op that forces it.
  const LeastPool& least_pool() const { return least_; }

  /// Throws Infeasible when even the least pool exceeds the capacity, naming the op whose working
  /// set is largest and the least memory that would work.
  void check_feasible() const;

 private:
  IndexRange range(int op, int part) const {
    const int* at = flat_.data() + flat_at_[4 * static_cast<size_t>(op) + static_cast<size_t>(part)];
    const int* next = flat_.data() + flat_at_[4 * static_cast<size_t>(op) + static_cast<size_t>(part) + 1];
    return {at, next};
  }

  std::vector<Tensor> tensors_;
  std::vector<int> flat_;                 ///< per op: working set, inputs, outputs
  std::vector<size_t> flat_at_;           ///< per op: where each of the three starts, and the end
  std::vector<double> op_seconds_;
  std::vector<TensorFacts> facts_;
  std::vector<Op> ops_;
  int64_t capacity_ = 0;
  HostLink host_;
  std::vector<int64_t> sizes_;
  std::vector<int> size_index_, tensors_per_size_, producer_;
  std::vector<std::vector<int>> working_, preds_, succs_;
  std::vector<std::vector<std::pair<int, int>>> ops_with_size_;
  int64_t total_bytes_ = 0;
  double total_seconds_ = 0;
  LeastPool least_;
};

}  // namespace tilewise::swap

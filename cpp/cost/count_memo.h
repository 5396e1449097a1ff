// Counts shared by ops alike (docs/PARTITION.md "Planning at scale"). What an op moves for one
// slot (an input, or its output) depends only on its description, its shapes, the split and that
// slot's tiling over the steps counted: ops with the same description and shapes (a ResNet stage's
// blocks, an RNN's time steps) get the same count for the same choices. The planners cost every op
// under every value of its class at every step and revision, so most counts recur: each is
// computed once (by class_count.h, or device by device where that does not apply) and looked up
// after, which makes the count exact and its cost grow with the distinct ops, not the ops.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "cost/class_count.h"

namespace tilewise::cost {

/// One count's identity: the op's kind (ops alike share it), the slot, and per step the split and
/// the cut, packed into 32 bytes. The split's bits and the tiling's bits are disjoint, so a key is
/// the OR of a header, a split part and a tiling part (each built once and combined per lookup).
using CountKey = std::array<uint64_t, 4>;

/// Counts by key. Not thread-safe: one memo per worker thread.
class CountMemo {
 public:
  /// The split's bits of a key over `steps` steps, or nullopt when it does not fit a key.
  static std::optional<CountKey> split_part(const OpSplit& split, int steps);
  /// The tiling's bits of a key over `steps` steps, or nullopt when it does not fit a key.
  static std::optional<CountKey> tiling_part(const Tiling& tiling, int steps);
  /// The key of a count from its parts; nullopt when the kind or slot do not fit.
  static std::optional<CountKey> combine(int op_kind, int slot, int steps, const CountKey& split_bits,
                                         const CountKey& tiling_bits);
  /// The key, or nullopt when the choices do not fit it (then count without the memo).
  static std::optional<CountKey> key(int op_kind, int slot, const OpSplit& split, const Tiling& tiling, int steps);

  const int64_t* find(const CountKey& key) const;
  void put(const CountKey& key, int64_t elements);
  /// The read tables of ops of one kind (they depend on the description and shapes only).
  ReadTables& read_tables(int op_kind);

 private:
  // Open addressing with linear probing over a power-of-two table (a lookup is a hash and, mostly,
  // one cache line); a zero header word marks an empty slot (real keys have steps >= 1 there).
  struct Slot {
    CountKey key{};
    int64_t value = 0;
  };
  size_t home(const CountKey& key) const;
  void grow();
  std::vector<Slot> slots_;
  size_t used_ = 0;
  std::vector<ReadTables> tables_;  // per op kind
};

/// Elements one op moves per slot under one split (input j: its fetches, slot = inputs: the output
/// conversion), exactly as op_comm counts them: by class where that applies, device by device
/// elsewhere, through `memo` when given. What the counts need is built on the first miss.
class SplitCounter {
 public:
  /// `op_kind`: ops with equal kinds have the same description and shapes. `memo`: the calling
  /// thread's (optional; it outlives the counter), which also keeps the kind's read tables.
  SplitCounter(const OpView& op, int op_kind, const OpSplit& split, const std::vector<int>& parts, int steps,
               CountMemo* memo);
  /// Elements moved for `slot` when its tensor takes `tiling`; `tiling_bits`, if given, is
  /// CountMemo::tiling_part(tiling, steps) (callers that reuse a tiling build it once).
  int64_t elements(int slot, const Tiling& tiling, const std::optional<CountKey>* tiling_bits = nullptr);

 private:
  int64_t count(int slot, const Tiling& tiling);
  const OpView* op_;
  int kind_;
  const OpSplit* split_;
  const std::vector<int>* parts_;
  int steps_;
  CountMemo* memo_;
  std::optional<CountKey> split_bits_;
  std::optional<SplitReads> reads_;
  std::vector<std::vector<Box>> device_reads_;  // only when a count falls back to devices
};

}  // namespace tilewise::cost

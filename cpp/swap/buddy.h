// A buddy allocator (Knuth, TAOCP 2.5) for ODSwap's dynamic memory (SwapAdvisor §5.1: "a memory
// allocator based on the buddy algorithm"). Blocks are unit * 2^k bytes; the capacity splits into top
// blocks by its binary representation, largest first, and buddies merge only inside a top block.
// Every free block carries the Ready of the tensors that last held its parts, so that the next tensor
// placed there waits for all of them (plan.h).
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "swap/plan.h"

namespace tilewise::swap {

class Buddy {
 public:
  /// Manages floor(capacity / unit) units; `unit` is a power of two.
  Buddy(int64_t capacity, int64_t unit);
  /// The order of the smallest block that holds `bytes`.
  int order_for(int64_t bytes) const;
  int64_t block_bytes(int order) const { return unit_ << order; }
  /// The lowest free block of `order` (splitting a larger one), or -1 when none is free; `ready` gets
  /// what its previous occupants need.
  int64_t allocate(int order, Ready& ready);
  /// Frees a block allocated with `order`; `freed`: what must end before it is used again.
  void release(int64_t offset, int order, const Ready& freed);
  /// Forgets what free blocks wait for (a new iteration: everything before it has ended).
  void clear_ready();
  /// Bytes the allocator manages.
  int64_t capacity() const { return managed_; }

 private:
  int top_order(int64_t offset) const;
  int64_t unit_ = 1, managed_ = 0;
  std::vector<std::pair<int64_t, int>> tops_;    ///< (offset, order), ascending offsets
  std::vector<std::map<int64_t, Ready>> free_;  ///< per order: offset -> what its occupants need
};

}  // namespace tilewise::swap

#include "cost/count_memo.h"

namespace tilewise::cost {

std::optional<CountKey> CountMemo::key(int op_kind, int slot, const OpSplit& split, const Tiling& tiling, int steps) {
  // Word 0: kind, slot, steps; then two bytes per step (strategy kind and variable; cut + 1) for up
  // to 12 steps (4096 devices in factors of 2). Anything larger is counted without the memo.
  constexpr int kMaxSteps = 12;
  if (steps > kMaxSteps || op_kind < 0 || slot < 0 || slot > 0xffff) return std::nullopt;
  CountKey k{static_cast<uint64_t>(static_cast<uint32_t>(op_kind)) | static_cast<uint64_t>(slot) << 32 |
                 static_cast<uint64_t>(steps) << 48,
             0, 0, 0};
  for (int i = 0; i < steps; ++i) {
    const int var = split[i].var + 1, cut = tiling[i] + 1;
    if (var < 0 || var > 63 || cut < 0 || cut > 255) return std::nullopt;
    const uint64_t two = static_cast<uint64_t>(static_cast<int>(split[i].kind) << 6 | var) | static_cast<uint64_t>(cut) << 8;
    k[1 + i / 4] |= two << (16 * (i % 4));
  }
  return k;
}

size_t CountMemo::Hash::operator()(const CountKey& k) const {
  // A multiply-xorshift mix of the four words (splitmix64's finaliser per word).
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint64_t w : k) {
    h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 27, h *= 0x94d049bb133111ebull, h ^= h >> 31;
  }
  return static_cast<size_t>(h);
}

void CountMemo::put(const CountKey& key, int64_t elements) { counts_.emplace(key, elements); }

ReadTables& CountMemo::read_tables(int op_kind) {
  if (tables_.size() <= static_cast<size_t>(op_kind)) tables_.resize(op_kind + 1);
  return tables_[op_kind];
}

SplitCounter::SplitCounter(const OpView& op, int op_kind, const OpSplit& split, const std::vector<int>& parts,
                           int steps, CountMemo* memo)
    : op_(&op), kind_(op_kind), split_(&split), parts_(&parts), steps_(steps), memo_(memo) {}

int64_t SplitCounter::elements(int slot, const Tiling& tiling) {
  std::optional<CountKey> key;
  if (memo_) {
    key = CountMemo::key(kind_, slot, *split_, tiling, steps_);
    if (key)
      if (const int64_t* hit = memo_->find(*key)) return *hit;
  }
  const int64_t e = count(slot, tiling);
  if (key) memo_->put(*key, e);
  return e;
}

int64_t SplitCounter::count(int slot, const Tiling& tiling) {
  const OpView& op = *op_;
  const auto& parts = *parts_;
  if (slot < static_cast<int>(op.input_shapes.size())) {
    if (!reads_) reads_.emplace(op, *split_, parts, steps_, memo_ && kind_ >= 0 ? &memo_->read_tables(kind_) : nullptr);
    if (auto e = fetch_by_class(*reads_, slot, op.input_shapes[slot], tiling)) return *e;
    if (device_reads_.empty()) device_reads_ = device_reads(op, *split_, parts, steps_);
    return fetch_elements(device_reads_[slot], device_tiles(op.input_shapes[slot], tiling, parts, steps_));
  }
  if (auto e = output_by_class(op, *split_, tiling, parts, steps_)) return *e;
  return output_elements(device_outputs(op, *split_, parts, steps_), partial_classes(*split_, parts, steps_),
                         device_tiles(op.output_shape, tiling, parts, steps_), outputs_are_disjoint(*split_));
}

}  // namespace tilewise::cost

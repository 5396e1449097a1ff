#include "cost/count_memo.h"

namespace tilewise::cost {

namespace {

// Word 0: kind, slot, steps; then two bytes per step (strategy kind and variable + 1; cut + 1) for
// up to 12 steps (4096 devices in factors of 2). Anything larger is counted without the memo.
constexpr int kMaxSteps = 12;

}  // namespace

std::optional<CountKey> CountMemo::split_part(const OpSplit& split, int steps) {
  if (steps > kMaxSteps) return std::nullopt;
  CountKey k{};
  for (int i = 0; i < steps; ++i) {
    const int var = split[i].var + 1;
    if (var < 0 || var > 63) return std::nullopt;
    k[1 + i / 4] |= static_cast<uint64_t>(static_cast<int>(split[i].kind) << 6 | var) << (16 * (i % 4));
  }
  return k;
}

std::optional<CountKey> CountMemo::tiling_part(const Tiling& tiling, int steps) {
  if (steps > kMaxSteps) return std::nullopt;
  CountKey k{};
  for (int i = 0; i < steps; ++i) {
    const int cut = tiling[i] + 1;
    if (cut < 0 || cut > 255) return std::nullopt;
    k[1 + i / 4] |= static_cast<uint64_t>(cut) << (16 * (i % 4) + 8);
  }
  return k;
}

std::optional<CountKey> CountMemo::combine(int op_kind, int slot, int steps, const CountKey& split_bits,
                                          const CountKey& tiling_bits) {
  if (op_kind < 0 || slot < 0 || slot > 0xffff || steps < 1) return std::nullopt;
  return CountKey{static_cast<uint64_t>(static_cast<uint32_t>(op_kind)) | static_cast<uint64_t>(slot) << 32 |
                      static_cast<uint64_t>(steps) << 48,
                  split_bits[1] | tiling_bits[1], split_bits[2] | tiling_bits[2], split_bits[3] | tiling_bits[3]};
}

std::optional<CountKey> CountMemo::key(int op_kind, int slot, const OpSplit& split, const Tiling& tiling, int steps) {
  auto s = split_part(split, steps), t = tiling_part(tiling, steps);
  if (!s || !t) return std::nullopt;
  return combine(op_kind, slot, steps, *s, *t);
}

size_t CountMemo::home(const CountKey& k) const {
  // splitmix64's finaliser over a multiply-combine of the words.
  uint64_t h = k[0] * 0x9e3779b97f4a7c15ull ^ k[1] * 0xc2b2ae3d27d4eb4full ^ k[2] * 0x165667b19e3779f9ull ^
               k[3] * 0x27d4eb2f165667c5ull;
  h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 27, h *= 0x94d049bb133111ebull, h ^= h >> 31;
  return static_cast<size_t>(h) & (slots_.size() - 1);
}

const int64_t* CountMemo::find(const CountKey& key) const {
  if (slots_.empty()) return nullptr;
  for (size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
    const Slot& s = slots_[i];
    if (s.key == key) return &s.value;
    if (s.key[0] == 0) return nullptr;
  }
}

void CountMemo::put(const CountKey& key, int64_t elements) {
  if (2 * (used_ + 1) > slots_.size()) grow();  // at most half full: probes stay short
  for (size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
    Slot& s = slots_[i];
    if (s.key == key) return;
    if (s.key[0] == 0) {
      s = {key, elements};
      ++used_;
      return;
    }
  }
}

void CountMemo::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 1024 : 2 * old.size(), Slot{});
  used_ = 0;
  for (const Slot& s : old)
    if (s.key[0] != 0) put(s.key, s.value);
}

ReadTables& CountMemo::read_tables(int op_kind) {
  if (tables_.size() <= static_cast<size_t>(op_kind)) tables_.resize(op_kind + 1);
  return tables_[op_kind];
}

SplitCounter::SplitCounter(const OpView& op, int op_kind, const OpSplit& split, const std::vector<int>& parts,
                           int steps, CountMemo* memo)
    : op_(&op), kind_(op_kind), split_(&split), parts_(&parts), steps_(steps), memo_(memo) {
  if (memo_) split_bits_ = CountMemo::split_part(split, steps);
}

int64_t SplitCounter::elements(int slot, const Tiling& tiling, const std::optional<CountKey>* tiling_bits) {
  std::optional<CountKey> key;
  if (memo_ && split_bits_) {
    auto bits = tiling_bits ? *tiling_bits : CountMemo::tiling_part(tiling, steps_);
    if (bits) key = CountMemo::combine(kind_, slot, steps_, *split_bits_, *bits);
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

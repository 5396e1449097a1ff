#include "exec/arena.h"

#include <algorithm>
#include <numeric>

#include "tdl/errors.h"

namespace tilewise::exec {

OutOfMemory::OutOfMemory(int d, std::string w, int64_t b, int64_t u, int64_t c)
    : std::runtime_error("device " + std::to_string(d) + " is out of memory allocating " + std::to_string(b) +
                         " bytes for '" + w + "': " + std::to_string(u) + " of " + std::to_string(c) +
                         " bytes in use"),
      device(d),
      tensor(std::move(w)),
      bytes(b),
      in_use(u),
      capacity(c) {}

int64_t plan_block(const std::vector<BufferLife>& lives, std::vector<int64_t>* offsets) {
  // Largest first; each at the lowest offset free of every placed buffer whose lifetime overlaps.
  std::vector<size_t> order(lives.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return lives[a].bytes > lives[b].bytes; });
  std::vector<int64_t> at(lives.size(), 0);
  std::vector<size_t> placed;
  int64_t top = 0;
  std::vector<std::pair<int64_t, int64_t>> busy;
  auto slot = [](int64_t bytes) { return (bytes + 15) / 16 * 16; };  // 16-byte aligned slots (SIMD loads)
  for (size_t i : order) {
    const BufferLife& r = lives[i];
    const int64_t size = slot(r.bytes);
    busy.clear();
    for (size_t j : placed) {
      const BufferLife& o = lives[j];
      if (o.born < r.dies && r.born < o.dies) busy.push_back({at[j], at[j] + slot(o.bytes)});
    }
    std::sort(busy.begin(), busy.end());
    int64_t off = 0;
    for (const auto& [lo, hi] : busy) {
      if (off + size <= lo) break;
      off = std::max(off, hi);
    }
    at[i] = off;
    top = std::max(top, off + size);
    placed.push_back(i);
  }
  if (offsets) *offsets = std::move(at);
  return top;
}

std::byte* Arena::allocate(int64_t bytes, const std::string& what) {
  if (planned_ && recording_) {
    // Replay: the same buffers come in the same order every step.
    TW_ASSERT(next_ < records_.size() && records_[next_].bytes == bytes, "a step allocates as the planned one did");
    std::byte* p = block_.get() + offsets_[next_];
    live_[p] = next_++;
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return p;
  }
  if (capacity_ > 0 && in_use_ + bytes > capacity_) throw OutOfMemory(device_, what, bytes, in_use_, capacity_);
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
  std::byte* p = new std::byte[static_cast<size_t>(std::max<int64_t>(bytes, 1))];
  if (recording_) {
    live_[p] = records_.size();
    records_.push_back({bytes, clock_++, -1, what});
  }
  return p;
}

void Arena::release(std::byte* p, int64_t bytes) {
  if (!p) return;
  in_use_ -= bytes;
  const bool in_block = planned_ && p >= block_.get() && p < block_.get() + std::max<int64_t>(block_bytes_, 1);
  auto it = live_.find(p);
  if (it != live_.end()) {
    if (!planned_ && recording_) records_[it->second].dies = clock_++;
    live_.erase(it);
  }
  if (!in_block) delete[] p;
}

void Arena::begin_step() {
  recording_ = true;
  next_ = 0;
  outside_ = in_use_;
  if (!planned_) records_.clear(), clock_ = 0;
}

void Arena::abort_step() {
  const std::byte* lo = block_.get();
  const std::byte* hi = lo + (planned_ ? std::max<int64_t>(block_bytes_, 1) : 0);
  for (const auto& [p, record] : live_) {
    (void)record;
    if (!(planned_ && p >= lo && p < hi)) delete[] p;
  }
  live_.clear();
  in_use_ = outside_;
  if (!planned_) records_.clear(), clock_ = 0;
  recording_ = false;
  next_ = 0;
}

int64_t Arena::footprint() const { return planned_ ? outside_ + block_bytes_ : peak_; }

void Arena::end_step() {
  if (planned_) {
    TW_ASSERT(next_ == records_.size(), "a step allocates as the planned one did");
    next_ = 0;
    return;
  }
  recording_ = false;
  // Buffers alive at the end of the step (results kept for reading) live to the end.
  for (auto& r : records_)
    if (r.dies < 0) r.dies = clock_;
  std::vector<BufferLife> lives;
  lives.reserve(records_.size());
  for (const auto& r : records_) lives.push_back({r.bytes, r.born, r.dies});
  std::vector<int64_t> at;
  block_bytes_ = plan_block(lives, &at);
  offsets_.resize(at.size());
  for (size_t i = 0; i < at.size(); ++i) offsets_[i] = at[i];
  // The block replaces the recorded buffers; what lives outside it (parameters, inputs) stays.
  const int64_t outside = outside_;
  if (capacity_ > 0 && outside + block_bytes_ > capacity_) {
    auto largest = std::max_element(records_.begin(), records_.end(),
                                    [](const Record& a, const Record& b) { return a.bytes < b.bytes; });
    throw OutOfMemory(device_, "the planned block (largest buffer: " + (largest == records_.end() ? std::string("none") : largest->what) + ")", block_bytes_, outside,
                      capacity_);
  }
  block_.reset(new std::byte[static_cast<size_t>(std::max<int64_t>(block_bytes_, 1))]);
  planned_ = true;
  next_ = 0;
}

}  // namespace tilewise::exec

// The buddy allocator (buddy.h): split on allocation, merge on release.
#include "swap/buddy.h"

#include <algorithm>

namespace tilewise::swap {

Buddy::Buddy(int64_t capacity, int64_t unit) : unit_(unit) {
  const int64_t units = capacity / unit;
  int orders = 1;
  while (orders < 62 && (int64_t{1} << orders) <= units) ++orders;
  free_.resize(static_cast<size_t>(orders));
  int64_t offset = 0;
  for (int k = orders - 1; k >= 0; --k)
    if (units & (int64_t{1} << k)) {
      tops_.push_back({offset, k});
      free_[static_cast<size_t>(k)][offset] = Ready{};
      offset += unit_ << k;
    }
  managed_ = offset;
}

int Buddy::order_for(int64_t bytes) const {
  int k = 0;
  while ((unit_ << k) < bytes) ++k;
  return k;
}

int Buddy::top_order(int64_t offset) const {
  auto it = std::upper_bound(tops_.begin(), tops_.end(), std::make_pair(offset, 1 << 30));
  return std::prev(it)->second;
}

int64_t Buddy::allocate(int order, Ready& ready) {
  int k = order;
  while (k < static_cast<int>(free_.size()) && free_[static_cast<size_t>(k)].empty()) ++k;
  if (k >= static_cast<int>(free_.size())) return -1;
  auto it = free_[static_cast<size_t>(k)].begin();
  const int64_t offset = it->first;
  ready = it->second;
  free_[static_cast<size_t>(k)].erase(it);
  // Split down: the upper halves stay free and wait for what the whole block waited for.
  while (k > order) {
    --k;
    free_[static_cast<size_t>(k)][offset + (unit_ << k)] = ready;
  }
  return offset;
}

void Buddy::release(int64_t offset, int order, const Ready& freed) {
  Ready ready = freed;
  int k = order;
  const int top = top_order(offset);
  while (k < top) {
    const int64_t buddy = offset ^ (unit_ << k);
    auto& level = free_[static_cast<size_t>(k)];
    auto it = level.find(buddy);
    if (it == level.end()) break;
    ready.merge(it->second);
    level.erase(it);
    offset = std::min(offset, buddy);
    ++k;
  }
  free_[static_cast<size_t>(k)][offset] = ready;
}

void Buddy::clear_ready() {
  for (auto& level : free_)
    for (auto& [offset, ready] : level) ready = Ready{};
}

}  // namespace tilewise::swap

#include "exec/arena.h"

#include <algorithm>

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

float* Arena::allocate(int64_t elements, const std::string& what) {
  const int64_t bytes = elements * static_cast<int64_t>(sizeof(float));
  if (capacity_ > 0 && in_use_ + bytes > capacity_) throw OutOfMemory(device_, what, bytes, in_use_, capacity_);
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
  return new float[std::max<int64_t>(elements, 1)];
}

void Arena::release(float* p, int64_t elements) {
  if (!p) return;
  delete[] p;
  in_use_ -= elements * static_cast<int64_t>(sizeof(float));
}

}  // namespace tilewise::exec

// Reading a fuzzer's bytes as choices (every harness in this folder), and counting outcomes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string>

namespace tilewise::fuzz {

/// Choices drawn from the input; past its end every choice is 0 (the smallest option), so a short
/// input is a small case and mutations that grow it grow the case.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint8_t u8() { return p_ < end_ ? *p_++ : 0; }
  /// One of k options (k >= 1).
  int pick(int k) { return k <= 1 ? 0 : u8() % k; }
  bool flag() { return u8() & 1; }
  /// Small numbers mostly, and the values that break arithmetic.
  int64_t edge() {
    static const int64_t kEdges[] = {0, 1, 2, 3, 4, 5, 7, 8, -1, -2, 1000, 1000000000, int64_t{1} << 31,
                                     int64_t{1} << 40, int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
    const uint8_t b = u8();
    return b < 128 ? b % 6 : kEdges[b % (sizeof(kEdges) / sizeof(kEdges[0]))];
  }
  /// Extents: 1-7 mostly, sometimes 0 or huge.
  int64_t extent() {
    const uint8_t b = u8();
    if (b < 224) return 1 + b % 7;
    static const int64_t kOdd[] = {0, 13, 1000, 1000000000, int64_t{1} << 40, int64_t{1} << 62, -1, 97};
    return kOdd[b % 8];
  }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

/// Outcome counts, printed when the fuzzer exits (CI reads inputs tried and typed errors).
class Outcomes {
 public:
  explicit Outcomes(const char* harness) : harness_(harness) {}
  ~Outcomes() {
    int64_t total = 0;
    for (const auto& [k, v] : counts_) total += v;
    std::fprintf(stderr, "%s: %lld inputs:", harness_, static_cast<long long>(total));
    for (const auto& [k, v] : counts_) std::fprintf(stderr, " %s %lld;", k.c_str(), static_cast<long long>(v));
    std::fprintf(stderr, "\n");
  }
  void count(const std::string& outcome) { ++counts_[outcome]; }

 private:
  const char* harness_;
  std::map<std::string, int64_t> counts_;
};

}  // namespace tilewise::fuzz

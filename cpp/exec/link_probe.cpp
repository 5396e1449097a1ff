#include "exec/link_probe.h"

#include <algorithm>
#include <chrono>
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

#include "exec/box_copy.h"

namespace tilewise::exec {

using tdl::Range;

double mailbox_one_way_seconds(int64_t bytes, int rounds, int repeats) {
  using Clock = std::chrono::steady_clock;
  const int64_t n = std::max<int64_t>(1, (bytes + 3) / 4);
  const Box box{{Range{0, n - 1}}};
  rounds = std::max(rounds, 1);
  std::vector<double> runs;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    MailboxCommunicator comm(2);
    std::vector<float> a(n, 1.0f), b(n, 0.0f);
    const Deadline deadline = Clock::now() + std::chrono::seconds(60);
    std::thread peer([&] {
      for (int i = 0; i < rounds; ++i) {
        comm.recv(1, 0, 2 * i, b.data(), box, box, 4, deadline);
        comm.send(1, 0, 2 * i + 1, b.data(), box, box, 4);
      }
    });
    const auto t0 = Clock::now();
    for (int i = 0; i < rounds; ++i) {
      comm.send(0, 1, 2 * i, a.data(), box, box, 4);
      comm.recv(0, 1, 2 * i + 1, a.data(), box, box, 4, deadline);
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    peer.join();
    runs.push_back(s / (2.0 * rounds));
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace tilewise::exec

namespace tilewise::exec {

double box_copy_seconds(int64_t bytes, bool strided, bool combine, int repeats, int64_t run, bool cold,
                        bool warm_source) {
  using Clock = std::chrono::steady_clock;
  if (run < 1) throw std::invalid_argument("box_copy_seconds: run must be >= 1 float, got " + std::to_string(run));
  const int64_t n = std::max<int64_t>(1, bytes / 4);
  const int64_t cols = strided ? 2 * run : n;
  const int64_t rows = strided ? std::max<int64_t>(1, n / run) : 1;  // half the columns: n floats
  const Box src_box{{Range{0, rows - 1}, Range{0, cols - 1}}};
  const Box what{{Range{0, rows - 1}, Range{0, (strided ? run : cols) - 1}}};
  std::vector<float> src(static_cast<size_t>(rows * cols), 1.0f), dst(static_cast<size_t>(what.volume()), 0.0f);
  auto once = [&] {
    if (combine) combine_box(src.data(), src_box, dst.data(), what, what, tdl::Reducer::kSum);
    else copy_box(src.data(), src_box, dst.data(), what, what);
  };
  // Cold: both buffers evicted from the caches first (a step's copies read tensors written many ops
  // before), by writing a buffer larger than any last-level cache.
  std::vector<float> evict(cold ? size_t{32} << 20 : 0);
  volatile float sink = 0;
  auto flush = [&] {
    for (size_t i = 0; i < evict.size(); i += 16) evict[i] += 1.0f;
    if (warm_source) {
      float sum = 0;
      for (size_t i = 0; i < src.size(); i += 16) sum += src[i];  // one read per cache line
      sink = sum;
    }
  };
  once();
  std::vector<double> runs;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    flush();
    const auto t0 = Clock::now();
    once();
    runs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

double parallel_copy_rate(int threads, int64_t bytes, int repeats) {
  using Clock = std::chrono::steady_clock;
  threads = std::max(threads, 1);
  const size_t n = static_cast<size_t>(std::max<int64_t>(1, bytes / 4));
  std::vector<std::vector<float>> src(threads, std::vector<float>(n, 1.0f)), dst(threads, std::vector<float>(n));
  double best = 0;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        for (int k = 0; k < 3; ++k) std::copy(src[t].begin(), src[t].end(), dst[t].begin());
      });
    while (ready.load() < threads) std::this_thread::yield();
    const auto t0 = Clock::now();
    go.store(true);
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 3.0 * 2.0 * static_cast<double>(n * sizeof(float)) * threads / s);
  }
  return best;
}

}  // namespace tilewise::exec

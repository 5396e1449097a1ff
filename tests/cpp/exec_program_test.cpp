// Executor pieces below the lowering: box copies by contiguous runs against an element-by-element
// oracle, and the mailbox communicator's two-sided send/receive (tags, deadlines, aborts).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "exec/box_copy.h"
#include "exec/communicator.h"
#include "exec/errors.h"
#include "exec/program.h"

namespace tilewise::exec {
namespace {

int64_t offset(const Box& box, const std::vector<int64_t>& idx) {
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d) o = o * box.dims[d].size() + (idx[d] - box.dims[d].lo);
  return o;
}

// Every element of `what`, in row-major order.
template <class F>
void each(const Box& what, F f) {
  std::vector<int64_t> idx;
  for (const auto& r : what.dims) idx.push_back(r.lo);
  if (what.empty()) return;
  while (true) {
    f(idx);
    int d = static_cast<int>(idx.size()) - 1;
    for (; d >= 0; --d) {
      if (++idx[d] <= what.dims[d].hi) break;
      idx[d] = what.dims[d].lo;
    }
    if (d < 0) return;
  }
}

Range sub(std::mt19937& rng, const Range& r, bool whole) {
  if (whole) return r;
  std::uniform_int_distribution<int64_t> pick(r.lo, r.hi);
  int64_t a = pick(rng), b = pick(rng);
  return {std::min(a, b), std::max(a, b)};
}

TEST(BoxCopy, ContiguousRunsMatchAnElementwiseCopy) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const int rank = 1 + trial % 4;
    Box whole, src_box, dst_box, what;
    for (int d = 0; d < rank; ++d) whole.dims.push_back({0, 1 + static_cast<int64_t>(rng() % 5)});
    // Boxes that often cover trailing dimensions whole, so runs merge (or not).
    for (int d = 0; d < rank; ++d) {
      bool w = rng() % 2;
      src_box.dims.push_back(sub(rng, whole.dims[d], w || rng() % 3 == 0));
      dst_box.dims.push_back(sub(rng, whole.dims[d], w || rng() % 3 == 0));
    }
    Box common = tdl::intersect(src_box, dst_box);
    if (common.empty()) continue;
    for (int d = 0; d < rank; ++d) what.dims.push_back(sub(rng, common.dims[d], rng() % 2));
    std::vector<float> src(src_box.volume()), dst(dst_box.volume(), -1.0f), expect(dst);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i + 1);
    each(what, [&](const std::vector<int64_t>& idx) { expect[offset(dst_box, idx)] = src[offset(src_box, idx)]; });
    copy_box(src.data(), src_box, dst.data(), dst_box, what);
    ASSERT_EQ(dst, expect) << "trial " << trial;
    // Sum into the copy: doubles what was copied.
    combine_box(src.data(), src_box, dst.data(), dst_box, what, tdl::Reducer::kSum);
    each(what, [&](const std::vector<int64_t>& idx) { expect[offset(dst_box, idx)] *= 2; });
    ASSERT_EQ(dst, expect) << "trial " << trial;
  }
}

// Narrow columns of wide rows (runs of 1-16 elements, the fixed-size copy paths), elements of 1, 4
// and 8 bytes, and every reducer, against element-by-element loops.
TEST(BoxCopy, NarrowRunsOfEveryElementSizeAndReducer) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = 2 + trial % 3;
    Box src_box, dst_box, what;
    for (int d = 0; d < rank; ++d) {
      const int64_t n = 1 + static_cast<int64_t>(rng() % (d + 1 == rank ? 17 : 4));
      src_box.dims.push_back({0, n - 1 + static_cast<int64_t>(rng() % 3)});
      dst_box.dims.push_back({0, n - 1 + static_cast<int64_t>(rng() % 3)});
      what.dims.push_back({0, n - 1});
    }
    for (const int64_t e : {1, 4, 8}) {
      std::vector<unsigned char> src(static_cast<size_t>(src_box.volume() * e)), dst(dst_box.volume() * e, 0xEE);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(rng());
      std::vector<unsigned char> expect = dst;
      each(what, [&](const std::vector<int64_t>& idx) {
        std::memcpy(&expect[offset(dst_box, idx) * e], &src[offset(src_box, idx) * e], static_cast<size_t>(e));
      });
      copy_box(src.data(), src_box, dst.data(), dst_box, what, e);
      ASSERT_EQ(dst, expect) << "trial " << trial << ", " << e << "-byte elements";
    }
    std::uniform_real_distribution<float> value(-2, 2);
    std::vector<float> src(src_box.volume()), base(dst_box.volume());
    for (auto& v : src) v = value(rng);
    for (auto& v : base) v = value(rng);
    for (const auto reducer : {tdl::Reducer::kSum, tdl::Reducer::kProd, tdl::Reducer::kMax, tdl::Reducer::kMin}) {
      std::vector<float> dst = base, expect = base;
      each(what, [&](const std::vector<int64_t>& idx) {
        float& o = expect[offset(dst_box, idx)];
        const float x = src[offset(src_box, idx)];
        o = reducer == tdl::Reducer::kSum ? o + x : reducer == tdl::Reducer::kProd ? o * x
            : reducer == tdl::Reducer::kMax ? std::max(o, x) : std::min(o, x);
      });
      combine_box(src.data(), src_box, dst.data(), dst_box, what, reducer);
      ASSERT_EQ(dst, expect) << "trial " << trial << ", reducer " << static_cast<int>(reducer);
    }
  }
}

// A partial Max or Min that is NaN on either side stays NaN (the kernels' rule: NaN wins and stays),
// whichever device's partial arrives first.
TEST(BoxCopy, CombinedExtremaKeepNaN) {
  const Box box{{{0, 2}}};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto reducer : {tdl::Reducer::kMax, tdl::Reducer::kMin}) {
    std::vector<float> dst = {1.0f, nan, nan}, src = {nan, 2.0f, nan};
    combine_box(src.data(), box, dst.data(), box, box, reducer);
    for (float v : dst) EXPECT_TRUE(std::isnan(v)) << "reducer " << static_cast<int>(reducer);
    dst = {1.0f, -3.0f, 0.5f}, src = {2.0f, -4.0f, 0.5f};
    combine_box(src.data(), box, dst.data(), box, box, reducer);
    EXPECT_EQ(dst, (reducer == tdl::Reducer::kMax ? std::vector<float>{2.0f, -3.0f, 0.5f} : std::vector<float>{1.0f, -4.0f, 0.5f}));
  }
}

TEST(Mailbox, SendsAndReceivesBoxesByTagInAnyOrder) {
  MailboxCommunicator comm(2);
  Box src_box{{{0, 3}, {0, 3}}};
  std::vector<float> src(16);
  for (int i = 0; i < 16; ++i) src[i] = static_cast<float>(i);
  const Box top{{{0, 1}, {0, 3}}}, corner{{{2, 3}, {2, 3}}};
  comm.send(0, 1, 5, src.data(), src_box, top, 4);
  comm.send(0, 1, 6, src.data(), src_box, corner, 4);
  EXPECT_TRUE(comm.poll(1, 0, 6));
  EXPECT_FALSE(comm.poll(1, 0, 7));
  std::vector<float> got(16, -1);
  auto later = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  comm.recv(1, 0, 6, got.data(), src_box, corner, 4, later);  // out of order
  comm.recv(1, 0, 5, got.data(), src_box, top, 4, later);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], src[i]);
  EXPECT_EQ(got[10], 10);
  EXPECT_EQ(got[15], 15);
  EXPECT_EQ(got[9], -1);
  EXPECT_EQ(comm.bytes_sent()[0], 12 * 4);
  EXPECT_EQ(comm.bytes_received()[1], 12 * 4);
  EXPECT_EQ(comm.bytes_sent()[1], 0);
}

TEST(Mailbox, MovesInt64AndBoolBoxesBitForBit) {
  // Token ids (8 bytes) past 2^24, where a float would round, and one-byte masks.
  MailboxCommunicator comm(2);
  const Box whole{{{0, 2}, {0, 3}}}, part{{{1, 2}, {1, 2}}};
  std::vector<int64_t> ids(12), got(12, -1);
  for (int i = 0; i < 12; ++i) ids[i] = (int64_t{1} << 40) + 3 * i;
  comm.send(0, 1, 1, ids.data(), whole, part, 8);
  comm.recv(1, 0, 1, got.data(), whole, part, 8, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(got[r * 4 + c], r >= 1 && c >= 1 && c <= 2 ? ids[r * 4 + c] : -1);
  EXPECT_EQ(comm.bytes_sent()[0], 4 * 8);
  std::vector<uint8_t> mask{1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 0}, into(12, 7);
  comm.send(0, 1, 2, mask.data(), whole, whole, 1);
  comm.recv(1, 0, 2, into.data(), whole, whole, 1, std::chrono::steady_clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(into, mask);
  EXPECT_EQ(comm.bytes_received()[1], 4 * 8 + 12);
}

TEST(Mailbox, AReceiveWaitsForItsSend) {
  MailboxCommunicator comm(2);
  Box b{{{0, 999}}};
  std::vector<float> src(1000, 3.0f), dst(1000, 0.0f);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    comm.send(1, 0, 0, src.data(), b, b, 4);
  });
  comm.recv(0, 1, 0, dst.data(), b, b, 4, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  sender.join();
  EXPECT_EQ(dst[999], 3.0f);
}

TEST(Mailbox, DeadlinesAndAbortsRaiseCommunicationErrors) {
  MailboxCommunicator comm(3);
  Box b{{{0, 3}}};
  std::vector<float> dst(4);
  try {
    comm.recv(2, 1, 9, dst.data(), b, b, 4, std::chrono::steady_clock::now() + std::chrono::milliseconds(10));
    FAIL() << "no error";
  } catch (const CommunicationError& e) {
    EXPECT_EQ(e.device, 2);
    EXPECT_EQ(e.peer, 1);
    EXPECT_NE(std::string(e.what()).find("deadline"), std::string::npos);
  }
  std::thread failing([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    comm.abort(0, "out of memory");
  });
  try {
    comm.recv(2, 0, 1, dst.data(), b, b, 4, std::chrono::steady_clock::now() + std::chrono::seconds(30));
    FAIL() << "no error";
  } catch (const CommunicationError& e) {
    EXPECT_EQ(e.peer, 0);
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos);
  }
  failing.join();
  comm.reset();
  std::vector<float> src(4, 1.0f);
  comm.send(1, 2, 1, src.data(), b, b, 4);
  comm.recv(2, 1, 1, dst.data(), b, b, 4, std::chrono::steady_clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(dst[3], 1.0f);
}

TEST(ExecProgram, PrintsAndSerialisesItsInstructions) {
  Program p;
  p.device = 0, p.devices = 2, p.streams = {"compute", "comm"}, p.op_names = {"fc"};
  p.buffers.push_back({"x", BufferRole::kTile, 0, Box{{{0, 3}}}, true});
  Instr send;
  send.kind = InstrKind::kSend, send.stream = 1, send.op = 0, send.buffer = 0, send.peer = 1, send.tag = 3;
  send.box = Box{{{0, 1}}}, send.bytes = 8;
  p.instrs.push_back(send);
  EXPECT_EQ(p.bytes_sent(), 8);
  EXPECT_NE(p.text().find("send x[0:2] to 1 tag 3 (8 B)"), std::string::npos) << p.text();
  EXPECT_NE(p.to_json().find("\"kind\": \"send\""), std::string::npos);
}

}  // namespace
}  // namespace tilewise::exec

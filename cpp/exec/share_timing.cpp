#include "exec/share_timing.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <set>
#include <utility>

#include "exec/kernel_call.h"
#include "kernels/cpu/tile_kernels.h"

namespace tilewise::exec {

namespace {

int64_t volume(const std::vector<kernels::Span>& box) {
  int64_t v = 1;
  for (const auto& s : box) v *= std::max<int64_t>(s.size(), 0);
  return v;
}

// A kernel call with buffers of its regions' sizes (inputs ones; integer inputs zeros: id 0 names a
// row of any table), ready to run again and again.
class PreparedCall {
 public:
  explicit PreparedCall(kernels::TileCall call) : call_(std::move(call)) {
    floats_.resize(call_.inputs.size());
    raws_.resize(call_.inputs.size());
    const bool integers = kernels::reads_integers(call_.kernel);
    for (size_t j = 0; j < call_.inputs.size(); ++j) {
      kernels::TileIn& in = call_.inputs[j];
      const int64_t n = in.region.empty() ? 1 : volume(in.region);
      if (in.dtype != kernels::DType::kFloat32 && integers) {
        raws_[j].assign(static_cast<size_t>(n) * 8, std::byte{0});
        in.raw = raws_[j].data();
        bytes_ += n * 8;
      } else {
        floats_[j].assign(static_cast<size_t>(n), in.dtype == kernels::DType::kFloat32 ? 1.0f : 0.0f);
        in.data = floats_[j].data();
        in.dtype = kernels::DType::kFloat32;  // the runtime hands float kernels float32 copies
        bytes_ += n * 4;
      }
    }
    int64_t out_n = 1;
    for (int v : call_.output_vars) out_n *= call_.vars[static_cast<size_t>(v)].size();
    out_.resize(static_cast<size_t>(std::max<int64_t>(out_n, 1)));
    call_.out = out_.data();
    const int64_t scratch = kernels::scratch_bytes(call_);
    scratch_.resize(static_cast<size_t>(scratch / 4 + 4));
    call_.scratch = reinterpret_cast<std::byte*>(scratch_.data());
    call_.scratch_size = scratch;
    bytes_ += static_cast<int64_t>(out_.size() + scratch_.size()) * 4;
  }
  // The call points into its own buffers: not copied or moved.
  PreparedCall(const PreparedCall&) = delete;
  PreparedCall& operator=(const PreparedCall&) = delete;
  /// Runs it once (the warm-up): false when the kernel declines the call or rejects a value.
  bool ready() {
    try {
      return kernels::run_native(call_);
    } catch (const std::exception&) {
      return false;
    }
  }
  double seconds() {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::run_native(call_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  int64_t bytes() const { return bytes_; }

 private:
  kernels::TileCall call_;
  std::vector<std::vector<float>> floats_;
  std::vector<std::vector<std::byte>> raws_;
  std::vector<float> out_, scratch_;
  int64_t bytes_ = 0;
};

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string share_signature(const DeviceOp& dev) {
  std::string s;
  for (const auto& r : dev.vars) s += std::to_string(r.hi - r.lo + 1) + ",";
  for (const auto& slot : dev.slots) {
    s += "|";
    for (const auto& r : slot.region.dims) s += std::to_string(r.hi - r.lo + 1) + ",";
  }
  return s;
}

std::vector<ShareRatio> time_share_ratios(const graph::Graph& g, const Lowered& whole,
                                          const std::vector<const Lowered*>& lows, int repeats) {
  repeats = std::max(repeats, 1);
  // Per op, its distinct shares in the order the plans give them.
  struct Share {
    std::string signature;
    const Lowered* low;
    size_t op_plan;  // in low->ops
    int device;
  };
  std::vector<std::vector<Share>> shares(g.ops().size());
  std::set<std::pair<int, std::string>> seen;
  for (const Lowered* low : lows)
    for (size_t k = 0; k < low->ops.size(); ++k) {
      const OpPlan& op = low->ops[k];
      for (size_t d = 0; d < op.devices.size(); ++d) {
        if (!op.devices[d].active) continue;
        std::string sig = share_signature(op.devices[d]);
        if (!seen.insert({op.op, sig}).second) continue;
        shares[static_cast<size_t>(op.op)].push_back({std::move(sig), low, k, static_cast<int>(d)});
      }
    }
  std::vector<ShareRatio> out;
  // Every run from cold caches: in a step, an op's weights were last touched a step before and its
  // inputs by other ops; timed hot, a share small enough to stay in the caches looks faster than it
  // is (the MLP's half-width weight shares: predicted 15 % fast). 48 MiB: past any last-level cache here.
  std::vector<float> evict(size_t{48} << 20 >> 2);
  auto flush = [&evict] {
    for (size_t i = 0; i < evict.size(); i += 16) evict[i] += 1.0f;
  };
  constexpr int64_t kBatchBytes = int64_t{256} << 20;  // the shares' buffers held at once, beside the whole's
  for (const OpPlan& op : whole.ops) {
    const auto& node = g.op(op.op);
    auto& mine = shares[static_cast<size_t>(op.op)];
    if (!node.desc || node.desc->kernel.empty() || mine.empty()) continue;  // interpreted: the interpreter's curve
    int dw = -1;
    for (size_t d = 0; d < op.devices.size(); ++d)
      if (op.devices[d].active) dw = static_cast<int>(d);
    if (dw < 0) continue;
    const std::string whole_sig = share_signature(op.devices[static_cast<size_t>(dw)]);
    PreparedCall whole_call(kernel_call(g, op, dw));
    if (!whole_call.ready()) continue;  // the kernel declines the whole op: its shares are scaled by work
    // The shares in batches, each timed in turns with the whole op: both see the machine as it is
    // then (this machine's speed drifts by up to 30 % over seconds; timed apart, the ratios carried it).
    size_t next = 0;
    while (next < mine.size()) {
      std::vector<std::unique_ptr<PreparedCall>> calls;
      std::vector<size_t> which;
      int64_t held = 0;
      for (; next < mine.size() && (calls.empty() || held < kBatchBytes); ++next) {
        const Share& share = mine[next];
        if (share.signature == whole_sig) {  // the same call: exactly 1, not two timings' noise
          out.push_back({op.op, share.signature, 1.0});
          continue;
        }
        auto call = std::make_unique<PreparedCall>(kernel_call(g, share.low->ops[share.op_plan], share.device));
        if (!call->ready()) continue;  // declined or rejected: scaled by work
        held += call->bytes();
        calls.push_back(std::move(call));
        which.push_back(next);
      }
      if (calls.empty()) continue;
      std::vector<double> whole_seconds;
      std::vector<std::vector<double>> seconds(calls.size());
      for (int r = 0; r < repeats; ++r) {
        flush();
        whole_seconds.push_back(whole_call.seconds());
        for (size_t c = 0; c < calls.size(); ++c) {
          flush();
          seconds[c].push_back(calls[c]->seconds());
        }
      }
      const double w = median(whole_seconds);
      if (!(w > 0)) continue;
      for (size_t c = 0; c < calls.size(); ++c) out.push_back({op.op, mine[which[c]].signature, median(seconds[c]) / w});
    }
  }
  return out;
}

}  // namespace tilewise::exec

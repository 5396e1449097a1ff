#include "exec/share_timing.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
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

// Median seconds of `repeats` runs of the call on buffers of its regions' sizes, each after `evict` is
// written (cold caches), or -1 when the kernel declines or rejects it.
double time_call(kernels::TileCall call, int repeats, std::vector<float>& evict) {
  std::vector<std::vector<float>> floats(call.inputs.size());
  std::vector<std::vector<std::byte>> raws(call.inputs.size());
  const bool integers = kernels::reads_integers(call.kernel);
  for (size_t j = 0; j < call.inputs.size(); ++j) {
    kernels::TileIn& in = call.inputs[j];
    const int64_t n = in.region.empty() ? 1 : volume(in.region);
    if (in.dtype != kernels::DType::kFloat32 && integers) {
      raws[j].assign(static_cast<size_t>(n) * 8, std::byte{0});  // zeros: id 0 names a row of any table
      in.raw = raws[j].data();
    } else {
      floats[j].assign(static_cast<size_t>(n), in.dtype == kernels::DType::kFloat32 ? 1.0f : 0.0f);
      in.data = floats[j].data();
      in.dtype = kernels::DType::kFloat32;  // the runtime hands float kernels float32 copies
    }
  }
  int64_t out_n = 1;
  for (int v : call.output_vars) out_n *= call.vars[static_cast<size_t>(v)].size();
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(out_n, 1)));
  call.out = out.data();
  const int64_t scratch = kernels::scratch_bytes(call);
  std::vector<float> scratch_buf(static_cast<size_t>(scratch / 4 + 4));
  call.scratch = reinterpret_cast<std::byte*>(scratch_buf.data());
  call.scratch_size = scratch;
  using clock = std::chrono::steady_clock;
  std::vector<double> seconds;
  auto flush = [&evict] {
    for (size_t i = 0; i < evict.size(); i += 16) evict[i] += 1.0f;
  };
  try {
    if (!kernels::run_native(call)) return -1;  // also the warm-up
    for (int r = 0; r < repeats; ++r) {
      flush();
      const auto t0 = clock::now();
      kernels::run_native(call);
      seconds.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    }
  } catch (const std::exception&) {
    return -1;  // a value the kernel cannot take (an index read from the ones)
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2];
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

std::vector<ShareTime> time_shares(const graph::Graph& g, const Lowered& low, int repeats) {
  return time_shares(g, std::vector<const Lowered*>{&low}, repeats);
}

std::vector<ShareTime> time_shares(const graph::Graph& g, const std::vector<const Lowered*>& lows, int repeats) {
  std::vector<ShareTime> out;
  std::set<std::pair<int, std::string>> done;
  // Every run from cold caches: in a step, an op's weights were last touched a step before and its
  // inputs by other ops; timed hot, a share small enough to stay in the caches looks faster than it
  // is (the MLP's half-width weight shares: predicted 15 % fast). 48 MiB: past any last-level cache here.
  std::vector<float> evict(size_t{48} << 20 >> 2);
  for (const Lowered* low : lows) {
    for (const OpPlan& op : low->ops) {
      const auto& node = g.op(op.op);
      if (!node.desc || node.desc->kernel.empty()) continue;  // interpreted: priced by the interpreter's curve
      for (size_t d = 0; d < op.devices.size(); ++d) {
        if (!op.devices[d].active) continue;
        std::string sig = share_signature(op.devices[d]);
        if (!done.insert({op.op, sig}).second) continue;
        const double s = time_call(kernel_call(g, op, static_cast<int>(d)), std::max(repeats, 1), evict);
        if (s > 0) out.push_back({op.op, std::move(sig), s});
      }
    }
  }
  return out;
}

}  // namespace tilewise::exec

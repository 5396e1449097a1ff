#include "exec/cuda/host_executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "exec/box_copy.h"
#include "exec/cuda/host_reference.h"
#include "exec/cuda/step_schedule.h"
#include "exec/errors.h"
#include "exec/kernel_call.h"

namespace tilewise::exec::cuda {

namespace {

constexpr std::byte kPoison{0xFF};  // a float32 NaN in every word: a read of unheld bytes shows

int64_t element_bytes(const BufferDesc& b) { return graph::dtype_size(b.dtype); }

float fold(tdl::Reducer r, float a, float b) {
  switch (r) {
    case tdl::Reducer::kSum: return a + b;
    case tdl::Reducer::kProd: return a * b;
    case tdl::Reducer::kMax: return std::isnan(b) || b > a ? b : a;
    case tdl::Reducer::kMin: return std::isnan(b) || b < a ? b : a;
  }
  return b;
}

}  // namespace

HostExecutable::HostExecutable(const graph::Graph& g, const cost::Placement& plan, const std::vector<int>& keep)
    : g_(g), low_(lower(g, plan, keep)) {
  for (int d = 0; d < low_.devices; ++d) plans_.push_back(translate(g, low_, d));
  dev_.resize(static_cast<size_t>(low_.devices));
  for (int d = 0; d < low_.devices; ++d) {
    const Program& prog = low_.programs[d];
    Device& dev = dev_[d];
    dev.block.assign(static_cast<size_t>(plans_[d].block_bytes), kPoison);
    dev.resident.resize(prog.buffers.size());
    dev.ptr.assign(prog.buffers.size(), nullptr);
    for (size_t b = 0; b < prog.buffers.size(); ++b) {
      if (!prog.buffers[b].resident || prog.buffers[b].bytes() == 0) continue;
      dev.resident[b].assign(static_cast<size_t>(prog.buffers[b].bytes()), kPoison);
      dev.ptr[b] = dev.resident[b].data();
    }
  }
}

HostExecutable::HostExecutable(const graph::Graph& g, const SwapSchedule& s, const std::vector<int>& keep,
                               const std::vector<std::pair<int, int>>& in_place)
    : g_(g), swapped_(true) {
  plans_.resize(1);
  swap_ = prepare_swapped(g, s, keep, in_place, &low_, &plans_[0]);
  const Program& prog = low_.programs[0];
  dev_.resize(1);
  Device& dev = dev_[0];
  // Zeroed, as the CPU's pool: optimizer state nobody sets starts at zero.
  dev.block.assign(static_cast<size_t>(swap_.pool_bytes), std::byte{0});
  dev.resident.resize(prog.buffers.size());
  dev.ptr.assign(prog.buffers.size(), nullptr);
  host_.resize(prog.buffers.size());
  on_host_.assign(prog.buffers.size(), 0);
  for (size_t b = 0; b < prog.buffers.size(); ++b)
    if (swap_.host_stored[b]) host_[b].assign(static_cast<size_t>(prog.buffers[b].bytes()), std::byte{0});
}

void HostExecutable::set_tensor(int tensor, const void* data) {
  if (swapped_) {  // the host store, and the home object of a buffer that starts a step on the device
    const int b = swapped_buffer(low_, tensor);
    if (g_.tensor(tensor).producer >= 0 || b < 0 || host_[b].empty())
      throw ExecError("'" + g_.tensor(tensor).name + "' is computed in a step, not set");
    std::memcpy(host_[b].data(), data, host_[b].size());
    if (swap_.home[b].object >= 0)
      std::memcpy(dev_[0].block.data() + swap_.objects[swap_.home[b].object].first, data, host_[b].size());
    return;
  }
  bool any = false;
  for (int d = 0; d < low_.devices; ++d) {
    const int b = tile_buffer(low_, d, tensor);
    if (b < 0 || dev_[d].resident[b].empty()) continue;
    const BufferDesc& buf = low_.programs[d].buffers[b];
    copy_box(data, Box::whole(g_.tensor(tensor).shape), dev_[d].resident[b].data(), buf.box, buf.box, element_bytes(buf));
    any = true;
  }
  if (!any) throw ExecError("'" + g_.tensor(tensor).name + "' is computed in a step, not set");
}

void HostExecutable::read_tensor(int tensor, void* out) const {
  if (swapped_) {  // as the CPU's swapped executable: a home or end object, else the host store
    const SwappedLaunch::Source src = swap_.source(g_, low_, tensor, steps_, on_host_);
    if (src.object >= 0) {
      std::memcpy(out, dev_[0].block.data() + swap_.objects[src.object].first,
                  static_cast<size_t>(low_.programs[0].buffers[src.buffer].bytes()));
      return;
    }
    if (!src.host) throw ExecError("'" + g_.tensor(tensor).name + "' is not held after a step");
    std::memcpy(out, host_[src.buffer].data(), host_[src.buffer].size());
    return;
  }
  bool any = false;
  for (int d = 0; d < low_.devices; ++d) {  // the tiles cover the tensor; replicas write equal values
    const int b = tile_buffer(low_, d, tensor);
    if (b < 0 || !dev_[d].ptr[b]) continue;
    const BufferDesc& buf = low_.programs[d].buffers[b];
    copy_box(dev_[d].ptr[b], buf.box, out, Box::whole(g_.tensor(tensor).shape), buf.box, element_bytes(buf));
    any = true;
  }
  if (!any) throw ExecError("'" + g_.tensor(tensor).name + "' is not held after a step");
}

void HostExecutable::timed_execute(int d, size_t index) {
  if (!timing_) return execute(d, index);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  execute(d, index);
  const InstrKind k = low_.programs[d].instrs[index].kind;
  if (k == InstrKind::kAlloc || k == InstrKind::kFree || k == InstrKind::kRecord || k == InstrKind::kWait) return;
  times_[d][index] = {std::chrono::duration<double>(t0 - origin_).count(),
                      std::chrono::duration<double>(Clock::now() - origin_).count()};
}

void HostExecutable::step(bool timed) {
  if (timed) {
    times_.assign(static_cast<size_t>(low_.devices), {});
    for (int d = 0; d < low_.devices; ++d) times_[d].assign(low_.programs[d].instrs.size(), {0.0, 0.0});
    origin_ = std::chrono::steady_clock::now();
  }
  timing_ = timed;
  struct Untime {  // a failed step leaves no timing on
    bool* on;
    ~Untime() { *on = false; }
  } untime{&timing_};
  if (swapped_) {
    const Program& prog = low_.programs[0];
    for (size_t b = 0; b < prog.buffers.size(); ++b) {  // the step starts with the plan's initial residents
      const int o = swap_.home[b].object;
      dev_[0].ptr[b] = o >= 0 ? dev_[0].block.data() + swap_.objects[o].first : nullptr;
    }
    std::fill(on_host_.begin(), on_host_.end(), 0);
    for (size_t i : swap_.order) timed_execute(0, i);
    ++steps_;
    return;
  }
  mailbox_.clear();
  // Results kept after the last step are released before this one (as the runtimes do): their bytes
  // are the arena's again.
  for (int d = 0; d < low_.devices; ++d)
    for (size_t b = 0; b < dev_[d].ptr.size(); ++b)
      if (plans_[d].offset[b] >= 0) dev_[d].ptr[b] = nullptr;
  run_step(
      low_.programs, [this](int d, size_t i) { timed_execute(d, i); },
      [this](const std::vector<CommOp>& wave) {
        for (const CommOp& op : wave) {  // the Sends were packed into the mailbox where they ran
          const Program& prog = low_.programs[op.device];
          const Instr& in = prog.instrs[op.instr];
          if (in.kind != InstrKind::kRecv) continue;
          const auto t0 = std::chrono::steady_clock::now();
          auto it = mailbox_.find(in.tag);
          if (it == mailbox_.end()) throw ExecError("a receive whose send is not in its wave");
          const BufferDesc& buf = prog.buffers[in.buffer];
          copy_box(it->second.data(), in.box, dev_[op.device].ptr[in.buffer], buf.box, in.box, element_bytes(buf));
          mailbox_.erase(it);
          if (timing_)
            times_[op.device][op.instr] = {std::chrono::duration<double>(t0 - origin_).count(),
                                           std::chrono::duration<double>(std::chrono::steady_clock::now() - origin_).count()};
        }
      });
}

void HostExecutable::execute(int d, size_t index) {
  const Program& prog = low_.programs[d];
  const LaunchPlan& plan = plans_[d];
  Device& dev = dev_[d];
  {
    const Instr& in = prog.instrs[index];
    const Launch& l = plan.launches[index];
    switch (in.kind) {
      case InstrKind::kAlloc: {
        if (plan.swapped) {  // the object the plan gives this stay
          dev.ptr[in.buffer] = dev.block.data() + in.offset;
          break;
        }
        const int64_t off = plan.offset[in.buffer];
        if (off < 0) break;  // resident
        // The arena's promise: a buffer's bytes are no live buffer's.
        const int64_t end = off + prog.buffers[in.buffer].bytes();
        for (size_t b = 0; b < prog.buffers.size(); ++b) {
          if (!dev.ptr[b] || plan.offset[b] < 0 || static_cast<int>(b) == in.buffer) continue;
          if (plan.offset[b] < end && off < plan.offset[b] + prog.buffers[b].bytes())
            throw ExecError("device " + std::to_string(d) + ": buffer '" + prog.buffers[in.buffer].name + "' at bytes [" +
                            std::to_string(off) + ", " + std::to_string(end) + ") of the arena overlaps '" +
                            prog.buffers[b].name + "', still allocated (instruction " + std::to_string(index) + ")");
        }
        dev.ptr[in.buffer] = dev.block.data() + off;
        std::memset(dev.ptr[in.buffer], 0xFF, static_cast<size_t>(prog.buffers[in.buffer].bytes()));
        break;
      }
      case InstrKind::kFree:
        if (plan.swapped) break;  // the object is free; its next occupant places itself
        if (plan.offset[in.buffer] >= 0 && dev.ptr[in.buffer]) {
          std::memset(dev.ptr[in.buffer], 0xFF, static_cast<size_t>(prog.buffers[in.buffer].bytes()));
          dev.ptr[in.buffer] = nullptr;
        }
        break;
      case InstrKind::kRecord: break;
      case InstrKind::kWait:  // the compute stream learns where a swapped-in buffer landed
        if (plan.swapped && swap_.swapped_in_by[in.event].first >= 0)
          dev.ptr[swap_.swapped_in_by[in.event].first] = dev.block.data() + swap_.swapped_in_by[in.event].second;
        break;
      case InstrKind::kCompute: {
        kernels::TileCall call = kernel_call(g_, low_.ops[in.op], d);
        for (size_t j = 0; j < in.inputs.size() && j < call.inputs.size(); ++j) {
          const int b = in.inputs[j];
          if (b < 0) continue;
          std::byte* p = dev.ptr[b];
          if (!p) throw ExecError("op '" + g_.op(in.op).name + "' reads buffer '" + prog.buffers[b].name + "', not allocated");
          call.inputs[j].raw = p;
          call.inputs[j].data = call.inputs[j].dtype == kernels::DType::kFloat32 ? reinterpret_cast<const float*>(p) : nullptr;
        }
        call.out = reinterpret_cast<float*>(dev.ptr[in.buffer]);
        call.scratch = nullptr, call.scratch_size = 0;
        run_steps_on_host(l.steps, call, &id_error_, static_cast<long long>(index));
        if (id_error_.set) {
          const IdError e = id_error_;
          id_error_ = IdError{};
          throw_bad_id(g_, low_, d, e);
        }
        break;
      }
      case InstrKind::kCopy:
      case InstrKind::kCombine: {
        const std::byte* src = dev.ptr[in.src];
        std::byte* dst = dev.ptr[in.buffer];
        const int64_t e = l.element_bytes;
        for (int64_t i = 0; i < l.copy.elements(); ++i) {
          int64_t s = 0, t = 0;
          l.copy.offsets(i, &s, &t);
          if (in.kind == InstrKind::kCopy) {
            std::memcpy(dst + t * e, src + s * e, static_cast<size_t>(e));
          } else {
            float* o = reinterpret_cast<float*>(dst) + t;
            *o = fold(in.reducer, *o, reinterpret_cast<const float*>(src)[s]);
          }
        }
        break;
      }
      case InstrKind::kSend: {  // packed now into its own message; received in a wave (run_step)
        const BufferDesc& buf = prog.buffers[in.buffer];
        std::vector<std::byte> msg(static_cast<size_t>(in.box.volume() * element_bytes(buf)));
        copy_box(dev.ptr[in.buffer], buf.box, msg.data(), in.box, in.box, element_bytes(buf));
        mailbox_[in.tag] = std::move(msg);
        break;
      }
      case InstrKind::kRecv: break;  // in the step's waves (run_step)
      case InstrKind::kSwapIn:
        std::memcpy(dev.block.data() + in.offset, host_[in.buffer].data(), static_cast<size_t>(in.bytes));
        break;
      case InstrKind::kSwapOut:
        std::memcpy(host_[in.buffer].data(), dev.block.data() + in.offset, static_cast<size_t>(in.bytes));
        on_host_[in.buffer] = 1;
        break;
    }
  }
}

}  // namespace tilewise::exec::cuda

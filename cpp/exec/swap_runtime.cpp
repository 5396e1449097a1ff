// The swapped executor (swap_runtime.h): three streams on three threads, events between them.
#include "exec/swap_runtime.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "exec/errors.h"
#include "kernels/cpu/blas.h"
#include "tdl/errors.h"

namespace tilewise::exec {

namespace {

// Another stream failed: this one stops where it waits (the first error is the one reported).
struct Aborted {};

double since(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

SwapExecutable::SwapExecutable(const graph::Graph& g, const SwapSchedule& s, int64_t capacity,
                               const std::vector<int>& keep, std::vector<tdl::OpaqueCall> opaque,
                               double timeout_seconds, const std::vector<std::pair<int, int>>& in_place)
    : g_(g), low_(lower_swapped(g, s, keep, in_place)), opaque_(std::move(opaque)), timeout_(timeout_seconds) {
  opaque_.resize(g.ops().size());
  check_dtypes(g);
  for (const auto& op : g.ops())
    if (!op.desc->opaque_names.empty() && !opaque_[op.id])
      throw ExecError("op '" + op.name + "' (" + op.type + ") calls an opaque function and none was given");
  const int64_t pool_bytes = low_.schedule.memory_bytes;
  if (capacity > 0 && pool_bytes > capacity) throw OutOfMemory(0, "the swap plan's pool", pool_bytes, 0, capacity);
  // Zeroed: optimizer state nobody sets starts at zero, as in the other executors.
  pool_.reset(new std::byte[static_cast<size_t>(std::max<int64_t>(pool_bytes, 1))]());
  const Program& prog = low_.low.programs[0];
  const size_t nb = prog.buffers.size();
  host_.resize(nb);
  on_host_.assign(nb, 0);
  left_.assign(nb, 0);
  lives_across_.assign(nb, 0);
  auto host = [&](int b) { host_[b].assign(static_cast<size_t>(bytes_of(b)), std::byte{0}); };
  for (const auto& t : g.tensors())
    if (t.producer < 0 && prog.tile_of[t.id] >= 0) host(prog.tile_of[t.id]), lives_across_[prog.tile_of[t.id]] = 1;
  stream_instrs_.resize(prog.streams.size());
  int events = 0;
  for (size_t i = 0; i < prog.instrs.size(); ++i) {
    const Instr& in = prog.instrs[i];
    stream_instrs_[in.stream].push_back(static_cast<int>(i));
    events = std::max(events, in.event + 1);
    if ((in.kind == InstrKind::kSwapIn || in.kind == InstrKind::kSwapOut) && host_[in.buffer].empty()) host(in.buffer);
  }
  // The compute stream learns where a swapped-in buffer landed when it waits for that swap-in: the
  // Record following each SwapIn on its stream.
  swapped_in_by_.assign(events, {-1, 0});
  int last_in = -1;
  for (int i : stream_instrs_[1]) {
    const Instr& in = prog.instrs[i];
    if (in.kind == InstrKind::kSwapIn) last_in = i;
    if (in.kind == InstrKind::kRecord && last_in >= 0)
      swapped_in_by_[in.event] = {prog.instrs[last_in].buffer, prog.instrs[last_in].offset}, last_in = -1;
  }
  asleep_on_.assign(prog.streams.size(), -1);
  ready_ = std::make_unique<std::condition_variable[]>(prog.streams.size());
  recorded_ = std::vector<std::atomic<int64_t>>(events);
  for (auto& r : recorded_) r = -1;
  runner_ = std::make_unique<DeviceRunner>(g, low_.low, 0, 0, opaque_);
  op_seconds_.assign(g.ops().size(), 0);
  stats_.op_native.assign(g.ops().size(), 1);
  for (int stream = 1; stream < static_cast<int>(prog.streams.size()); ++stream)
    workers_.emplace_back([this, stream] { worker(stream); });
}

SwapExecutable::~SwapExecutable() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  go_.notify_all();
  for (auto& th : workers_) th.join();
  // The runner's buffers point into the pool, which it must not release.
  for (size_t b = 0; b < low_.low.programs[0].buffers.size(); ++b) runner_->place(static_cast<int>(b), nullptr);
}

const Program& SwapExecutable::program(int device) const {
  if (device != 0) throw ExecError("device " + std::to_string(device) + " is not the swapped executable's device 0");
  return low_.low.programs[0];
}

int SwapExecutable::buffer_of(int tensor) const {
  if (tensor < 0 || tensor >= static_cast<int>(g_.tensors().size()))
    throw ExecError("tensor id " + std::to_string(tensor) + " is not a tensor of the graph");
  return low_.low.programs[0].tile_of[low_.low.storage_of[tensor]];
}

int64_t SwapExecutable::bytes_of(int b) const {
  const BufferDesc& buf = low_.low.programs[0].buffers[b];
  return buf.bytes();
}

void SwapExecutable::set_tensor(int tensor, const void* data) {
  ExclusiveUse::Guard one(use_, "set_tensor");
  const int b = buffer_of(tensor);
  const auto& t = g_.tensor(tensor);
  if (t.producer >= 0 || b < 0)
    throw ExecError("'" + t.name + "' is computed by the graph; only inputs, labels, parameters, "
                    "optimizer state and constants can be set");
  std::memcpy(host_[b].data(), data, host_[b].size());
  const int o = low_.home[b].object;
  if (o >= 0) std::memcpy(at(low_.schedule.objects[o].first), data, host_[b].size());
}

std::vector<float> SwapExecutable::get_tensor(int tensor) const {
  const auto& t = g_.tensor(tensor);
  if (t.dtype != "float32") throw ExecError("'" + t.name + "' is " + t.dtype + ", not float32: read it with read_tensor");
  std::vector<float> out(static_cast<size_t>(tdl::Box::whole(t.shape).volume()));
  read_tensor(tensor, out.data());
  return out;
}

void SwapExecutable::read_tensor(int tensor, void* out) const {
  ExclusiveUse::Guard one(use_, "get_tensor");
  const int b = buffer_of(tensor);
  const auto& t = g_.tensor(tensor);
  const bool canonical = g_.tensor(low_.low.storage_of[tensor]).producer < 0;  // a parameter, input, state
  const int object = b < 0 ? -1 : canonical ? low_.home[b].object : stats_.steps > 0 ? low_.home[b].end_object : -1;
  if (object >= 0) {
    std::memcpy(out, at(low_.schedule.objects[object].first), static_cast<size_t>(bytes_of(b)));
    return;
  }
  if (b < 0 || host_[b].empty() || !(canonical || (stats_.steps > 0 && on_host_[b])))
    throw ExecError("'" + t.name + "' is not held after a step (only tensors without a producer and results "
                    "without consumers are)");
  std::memcpy(out, host_[b].data(), host_[b].size());
}

void SwapExecutable::add_in_use(int64_t bytes) {
  const int64_t now = in_use_.fetch_add(bytes) + bytes;
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

void SwapExecutable::record(int event) {
  std::vector<int> wake;  // streams asleep on this event (the copy streams may both wait for one op)
  {
    std::lock_guard<std::mutex> lock(m_);
    recorded_[event] = generation_;
    for (size_t s = 0; s < asleep_on_.size(); ++s)
      if (asleep_on_[s] == event) wake.push_back(static_cast<int>(s));
  }
  // Only streams asleep on this very event are woken: a wake-up is a context switch, which on a busy
  // machine takes the core from compute (0.5 ms a record here when every record woke every sleeper).
  for (int s : wake) ready_[s].notify_one();
}

void SwapExecutable::wait(int event, int stream) {
  // The compute stream usually waits for a copy already under way (tens of microseconds): it yields
  // a while before sleeping, as a sleep and a wake-up cost more than that on a busy machine.
  if (stream == 0)
    for (const auto until = Clock::now() + std::chrono::microseconds(200); Clock::now() < until;) {
      if (recorded_[event].load(std::memory_order_acquire) == generation_) return;
      std::this_thread::yield();
    }
  std::unique_lock<std::mutex> lock(m_);
  if (recorded_[event] == generation_) return;
  asleep_on_[stream] = event;
  const bool ok =
      ready_[stream].wait_until(lock, deadline_, [&] { return abort_ || recorded_[event] == generation_; });
  asleep_on_[stream] = -1;
  if (!ok)
    throw ExecError("swapped execution: stream '" + low_.low.programs[0].streams[stream] + "' waited past the " +
                    std::to_string(timeout_) + " s timeout for event " + std::to_string(event));
  if (abort_ && recorded_[event] != generation_) throw Aborted{};
}

void SwapExecutable::run_stream(int stream) {
  const Program& prog = low_.low.programs[0];
  for (int i : stream_instrs_[stream]) {
    const Instr& in = prog.instrs[i];
    const auto t0 = profile_ ? Clock::now() : Clock::time_point{};
    switch (in.kind) {
      case InstrKind::kWait:
        wait(in.event, stream);
        if (stream == 0 && swapped_in_by_[in.event].first >= 0)
          runner_->place(swapped_in_by_[in.event].first, at(swapped_in_by_[in.event].second));
        break;
      case InstrKind::kRecord: record(in.event); break;
      case InstrKind::kAlloc:
        runner_->place(in.buffer, at(in.offset));
        add_in_use(in.bytes);
        break;
      case InstrKind::kFree:  // the object is free; the next occupant places itself
        left_[in.buffer] = 1;
        add_in_use(-in.bytes);
        break;
      case InstrKind::kCompute:
      case InstrKind::kCopy: {
        if (lives_across_[in.buffer]) wrote_state_ = true;  // from here, no undo
        const auto c0 = Clock::now();
        runner_->execute(i);
        op_seconds_[in.op] += since(c0, Clock::now());
        break;
      }
      case InstrKind::kSwapIn:
        add_in_use(in.bytes);
        std::memcpy(at(in.offset), host_[in.buffer].data(), static_cast<size_t>(in.bytes));
        swapped_in_ += in.bytes;
        break;
      case InstrKind::kSwapOut:
        std::memcpy(host_[in.buffer].data(), at(in.offset), static_cast<size_t>(in.bytes));
        on_host_[in.buffer] = 1, left_[in.buffer] = 1;
        swapped_out_ += in.bytes;
        add_in_use(-in.bytes);
        break;
      default: TW_ASSERT(false, std::string("a swapped program has no ") + kind_name(in.kind) + " instruction");
    }
    if (profile_) profile_times_[i] = {since(start_, t0), since(start_, Clock::now())};
  }
}

void SwapExecutable::stream_thread(int stream) {
  try {
    run_stream(stream);
  } catch (const Aborted&) {
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!error_) error_ = std::current_exception();
      abort_ = true;
    }
    for (size_t st = 0; st < asleep_on_.size(); ++st) ready_[st].notify_all();
  }
}

void SwapExecutable::worker(int stream) {
  int64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(m_);
      go_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    stream_thread(stream);
    {
      std::lock_guard<std::mutex> lock(m_);
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

void SwapExecutable::step() {
  ExclusiveUse::Guard one(use_, "step");
  if (failed_)
    throw ExecError("a previous step of this swapped executable failed while tensors moved between device and "
                    "host; compile the plan again (and set the parameters)");
  const Program& prog = low_.low.programs[0];
  // The iteration starts with the plan's initial residents in their objects.
  int64_t resident = 0;
  for (size_t b = 0; b < prog.buffers.size(); ++b) {
    const int o = low_.home[b].object;
    runner_->place(static_cast<int>(b), o >= 0 ? at(low_.schedule.objects[o].first) : nullptr);
    if (o >= 0) resident += bytes_of(static_cast<int>(b));
  }
  in_use_ = resident, peak_ = resident, swapped_in_ = 0, swapped_out_ = 0;
  std::fill(on_host_.begin(), on_host_.end(), 0);
  std::fill(left_.begin(), left_.end(), 0);
  wrote_state_ = false;
  std::fill(op_seconds_.begin(), op_seconds_.end(), 0.0);
  if (profile_) profile_times_.assign(prog.instrs.size(), {0.0, 0.0});
  const int blas_before = kernels::blas_threads();
  kernels::set_blas_threads(1);  // a device is one core; the copy workers are the other threads
  start_ = Clock::now();
  deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  {
    std::lock_guard<std::mutex> lock(m_);
    abort_ = false;
    error_ = nullptr;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  go_.notify_all();
  stream_thread(0);
  const auto compute_end = Clock::now();
  {
    std::unique_lock<std::mutex> lock(m_);
    done_.wait(lock, [&] { return pending_ == 0; });
  }
  kernels::set_blas_threads(blas_before);
  stats_.step_seconds = since(start_, Clock::now());
  if (error_) {
    if (wrote_state_) {
      failed_ = true;
    } else {
      // Undo: what left its object was unchanged or copied out unchanged; put it back.
      for (size_t b = 0; b < prog.buffers.size(); ++b) {
        const int o = low_.home[b].object;
        if (o >= 0 && left_[b]) std::copy(host_[b].begin(), host_[b].end(), at(low_.schedule.objects[o].first));
      }
    }
    std::rethrow_exception(error_);
  }
  stats_.bytes_moved = 0;
  stats_.bytes_received = stats_.bytes_sent = {0};
  stats_.peak_bytes = {low_.schedule.memory_bytes};
  stats_.scratch_bytes = {runner_->scratch_bytes()};
  stats_.device_seconds = {since(start_, compute_end)};
  stats_.op_seconds = op_seconds_;
  for (size_t o = 0; o < stats_.op_native.size(); ++o) stats_.op_native[o] = runner_->native()[o];
  stats_.profile.clear();
  if (profile_) stats_.profile.push_back(profile_times_);
  stats_.swapped_in_bytes = swapped_in_.load();
  stats_.swapped_out_bytes = swapped_out_.load();
  stats_.pool_peak_bytes = peak_.load();
  ++stats_.steps;
}

}  // namespace tilewise::exec

#include "exec/runtime.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "exec/box_copy.h"
#include "exec/errors.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/tile_kernels.h"
#include "tdl/errors.h"
#include "tdl/interpreter.h"

namespace tilewise::exec {

namespace {

using Clock = std::chrono::steady_clock;

bool lives_all_iteration(const graph::TensorNode& t) { return t.producer < 0; }

// A barrier that a failing worker can break, releasing the others.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  bool wait() {
    std::unique_lock<std::mutex> lock(m_);
    if (broken_) return false;
    int gen = gen_;
    if (++count_ == n_) {
      count_ = 0, ++gen_;
      cv_.notify_all();
      return true;
    }
    cv_.wait(lock, [&] { return gen != gen_ || broken_; });
    return !broken_;
  }
  void breakdown() {
    std::lock_guard<std::mutex> lock(m_);
    broken_ = true;
    cv_.notify_all();
  }
  void reset() { broken_ = false, count_ = 0; }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
  bool broken_ = false;
};

kernels::Span span(const Range& r) { return {r.lo, r.hi}; }

std::vector<kernels::Span> spans(const Box& b) {
  std::vector<kernels::Span> s;
  for (const auto& r : b.dims) s.push_back(span(r));
  return s;
}

}  // namespace

struct Executable::Shared {
  explicit Shared(int n) : barrier(n), computed(n, nullptr) {}
  Barrier barrier;
  std::vector<float*> computed;  // this op's computed buffer per device (phase C/D read others')
  std::mutex error_mutex;
  std::exception_ptr error;
  std::vector<char> native;      // per op, and-ed over devices
};

Executable::Executable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity,
                       const std::vector<int>& keep, std::vector<tdl::OpaqueCall> opaque)
    : g_(g), low_(lower(g, plan)), opaque_(std::move(opaque)) {
  opaque_.resize(g.ops().size());
  const int n = low_.devices;
  for (const auto& t : g.tensors())
    if (t.dtype != "float32")
      throw ExecError("the CPU runtime stores float32 tensors; '" + t.name + "' is " + t.dtype);
  for (const auto& op : g.ops())
    if (!op.desc->opaque_names.empty() && !opaque_[op.id])
      throw ExecError("op '" + op.name + "' (" + op.type + ") calls an opaque function and none was given");
  for (int d = 0; d < n; ++d) arenas_.push_back(std::make_unique<Arena>(d, capacity));
  comm_ = std::make_unique<InProcessCommunicator>(n);
  shared_ = std::make_unique<Shared>(n);
  const int nt = static_cast<int>(g.tensors().size());
  tiles_.assign(nt, std::vector<float*>(n, nullptr));
  storage_of_.resize(nt);
  last_use_.assign(nt, -1);
  for (const auto& t : g.tensors()) {
    int s = t.id;
    while (g.tensor(s).updates >= 0) s = g.tensor(s).updates;  // in place of the tensor it updates
    storage_of_[t.id] = s;
    if (s != t.id)
      for (int d = 0; d < n; ++d)
        TW_ASSERT(low_.tiles[t.id][d].dims == low_.tiles[s][d].dims, "an update shares its tensor's tiles");
    if (lives_all_iteration(t) || s != t.id) continue;
    int last = t.producer;
    for (int c : t.consumers) last = std::max(last, c);
    bool kept = t.consumers.empty() || std::find(keep.begin(), keep.end(), t.id) != keep.end();
    if (kept) keep_.push_back(t.id);
    else last_use_[t.id] = last;
  }
  for (const auto& t : g.tensors())
    if (lives_all_iteration(t))
      for (int d = 0; d < n; ++d) {
        tiles_[t.id][d] = arenas_[d]->allocate(low_.tiles[t.id][d].volume(), t.name);
        std::fill(tiles_[t.id][d], tiles_[t.id][d] + low_.tiles[t.id][d].volume(), 0.0f);
      }
  // Kernel calls: everything but the buffers is known now; a step fills in the pointers.
  calls_.resize(g.ops().size());
  for (const OpPlan& op : low_.ops) {
    const auto& node = g.op(op.op);
    calls_[op.op].resize(n);
    for (int d = 0; d < n; ++d) {
      const DeviceOp& dev = op.devices[d];
      if (!dev.active) continue;
      kernels::TileCall& call = calls_[op.op][d];
      call.type = node.type;
      call.attrs = kernels::OpAttrs::parse(node.attrs_json);  // once, not per step
      for (const auto& v : node.desc->vars) call.var_names.push_back(v.name);
      call.output_vars = node.desc->output_vars;
      call.extents = op.extents;
      for (const auto& r : dev.vars) call.vars.push_back(span(r));
      for (size_t j = 0; j < node.inputs.size(); ++j)
        call.inputs.push_back({nullptr, spans(dev.slots[j].region), g.tensor(node.inputs[j]).shape});
      call.output_shape = g.tensor(node.output).shape;
      call.kernel = node.desc->kernel;  // the op's declared native kernel, in its role order
      kernels::bind_roles(call, node.desc->kernel_vars);
    }
  }
  stats_.op_seconds.assign(g.ops().size(), 0);
  stats_.op_native.assign(g.ops().size(), 1);
}

Executable::~Executable() {
  const int n = low_.devices;
  for (size_t t = 0; t < tiles_.size(); ++t)
    if (storage_of_[t] == static_cast<int>(t))
      for (int d = 0; d < n; ++d) arenas_[d]->release(tiles_[t][d], low_.tiles[t][d].volume());
}

void Executable::set_tensor(int tensor, const float* data) {
  const auto& t = g_.tensor(tensor);
  if (!lives_all_iteration(t))
    throw ExecError("'" + t.name + "' is computed by the graph; only inputs, labels, parameters, "
                    "optimizer state and constants can be set");
  const Box whole = Box::whole(t.shape);
  for (int d = 0; d < low_.devices; ++d)
    copy_box(data, whole, tiles_[tensor][d], low_.tiles[tensor][d], low_.tiles[tensor][d]);
}

std::vector<float> Executable::get_tensor(int tensor) const {
  const auto& t = g_.tensor(tensor);
  int s = storage_of_[tensor];
  const Box whole = Box::whole(t.shape);
  std::vector<float> out(whole.volume(), 0.0f);
  bool any = false;
  for (int d = 0; d < low_.devices; ++d) {
    if (!tiles_[s][d]) continue;
    any = true;
    copy_box(tiles_[s][d], low_.tiles[s][d], out.data(), whole, low_.tiles[s][d]);
  }
  if (!any)
    throw ExecError("'" + t.name + "' is not held after a step (only resident tensors and results "
                    "without consumers are)");
  return out;
}

void Executable::step() {
  const int n = low_.devices;
  // Results kept from the previous step go now (the caller has read them).
  for (int t : keep_)
    for (int d = 0; d < n; ++d) {
      arenas_[d]->release(tiles_[t][d], low_.tiles[t][d].volume());
      tiles_[t][d] = nullptr;
    }
  if (failed_)
    throw ExecError("a previous step of this executable failed; compile the plan again");
  comm_->reset();
  for (auto& a : arenas_) a->reset_peak(), a->begin_step();
  shared_->barrier.reset();
  shared_->error = nullptr;
  shared_->native.assign(g_.ops().size(), 1);
  // A device is one core: its kernels run on its worker thread alone (the BLAS included).
  const int blas_before = kernels::blas_threads();
  kernels::set_blas_threads(1);
  auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int d = 1; d < n; ++d) pool.emplace_back([this, d] { run_device(d); });
  run_device(0);
  for (auto& th : pool) th.join();
  kernels::set_blas_threads(blas_before);
  stats_.step_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (shared_->error) {
    failed_ = true;
    std::rethrow_exception(shared_->error);
  }
  try {
    for (auto& a : arenas_) a->end_step();  // plans the arenas after the first step
  } catch (...) {
    failed_ = true;
    throw;
  }
  stats_.bytes_received = comm_->bytes_received();
  stats_.bytes_moved = 0;
  for (int64_t b : stats_.bytes_received) stats_.bytes_moved += b;
  stats_.peak_bytes.clear();
  for (auto& a : arenas_) stats_.peak_bytes.push_back(a->footprint());
  stats_.op_native = shared_->native;
  ++stats_.steps;
}

void Executable::run_device(int d) {
  Shared& sh = *shared_;
  Arena& arena = *arenas_[d];
  auto fail = [&](std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(sh.error_mutex);
      if (!sh.error) sh.error = e;
    }
    sh.barrier.breakdown();
  };
  std::vector<float*> region_bufs;
  std::vector<int64_t> region_sizes;
  try {
    for (const OpPlan& op : low_.ops) {
      auto op_start = Clock::now();
      const auto& node = g_.op(op.op);
      const DeviceOp& dev = op.devices[d];
      const int out_t = storage_of_[node.output];
      // A: assemble every input region (fetching what other devices hold).
      region_bufs.assign(node.inputs.size(), nullptr);
      region_sizes.assign(node.inputs.size(), 0);
      std::vector<const float*> in_data(node.inputs.size(), nullptr);
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const SlotPlan& slot = dev.slots[j];
        if (slot.region.empty()) continue;
        const int t = storage_of_[node.inputs[j]];
        if (slot.use_tile) {
          in_data[j] = tiles_[t][d];
          continue;
        }
        region_sizes[j] = slot.region.volume();
        region_bufs[j] = arena.allocate(region_sizes[j], g_.tensor(node.inputs[j]).name + " (region for " + node.name + ")");
        for (const Transfer& tr : slot.parts)
          comm_->receive(tr.src, tiles_[t][tr.src], low_.tiles[t][tr.src], d, region_bufs[j], slot.region, tr.what);
        in_data[j] = region_bufs[j];
      }
      if (!sh.barrier.wait()) return;
      // B: compute this device's share.
      if (!dev.tile.empty() && !tiles_[out_t][d]) tiles_[out_t][d] = arena.allocate(dev.tile.volume(), g_.tensor(node.output).name);
      float* computed = nullptr;
      int64_t computed_size = 0;
      if (dev.active) {
        if (dev.direct) {
          computed = tiles_[out_t][d];
        } else {
          computed_size = dev.computed.volume();
          computed = arena.allocate(computed_size, g_.tensor(node.output).name + " (computed by " + node.name + ")");
        }
        kernels::TileCall& call = calls_[op.op][d];  // prepared once; this device's entry only
        for (size_t j = 0; j < node.inputs.size(); ++j) call.inputs[j].data = in_data[j];
        call.out = computed;
        if (!kernels::run_native(call)) {
          sh.native[op.op] = 0;
          // Interpreter fallback (float64) on the same regions.
          std::vector<std::vector<double>> in64(node.inputs.size());
          std::vector<tdl::RegionView> views;
          for (size_t j = 0; j < node.inputs.size(); ++j) {
            int64_t m = dev.slots[j].region.volume();
            in64[j].assign(in_data[j] ? in_data[j] : nullptr, in_data[j] ? in_data[j] + m : nullptr);
            views.push_back({in64[j].data(), dev.slots[j].region, call.inputs[j].shape});
          }
          std::vector<double> out64(dev.computed.volume());
          tdl::interpret_region(*node.desc, views, op.extents, dev.vars, out64.data(), opaque_[op.op], 1);
          std::copy(out64.begin(), out64.end(), computed);
        }
      }
      sh.computed[d] = computed;
      // Only needed when others read this buffer (an op computed where it is held skips it).
      if (op.remote_results && !sh.barrier.wait()) return;
      // C: owners combine the other classes' partial sums.
      if (!dev.reduce_in.empty()) {
        int64_t total = 0;
        for (const Transfer& tr : dev.reduce_in) total += tr.what.volume();
        float* stage = arena.allocate(total, g_.tensor(node.output).name + " (partials for " + node.name + ")");
        for (const Transfer& tr : dev.reduce_in) {
          comm_->receive(tr.src, sh.computed[tr.src], op.devices[tr.src].computed, d, stage, tr.what, tr.what);
          combine_box(stage, tr.what, computed, dev.computed, tr.what, op.reducer);
        }
        arena.release(stage, total);
      }
      if (op.reduces && !sh.barrier.wait()) return;
      // D: every holder gets its tile's final values.
      for (const Transfer& tr : dev.result_in)
        comm_->receive(tr.src, sh.computed[tr.src], op.devices[tr.src].computed, d, tiles_[out_t][d], dev.tile, tr.what);
      if (!sh.barrier.wait()) return;
      for (size_t j = 0; j < region_bufs.size(); ++j) arena.release(region_bufs[j], region_sizes[j]);
      if (computed_size) arena.release(computed, computed_size);
      for (int t : node.inputs)
        if (last_use_[t] == op.op && storage_of_[t] == t && tiles_[t][d]) {
          arena.release(tiles_[t][d], low_.tiles[t][d].volume());
          tiles_[t][d] = nullptr;
        }
      if (last_use_[node.output] == op.op && storage_of_[node.output] == node.output && tiles_[node.output][d]) {
        arena.release(tiles_[node.output][d], low_.tiles[node.output][d].volume());
        tiles_[node.output][d] = nullptr;
      }
      if (d == 0) stats_.op_seconds[op.op] = std::chrono::duration<double>(Clock::now() - op_start).count();
    }
  } catch (...) {
    fail(std::current_exception());
  }
}

}  // namespace tilewise::exec

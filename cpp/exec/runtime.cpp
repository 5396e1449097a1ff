#include "exec/runtime.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "exec/box_copy.h"
#include "exec/errors.h"
#include "exec/kernel_call.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/tile_kernels.h"
#include "tdl/errors.h"
#include "tdl/interpreter.h"
#include "tdl/interrupt.h"

namespace tilewise::exec {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0, Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); }

// Element i of a buffer of `type` as a double (what the interpreter and float32 copies read).
double value_at(const void* data, kernels::DType type, int64_t i) {
  switch (type) {
    case kernels::DType::kFloat32: return static_cast<const float*>(data)[i];
    case kernels::DType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case kernels::DType::kInt32: return static_cast<const int32_t*>(data)[i];
    case kernels::DType::kBool: return static_cast<const uint8_t*>(data)[i] != 0 ? 1.0 : 0.0;
  }
  return 0;
}

}  // namespace

void check_dtypes(const graph::Graph& g) {
  for (const auto& t : g.tensors()) {
    kernels::DType type;
    try {
      type = kernels::dtype_of(t.dtype);
    } catch (const std::invalid_argument&) {
      throw ExecError("the CPU runtime holds float32, int64, int32 and bool tensors; '" + t.name + "' is " + t.dtype);
    }
    if (type != kernels::DType::kFloat32 && t.producer >= 0)
      throw ExecError("op '" + g.op(t.producer).name + "' computes '" + t.name + "' as " + t.dtype +
                      "; ops compute float32 (int64, int32 and bool tensors are inputs and constants)");
    if (type != kernels::DType::kFloat32 && (t.role == graph::Role::kParameter || t.role == graph::Role::kOptimizerState))
      throw ExecError("parameter or optimizer state '" + t.name + "' is " + t.dtype + "; they are float32");
  }
}

// ---------------------------------------------------------------------------------------------
// DeviceRunner

DeviceRunner::DeviceRunner(const graph::Graph& g, const Lowered& low, int device, int64_t capacity,
                           const std::vector<tdl::OpaqueCall>& opaque)
    : g_(g), low_(low), prog_(low.programs[device]), device_(device), arena_(device, capacity), opaque_(opaque) {
  ptr_.assign(prog_.buffers.size(), nullptr);
  for (const BufferDesc& buf : prog_.buffers) {
    dtype_.push_back(kernels::dtype_of(buf.dtype));
    bytes_.push_back(buf.elements() * kernels::dtype_bytes(dtype_.back()));
  }
  for (size_t b = 0; b < prog_.buffers.size(); ++b) {
    const BufferDesc& buf = prog_.buffers[b];
    if (!buf.resident) continue;
    ptr_[b] = arena_.allocate(bytes_[b], buf.name);
    std::fill(ptr_[b], ptr_[b] + bytes_[b], std::byte{0});  // all-zero bits: 0 in every dtype
  }
  // Kernel calls and their scratch layouts: everything but the buffers is known now (as lowering
  // sized the scratch buffers); a step fills in the pointers.
  calls_.resize(prog_.instrs.size());
  layouts_.resize(prog_.instrs.size());
  for (size_t i = 0; i < prog_.instrs.size(); ++i) {
    const Instr& in = prog_.instrs[i];
    if (in.kind != InstrKind::kCompute) continue;
    calls_[i] = kernel_call(g, low.ops[in.op], device);
    layouts_[i] = scratch_layout(g, in.op, calls_[i]);
    TW_ASSERT(in.scratch < 0 ? layouts_[i].bytes == 0 : bytes_[in.scratch] >= layouts_[i].bytes,
              "a Compute instruction's scratch buffer holds its scratch layout");
  }
  native_.assign(g.ops().size(), 1);
  op_seconds_.assign(g.ops().size(), 0);
}

DeviceRunner::~DeviceRunner() {
  for (size_t b = 0; b < ptr_.size(); ++b) arena_.release(ptr_[b], bytes_[b]);
}

std::byte* DeviceRunner::tile(int tensor) const {
  int b = prog_.tile_of[low_.storage_of[tensor]];
  return b < 0 ? nullptr : ptr_[b];
}

void DeviceRunner::release_kept() {
  for (int t : low_.kept) {
    int b = prog_.tile_of[t];
    if (b < 0 || !ptr_[b]) continue;
    arena_.release(ptr_[b], bytes_[b]);
    ptr_[b] = nullptr;
  }
}

int64_t DeviceRunner::undo_bytes() const {
  int64_t total = 0;
  for (const auto& copy : saved_) total += static_cast<int64_t>(copy.capacity());
  return total;
}

void DeviceRunner::restore_updates() {
  for (size_t b = 0; b < saved_now_.size(); ++b)
    if (saved_now_[b] && ptr_[b]) std::copy(saved_[b].begin(), saved_[b].end(), ptr_[b]);
  std::fill(saved_now_.begin(), saved_now_.end(), 0);
}

void DeviceRunner::abort_step() {
  restore_updates();
  for (size_t b = 0; b < ptr_.size(); ++b)
    if (!prog_.buffers[b].resident) ptr_[b] = nullptr;
  arena_.abort_step();
}

void DeviceRunner::bind_input(kernels::TileCall& call, size_t j, int b, std::byte* scratch, int64_t offset) {
  kernels::TileIn& in = call.inputs[j];
  in.data = nullptr, in.raw = nullptr, in.dtype = kernels::DType::kFloat32;
  if (b < 0 || !ptr_[b]) return;
  const kernels::DType type = dtype_[b];
  if (type == kernels::DType::kFloat32) {
    in.data = reinterpret_cast<const float*>(ptr_[b]);
    in.raw = in.data;
  } else if (kernels::reads_integers(call.kernel)) {
    in.raw = ptr_[b], in.dtype = type;
  } else {
    // Torch promotes an integer operand of a float op to float: a float32 copy (masks, labels), in
    // the instruction's scratch (the heap when it has none: a swapped program's).
    const int64_t n = prog_.buffers[b].elements();
    float* copy = nullptr;
    if (scratch && offset >= 0) {
      copy = reinterpret_cast<float*>(scratch + offset);
    } else {
      as_float_[j].resize(static_cast<size_t>(n));
      copy = as_float_[j].data();
      heap_now_ += n * 4;
    }
    for (int64_t i = 0; i < n; ++i) copy[i] = static_cast<float>(value_at(ptr_[b], type, i));
    in.data = copy, in.raw = in.data;
  }
}

void DeviceRunner::compute(const Instr& in, size_t index) {
  const auto& node = g_.op(in.op);
  const DeviceOp& dev = low_.ops[in.op].devices[device_];
  kernels::TileCall& call = calls_[index];
  const ScratchLayout& layout = layouts_[index];
  std::byte* scratch = in.scratch >= 0 ? ptr_[in.scratch] : nullptr;  // null: not placed (swapped programs)
  heap_now_ = 0;
  if (as_float_.size() < node.inputs.size()) as_float_.resize(node.inputs.size());
  for (size_t j = 0; j < node.inputs.size(); ++j) bind_input(call, j, in.inputs[j], scratch, layout.as_float[j]);
  float* out = reinterpret_cast<float*>(ptr_[in.buffer]);  // ops compute float32 (check_dtypes)
  call.out = out;
  call.scratch = scratch && !layout.interpreted ? scratch + layout.kernel : nullptr;
  call.scratch_size = call.scratch ? layout.kernel_bytes : 0;
  const int64_t heap_before = kernels::heap_scratch_bytes_this_thread();
  const bool native = kernels::run_native(call);
  heap_now_ += kernels::heap_scratch_bytes_this_thread() - heap_before;
  if (native) {
    scratch_bytes_ = std::max(scratch_bytes_, heap_now_);
    return;
  }
  native_[in.op] = 0;
  // Interpreter fallback (float64) on the same regions: copies in the instruction's scratch when the
  // op declares no kernel (lowering planned them), else (a kernel that declined) on the heap.
  double* planned = scratch && layout.interpreted ? reinterpret_cast<double*>(scratch + layout.kernel) : nullptr;
  std::vector<std::vector<double>> heap(node.inputs.size() + 1);
  auto take = [&](size_t slot, int64_t n) {
    if (planned) {
      double* p = planned;
      planned += (n * 8 + 15) / 16 * 2;  // 16-byte aligned pieces, as scratch_layout counts them
      return p;
    }
    heap[slot].resize(static_cast<size_t>(n));
    heap_now_ += n * 8;
    return heap[slot].data();
  };
  std::vector<tdl::RegionView> views;
  for (size_t j = 0; j < node.inputs.size(); ++j) {
    const kernels::TileIn& tin = call.inputs[j];
    const int64_t m = tin.raw && !dev.slots[j].region.empty() ? dev.slots[j].region.volume() : 0;
    double* in64 = take(j, m);
    for (int64_t i = 0; i < m; ++i) in64[i] = value_at(tin.raw, tin.dtype, i);
    views.push_back({in64, dev.slots[j].region, call.inputs[j].shape});
  }
  const int64_t nout = dev.computed.volume();
  double* out64 = take(node.inputs.size(), nout);
  scratch_bytes_ = std::max(scratch_bytes_, heap_now_);
  // The description's own variable order (the call's is the kernel's role order).
  tdl::interpret_region(*node.desc, views, low_.ops[in.op].extents, dev.vars, out64, opaque_[in.op], 1);
  std::copy(out64, out64 + nout, out);
}

void DeviceRunner::execute(size_t i) {
  const Instr& in = prog_.instrs[i];
  const auto& bufs = prog_.buffers;
  if (in.kind == InstrKind::kCompute) compute(in, i);
  else if (in.kind == InstrKind::kCopy)
    copy_box(ptr_[in.src], bufs[in.src].box, ptr_[in.buffer], bufs[in.buffer].box, in.box, element_bytes(in.buffer));
  else TW_ASSERT(false, "execute runs Compute and Copy instructions");
}

void DeviceRunner::check_finite(const Instr& in) {
  if (in.buffer < 0 || dtype_[in.buffer] != kernels::DType::kFloat32 || !ptr_[in.buffer]) return;
  const auto& b = prog_.buffers[in.buffer];
  // A compute instruction writes its whole buffer (the computed box, or the tile it is), a combine
  // its box of it.
  const NonFinite bad = count_nonfinite(reinterpret_cast<const float*>(ptr_[in.buffer]), b.box,
                                        in.kind == InstrKind::kCombine ? in.box : b.box);
  if (!bad.any()) return;
  const auto& op = g_.op(in.op);
  const std::string tensor = g_.tensor(op.output).name;
  throw NumericalError("op '" + op.name + "' (" + op.type + ") produced " + std::to_string(bad.nan) + " NaN and " +
                           std::to_string(bad.inf) + " infinite values in '" + tensor + "' on device " +
                           std::to_string(device_) + (in.kind == InstrKind::kCombine ? " (summing partials)" : "") +
                           " (check_finite: the first non-finite output this device computed)",
                       op.name, tensor, device_, bad.nan, bad.inf);
}

void DeviceRunner::interrupt_if_undoable() {
  if (atomic_) throw Interrupted();  // the saved copies take back whatever the step wrote
  int state = kStepRunning;
  if (gate_->compare_exchange_strong(state, kStepInterrupted) || state == kStepInterrupted) throw Interrupted();
  // kStepWriting: some device updates in place; the step finishes and the interrupt follows it.
}

void DeviceRunner::begin_writing() {
  if (!gate_ || atomic_) return;
  int state = kStepRunning;
  if (!gate_->compare_exchange_strong(state, kStepWriting) && state == kStepInterrupted) throw Interrupted();
}

void DeviceRunner::run(Communicator& comm, Deadline deadline, bool profile) {
  const auto start = Clock::now();
  std::fill(native_.begin(), native_.end(), 1);
  std::fill(op_seconds_.begin(), op_seconds_.end(), 0.0);
  if (profile) profile_.assign(prog_.instrs.size(), {0.0, 0.0});
  else profile_.clear();
  const auto& bufs = prog_.buffers;
  wrote_resident_ = false;
  if (atomic_) {
    saved_.resize(prog_.buffers.size());
    saved_now_.assign(prog_.buffers.size(), 0);
  }
  int current_op = -1;
  auto op_start = start;
  for (size_t i = 0; i < prog_.instrs.size(); ++i) {
    const Instr& in = prog_.instrs[i];
    if (in.op != current_op) {
      auto now = Clock::now();
      if (current_op >= 0) op_seconds_[current_op] += since(op_start, now);
      current_op = in.op, op_start = now;
    }
    const auto t0 = profile ? Clock::now() : start;
    if (gate_ && interrupt_requested()) interrupt_if_undoable();
    const bool writes = in.kind == InstrKind::kCompute || in.kind == InstrKind::kRecv ||
                        in.kind == InstrKind::kCopy || in.kind == InstrKind::kCombine;
    if (writes && in.buffer >= 0 && bufs[in.buffer].resident) {
      if (!wrote_resident_) begin_writing();
      wrote_resident_ = true;  // from here, undone only from a saved copy
      if (atomic_ && !saved_now_[in.buffer]) {
        saved_[in.buffer].assign(ptr_[in.buffer], ptr_[in.buffer] + bytes_[in.buffer]);
        saved_now_[in.buffer] = 1;
      }
    }
    switch (in.kind) {
      case InstrKind::kAlloc: ptr_[in.buffer] = arena_.allocate(bytes_[in.buffer], bufs[in.buffer].name); break;
      case InstrKind::kFree:
        arena_.release(ptr_[in.buffer], bytes_[in.buffer]);
        ptr_[in.buffer] = nullptr;
        break;
      case InstrKind::kCompute: compute(in, i); break;
      case InstrKind::kSend:
        comm.send(device_, in.peer, in.tag, ptr_[in.buffer], bufs[in.buffer].box, in.box, element_bytes(in.buffer));
        break;
      case InstrKind::kRecv:
        try {
          comm.recv(device_, in.peer, in.tag, ptr_[in.buffer], bufs[in.buffer].box, in.box, element_bytes(in.buffer),
                    deadline);
        } catch (const CommunicationError& e) {
          throw CommunicationError(e.device, e.peer,
                                   std::string(e.what()) + ", at instruction " + std::to_string(i) + " of its program: " +
                                       prog_.instr_text(in));
        }
        break;
      case InstrKind::kCombine:
        // Partials of computed tensors: float32 (check_dtypes).
        combine_box(reinterpret_cast<const float*>(ptr_[in.src]), bufs[in.src].box,
                    reinterpret_cast<float*>(ptr_[in.buffer]), bufs[in.buffer].box, in.box, in.reducer);
        break;
      case InstrKind::kCopy:
        copy_box(ptr_[in.src], bufs[in.src].box, ptr_[in.buffer], bufs[in.buffer].box, in.box, element_bytes(in.buffer));
        break;
      case InstrKind::kRecord:
      case InstrKind::kWait:
        break;  // one worker runs the streams in program order: events hold already
      case InstrKind::kSwapOut:
      case InstrKind::kSwapIn: throw ExecError("swap instructions are not implemented by the thread executor");
    }
    if (check_finite_ && (in.kind == InstrKind::kCompute || in.kind == InstrKind::kCombine)) check_finite(in);
    if (profile) profile_[i] = {since(start, t0), since(start, Clock::now())};
  }
  const auto end = Clock::now();
  if (current_op >= 0) op_seconds_[current_op] += since(op_start, end);
  seconds_ = since(start, end);
}

// ---------------------------------------------------------------------------------------------
// The thread executor

struct Executable::Pool {
  std::vector<std::thread> threads;
  std::mutex m;
  std::condition_variable go, done;
  int64_t generation = 0;
  int pending = 0;
  bool stop = false;
  std::mutex error_mutex;
  std::exception_ptr error;
  std::atomic<int> gate{kStepRunning};  ///< StepGate, shared by the devices' runners
};

Executable::Executable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity,
                       const std::vector<int>& keep, std::vector<tdl::OpaqueCall> opaque, double timeout_seconds)
    : g_(g), low_(lower(g, plan, keep)), opaque_(std::move(opaque)), timeout_(timeout_seconds) {
  opaque_.resize(g.ops().size());
  const int n = low_.devices;
  check_dtypes(g);
  for (const auto& op : g.ops()) {
    TW_ASSERT(low_.ops[op.id].op == op.id, "ops are lowered in id order");
    if (!op.desc->opaque_names.empty() && !opaque_[op.id])
      throw ExecError("op '" + op.name + "' (" + op.type + ") calls an opaque function and none was given");
  }
  for (int d = 0; d < n; ++d) runners_.push_back(std::make_unique<DeviceRunner>(g, low_, d, capacity, opaque_));
  comm_ = std::make_unique<MailboxCommunicator>(n);
  stats_.op_seconds.assign(g.ops().size(), 0);
  stats_.op_native.assign(g.ops().size(), 1);
  pool_ = std::make_unique<Pool>();
  for (auto& r : runners_) r->set_step_gate(&pool_->gate);
  for (int d = 1; d < n; ++d) pool_->threads.emplace_back([this, d] { worker(d); });
}

Executable::~Executable() {
  {
    std::lock_guard<std::mutex> lock(pool_->m);
    pool_->stop = true;
  }
  pool_->go.notify_all();
  for (auto& th : pool_->threads) th.join();
}

const Program& Executable::program(int device) const {
  if (device < 0 || device >= low_.devices)
    throw ExecError("device " + std::to_string(device) + " is not one of the " + std::to_string(low_.devices) +
                    " devices");
  return low_.programs[device];
}

void Executable::set_tensor(int tensor, const void* data) {
  ExclusiveUse::Guard one(use_, "set_tensor");
  const auto& t = g_.tensor(tensor);
  if (t.producer >= 0)
    throw ExecError("'" + t.name + "' is computed by the graph; only inputs, labels, parameters, "
                    "optimizer state and constants can be set");
  const Box whole = Box::whole(t.shape);
  const int64_t size = kernels::dtype_bytes(kernels::dtype_of(t.dtype));
  for (int d = 0; d < low_.devices; ++d)
    if (std::byte* tile = runners_[d]->tile(tensor))
      copy_box(data, whole, tile, low_.tiles[tensor][d], low_.tiles[tensor][d], size);
}

void Executable::read_tensor(int tensor, void* out) const {
  ExclusiveUse::Guard one(use_, "get_tensor");
  const auto& t = g_.tensor(tensor);
  int s = low_.storage_of[tensor];
  const Box whole = Box::whole(t.shape);
  const int64_t size = kernels::dtype_bytes(kernels::dtype_of(t.dtype));
  std::fill(static_cast<std::byte*>(out), static_cast<std::byte*>(out) + whole.volume() * size, std::byte{0});
  bool any = false;
  for (int d = 0; d < low_.devices; ++d) {
    const std::byte* tile = runners_[d]->tile(tensor);
    if (!tile) continue;
    any = true;
    copy_box(tile, low_.tiles[s][d], out, whole, low_.tiles[s][d], size);
  }
  if (!any)
    throw ExecError("'" + t.name + "' is not held after a step (only resident tensors and results "
                    "without consumers are)");
}

std::vector<float> Executable::get_tensor(int tensor) const {
  const auto& t = g_.tensor(tensor);
  if (t.dtype != "float32") throw ExecError("'" + t.name + "' is " + t.dtype + ", not float32: read it with read_tensor");
  std::vector<float> out(static_cast<size_t>(Box::whole(t.shape).volume()));
  read_tensor(tensor, out.data());
  return out;
}

void Executable::run_device(int d) {
  try {
    runners_[d]->run(*comm_, deadline_, profile_);
  } catch (...) {
    std::string why = "error";
    try {
      throw;
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
    }
    {
      std::lock_guard<std::mutex> lock(pool_->error_mutex);
      if (!pool_->error) pool_->error = std::current_exception();
    }
    comm_->abort(d, why);  // releases the devices waiting on this one
  }
}

void Executable::worker(int d) {
  int64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(pool_->m);
      pool_->go.wait(lock, [&] { return pool_->stop || pool_->generation != seen; });
      if (pool_->stop) return;
      seen = pool_->generation;
    }
    run_device(d);
    {
      std::lock_guard<std::mutex> lock(pool_->m);
      if (--pool_->pending == 0) pool_->done.notify_all();
    }
  }
}

void Executable::step() {
  ExclusiveUse::Guard one(use_, "step");
  const int n = low_.devices;
  // Results kept from the previous step go now (the caller has read them).
  for (auto& r : runners_) r->release_kept();
  if (failed_)
    throw ExecError("a previous step of this executable failed after updating parameters or optimizer state in "
                    "place; compile the plan again (and set the parameters)");
  comm_->reset();
  for (auto& r : runners_) r->arena().reset_peak(), r->arena().begin_step();
  pool_->error = nullptr;
  pool_->gate = kStepRunning;
  // A device is one core: its kernels run on its worker thread alone (the BLAS included).
  const int blas_before = kernels::blas_threads();
  kernels::set_blas_threads(1);
  auto start = Clock::now();
  deadline_ = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
  {
    std::lock_guard<std::mutex> lock(pool_->m);
    pool_->pending = n - 1;
    ++pool_->generation;
  }
  pool_->go.notify_all();
  run_device(0);
  {
    std::unique_lock<std::mutex> lock(pool_->m);
    pool_->done.wait(lock, [&] { return pool_->pending == 0; });
  }
  kernels::set_blas_threads(blas_before);
  stats_.step_seconds = since(start, Clock::now());
  if (pool_->error) {
    // Undone when every device can: none had written a tensor that lives across steps (a bad id is
    // found in the forward pass, before any update), or steps are atomic (set_atomic: copies of the
    // updated tensors). The executable stays usable, parameters as they were.
    bool wrote = false;
    for (auto& r : runners_) wrote = wrote || !r->can_undo();
    if (wrote) {
      failed_ = true;
    } else {
      for (auto& r : runners_) r->abort_step();
      comm_->reset();
    }
    std::rethrow_exception(pool_->error);
  }
  const bool recorded = !runners_.empty() && !runners_[0]->arena().planned();
  try {
    for (auto& r : runners_) r->arena().end_step();  // plans the arenas after the first step
  } catch (...) {
    failed_ = true;
    throw;
  }
#if defined(__GLIBC__)
  // The recorded step's buffers came from malloc and went back to it; hand that memory back to the
  // system, or the process holds it beside the planned blocks (peak RSS 1.3-1.7x the plan).
  if (recorded) malloc_trim(0);
#endif
  stats_.bytes_received = comm_->bytes_received();
  stats_.bytes_sent = comm_->bytes_sent();
  stats_.bytes_moved = 0;
  for (int64_t b : stats_.bytes_received) stats_.bytes_moved += b;
  stats_.peak_bytes.clear();
  stats_.scratch_bytes.clear();
  stats_.undo_bytes.clear();
  stats_.device_seconds.clear();
  stats_.profile.clear();
  std::fill(stats_.op_native.begin(), stats_.op_native.end(), 1);
  for (auto& r : runners_) {
    stats_.peak_bytes.push_back(r->arena().footprint());
    stats_.scratch_bytes.push_back(r->scratch_bytes());
    stats_.undo_bytes.push_back(r->undo_bytes());
    stats_.device_seconds.push_back(r->seconds());
    for (size_t o = 0; o < stats_.op_native.size(); ++o) stats_.op_native[o] = stats_.op_native[o] && r->native()[o];
    if (profile_) stats_.profile.push_back(r->profile());
  }
  stats_.op_seconds = runners_[0]->op_seconds();
  stats_.message_bytes = comm_->buffer_bytes();
  ++stats_.steps;
}

}  // namespace tilewise::exec

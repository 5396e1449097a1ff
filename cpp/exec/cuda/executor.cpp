#include "exec/cuda/executor.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "exec/arena.h"
#include "exec/box_copy.h"
#include "exec/copy_plan.h"
#include "exec/cuda/copy_kernel.h"
#include "exec/cuda/device.h"
#include "exec/cuda/map_kernels.h"
#include "exec/cuda/step_schedule.h"

namespace tilewise::exec::cuda {

namespace {

void check_cublas(cublasStatus_t s, const std::string& call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw CudaError(call, cublasGetStatusName(s), cublasGetStatusString(s));
}

void check_nccl(ncclResult_t r, const std::string& call) {
  if (r != ncclSuccess) throw CudaError(call, "ncclResult " + std::to_string(static_cast<int>(r)), ncclGetErrorString(r));
}

void check_cudnn(cudnnStatus_t s, const std::string& call) {
  if (s != CUDNN_STATUS_SUCCESS) throw CudaError(call, "cudnnStatus " + std::to_string(static_cast<int>(s)), cudnnGetErrorString(s));
}

// cuDNN descriptors of one convolution, destroyed with it.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  explicit ConvDescriptors(const ConvCall& c) {
    check_cudnn(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check_cudnn(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check_cudnn(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    const int xd[4] = {int(c.n), int(c.c), int(c.h), int(c.w)}, yd[4] = {int(c.n), int(c.k), int(c.p), int(c.q)};
    const int xs[4] = {int(c.x_stride[0]), int(c.x_stride[1]), int(c.x_stride[2]), int(c.x_stride[3])};
    const int ys[4] = {int(c.y_stride[0]), int(c.y_stride[1]), int(c.y_stride[2]), int(c.y_stride[3])};
    check_cudnn(cudnnSetTensorNdDescriptor(x, CUDNN_DATA_FLOAT, 4, xd, xs), "cudnnSetTensorNdDescriptor(x)");
    check_cudnn(cudnnSetTensorNdDescriptor(y, CUDNN_DATA_FLOAT, 4, yd, ys), "cudnnSetTensorNdDescriptor(y)");
    check_cudnn(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(c.k), int(c.c), int(c.r), int(c.s)),
                "cudnnSetFilter4dDescriptor");
    check_cudnn(cudnnSetConvolution2dDescriptor(conv, int(c.pad_h), int(c.pad_w), int(c.stride_h), int(c.stride_w),
                                                int(c.dil_h), int(c.dil_w), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                "cudnnSetConvolution2dDescriptor");
    // float32 results within the CPU's tolerance: no TF32 tensor-core math.
    check_cudnn(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
  }
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;
  ~ConvDescriptors() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
};

// The launch path's library checks, their messages built only on failure (as check_lazy).
template <class Message>
void cublas_ok(cublasStatus_t s, Message&& message) {
  if (s != CUBLAS_STATUS_SUCCESS) check_cublas(s, message());
}
template <class Message>
void cudnn_ok(cudnnStatus_t s, Message&& message) {
  if (s != CUDNN_STATUS_SUCCESS) check_cudnn(s, message());
}

// One convolution step's descriptors and cuDNN's algorithm for it, chosen on its first launch and
// kept: a step's geometry never changes, and the queries cost tens of microseconds per launch.
struct ConvChoice {
  ConvChoice(const ConvCall& c, std::string op_name) : dsc(c), op(std::move(op_name)), mode(c.mode) {}
  ConvDescriptors dsc;
  std::string op;
  int mode;
  int algo = 0;
  size_t workspace = 0;
};

}  // namespace

struct CudaExecutable::Device {
  int id = 0;
  void* block = nullptr;
  std::vector<void*> resident;  // per buffer: own cudaMalloc (resident buffers), else null
  std::vector<void*> ptr;       // per buffer: where it is during a step
  cudaStream_t streams[3] = {nullptr, nullptr, nullptr};
  std::vector<cudaEvent_t> events;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  void* workspace = nullptr;  // cuDNN's workspace, grown on demand (outside the planned block)
  size_t workspace_bytes = 0;
  // Several GPUs: the NCCL communicator (rank = device), and a staging block outside the arena with
  // one box per Send (packed where the Send stands, sent in its Recv's wave: step_schedule.h) and per
  // Recv whose box is not its buffer's whole contiguous bytes; per instruction its offset (-1: none)
  // and the pack or unpack geometry.
  ncclComm_t comm = nullptr;
  void* staging = nullptr;
  std::vector<int64_t> staging_offset;
  std::vector<CopyPlan> comm_copy;
  // Timed steps: an origin event recorded as the step begins, and per instruction a start and an end
  // event (timing enabled, unlike the program's events), made on the first timed step.
  cudaEvent_t origin = nullptr;
  std::vector<cudaEvent_t> starts, ends;
  std::vector<char> recorded;
  std::unordered_map<const Step*, std::unique_ptr<ConvChoice>> conv;  // per convolution step of the plans
  // Embedding lookups: where they report an id outside the table (device memory, zeroed), and the
  // instruction before which the step checks it (the program's first optimizer update; -1: none).
  IdError* id_error = nullptr;
  bool looks_up_ids = false;
  int first_update = -1;

  ~Device() {
    if (id < 0) return;
    cudaSetDevice(id);
    for (auto* s : streams)
      if (s) cudaStreamSynchronize(s);
    if (comm) ncclCommDestroy(comm);
    if (staging) cudaFree(staging);
    if (cudnn) cudnnDestroy(cudnn);
    if (cublas) cublasDestroy(cublas);
    for (auto e : events) cudaEventDestroy(e);
    for (auto e : starts) cudaEventDestroy(e);
    for (auto e : ends) cudaEventDestroy(e);
    if (origin) cudaEventDestroy(origin);
    for (auto* s : streams)
      if (s) cudaStreamDestroy(s);
    for (void* p : resident)
      if (p) cudaFree(p);
    if (block) cudaFree(block);
    if (workspace) cudaFree(workspace);
    if (id_error) cudaFree(id_error);
  }
  void* scratch(size_t bytes) {
    if (bytes > workspace_bytes) {
      if (workspace) check(cudaFree(workspace), "cudaFree(workspace)");
      workspace = nullptr;
      check(cudaMalloc(&workspace, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes of cuDNN workspace)");
      workspace_bytes = bytes;
    }
    return workspace;
  }
};

CudaExecutable::CudaExecutable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity,
                               const std::vector<int>& keep)
    : g_(g), low_(lower(g, plan, keep)) {
  // Translation first, on the host: an op with no CUDA kernel is named before any device call.
  for (int d = 0; d < low_.devices; ++d) plans_.push_back(translate(g, low_, d));
  devices_.resize(static_cast<size_t>(low_.devices));
  for (int d = 0; d < low_.devices; ++d) open_plan_device(d, capacity, d);
  if (low_.devices > 1) {  // one process, one communicator per GPU (ranks = devices 0..n-1)
    std::vector<ncclComm_t> comms(static_cast<size_t>(low_.devices));
    std::vector<int> ids(static_cast<size_t>(low_.devices));
    for (int d = 0; d < low_.devices; ++d) ids[d] = d;
    check_nccl(ncclCommInitAll(comms.data(), low_.devices, ids.data()),
               "ncclCommInitAll(" + std::to_string(low_.devices) + " GPUs)");
    for (int d = 0; d < low_.devices; ++d) devices_[d]->comm = comms[d];
  }
}

CudaExecutable::CudaExecutable(const graph::Graph& g, const cost::Placement& plan, int64_t capacity,
                               const std::vector<int>& keep, const RankSetup& rank)
    : g_(g), low_(lower(g, plan, keep)), rank_(rank.rank) {
  if (rank.rank < 0 || rank.rank >= low_.devices)
    throw ExecError("rank " + std::to_string(rank.rank) + " has no device in a plan of " + std::to_string(low_.devices) +
                    " devices (one rank per device)");
  if (rank.gpu < 0) throw ExecError("GPU " + std::to_string(rank.gpu) + " is not a device index");
  // Every device's translation, on the host: each rank names the same untranslatable ops.
  for (int d = 0; d < low_.devices; ++d) plans_.push_back(translate(g, low_, d));
  devices_.resize(static_cast<size_t>(low_.devices));
  open_plan_device(rank.rank, capacity, rank.gpu);
}

void CudaExecutable::connect(const std::string& nccl_id) {
  if (rank_ < 0) throw ExecError("connect() is for one rank of an MPI job; this executable drives every device");
  if (nccl_id.size() != sizeof(ncclUniqueId))
    throw ExecError("an NCCL unique id has " + std::to_string(sizeof(ncclUniqueId)) + " bytes, got " +
                    std::to_string(nccl_id.size()));
  Device& dev = *devices_[rank_];
  if (dev.comm) throw ExecError("rank " + std::to_string(rank_) + " is connected already");
  if (low_.devices < 2) return;  // nothing to talk to
  ncclUniqueId id;
  std::memcpy(&id, nccl_id.data(), sizeof id);
  check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
  check_nccl(ncclCommInitRank(&dev.comm, low_.devices, id, rank_),
             "ncclCommInitRank(rank " + std::to_string(rank_) + " of " + std::to_string(low_.devices) + ")");
}

std::string nccl_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

// Plan device d on GPU `gpu`: capacity checked, the device opened, resident buffers and staging.
void CudaExecutable::open_plan_device(int d, int64_t capacity, int gpu) {
  const LaunchPlan& p = plans_[d];
  if (capacity > 0 && p.block_bytes + p.resident_bytes > capacity)
    throw OutOfMemory(d, "the planned block and resident tensors", p.block_bytes + p.resident_bytes, 0, capacity);
  auto dev = std::make_unique<Device>();
  open_device(*dev, d, p.block_bytes, gpu);
  const Program& prog = low_.programs[d];
  for (size_t b = 0; b < prog.buffers.size(); ++b) {
    if (!prog.buffers[b].resident || prog.buffers[b].bytes() == 0) continue;
    check(cudaMalloc(&dev->resident[b], static_cast<size_t>(prog.buffers[b].bytes())),
          "cudaMalloc(" + std::to_string(prog.buffers[b].bytes()) + " bytes for " + prog.buffers[b].name + ")");
    // Zeroed, as the CPU runtime's resident buffers: optimizer state nobody sets starts at zero.
    check(cudaMemset(dev->resident[b], 0, static_cast<size_t>(prog.buffers[b].bytes())),
          "cudaMemset(" + prog.buffers[b].name + ")");
    dev->ptr[b] = dev->resident[b];
  }
  plan_staging(*dev, prog);
  devices_[static_cast<size_t>(d)] = std::move(dev);
}

// cudaSetDevice, the block, the three streams and the program's events, the cuBLAS and cuDNN handles.
void CudaExecutable::open_device(Device& dev, int d, int64_t block_bytes, int gpu) {
  const LaunchPlan& p = plans_[d];
  const Program& prog = low_.programs[d];
  dev.id = -1;  // nothing to release until cudaSetDevice succeeds
  check(cudaSetDevice(gpu), "cudaSetDevice(" + std::to_string(gpu) + ")");
  dev.id = gpu;
  dev.resident.assign(prog.buffers.size(), nullptr);
  dev.ptr.assign(prog.buffers.size(), nullptr);
  if (block_bytes > 0)
    check(cudaMalloc(&dev.block, static_cast<size_t>(block_bytes)),
          "cudaMalloc(" + std::to_string(block_bytes) + " bytes) on device " + std::to_string(d));
  for (auto& s : dev.streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  dev.events.resize(static_cast<size_t>(p.events));
  for (auto& e : dev.events) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  check_cublas(cublasCreate(&dev.cublas), "cublasCreate");
  // Plain float32 GEMMs (no TF32): the CPU runtime's results within float32 tolerance.
  check_cublas(cublasSetMathMode(dev.cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  check_cudnn(cudnnCreate(&dev.cudnn), "cudnnCreate");
  dev.looks_up_ids = looks_up_ids(p);
  if (dev.looks_up_ids) {
    check(cudaMalloc(reinterpret_cast<void**>(&dev.id_error), sizeof(IdError)), "cudaMalloc(id error)");
    check(cudaMemset(dev.id_error, 0, sizeof(IdError)), "cudaMemset(id error)");
    dev.first_update = first_update(g_, low_, d);
  }
}

// After the lookups launched so far: every local device's compute stream synchronised and its id
// report read; ExecError (the CPU's InvalidInput, worded alike) for the first id outside its table.
void CudaExecutable::check_ids() {
  for (int d = 0; d < low_.devices; ++d) {
    if (!local(d) || !devices_[d]->looks_up_ids) continue;
    Device& dev = *devices_[d];
    check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
    IdError e;
    check(cudaMemcpyAsync(&e, dev.id_error, sizeof e, cudaMemcpyDeviceToHost, dev.streams[0]), "cudaMemcpyAsync(id error)");
    check(cudaStreamSynchronize(dev.streams[0]), "cudaStreamSynchronize (device " + std::to_string(dev.id) + ")");
    if (!e.set) continue;
    for (auto* st : dev.streams) cudaStreamSynchronize(st);  // nothing in flight reads the report
    check(cudaMemset(dev.id_error, 0, sizeof(IdError)), "cudaMemset(id error)");
    throw_bad_id(g_, low_, d, e);
  }
}

CudaExecutable::CudaExecutable(const graph::Graph& g, const SwapSchedule& s, int64_t capacity,
                               const std::vector<int>& keep, const std::vector<std::pair<int, int>>& in_place)
    : g_(g), swapped_(true) {
  plans_.resize(1);
  swap_ = prepare_swapped(g, s, keep, in_place, &low_, &plans_[0]);
  const int64_t pool = swap_.pool_bytes;
  if (capacity > 0 && pool > capacity) throw OutOfMemory(0, "the swap plan's pool", pool, 0, capacity);
  auto dev = std::make_unique<Device>();
  open_device(*dev, 0, pool, 0);
  // Zeroed, as the CPU's pool: optimizer state nobody sets starts at zero.
  if (pool > 0) check(cudaMemset(dev->block, 0, static_cast<size_t>(pool)), "cudaMemset(the pool)");
  devices_.push_back(std::move(dev));
  const Program& prog = low_.programs[0];
  pinned_.assign(prog.buffers.size(), nullptr);
  on_host_.assign(prog.buffers.size(), 0);
  for (size_t b = 0; b < prog.buffers.size(); ++b) {  // pinned, so that cudaMemcpyAsync is asynchronous
    if (!swap_.host_stored[b]) continue;
    const size_t bytes = static_cast<size_t>(prog.buffers[b].bytes());
    check(cudaHostAlloc(&pinned_[b], bytes, cudaHostAllocDefault), "cudaHostAlloc(" + std::to_string(bytes) + " bytes)");
    std::memset(pinned_[b], 0, bytes);
  }
}

void CudaExecutable::plan_staging(Device& dev, const Program& prog) {
  dev.staging_offset.assign(prog.instrs.size(), -1);
  dev.comm_copy.resize(prog.instrs.size());
  int64_t bytes = 0;
  for (size_t i = 0; i < prog.instrs.size(); ++i) {
    const Instr& in = prog.instrs[i];
    if (in.kind != InstrKind::kSend && in.kind != InstrKind::kRecv) continue;
    const BufferDesc& buf = prog.buffers[in.buffer];
    const CopyPlan whole = plan_copy(buf.box, buf.box, in.box);
    if (in.kind == InstrKind::kRecv && whole.elements() == whole.run_length) continue;  // one contiguous run
    dev.comm_copy[i] = in.kind == InstrKind::kSend ? plan_copy(buf.box, in.box, in.box) : plan_copy(in.box, buf.box, in.box);
    dev.staging_offset[i] = bytes;
    bytes += (in.box.volume() * graph::dtype_size(buf.dtype) + 15) / 16 * 16;
  }
  if (bytes > 0)
    check(cudaMalloc(&dev.staging, static_cast<size_t>(bytes)),
          "cudaMalloc(" + std::to_string(bytes) + " bytes of communication staging) on device " + std::to_string(dev.id));
}

CudaExecutable::~CudaExecutable() {
  devices_.clear();  // streams synchronised before the host store goes
  for (void* p : pinned_)
    if (p) cudaFreeHost(p);
}

void CudaExecutable::set_tensor(int tensor, const void* data) {
  if (swapped_) {  // the pinned host store, and the home object of a buffer that starts a step on the GPU
    const int b = swapped_buffer(low_, tensor);
    if (g_.tensor(tensor).producer >= 0 || b < 0 || !pinned_[b])
      throw ExecError("'" + g_.tensor(tensor).name + "' is computed in a step, not set");
    const size_t bytes = static_cast<size_t>(low_.programs[0].buffers[b].bytes());
    std::memcpy(pinned_[b], data, bytes);
    if (swap_.home[b].object >= 0)
      check(cudaMemcpy(static_cast<std::byte*>(devices_[0]->block) + swap_.objects[swap_.home[b].object].first, data, bytes,
                       cudaMemcpyHostToDevice),
            "cudaMemcpy(host -> pool, " + g_.tensor(tensor).name + ")");
    return;
  }
  bool any = false;
  for (int d = 0; d < low_.devices; ++d) {  // each device's resident tile of it (this rank's device only)
    if (!local(d)) continue;
    const int b = tile_buffer(low_, d, tensor);
    Device& dev = *devices_[d];
    if (b < 0 || !dev.resident[b]) continue;
    const BufferDesc& buf = low_.programs[d].buffers[b];
    std::vector<std::byte> tile(static_cast<size_t>(buf.bytes()));
    copy_box(data, Box::whole(g_.tensor(tensor).shape), tile.data(), buf.box, buf.box, graph::dtype_size(buf.dtype));
    check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
    check(cudaMemcpy(dev.resident[b], tile.data(), tile.size(), cudaMemcpyHostToDevice),
          "cudaMemcpy(host -> device " + std::to_string(d) + ", " + g_.tensor(tensor).name + ")");
    any = true;
  }
  if (!any && rank_ >= 0) return;  // held on other ranks' devices only
  if (!any) throw ExecError("'" + g_.tensor(tensor).name + "' is computed in a step, not set");
}

void CudaExecutable::read_tensor(int tensor, void* out) const {
  if (swapped_) {  // a home or end object of the pool, else the host store (as the CPU's swapped executable)
    const SwappedLaunch::Source src = swap_.source(g_, low_, tensor, steps_, on_host_);
    const size_t bytes = src.buffer < 0 ? 0 : static_cast<size_t>(low_.programs[0].buffers[src.buffer].bytes());
    if (src.object >= 0) {
      check(cudaMemcpy(out, static_cast<const std::byte*>(devices_[0]->block) + swap_.objects[src.object].first, bytes,
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy(pool -> host, " + g_.tensor(tensor).name + ")");
      return;
    }
    if (!src.host) throw ExecError("'" + g_.tensor(tensor).name + "' is not held after a step");
    std::memcpy(out, pinned_[src.buffer], bytes);
    return;
  }
  // The tiles cover the tensor; replicas hold equal values. One rank of an MPI job: its own device's.
  const auto tiles = local_tiles(tensor);
  const auto& t = g_.tensor(tensor);
  for (const auto& [box, tile] : tiles) copy_box(tile.data(), box, out, Box::whole(t.shape), box, graph::dtype_size(t.dtype));
  if (tiles.empty())
    throw ExecError("'" + g_.tensor(tensor).name + "' is not held after a step" +
                    (rank_ >= 0 ? " on rank " + std::to_string(rank_) + "'s device" : std::string()));
}

namespace {

// Instructions that put work on a stream (timed in a timed step); Recv is timed in its wave.
bool launches_work(InstrKind k) {
  return k == InstrKind::kCompute || k == InstrKind::kCopy || k == InstrKind::kCombine || k == InstrKind::kSend ||
         k == InstrKind::kSwapIn || k == InstrKind::kSwapOut;
}

}  // namespace

std::vector<ConvAlgorithm> CudaExecutable::conv_algorithms() const {
  std::vector<ConvAlgorithm> out;
  for (int d = 0; d < low_.devices; ++d) {
    if (!local(d)) continue;
    for (const auto& [step, ch] : devices_[d]->conv) {
      static const char* const modes[] = {"forward", "backward_data", "backward_filter"};
      out.push_back({d, ch->op, ch->mode == ConvCall::kForward ? modes[0]
                                : ch->mode == ConvCall::kBackwardData ? modes[1] : modes[2],
                     ch->algo, static_cast<int64_t>(ch->workspace)});
    }
  }
  std::sort(out.begin(), out.end(), [](const ConvAlgorithm& a, const ConvAlgorithm& b) {
    return std::tie(a.device, a.op, a.mode) < std::tie(b.device, b.op, b.mode);
  });
  return out;
}

void CudaExecutable::begin_timing() {
  times_.assign(static_cast<size_t>(low_.devices), {});
  for (int d = 0; d < low_.devices; ++d) {
    times_[d].assign(low_.programs[d].instrs.size(), {0.0, 0.0});
    if (!local(d)) continue;
    Device& dev = *devices_[d];
    check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
    const size_t n = low_.programs[d].instrs.size();
    if (!dev.origin) check(cudaEventCreate(&dev.origin), "cudaEventCreate");
    while (dev.starts.size() < n) {
      cudaEvent_t a = nullptr, b = nullptr;
      check(cudaEventCreate(&a), "cudaEventCreate");
      dev.starts.push_back(a);
      check(cudaEventCreate(&b), "cudaEventCreate");
      dev.ends.push_back(b);
    }
    dev.recorded.assign(n, 0);
    // The streams are idle here (the last step synchronised them), so the origin is the step's start
    // on every stream of the device.
    check(cudaEventRecord(dev.origin, dev.streams[0]), "cudaEventRecord(origin)");
  }
  timing_ = true;
}

void CudaExecutable::end_timing() {
  timing_ = false;
  for (int d = 0; d < low_.devices; ++d) {
    if (!local(d)) continue;
    Device& dev = *devices_[d];
    check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
    for (size_t i = 0; i < dev.recorded.size(); ++i) {
      if (!dev.recorded[i]) continue;
      float a = 0, b = 0;
      check(cudaEventElapsedTime(&a, dev.origin, dev.starts[i]), "cudaEventElapsedTime");
      check(cudaEventElapsedTime(&b, dev.origin, dev.ends[i]), "cudaEventElapsedTime");
      times_[d][i] = {a * 1e-3, b * 1e-3};
    }
  }
}

std::vector<std::pair<tdl::Box, std::vector<std::byte>>> CudaExecutable::local_tiles(int tensor) const {
  if (swapped_) throw ExecError("local_tiles: a swapped executable holds whole tensors (read_tensor)");
  std::vector<std::pair<tdl::Box, std::vector<std::byte>>> out;
  for (int d = 0; d < low_.devices; ++d) {
    if (!local(d)) continue;
    const int b = tile_buffer(low_, d, tensor);
    const Device& dev = *devices_[d];
    if (b < 0 || !dev.ptr[b]) continue;
    const BufferDesc& buf = low_.programs[d].buffers[b];
    std::vector<std::byte> tile(static_cast<size_t>(buf.bytes()));
    check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
    check(cudaMemcpy(tile.data(), dev.ptr[b], tile.size(), cudaMemcpyDeviceToHost),
          "cudaMemcpy(device " + std::to_string(d) + " -> host, " + g_.tensor(tensor).name + ")");
    out.emplace_back(buf.box, std::move(tile));
  }
  return out;
}

void CudaExecutable::step(bool timed) {
  if (timed) begin_timing();
  struct Untime {  // a failed step leaves no timing half on
    bool* on;
    ~Untime() { *on = false; }
  } untime{&timing_};
  if (swapped_) {
    Device& dev = *devices_[0];
    const Program& prog = low_.programs[0];
    for (size_t b = 0; b < prog.buffers.size(); ++b) {  // the step starts with the plan's initial residents
      const int o = swap_.home[b].object;
      dev.ptr[b] = o >= 0 ? static_cast<std::byte*>(dev.block) + swap_.objects[o].first : nullptr;
    }
    std::fill(on_host_.begin(), on_host_.end(), 0);
    for (size_t i : swap_.order) launch(dev, plans_[0], prog, i);
    for (auto* st : dev.streams) check(cudaStreamSynchronize(st), "cudaStreamSynchronize (device 0)");
    check_ids();
    if (timed) end_timing();
    ++steps_;
    return;
  }
  if (rank_ >= 0 && low_.devices > 1 && !devices_[rank_]->comm)
    throw ExecError("rank " + std::to_string(rank_) + " is not connected: call connect(nccl_id) before the first step");
  // One host thread over every GPU in step_schedule's order: local launches in program order, each
  // Recv with its (already packed) Send in one NCCL group. One rank of an MPI job walks the same order
  // and issues its own device's part.
  run_step(
      low_.programs,
      [this](int d, size_t i) {
        if (local(d)) launch(*devices_[d], plans_[d], low_.programs[d], i);
      },
      [this](const std::vector<CommOp>& all) {
        std::vector<CommOp> wave;
        for (const CommOp& op : all)
          if (local(op.device)) wave.push_back(op);
        if (wave.empty()) return;
        if (timing_)
          for (const CommOp& op : wave) {
            if (low_.programs[op.device].instrs[op.instr].kind != InstrKind::kRecv) continue;
            Device& dev = *devices_[op.device];
            check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
            check(cudaEventRecord(dev.starts[op.instr], dev.streams[plans_[op.device].launches[op.instr].stream]),
                  "cudaEventRecord");
          }
        check_nccl(ncclGroupStart(), "ncclGroupStart");
        for (const CommOp& op : wave) {
          Device& dev = *devices_[op.device];
          const Program& prog = low_.programs[op.device];
          const Instr& in = prog.instrs[op.instr];
          const BufferDesc& buf = prog.buffers[in.buffer];
          const size_t bytes = static_cast<size_t>(in.box.volume() * graph::dtype_size(buf.dtype));
          cudaStream_t stream = dev.streams[plans_[op.device].launches[op.instr].stream];
          const int64_t at = dev.staging_offset[op.instr];
          if (in.kind == InstrKind::kSend) {
            check_nccl(ncclSend(static_cast<std::byte*>(dev.staging) + at, bytes, ncclUint8, in.peer, dev.comm, stream),
                       "ncclSend (device " + std::to_string(dev.id) + " to " + std::to_string(in.peer) + ")");
          } else {
            // Straight into the buffer when the box is one contiguous run of it, else into staging.
            std::byte* dst = at >= 0 ? static_cast<std::byte*>(dev.staging) + at
                                     : static_cast<std::byte*>(dev.ptr[in.buffer]) +
                                           plan_copy(buf.box, buf.box, in.box).src_base * graph::dtype_size(buf.dtype);
            check_nccl(ncclRecv(dst, bytes, ncclUint8, in.peer, dev.comm, stream),
                       "ncclRecv (device " + std::to_string(dev.id) + " from " + std::to_string(in.peer) + ")");
          }
        }
        check_nccl(ncclGroupEnd(), "ncclGroupEnd");
        for (const CommOp& op : wave) {  // unpack what arrived in staging, on the Recv's stream
          Device& dev = *devices_[op.device];
          const Instr& in = low_.programs[op.device].instrs[op.instr];
          if (in.kind != InstrKind::kRecv) continue;
          check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
          cudaStream_t stream = dev.streams[plans_[op.device].launches[op.instr].stream];
          if (dev.staging_offset[op.instr] >= 0) {
            const BufferDesc& buf = low_.programs[op.device].buffers[in.buffer];
            launch_copy(dev.comm_copy[op.instr], static_cast<std::byte*>(dev.staging) + dev.staging_offset[op.instr],
                        dev.ptr[in.buffer], static_cast<int>(graph::dtype_size(buf.dtype)), stream);
          }
          if (timing_) {
            check(cudaEventRecord(dev.ends[op.instr], stream), "cudaEventRecord");
            dev.recorded[op.instr] = 1;
          }
        }
      });
  for (auto& dev : devices_) {
    if (!dev) continue;
    check(cudaSetDevice(dev->id), "cudaSetDevice(" + std::to_string(dev->id) + ")");
    for (auto* s : dev->streams) check(cudaStreamSynchronize(s), "cudaStreamSynchronize (device " + std::to_string(dev->id) + ")");
  }
  check_ids();
  if (timed) end_timing();
  ++steps_;
}

void CudaExecutable::launch(Device& dev, const LaunchPlan& plan, const Program& prog, size_t i) {
  check_lazy(cudaSetDevice(dev.id), [&] { return "cudaSetDevice(" + std::to_string(dev.id) + ")"; });
  auto* block = static_cast<std::byte*>(dev.block);
  {
    const Launch& l = plan.launches[i];
    const Instr& in = prog.instrs[i];
    cudaStream_t stream = dev.streams[l.stream];
    // Before the step's first optimizer update: the lookups so far checked, so that an id outside its
    // table fails the step with the parameters as they were (as on the CPU).
    if (dev.looks_up_ids && static_cast<int>(i) == dev.first_update) check_ids();
    const bool timed = timing_ && launches_work(l.kind);
    if (timed) check_lazy(cudaEventRecord(dev.starts[i], stream), [] { return std::string("cudaEventRecord"); });
    switch (l.kind) {
      case InstrKind::kAlloc: dev.ptr[in.buffer] = block + (plan.swapped ? l.offset : plan.offset[in.buffer]); break;
      case InstrKind::kFree: break;  // the block is planned: later buffers reuse the bytes after their events
      case InstrKind::kRecord:
        check_lazy(cudaEventRecord(dev.events[l.event], stream), [] { return std::string("cudaEventRecord"); });
        break;
      case InstrKind::kWait:
        check_lazy(cudaStreamWaitEvent(stream, dev.events[l.event], 0), [] { return std::string("cudaStreamWaitEvent"); });
        // The compute stream learns where a swapped-in buffer landed (issue order: after its SwapIn).
        if (plan.swapped && swap_.swapped_in_by[l.event].first >= 0)
          dev.ptr[swap_.swapped_in_by[l.event].first] = block + swap_.swapped_in_by[l.event].second;
        break;
      case InstrKind::kSwapIn:
        check(cudaMemcpyAsync(block + l.offset, pinned_[in.buffer], static_cast<size_t>(in.bytes), cudaMemcpyHostToDevice,
                              stream),
              "cudaMemcpyAsync(swap-in " + prog.buffers[in.buffer].name + ")");
        break;
      case InstrKind::kSwapOut:
        check(cudaMemcpyAsync(pinned_[in.buffer], block + l.offset, static_cast<size_t>(in.bytes), cudaMemcpyDeviceToHost,
                              stream),
              "cudaMemcpyAsync(swap-out " + prog.buffers[in.buffer].name + ")");
        on_host_[in.buffer] = 1;
        break;
      case InstrKind::kCopy:
        launch_copy(l.copy, dev.ptr[in.src], dev.ptr[in.buffer], l.element_bytes, stream);
        break;
      case InstrKind::kCombine:
        launch_combine(l.copy, static_cast<const float*>(dev.ptr[in.src]), static_cast<float*>(dev.ptr[in.buffer]),
                       in.reducer, stream);
        break;
      case InstrKind::kSend: {  // packed into its own staging box now; sent in its Recv's wave
        const BufferDesc& buf = prog.buffers[in.buffer];
        launch_copy(dev.comm_copy[i], dev.ptr[in.buffer], static_cast<std::byte*>(dev.staging) + dev.staging_offset[i],
                    static_cast<int>(graph::dtype_size(buf.dtype)), stream);
        break;
      }
      case InstrKind::kRecv: break;  // issued in a wave (step)
      case InstrKind::kCompute: {
        float* out = static_cast<float*>(dev.ptr[in.buffer]);
        auto input = [&](int j) -> const float* {
          if (j == kOutput) return out;
          const int b = in.inputs[static_cast<size_t>(j)];
          return b < 0 ? nullptr : static_cast<const float*>(dev.ptr[b]);
        };
        for (const Step& s : l.steps) {
          if (s.kind == Step::kGemm) {
            const GemmCall& gc = s.gemm;
            cublas_ok(cublasSetStream(dev.cublas, stream), [] { return std::string("cublasSetStream"); });
            cublas_ok(cublasSgemmStridedBatched(dev.cublas, gc.transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                   gc.transb ? CUBLAS_OP_T : CUBLAS_OP_N, int(gc.m), int(gc.n), int(gc.k),
                                                   &gc.alpha, input(gc.a) + gc.a_offset, int(gc.lda), gc.stride_a,
                                                   input(gc.b) + gc.b_offset, int(gc.ldb), gc.stride_b, &gc.beta,
                                                   out + gc.c_offset, int(gc.ldc), gc.stride_c, int(gc.batch)),
                         [&] { return "cublasSgemmStridedBatched (op " + g_.op(in.op).name + ")"; });
          } else if (s.kind == Step::kConv) {
            const ConvCall& c = s.conv;
            auto& slot = dev.conv[&s];
            const bool first = !slot;
            if (first) slot = std::make_unique<ConvChoice>(c, g_.op(in.op).name);
            ConvChoice& ch = *slot;
            const ConvDescriptors& dsc = ch.dsc;
            cudnn_ok(cudnnSetStream(dev.cudnn, stream), [] { return std::string("cudnnSetStream"); });
            const float one = 1.0f, zero = 0.0f;
            const float* w = input(c.w_input);
            const std::string what = first ? " (op " + g_.op(in.op).name + ")" : std::string();
            int found = 0;
            if (c.mode == ConvCall::kForward) {
              if (first) {
                cudnnConvolutionFwdAlgoPerf_t perf;
                check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(dev.cudnn, dsc.x, dsc.w, dsc.conv, dsc.y, 1, &found, &perf),
                            "cudnnGetConvolutionForwardAlgorithm_v7" + what);
                ch.algo = perf.algo;
                check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(dev.cudnn, dsc.x, dsc.w, dsc.conv, dsc.y, perf.algo,
                                                                    &ch.workspace),
                            "cudnnGetConvolutionForwardWorkspaceSize" + what);
              }
              cudnn_ok(cudnnConvolutionForward(dev.cudnn, &one, dsc.x, input(c.x_input) + c.x_offset, dsc.w, w + c.w_offset,
                                                  dsc.conv, static_cast<cudnnConvolutionFwdAlgo_t>(ch.algo),
                                                  dev.scratch(ch.workspace), ch.workspace, &zero, dsc.y, out),
                          [&] { return "cudnnConvolutionForward (op " + g_.op(in.op).name + ")"; });
            } else if (c.mode == ConvCall::kBackwardData) {
              if (first) {
                cudnnConvolutionBwdDataAlgoPerf_t perf;
                check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(dev.cudnn, dsc.w, dsc.y, dsc.conv, dsc.x, 1, &found, &perf),
                            "cudnnGetConvolutionBackwardDataAlgorithm_v7" + what);
                ch.algo = perf.algo;
                check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(dev.cudnn, dsc.w, dsc.y, dsc.conv, dsc.x, perf.algo,
                                                                         &ch.workspace),
                            "cudnnGetConvolutionBackwardDataWorkspaceSize" + what);
              }
              cudnn_ok(cudnnConvolutionBackwardData(dev.cudnn, &one, dsc.w, w + c.w_offset, dsc.y,
                                                       input(c.y_input) + c.y_offset, dsc.conv,
                                                       static_cast<cudnnConvolutionBwdDataAlgo_t>(ch.algo),
                                                       dev.scratch(ch.workspace), ch.workspace, &zero, dsc.x, out),
                          [&] { return "cudnnConvolutionBackwardData (op " + g_.op(in.op).name + ")"; });
            } else {
              if (first) {
                cudnnConvolutionBwdFilterAlgoPerf_t perf;
                check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dev.cudnn, dsc.x, dsc.y, dsc.conv, dsc.w, 1, &found,
                                                                          &perf),
                            "cudnnGetConvolutionBackwardFilterAlgorithm_v7" + what);
                ch.algo = perf.algo;
                check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(dev.cudnn, dsc.x, dsc.y, dsc.conv, dsc.w, perf.algo,
                                                                           &ch.workspace),
                            "cudnnGetConvolutionBackwardFilterWorkspaceSize" + what);
              }
              cudnn_ok(cudnnConvolutionBackwardFilter(dev.cudnn, &one, dsc.x, input(c.x_input) + c.x_offset, dsc.y,
                                                         input(c.y_input) + c.y_offset, dsc.conv,
                                                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(ch.algo),
                                                         dev.scratch(ch.workspace), ch.workspace, &zero, dsc.w, out),
                          [&] { return "cudnnConvolutionBackwardFilter (op " + g_.op(in.op).name + ")"; });
            }
          } else if (s.kind == Step::kMap) {
            const float* reads[kMaxReads] = {};
            for (int r = 0; r < s.map.reads; ++r) reads[r] = input(s.map_inputs[r]);
            launch_map(s.map, reads, out, stream);
          } else if (s.kind == Step::kChannel) {
            const float* reads[kMaxReads] = {};
            for (int r = 0; r < kMaxReads; ++r)
              if (s.row_inputs[r] != kOutput) reads[r] = input(s.row_inputs[r]);
            launch_channel(s.channel, reads, out,
                           static_cast<double*>(dev.scratch(static_cast<size_t>(channel_scratch_doubles(s.channel)) * 8)),
                           stream);
          } else if (s.kind == Step::kGather) {
            const float* reads[kMaxReads] = {};
            for (int r = 0; r < kMaxReads; ++r)
              if (s.row_inputs[r] != kOutput) reads[r] = input(s.row_inputs[r]);
            launch_gather(s.gather, reads, out, stream);
          } else if (s.kind == Step::kRow) {
            const float* reads[kMaxReads] = {};
            for (int r = 0; r < s.row.inputs; ++r) reads[r] = input(s.row_inputs[r]);
            launch_row(s.row, reads, out, static_cast<double*>(dev.scratch(static_cast<size_t>(row_scratch_doubles(s.row)) * 8)),
                       stream, dev.id_error, static_cast<long long>(i));
          } else {
            launch_reduce(s.reduce, input(s.reduce_input), s.reduce.term != 0 ? input(s.reduce_input2) : nullptr, out,
                          static_cast<double*>(dev.scratch(static_cast<size_t>(reduce_scratch_doubles(s.reduce)) * 8)), stream);
          }
        }
        break;
      }
    }
    if (timed) {
      check_lazy(cudaEventRecord(dev.ends[i], stream), [] { return std::string("cudaEventRecord"); });
      dev.recorded[i] = 1;
    }
  }
}

}  // namespace tilewise::exec::cuda

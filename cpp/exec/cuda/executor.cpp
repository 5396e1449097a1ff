#include "exec/cuda/executor.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "exec/arena.h"
#include "exec/cuda/copy_kernel.h"
#include "exec/cuda/device.h"
#include "exec/cuda/map_kernels.h"

namespace tilewise::exec::cuda {

namespace {

void check_cublas(cublasStatus_t s, const std::string& call) {
  if (s != CUBLAS_STATUS_SUCCESS) throw CudaError(call, cublasGetStatusName(s), cublasGetStatusString(s));
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
  ~ConvDescriptors() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
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

  ~Device() {
    if (id < 0) return;
    cudaSetDevice(id);
    for (auto* s : streams)
      if (s) cudaStreamSynchronize(s);
    if (cudnn) cudnnDestroy(cudnn);
    if (cublas) cublasDestroy(cublas);
    for (auto e : events) cudaEventDestroy(e);
    for (auto* s : streams)
      if (s) cudaStreamDestroy(s);
    for (void* p : resident)
      if (p) cudaFree(p);
    if (block) cudaFree(block);
    if (workspace) cudaFree(workspace);
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
  if (low_.devices > 1)
    throw ExecError("the CUDA executor runs one-device plans so far: a plan over " + std::to_string(low_.devices) +
                    " GPUs needs Send/Recv over NCCL, which is not written (docs/CUDA.md)");
  for (int d = 0; d < low_.devices; ++d) {
    const LaunchPlan& p = plans_[d];
    if (capacity > 0 && p.block_bytes + p.resident_bytes > capacity)
      throw OutOfMemory(d, "the planned block and resident tensors", p.block_bytes + p.resident_bytes, 0, capacity);
    auto dev = std::make_unique<Device>();
    dev->id = -1;  // nothing to release until cudaSetDevice succeeds
    check(cudaSetDevice(d), "cudaSetDevice(" + std::to_string(d) + ")");
    dev->id = d;
    const Program& prog = low_.programs[d];
    dev->resident.assign(prog.buffers.size(), nullptr);
    dev->ptr.assign(prog.buffers.size(), nullptr);
    if (p.block_bytes > 0)
      check(cudaMalloc(&dev->block, static_cast<size_t>(p.block_bytes)),
            "cudaMalloc(" + std::to_string(p.block_bytes) + " bytes) on device " + std::to_string(d));
    for (size_t b = 0; b < prog.buffers.size(); ++b) {
      if (!prog.buffers[b].resident || prog.buffers[b].bytes() == 0) continue;
      check(cudaMalloc(&dev->resident[b], static_cast<size_t>(prog.buffers[b].bytes())),
            "cudaMalloc(" + std::to_string(prog.buffers[b].bytes()) + " bytes for " + prog.buffers[b].name + ")");
      dev->ptr[b] = dev->resident[b];
    }
    for (auto& s : dev->streams) check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    dev->events.resize(static_cast<size_t>(p.events));
    for (auto& e : dev->events) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    check_cublas(cublasCreate(&dev->cublas), "cublasCreate");
    // Plain float32 GEMMs (no TF32): the CPU runtime's results within float32 tolerance.
    check_cublas(cublasSetMathMode(dev->cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check_cudnn(cudnnCreate(&dev->cudnn), "cudnnCreate");
    devices_.push_back(std::move(dev));
  }
}

CudaExecutable::~CudaExecutable() = default;

int CudaExecutable::buffer_of(int tensor) const {
  if (tensor < 0 || tensor >= static_cast<int>(low_.storage_of.size()))
    throw ExecError("no tensor " + std::to_string(tensor));
  const Program& prog = low_.programs[0];
  int b = prog.tile_of[tensor];
  if (b < 0) b = prog.tile_of[low_.storage_of[tensor]];
  if (b < 0) throw ExecError("'" + g_.tensor(tensor).name + "' has no buffer on device 0");
  return b;
}

void CudaExecutable::set_tensor(int tensor, const void* data) {
  const int b = buffer_of(tensor);
  Device& dev = *devices_[0];
  if (!dev.resident[b]) throw ExecError("'" + g_.tensor(tensor).name + "' is computed in a step, not set");
  check(cudaMemcpy(dev.resident[b], data, static_cast<size_t>(low_.programs[0].buffers[b].bytes()),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy(host -> device, " + g_.tensor(tensor).name + ")");
}

void CudaExecutable::read_tensor(int tensor, void* out) const {
  const int b = buffer_of(tensor);
  const Device& dev = *devices_[0];
  if (!dev.ptr[b]) throw ExecError("'" + g_.tensor(tensor).name + "' is not held after a step");
  check(cudaMemcpy(out, dev.ptr[b], static_cast<size_t>(low_.programs[0].buffers[b].bytes()), cudaMemcpyDeviceToHost),
        "cudaMemcpy(device -> host, " + g_.tensor(tensor).name + ")");
}

void CudaExecutable::step() {
  for (size_t d = 0; d < devices_.size(); ++d) run(*devices_[d], plans_[d], low_.programs[d]);
  ++steps_;
}

void CudaExecutable::run(Device& dev, const LaunchPlan& plan, const Program& prog) {
  check(cudaSetDevice(dev.id), "cudaSetDevice(" + std::to_string(dev.id) + ")");
  auto* block = static_cast<std::byte*>(dev.block);
  for (size_t i = 0; i < plan.launches.size(); ++i) {
    const Launch& l = plan.launches[i];
    const Instr& in = prog.instrs[i];
    cudaStream_t stream = dev.streams[l.stream];
    switch (l.kind) {
      case InstrKind::kAlloc: dev.ptr[in.buffer] = block + plan.offset[in.buffer]; break;
      case InstrKind::kFree: break;  // the block is planned: later buffers reuse the bytes after their events
      case InstrKind::kRecord: check(cudaEventRecord(dev.events[l.event], stream), "cudaEventRecord"); break;
      case InstrKind::kWait: check(cudaStreamWaitEvent(stream, dev.events[l.event], 0), "cudaStreamWaitEvent"); break;
      case InstrKind::kCopy:
        launch_copy(l.copy, dev.ptr[in.src], dev.ptr[in.buffer], l.element_bytes, stream);
        break;
      case InstrKind::kCombine:
        launch_combine(l.copy, static_cast<const float*>(dev.ptr[in.src]), static_cast<float*>(dev.ptr[in.buffer]),
                       in.reducer, stream);
        break;
      case InstrKind::kSend:
      case InstrKind::kRecv: throw ExecError("Send/Recv between GPUs (NCCL) is not written yet");
      case InstrKind::kSwapIn:
      case InstrKind::kSwapOut: throw ExecError("swapped execution on a GPU is not written yet");
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
            check_cublas(cublasSetStream(dev.cublas, stream), "cublasSetStream");
            check_cublas(cublasSgemmStridedBatched(dev.cublas, gc.transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                   gc.transb ? CUBLAS_OP_T : CUBLAS_OP_N, int(gc.m), int(gc.n), int(gc.k),
                                                   &gc.alpha, input(gc.a) + gc.a_offset, int(gc.lda), gc.stride_a,
                                                   input(gc.b) + gc.b_offset, int(gc.ldb), gc.stride_b, &gc.beta,
                                                   out + gc.c_offset, int(gc.ldc), gc.stride_c, int(gc.batch)),
                         "cublasSgemmStridedBatched (op " + g_.op(in.op).name + ")");
          } else if (s.kind == Step::kConv) {
            const ConvCall& c = s.conv;
            ConvDescriptors dsc(c);
            check_cudnn(cudnnSetStream(dev.cudnn, stream), "cudnnSetStream");
            const float one = 1.0f, zero = 0.0f;
            const float* w = input(c.w_input);
            const std::string what = " (op " + g_.op(in.op).name + ")";
            int found = 0;
            size_t ws = 0;
            if (c.mode == ConvCall::kForward) {
              cudnnConvolutionFwdAlgoPerf_t perf;
              check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(dev.cudnn, dsc.x, dsc.w, dsc.conv, dsc.y, 1, &found, &perf),
                          "cudnnGetConvolutionForwardAlgorithm_v7" + what);
              check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(dev.cudnn, dsc.x, dsc.w, dsc.conv, dsc.y, perf.algo, &ws),
                          "cudnnGetConvolutionForwardWorkspaceSize" + what);
              check_cudnn(cudnnConvolutionForward(dev.cudnn, &one, dsc.x, input(c.x_input) + c.x_offset, dsc.w, w + c.w_offset,
                                                  dsc.conv, perf.algo, dev.scratch(ws), ws, &zero, dsc.y, out),
                          "cudnnConvolutionForward" + what);
            } else if (c.mode == ConvCall::kBackwardData) {
              cudnnConvolutionBwdDataAlgoPerf_t perf;
              check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(dev.cudnn, dsc.w, dsc.y, dsc.conv, dsc.x, 1, &found, &perf),
                          "cudnnGetConvolutionBackwardDataAlgorithm_v7" + what);
              check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(dev.cudnn, dsc.w, dsc.y, dsc.conv, dsc.x, perf.algo, &ws),
                          "cudnnGetConvolutionBackwardDataWorkspaceSize" + what);
              check_cudnn(cudnnConvolutionBackwardData(dev.cudnn, &one, dsc.w, w + c.w_offset, dsc.y,
                                                       input(c.y_input) + c.y_offset, dsc.conv, perf.algo,
                                                       dev.scratch(ws), ws, &zero, dsc.x, out),
                          "cudnnConvolutionBackwardData" + what);
            } else {
              cudnnFilterDescriptor_t dw = dsc.w;
              cudnnConvolutionBwdFilterAlgoPerf_t perf;
              check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dev.cudnn, dsc.x, dsc.y, dsc.conv, dw, 1, &found, &perf),
                          "cudnnGetConvolutionBackwardFilterAlgorithm_v7" + what);
              check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(dev.cudnn, dsc.x, dsc.y, dsc.conv, dw, perf.algo, &ws),
                          "cudnnGetConvolutionBackwardFilterWorkspaceSize" + what);
              check_cudnn(cudnnConvolutionBackwardFilter(dev.cudnn, &one, dsc.x, input(c.x_input) + c.x_offset, dsc.y,
                                                         input(c.y_input) + c.y_offset, dsc.conv, perf.algo,
                                                         dev.scratch(ws), ws, &zero, dw, out),
                          "cudnnConvolutionBackwardFilter" + what);
            }
          } else if (s.kind == Step::kMap) {
            const float* reads[kMaxReads] = {};
            for (int r = 0; r < s.map.reads; ++r) reads[r] = input(s.map_inputs[r]);
            launch_map(s.map, reads, out, stream);
          } else if (s.kind == Step::kChannel) {
            const float* reads[kMaxReads] = {};
            for (int r = 0; r < kMaxReads; ++r)
              if (s.row_inputs[r] != kOutput) reads[r] = input(s.row_inputs[r]);
            launch_channel(s.channel, reads, out, stream);
          } else if (s.kind == Step::kGather) {
            const float* reads[kMaxReads] = {};
            for (int r = 0; r < kMaxReads; ++r)
              if (s.row_inputs[r] != kOutput) reads[r] = input(s.row_inputs[r]);
            launch_gather(s.gather, reads, out, stream);
          } else if (s.kind == Step::kRow) {
            const float* reads[kMaxReads] = {};
            for (int r = 0; r < s.row.inputs; ++r) reads[r] = input(s.row_inputs[r]);
            launch_row(s.row, reads, out, stream);
          } else {
            launch_reduce(s.reduce, input(s.reduce_input), s.reduce.term != 0 ? input(s.reduce_input2) : nullptr, out,
                          stream);
          }
        }
        break;
      }
    }
  }
  for (auto* s : dev.streams) check(cudaStreamSynchronize(s), "cudaStreamSynchronize (device " + std::to_string(dev.id) + ")");
}

}  // namespace tilewise::exec::cuda

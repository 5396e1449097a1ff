#include "exec/cuda/host_reference.h"

#include <vector>

namespace tilewise::exec::cuda {

void host_sgemm(const GemmCall& g, const float* a, const float* b, float* c) {
  for (long long t = 0; t < g.batch; ++t) {
    const float* A = a + t * g.stride_a;
    const float* B = b + t * g.stride_b;
    float* C = c + t * g.stride_c;
    for (long long j = 0; j < g.n; ++j) {
      for (long long i = 0; i < g.m; ++i) {
        double acc = 0;
        for (long long p = 0; p < g.k; ++p) {
          const float av = g.transa ? A[p + i * g.lda] : A[i + p * g.lda];
          const float bv = g.transb ? B[j + p * g.ldb] : B[p + j * g.ldb];
          acc += static_cast<double>(av) * bv;
        }
        float& out = C[i + j * g.ldc];
        out = static_cast<float>(g.alpha * acc + (g.beta != 0.0f ? static_cast<double>(g.beta) * out : 0.0));
      }
    }
  }
}

void host_conv(const ConvCall& c, const float* x, const float* w, const float* y, float* out) {
  auto xi = [&](long long n, long long ch, long long h, long long ww) {
    return n * c.x_stride[0] + ch * c.x_stride[1] + h * c.x_stride[2] + ww * c.x_stride[3];
  };
  auto yi = [&](long long n, long long k, long long p, long long q) {
    return n * c.y_stride[0] + k * c.y_stride[1] + p * c.y_stride[2] + q * c.y_stride[3];
  };
  auto wi = [&](long long k, long long ch, long long r, long long s) { return ((k * c.c + ch) * c.r + r) * c.s + s; };
  // The input position a (output, kernel offset) pair reads, or -1 in the padding.
  auto in_h = [&](long long p, long long r) {
    const long long h = p * c.stride_h - c.pad_h + r * c.dil_h;
    return h >= 0 && h < c.h ? h : -1;
  };
  auto in_w = [&](long long q, long long s) {
    const long long v = q * c.stride_w - c.pad_w + s * c.dil_w;
    return v >= 0 && v < c.w ? v : -1;
  };
  if (c.mode == ConvCall::kForward) {
    for (long long n = 0; n < c.n; ++n)
      for (long long k = 0; k < c.k; ++k)
        for (long long p = 0; p < c.p; ++p)
          for (long long q = 0; q < c.q; ++q) {
            double acc = 0;
            for (long long ch = 0; ch < c.c; ++ch)
              for (long long r = 0; r < c.r; ++r)
                for (long long s = 0; s < c.s; ++s) {
                  const long long h = in_h(p, r), v = in_w(q, s);
                  if (h >= 0 && v >= 0) acc += static_cast<double>(x[xi(n, ch, h, v)]) * w[wi(k, ch, r, s)];
                }
            out[((n * c.k + k) * c.p + p) * c.q + q] = static_cast<float>(acc);
          }
  } else if (c.mode == ConvCall::kBackwardData) {
    std::vector<double> acc(static_cast<size_t>(c.n * c.c * c.h * c.w), 0.0);
    for (long long n = 0; n < c.n; ++n)
      for (long long k = 0; k < c.k; ++k)
        for (long long p = 0; p < c.p; ++p)
          for (long long q = 0; q < c.q; ++q) {
            const double dy = y[yi(n, k, p, q)];
            for (long long ch = 0; ch < c.c; ++ch)
              for (long long r = 0; r < c.r; ++r)
                for (long long s = 0; s < c.s; ++s) {
                  const long long h = in_h(p, r), v = in_w(q, s);
                  if (h >= 0 && v >= 0) acc[((n * c.c + ch) * c.h + h) * c.w + v] += dy * w[wi(k, ch, r, s)];
                }
          }
    for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i]);
  } else {
    for (long long k = 0; k < c.k; ++k)
      for (long long ch = 0; ch < c.c; ++ch)
        for (long long r = 0; r < c.r; ++r)
          for (long long s = 0; s < c.s; ++s) {
            double acc = 0;
            for (long long n = 0; n < c.n; ++n)
              for (long long p = 0; p < c.p; ++p)
                for (long long q = 0; q < c.q; ++q) {
                  const long long h = in_h(p, r), v = in_w(q, s);
                  if (h >= 0 && v >= 0) acc += static_cast<double>(y[yi(n, k, p, q)]) * x[xi(n, ch, h, v)];
                }
            out[wi(k, ch, r, s)] = static_cast<float>(acc);
          }
  }
}

namespace {

const float* input_data(const kernels::TileCall& call, int j) {
  if (j == kOutput) return call.out;
  const kernels::TileIn& in = call.inputs[static_cast<size_t>(j)];
  return in.data ? in.data : static_cast<const float*>(in.raw);  // int64 ids: read as such by the kernel
}

}  // namespace

void run_steps_on_host(const std::vector<Step>& steps, const kernels::TileCall& call, IdError* error, long long tag) {
  for (const Step& s : steps) {
    switch (s.kind) {
      case Step::kGemm: {
        const GemmCall& g = s.gemm;
        host_sgemm(g, input_data(call, g.a) + g.a_offset, input_data(call, g.b) + g.b_offset, call.out + g.c_offset);
        break;
      }
      case Step::kConv: {
        const ConvCall& c = s.conv;
        const float* x = c.x_input == kOutput ? nullptr : input_data(call, c.x_input) + c.x_offset;
        const float* w = c.w_input == kOutput ? nullptr : input_data(call, c.w_input) + c.w_offset;
        const float* y = c.y_input == kOutput ? nullptr : input_data(call, c.y_input) + c.y_offset;
        host_conv(c, x, w, y, call.out);
        break;
      }
      case Step::kMap: {
        // Every element from the values before the step (a GPU map that reads its own output reads
        // each element once, in the thread that writes it, so the order does not matter).
        const float* in[kMaxReads] = {};
        for (int r = 0; r < s.map.reads; ++r) in[r] = input_data(call, s.map_inputs[r]);
        for (long long i = 0; i < s.map.elements; ++i) call.out[map_out_offset(s.map, i)] = map_element(s.map, in, i);
        break;
      }
      case Step::kReduce: {
        const float* x = input_data(call, s.reduce_input);
        const float* y = s.reduce.term != 0 ? input_data(call, s.reduce_input2) : nullptr;
        if (s.reduce.split > 1) {  // the two phases, through a scratch as on the GPU
          std::vector<double> partials(static_cast<size_t>(reduce_scratch_doubles(s.reduce)));
          for (long long q = 0; q < s.reduce.outputs * s.reduce.split; ++q) partials[q] = reduce_partial_element(s.reduce, x, y, q);
          for (long long o = 0; o < s.reduce.outputs; ++o) call.out[o] = reduce_combine_element(s.reduce, partials.data(), o);
          break;
        }
        for (long long o = 0; o < s.reduce.outputs; ++o) call.out[o] = reduce_element(s.reduce, x, y, o);
        break;
      }
      case Step::kRow: {
        const float* in[kMaxReads] = {};
        for (int r = 0; r < s.row.inputs; ++r) in[r] = input_data(call, s.row_inputs[r]);
        std::vector<double> stage(static_cast<size_t>(row_scratch_doubles(s.row)));
        for (long long r = 0; s.row.staged && r < s.row.rows; ++r) row_stage_thread(s.row, in, stage.data(), r);
        for (long long t = 0; t < s.row.threads; ++t) row_thread(s.row, in, call.out, t, stage.data(), error, tag);
        break;
      }
      case Step::kChannel: {
        const float* in[kMaxReads] = {};
        for (int r = 0; r < kMaxReads; ++r)
          if (s.row_inputs[r] != kOutput) in[r] = input_data(call, s.row_inputs[r]);
        const ChannelArgs& ca = s.channel;  // the GPU's three phases, in order
        std::vector<double> stage(static_cast<size_t>(channel_scratch_doubles(ca)));
        for (long long q = 0; q < ca.cs * ca.chunks; ++q) channel_partial_thread(ca, in, stage.data(), q);
        for (long long t = 0; t < ca.cs; ++t) channel_combine_thread(ca, in, stage.data(), call.out, t);
        if (channel_writes_elements(ca))
          for (long long e = 0; e < channel_elements(ca); ++e) channel_apply_element(ca, in, stage.data(), call.out, e);
        break;
      }
      case Step::kGather: {
        const float* in[kMaxReads] = {};
        for (int r = 0; r < kMaxReads; ++r)
          if (s.row_inputs[r] != kOutput) in[r] = input_data(call, s.row_inputs[r]);
        for (long long e = 0; e < s.gather.elements; ++e) call.out[e] = gather_element(s.gather, in, e);
        break;
      }
    }
  }
}

}  // namespace tilewise::exec::cuda

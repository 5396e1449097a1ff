#include "exec/cuda/host_check.h"

#include <cmath>
#include <limits>
#include <random>

#include "exec/cuda/host_reference.h"
#include "exec/cuda/kernel_select.h"
#include "exec/kernel_call.h"

namespace tilewise::exec::cuda {

namespace {

int64_t volume(const std::vector<kernels::Span>& box) {
  int64_t v = 1;
  for (const auto& s : box) v *= s.size();
  return v;
}

// Work of the reference per output element (GEMM k, a convolution's window): bounds the loop.
int64_t reference_work(const std::vector<Step>& steps) {
  int64_t work = 0;
  for (const Step& s : steps) {
    if (s.kind == Step::kGemm) work += s.gemm.m * s.gemm.n * s.gemm.k * s.gemm.batch;
    else if (s.kind == Step::kConv) work += s.conv.n * s.conv.k * s.conv.c * s.conv.r * s.conv.s * s.conv.p * s.conv.q;
    else if (s.kind == Step::kReduce) work += s.reduce.outputs * s.reduce.folded;
    else if (s.kind == Step::kRow) work += s.row.threads * s.row.rows * s.row.n * 4;
    else if (s.kind == Step::kGather) work += s.gather.elements * s.gather.k * s.gather.k * 4;
    else if (s.kind == Step::kChannel) work += s.channel.cs * s.channel.N * s.channel.H * s.channel.W * 3;
    else work += s.map.elements;
  }
  return work;
}

}  // namespace

std::vector<CheckRow> host_check(const graph::Graph& g, const Lowered& low, uint64_t seed, int64_t max_elements,
                                 bool nonfinite, bool coarse) {
  std::vector<CheckRow> rows;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 47);
  const float specials[3] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity()};
  for (const OpPlan& op : low.ops) {
    for (int d = 0; d < low.devices; ++d) {
      if (!op.devices[d].active) continue;
      CheckRow row;
      row.op = op.op, row.device = d, row.name = g.op(op.op).name;
      kernels::TileCall call = kernel_call(g, op, d);
      row.kernel = call.kernel;
      const Selection sel = select_kernel(call);
      row.library = sel.library;
      if (!sel.ok()) {
        row.note = sel.why_not;
        rows.push_back(row);
        continue;
      }
      int64_t out_n = 1;
      for (int v : call.output_vars) out_n *= call.vars[v].size();
      row.elements = out_n;
      if (reference_work(sel.steps) > max_elements * 64) {
        row.note = "skipped: larger than the check's budget";
        rows.push_back(row);
        continue;
      }
      std::vector<std::vector<float>> data(call.inputs.size());
      std::vector<std::vector<int64_t>> ids(call.inputs.size());
      std::vector<std::vector<unsigned char>> typed(call.inputs.size());  // masks and labels in their own type
      kernels::TileCall as_float = call;  // what the CPU kernel gets: masks and labels as float32 copies
      for (size_t j = 0; j < call.inputs.size(); ++j) {
        const auto& in = call.inputs[j];
        const int64_t n = in.region.empty() ? 1 : volume(in.region);
        data[j].resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
        for (float& x : data[j]) {
          x = uniform(rng);
          if (coarse) x = 0.5f * static_cast<float>(pick(rng) % 5 - 2);
          if (nonfinite) {
            const int k = pick(rng);
            if (k < 3) x = specials[k];
          }
        }
        call.inputs[j].data = data[j].data();
        // ids (int64, or float32 whole numbers): rows of the table (embedding), of the gradient's
        // vocabulary (embedding_grad) or classes (one_hot)
        const int id_input = call.kernel == "embedding" ? 1 : 0;
        const bool reads_ids = call.kernel == "embedding" || call.kernel == "embedding_grad" || call.kernel == "one_hot";
        if (reads_ids && static_cast<int>(j) == id_input) {
          const int64_t rows = call.kernel == "embedding" && !call.inputs.empty() && call.inputs[0].shape.size() == 2
                                   ? call.inputs[0].shape[0]
                                   : (call.extents.empty() ? 1 : (call.kernel == "one_hot" ? call.extents.back() : call.extents[0]));
          std::uniform_int_distribution<int64_t> id(0, std::max<int64_t>(rows, 1) - 1);
          ids[j].resize(data[j].size());
          for (int64_t& v : ids[j]) v = id(rng);
          if (in.dtype == kernels::DType::kInt64) {
            call.inputs[j].data = nullptr;
            call.inputs[j].raw = ids[j].data();
          } else {
            for (size_t t = 0; t < ids[j].size(); ++t) data[j][t] = static_cast<float>(ids[j][t]);
          }
        } else if (in.dtype != kernels::DType::kFloat32) {
          // A mask or label of a float op: small whole numbers (0 / 1 for bool), read by the CUDA steps
          // in their type and by the CPU kernel as the runtime's float32 copy (data[j]).
          typed[j].resize(data[j].size() * static_cast<size_t>(kernels::dtype_bytes(in.dtype)));
          for (size_t t = 0; t < data[j].size(); ++t) {
            const int v = in.dtype == kernels::DType::kBool ? pick(rng) % 2 : pick(rng) % 7 - 3;
            data[j][t] = static_cast<float>(v);
            if (in.dtype == kernels::DType::kBool) typed[j][t] = static_cast<unsigned char>(v);
            else if (in.dtype == kernels::DType::kInt32) reinterpret_cast<int32_t*>(typed[j].data())[t] = v;
            else reinterpret_cast<int64_t*>(typed[j].data())[t] = v;
          }
          call.inputs[j].data = nullptr;
          call.inputs[j].raw = typed[j].data();
          as_float.inputs[j].dtype = kernels::DType::kFloat32;
        }
      }
      std::vector<float> cpu(static_cast<size_t>(out_n)), gpu(static_cast<size_t>(out_n),
                                                             std::numeric_limits<float>::quiet_NaN());
      for (size_t j = 0; j < call.inputs.size(); ++j) {
        if (as_float.inputs[j].dtype == kernels::DType::kFloat32 && call.inputs[j].dtype != kernels::DType::kFloat32) {
          as_float.inputs[j].data = data[j].data(), as_float.inputs[j].raw = data[j].data();
        } else {
          as_float.inputs[j] = call.inputs[j];
        }
      }
      as_float.out = cpu.data();
      as_float.scratch = nullptr, as_float.scratch_size = 0;
      if (!kernels::run_native(as_float)) {
        row.note = "the CPU kernel declined this call (the CPU runtime interprets it)";
        rows.push_back(row);
        continue;
      }
      call.out = gpu.data();
      run_steps_on_host(sel.steps, call);
      double scale = 0, err = 0;
      for (float c : cpu)
        if (std::isfinite(c)) scale = std::max(scale, static_cast<double>(std::fabs(c)));
      for (int64_t i = 0; i < out_n; ++i) {
        const float c = cpu[i], x = gpu[i];
        if (std::isnan(c) && std::isnan(x)) continue;
        if (c == x) continue;  // equal infinities
        const double e = std::fabs(static_cast<double>(c) - x);
        err = std::max(err, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
      }
      row.max_error = err / std::max(scale, 1e-30);
      row.checked = true;
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace tilewise::exec::cuda

// Kernel selection of the gather families: whole-row ops along an axis, pooling, one-hot, batch norm
// statistics, the GRU cell, depthwise and direct convolutions.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "exec/cuda/select_parts.h"

namespace tilewise::exec::cuda::select {

// ---- more gathers: whole-row ops along an axis, pooling, one-hot --------------------------------

// Gather slot `slot` reads input `input`: output position d indexes the input's dimension dim_of[d]
// (-1: none, stride 0); the region must hold `need` (per input dimension). Base: the all-zero index.
bool gather_slot(const TileCall& call, int input, const std::vector<int>& dim_of, const std::vector<Span>& need,
                 Step* step, int slot) {
  const TileIn& in = call.inputs[input];
  if (in.shape.size() != need.size() || dim_of.size() > static_cast<size_t>(kMaxDims)) return false;
  const std::vector<long long> rs = region_strides(in);
  GatherArgs& g = step->gather;
  g.base[slot] = 0;
  for (size_t d = 0; d < need.size(); ++d) {
    if (need[d].lo <= need[d].hi && (need[d].lo < in.region[d].lo || need[d].hi > in.region[d].hi)) return false;
    g.base[slot] -= in.region[d].lo * rs[d];
  }
  for (size_t d = 0; d < dim_of.size(); ++d) g.stride[slot][d] = dim_of[d] < 0 ? 0 : rs[dim_of[d]];
  step->row_inputs[slot] = input;
  return true;
}

Step gather_step(const TileCall& call, GatherFn fn, int out_dims) {
  Step st;
  st.kind = Step::kGather;
  st.gather.fn = static_cast<int>(fn);
  block_of(call, out_dims, &st.gather);
  return st;
}

Span all_of(long long n) { return Span{0, n - 1}; }

bool signed_axis(Attr& a, int nd, long long fallback, int* axis) {
  const long long x = a.integer("axis", fallback);
  if (!a.ok || x < -nd || x >= nd) return false;
  *axis = static_cast<int>(x < 0 ? x + nd : x);
  return true;
}

// logsumexp, argmax, argmin, reduce_var: x's dims but the axis are the output's (in order), the
// nested reduction over the axis whole, then (argmax, argmin, reduce_var) a partial range of it.
std::string axis_row(const TileCall& call, Attr& a, GatherFn fn, std::vector<Step>* s) {
  if (call.inputs.size() != 1) return "not a row reduction's layout";
  const TileIn& x = call.inputs[0];
  const int nd = static_cast<int>(x.shape.size());
  int ax = 0;
  const bool partial = fn != GatherFn::kLogSumExp;
  if (nd < 1 || !signed_axis(a, nd, -1, &ax) || static_cast<int>(call.vars.size()) != nd + 1 ||
      !outputs_first(call, nd - 1))
    return "not a row reduction's layout";
  if (partial ? !full(call, nd - 1) : !nested_full(call, nd - 1)) return "a split nested reduction";
  Step st = gather_step(call, fn, nd - 1);
  GatherArgs& g = st.gather;
  std::vector<int> dim_of;
  std::vector<Span> need;
  for (int d = 0, o = 0; d < nd; ++d) {
    if (d == ax) {
      need.push_back(all_of(x.shape[d]));
      continue;
    }
    dim_of.push_back(d);
    need.push_back(call.vars[o++]);
  }
  if (!gather_slot(call, 0, dim_of, need, &st, 0)) return "x's region does not hold the block's rows";
  g.row_n = x.shape[ax], g.row_stride = region_strides(x)[ax];
  g.i_lo = call.vars[nd].lo, g.i_hi = call.vars[nd].hi;
  s->push_back(st);
  return "";
}

// The gradients of whole-row reductions: inputs (dy, x) (reduce_var_grad, reduce_prod_grad) or
// (dy, x, y) (the extremum gradients); the output x's shape, the nested reduction whole.
std::string axis_row_grad(const TileCall& call, Attr& a, GatherFn fn, std::vector<Step>* s) {
  const bool extremum = fn == GatherFn::kExtremumGrad || fn == GatherFn::kFirstExtremumGrad;
  if (call.inputs.size() != (extremum ? 3u : 2u)) return "not a row gradient's layout";
  const TileIn& x = call.inputs[1];
  const int nd = static_cast<int>(x.shape.size());
  int ax = 0;
  if (extremum) {
    const long long axis = a.integer("axis", 0);
    if (!a.ok || axis < 0 || axis >= nd) return "not a row gradient's layout";
    ax = static_cast<int>(axis);
  } else if (!signed_axis(a, nd, 0, &ax)) {
    return "not a row gradient's layout";
  }
  if (static_cast<int>(call.vars.size()) != nd + 1 || !outputs_first(call, nd) || !nested_full(call, nd) ||
      call.inputs[0].shape.size() != static_cast<size_t>(nd - 1) ||
      (extremum && call.inputs[2].shape != call.inputs[0].shape))
    return "not a row gradient's layout";
  Step st = gather_step(call, fn, nd);
  GatherArgs& g = st.gather;
  std::vector<int> x_dims, rest_dims(nd, -1);
  std::vector<Span> whole, rest;
  for (int d = 0, e = 0; d < nd; ++d) {
    x_dims.push_back(d == ax ? -1 : d);
    whole.push_back(d == ax ? all_of(x.shape[d]) : call.vars[d]);
    if (d != ax) rest_dims[d] = e++, rest.push_back(call.vars[d]);
  }
  if (!gather_slot(call, 1, x_dims, whole, &st, 0)) return "x's region does not hold the block's rows";
  if (extremum) {
    if (!gather_slot(call, 2, rest_dims, rest, &st, 1) || !gather_slot(call, 0, rest_dims, rest, &st, 2))
      return "y's or dy's region does not hold the block";
  } else if (!gather_slot(call, 0, rest_dims, rest, &st, 1)) {
    return "dy's region does not hold the block";
  }
  g.row_n = x.shape[ax], g.row_stride = region_strides(x)[ax], g.axis = ax;
  s->push_back(st);
  return "";
}

std::string cumsum_op(const TileCall& call, bool suffix, std::vector<Step>* s) {
  if (call.inputs.size() != 1 || call.vars.size() != 3 || !outputs_first(call, 2)) return "not cumsum's layout";
  const TileIn& x = call.inputs[0];
  const Span i = call.vars[0], k = call.vars[2];
  if (x.shape.size() != 2 || i.hi >= x.shape[0] || k.hi >= x.shape[1]) return "not cumsum's layout";
  Step st = gather_step(call, suffix ? GatherFn::kCumsumGrad : GatherFn::kCumsum, 2);
  if (!gather_slot(call, 0, {0, -1}, {i, k}, &st, 0)) return "x's region does not hold the block's rows";
  st.gather.row_n = x.shape[1], st.gather.row_stride = region_strides(x)[1];
  st.gather.i_lo = k.lo, st.gather.i_hi = k.hi;
  s->push_back(st);
  return "";
}

std::string cross_entropy_grad(const TileCall& call, std::vector<Step>* s) {
  if (call.inputs.size() != 2 || call.vars.size() != 4 || !outputs_first(call, 2) || !nested_full(call, 2))
    return "not cross_entropy_grad's layout";
  const TileIn& logits = call.inputs[0];
  if (logits.shape.size() != 2 || call.inputs[1].shape != logits.shape) return "not cross_entropy_grad's layout";
  const Span b = call.vars[0], k = call.vars[1];
  Step st = gather_step(call, GatherFn::kCrossEntropyGrad, 2);
  if (!gather_slot(call, 0, {0, -1}, {b, all_of(logits.shape[1])}, &st, 0) || !gather_slot(call, 1, {0, 1}, {b, k}, &st, 1))
    return "an input's region does not hold the block's rows";
  st.gather.row_n = logits.shape[1], st.gather.row_stride = region_strides(logits)[1], st.gather.axis = 1;
  st.gather.scale = static_cast<double>(logits.shape[0]);
  s->push_back(st);
  return "";
}

std::string global_max_pool2d_grad(const TileCall& call, std::vector<Step>* s) {  // (x, y, dy)
  if (call.inputs.size() != 3 || call.vars.size() != 8 || !outputs_first(call, 4) || !nested_full(call, 4))
    return "not global_max_pool2d_grad's layout";
  const TileIn& x = call.inputs[0];
  if (x.shape.size() != 4 || call.inputs[1].shape.size() != 2 || call.inputs[2].shape != call.inputs[1].shape)
    return "not global_max_pool2d_grad's layout";
  const Span b = call.vars[0], c = call.vars[1];
  Step st = gather_step(call, GatherFn::kGlobalMaxPool2dGrad, 4);
  st.gather.H = x.shape[2], st.gather.W = x.shape[3];
  if (!gather_slot(call, 0, {0, 1, 2, 3}, {b, c, all_of(x.shape[2]), all_of(x.shape[3])}, &st, 0) ||
      !gather_slot(call, 1, {0, 1, -1, -1}, {b, c}, &st, 1) || !gather_slot(call, 2, {0, 1, -1, -1}, {b, c}, &st, 2))
    return "an input's region does not hold the block's maps";
  s->push_back(st);
  return "";
}

std::string one_hot(const TileCall& call, std::vector<Step>* s) {
  if (call.inputs.size() != 1 || call.vars.size() != call.output_vars.size()) return "not one_hot's layout";
  const TileIn& ids = call.inputs[0];
  const int nd = static_cast<int>(ids.shape.size());
  if (!outputs_first(call, nd + 1) || nd + 1 > kMaxDims) return "not one_hot's layout";
  if (ids.dtype != DType::kInt64 && ids.dtype != DType::kFloat32) return "ids of a dtype other than int64 or float32";
  std::vector<int> dim_of;
  std::vector<Span> need;
  for (int d = 0; d < nd; ++d) {
    if (call.vars[d].hi >= ids.shape[d]) return "not one_hot's layout";
    dim_of.push_back(d), need.push_back(call.vars[d]);
  }
  dim_of.push_back(-1);
  Step st = gather_step(call, GatherFn::kOneHot, nd + 1);
  if (!gather_slot(call, 0, dim_of, need, &st, 0)) return "the ids' region does not hold the block";
  st.gather.k = ids.dtype == DType::kInt64 ? 1 : 0;
  s->push_back(st);
  return "";
}

std::string avg_pool2d(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s) {
  const long long k = a.integer("kernel", 2), st = a.integer("stride", 2), p = a.integer("padding", 0);
  if (!a.ok || k < 1 || st < 1 || p < 0 || call.inputs.size() != 1 || !outputs_first(call, 4) || call.vars.size() != 6 ||
      call.extents[4] != k || call.extents[5] != k || call.inputs[0].shape.size() != 4)
    return "not avg_pool2d's layout";
  const TileIn& in = call.inputs[0];
  Step step = gather_step(call, grad ? GatherFn::kAvgPool2dGrad : GatherFn::kAvgPool2d, 4);
  GatherArgs& g = step.gather;
  g.k = k, g.s = st, g.p = p, g.scale = 1.0 / static_cast<double>(k * k);
  g.i_lo = call.vars[4].lo, g.i_hi = call.vars[4].hi, g.j_lo = call.vars[5].lo, g.j_hi = call.vars[5].hi;
  const Span b = call.vars[0], c = call.vars[1];
  if (!grad) {
    g.H = in.shape[2], g.W = in.shape[3];
    if (!gather_slot(call, 0, {0, 1, 2, 3}, {b, c, window_reads(call.vars[2], g.i_lo, g.i_hi, st, p, g.H),
                                             window_reads(call.vars[3], g.j_lo, g.j_hi, st, p, g.W)}, &step, 0))
      return "x's region does not hold the windows";
  } else {
    g.OH = in.shape[2], g.OW = in.shape[3];
    // dy's windows reaching rows [h.lo, h.hi] through offsets [i_lo, i_hi]: (h + p - i) / s, clipped.
    auto readers = [&](Span o, long long lo, long long hi, long long n) {
      return Span{std::max<long long>(0, tw_floor_div(o.lo + p - hi + st - 1, st)), std::min<long long>(n - 1, tw_floor_div(o.hi + p - lo, st))};
    };
    if (!gather_slot(call, 0, {0, 1, 2, 3}, {b, c, readers(call.vars[2], g.i_lo, g.i_hi, g.OH), readers(call.vars[3], g.j_lo, g.j_hi, g.OW)},
                     &step, 0))
      return "dy's region does not hold the windows";
  }
  s->push_back(step);
  return "";
}

std::string max_pool1d(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s) {
  const long long k = a.integer("kernel", 2);
  if (!a.ok || k < 1 || call.inputs.size() != (grad ? 3u : 1u) || !outputs_first(call, 3) ||
      call.vars.size() != (grad ? 5u : 4u) || call.extents[3] != k || (grad && call.extents[4] != k) ||
      call.inputs[0].shape.size() != 3)
    return "not max_pool1d's layout";
  const TileIn& x = call.inputs[0];
  const Span b = call.vars[0], c = call.vars[1], i = call.vars[2];
  if (b.hi >= x.shape[0] || c.hi >= x.shape[1]) return "not max_pool1d's layout";
  Step step = gather_step(call, grad ? GatherFn::kMaxPool1dGrad : GatherFn::kMaxPool1d, 3);
  GatherArgs& g = step.gather;
  g.k = k;
  if (!grad) {
    const Span j = call.vars[3];
    if (k * i.hi + j.hi >= x.shape[2]) return "not max_pool1d's layout";
    g.j_lo = j.lo, g.j_hi = j.hi;
    if (!gather_slot(call, 0, {0, 1, 2}, {b, c, {k * i.lo + j.lo, k * i.hi + j.hi}}, &step, 0))
      return "x's region does not hold the windows";
  } else {
    if (!nested_full(call, 3)) return "a split nested window";
    const TileIn& y = call.inputs[1];
    if (y.shape.size() != 3 || call.inputs[2].shape != y.shape || i.hi >= x.shape[2]) return "not max_pool1d_grad's layout";
    g.OW = y.shape[2];
    const Span read{i.lo / k, std::min(i.hi / k, g.OW - 1)};
    const Span none{0, -1};
    const bool any = read.lo <= read.hi;
    if (!gather_slot(call, 0, {0, 1, 2}, {b, c, any ? Span{k * read.lo, k * read.hi + k - 1} : none}, &step, 0) ||
        !gather_slot(call, 1, {0, 1, 2}, {b, c, any ? read : none}, &step, 1) ||
        !gather_slot(call, 2, {0, 1, 2}, {b, c, any ? read : none}, &step, 2))
      return "an input's region does not hold the windows";
  }
  s->push_back(step);
  return "";
}

// Batch norm's statistics with the channel kernel: batch_norm_var (x), batch_norm_var_grad (dy, x),
// batch_norm_inference_grad_gamma (dy, x, mean, var).
std::string channel_stats(const TileCall& call, Attr& a, ChannelFn fn, std::vector<Step>* s) {
  const bool var = fn == ChannelFn::kBatchNormVar, grad = fn == ChannelFn::kBatchNormVarGrad;
  const size_t inputs = var ? 1 : (grad ? 2 : 4);
  const double eps = a.num("eps", 1e-5);
  if (!a.ok || call.inputs.size() != inputs || call.vars.size() != (var || grad ? 7u : 4u) ||
      !outputs_first(call, grad ? 4 : 1) || (fn != ChannelFn::kBatchNormInferenceGradGamma && !nested_full(call, grad ? 4 : 1)))
    return "not batch norm's layout";
  const int xi = var ? 0 : 1;
  const TileIn& x = call.inputs[xi];
  if (x.shape.size() != 4) return "not batch norm's layout";
  Step st;
  st.kind = Step::kChannel;
  ChannelArgs& c = st.channel;
  c.fn = static_cast<int>(fn), c.eps = eps;
  c.N = x.shape[0], c.H = x.shape[2], c.W = x.shape[3];
  // The block: channels first for the statistics (c, ...), NCHW for the gradient.
  const Span ch = call.vars[grad ? 1 : 0];
  const Span b = grad ? call.vars[0] : call.vars[1], h = call.vars[2], w = call.vars[3];
  c.c_lo = ch.lo, c.cs = ch.size(), c.b_lo = b.lo, c.bs = b.size(), c.h_lo = h.lo, c.hs = h.size(), c.w_lo = w.lo, c.ws = w.size();
  c.chunks = channel_chunks(fn == ChannelFn::kBatchNormInferenceGradGamma ? c.bs * c.hs * c.ws : c.N * c.H * c.W);
  c.x_in = xi;
  const std::vector<Span> whole{{0, c.N - 1}, ch, {0, c.H - 1}, {0, c.W - 1}};
  if (fn == ChannelFn::kBatchNormInferenceGradGamma) {
    if (call.inputs[0].shape != x.shape || !nchw(call, 1, {b, ch, h, w}, &c.x_base, c.x_stride)) return "x's region does not hold the block";
    c.dy_in = 0, c.gamma_in = 2, c.beta_in = 3;
    if (!nchw(call, 0, {b, ch, h, w}, &c.dy_base, c.dy_stride) || !channel_vector(call, 2, ch, &c.gamma_base) ||
        !channel_vector(call, 3, ch, &c.beta_base))
      return "an input's region does not hold the block's channels";
  } else {
    if (!nchw(call, xi, whole, &c.x_base, c.x_stride)) return "x's region does not hold the block's channels";
    if (grad) {
      c.gamma_in = 0;  // dy, one value per channel
      if (!channel_vector(call, 0, ch, &c.gamma_base)) return "dy does not hold the block's channels";
    }
  }
  for (size_t j = 0; j < inputs; ++j) st.row_inputs[j] = static_cast<int>(j);
  s->push_back(st);
  return "";
}

// ---- the GRU cell: gates (batch, 3 hidden) by thirds r | z | n, read at shifted columns ------------

bool gru_layout(const TileCall& call, size_t inputs, int gi, int hidden_of, long long* hidden) {
  if (!pure_map(call, inputs) || call.vars.size() != 2) return false;
  const TileIn &a = call.inputs[gi], &b = call.inputs[gi + 1], &h = call.inputs[hidden_of];
  if (a.shape.size() != 2 || b.shape.size() != 2 || h.shape.size() != 2) return false;
  *hidden = h.shape[1];
  return a.shape[1] == 3 * *hidden && b.shape[1] == 3 * *hidden;
}

// The six gate reads (gi, gh at thirds r, z, n) for a column `shift` columns before its own third.
std::vector<Read> gru_gates(int gi, long long n, long long shift) {
  std::vector<Read> r;
  for (long long t = 0; t < 3; ++t) r.push_back(shifted(gi, t * n - shift)), r.push_back(shifted(gi + 1, t * n - shift));
  return r;
}

std::string gru_cell(const TileCall& call, std::vector<Step>* s) {  // (gi, gh, h)
  long long n = 0;
  if (!gru_layout(call, 3, 0, 2, &n)) return "not the GRU cell's layout";
  std::vector<Read> reads = gru_gates(0, n, 0);
  reads.push_back(aligned(call, 2));
  return add_map(call, MapFn::kGruCell, {}, reads, s);
}

// d gi (times_r false) or d gh (true): one box map per third the block meets.
std::string gru_gate_grads(const TileCall& call, bool times_r, std::vector<Step>* s) {  // (dy, gi, gh, h)
  if (call.inputs.size() != 4 || call.vars.size() != 2 || !outputs_are(call, {0, 1})) return "not the GRU gradients' layout";
  const TileIn &dy = call.inputs[0], &gi = call.inputs[1];
  if (dy.shape.size() != 2 || gi.shape.size() != 2 || call.inputs[2].shape != gi.shape || call.inputs[3].shape != dy.shape ||
      gi.shape[1] != 3 * dy.shape[1])
    return "not the GRU gradients' layout";
  const long long n = dy.shape[1];
  const Span b = call.vars[0], j = call.vars[1];
  static const MapFn fns[] = {MapFn::kGruGradR, MapFn::kGruGradZ, MapFn::kGruGradN};
  for (long long q = 0; q < 3; ++q) {
    const Span cols{std::max<int64_t>(j.lo, q * n), std::min<int64_t>(j.hi, q * n + n - 1)};
    if (cols.lo > cols.hi) continue;
    std::vector<Read> reads{shifted(0, -q * n)};
    for (const Read& r : gru_gates(1, n, q * n)) reads.push_back(r);
    if (q == 1) reads.push_back(shifted(3, -q * n));
    const std::string why = add_map_box(call, {b, cols}, fns[q], {times_r ? 1.0f : 0.0f}, reads, s);
    if (!why.empty()) return why;
  }
  return "";
}

// Depthwise convolutions as gathers (one thread per output element, the CPU's loops and order).
std::string depthwise(const TileCall& call, Attr& a, GatherFn fn, std::vector<Step>* s) {
  ConvAttrs g;
  const bool filter_grad = fn == GatherFn::kDepthwiseConvGradFilter;
  if (!conv_attrs(a, &g) || call.inputs.size() != 2 || call.vars.size() != (filter_grad ? 7u : 6u) ||
      !outputs_are(call, {0, 1, 2, 3}) || call.inputs[0].shape.size() != 4 || call.inputs[1].shape.size() != 4)
    return "not a depthwise convolution's layout";
  Step st = gather_step(call, fn, 4);
  GatherArgs& ga = st.gather;
  ga.s = g.s, ga.p = g.p, ga.d = g.d;
  const TileIn &first = call.inputs[0], &second = call.inputs[1];
  const Span none{0, -1};
  if (!filter_grad) {  // (x or dy, filters (c, 1, kh, kw)); output (b, c, y, x) or (b, c, h, w)
    const Span b = call.vars[0], c = call.vars[1], ky = call.vars[4], kx = call.vars[5];
    if (second.shape[0] != first.shape[1] || second.shape[1] != 1 || call.extents[4] != second.shape[2] ||
        call.extents[5] != second.shape[3] || b.hi >= first.shape[0])
      return "not a depthwise convolution's layout";
    ga.i_lo = ky.lo, ga.i_hi = ky.hi, ga.j_lo = kx.lo, ga.j_hi = kx.hi;
    std::vector<Span> need;
    if (fn == GatherFn::kDepthwiseConv) {
      ga.H = first.shape[2], ga.W = first.shape[3];
      need = {b, c, rows_read(call.vars[2], ky, g, ga.H), rows_read(call.vars[3], kx, g, ga.W)};
    } else {
      ga.OH = first.shape[2], ga.OW = first.shape[3];
      auto readers = [&](Span o, Span k, long long n) {  // dy rows (o + p - d k) / s, whole ones
        return Span{std::max<long long>(0, tw_floor_div(o.lo + g.p - g.d * k.hi + g.s - 1, g.s)),
                    std::min<long long>(n - 1, tw_floor_div(o.hi + g.p - g.d * k.lo, g.s))};
      };
      const Span rh = readers(call.vars[2], ky, ga.OH), rw = readers(call.vars[3], kx, ga.OW);
      need = {b, c, rh.lo <= rh.hi ? rh : none, rw.lo <= rw.hi ? rw : none};
    }
    if (!gather_slot(call, 0, {0, 1, 2, 3}, need, &st, 0) || !gather_slot(call, 1, {0, 1, 2, 3}, {c, {0, 0}, ky, kx}, &st, 1))
      return "an input's region does not hold the windows";
  } else {  // (x, dy); output (c, 1, kh, kw), summed over b, y, x
    const Span c = call.vars[0], ky = call.vars[2], kx = call.vars[3], b = call.vars[4], y = call.vars[5], x = call.vars[6];
    if (call.vars[1].lo != 0 || call.vars[1].hi != 0 || b.hi >= first.shape[0] || c.hi >= first.shape[1] ||
        y.hi >= second.shape[2] || x.hi >= second.shape[3])
      return "not depthwise_conv2d_backward_filter's layout";
    ga.H = first.shape[2], ga.W = first.shape[3];
    ga.b_lo = b.lo, ga.b_hi = b.hi, ga.i_lo = y.lo, ga.i_hi = y.hi, ga.j_lo = x.lo, ga.j_hi = x.hi;
    const std::vector<Span> need{b, c, rows_read(y, ky, g, ga.H), rows_read(x, kx, g, ga.W)};
    if (!gather_slot(call, 0, {0, 1, 2, 3}, need, &st, 0) || !gather_slot(call, 1, {0, 1, 2, 3}, {b, c, y, x}, &st, 1))
      return "an input's region does not hold the windows";
  }
  s->push_back(st);
  return "";
}

// A convolution cuDNN's descriptors cannot express, as a gather in the CPU's loops (slow for large
// layers: the CPU-style direct loop per output element; the planners' usual splits take cuDNN).
std::string conv_direct(const TileCall& call, GatherFn fn, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* s) {
  if (call.inputs.size() != 2 || call.vars.size() != 7 || !outputs_are(call, {0, 1, 2, 3}) ||
      call.inputs[0].shape.size() != 4 || call.inputs[1].shape.size() != 4)
    return "not a convolution's layout";
  Step st = gather_step(call, fn, 4);
  GatherArgs& ga = st.gather;
  ga.s = g.s, ga.p = g.p, ga.d = g.d, ga.rs = gh.s, ga.rp = gh.p, ga.rd = gh.d;
  const Span r0 = call.vars[4], r1 = call.vars[5], r2 = call.vars[6];  // the reduction's three ranges
  ga.b_lo = r0.lo, ga.b_hi = r0.hi, ga.i_lo = r1.lo, ga.i_hi = r1.hi, ga.j_lo = r2.lo, ga.j_hi = r2.hi;
  const TileIn &first = call.inputs[0], &second = call.inputs[1];
  const Span none{0, -1};
  std::vector<Span> need0, need1;
  if (fn == GatherFn::kConvDirect) {  // (x, w): out (b, co, y, x), reduce (ci, kh, kw)
    ga.H = first.shape[2], ga.W = first.shape[3];
    need0 = {call.vars[0], r0, rows_read(call.vars[2], r1, gh, ga.H), rows_read(call.vars[3], r2, g, ga.W)};
    need1 = {call.vars[1], r0, r1, r2};
  } else if (fn == GatherFn::kConvDirectGradData) {  // (dy, w): out (b, ci, h, w), reduce (co, kh, kw)
    ga.OH = first.shape[2], ga.OW = first.shape[3];
    auto readers = [](Span o, Span k, const ConvAttrs& c, long long n) {  // dy rows (o + p - d k) / s
      const Span r{std::max<long long>(0, tw_floor_div(o.lo + c.p - c.d * k.hi + c.s - 1, c.s)),
                   std::min<long long>(n - 1, tw_floor_div(o.hi + c.p - c.d * k.lo, c.s))};
      return r.lo <= r.hi ? r : Span{0, -1};
    };
    need0 = {call.vars[0], r0, readers(call.vars[2], r1, gh, ga.OH), readers(call.vars[3], r2, g, ga.OW)};
    need1 = {r0, call.vars[1], r1, r2};
  } else {  // (x, dy): out (co, ci, kh, kw), reduce (b, y, x)
    ga.H = first.shape[2], ga.W = first.shape[3];
    need0 = {r0, call.vars[1], rows_read(r1, call.vars[2], gh, ga.H), rows_read(r2, call.vars[3], g, ga.W)};
    need1 = {r0, call.vars[0], r1, r2};
  }
  for (Span& v : need0)
    if (v.lo > v.hi) v = none;
  if (!gather_slot(call, 0, {0, 1, 2, 3}, need0, &st, 0) || !gather_slot(call, 1, {0, 1, 2, 3}, need1, &st, 1))
    return "an input's region does not hold the convolution's reads";
  (void)second;
  s->push_back(st);
  return "";
}

}  // namespace tilewise::exec::cuda::select

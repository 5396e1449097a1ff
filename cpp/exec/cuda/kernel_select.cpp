#include "exec/cuda/kernel_select.h"
#include "exec/cuda/select_parts.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <initializer_list>
#include <utility>

#include "kernels/cpu/gemm_contraction.h"

namespace tilewise::exec::cuda {

namespace select {



// ---- attributes -----------------------------------------------------------------------------


// ---- geometry of the call's buffers --------------------------------------------------------

std::vector<long long> region_strides(const TileIn& in) {
  std::vector<long long> s(in.region.size(), 1);
  for (int d = static_cast<int>(in.region.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * in.region[d + 1].size();
  return s;
}

// Row-major strides of the output block per variable (0 for variables not in the output).
std::vector<long long> output_strides(const TileCall& call) {
  std::vector<long long> s(call.vars.size(), 0);
  long long step = 1;
  for (int p = static_cast<int>(call.output_vars.size()) - 1; p >= 0; --p) {
    s[call.output_vars[p]] = step;
    step *= call.vars[call.output_vars[p]].size();
  }
  return s;
}

long long output_size(const TileCall& call) {
  long long n = 1;
  for (int v : call.output_vars) n *= call.vars[v].size();
  return n;
}

bool outputs_are(const TileCall& call, std::vector<int> vars) { return call.output_vars == vars; }

bool outputs_first(const TileCall& call, int r) {
  if (static_cast<int>(call.output_vars.size()) != r) return false;
  for (int t = 0; t < r; ++t)
    if (call.output_vars[t] != t) return false;
  return true;
}

bool all_float(const TileCall& call) {
  return std::all_of(call.inputs.begin(), call.inputs.end(), [](const TileIn& in) { return in.dtype == DType::kFloat32; });
}

/// Input `input` read with dimension d at variable dims[d] (kNone: index `fixed[d]`): the floats
/// from the region's start to the block's corner and the stride of every variable. False when the
/// region does not hold the block (the CPU kernel declines those too).
bool view(const TileCall& call, int input, const std::vector<int>& dims, long long* base,
          std::vector<long long>* strides, const std::vector<long long>& fixed) {
  if (input < 0 || input >= static_cast<int>(call.inputs.size())) return false;
  const TileIn& in = call.inputs[input];
  if (in.region.size() != dims.size() || in.shape.size() != dims.size()) return false;
  const std::vector<long long> rs = region_strides(in);
  strides->assign(call.vars.size(), 0);
  *base = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    // fixed[d]: the index of a kNone dimension, else a shift added to the variable's span.
    const long long sh = d < fixed.size() ? fixed[d] : 0;
    Span want = dims[d] == kNone ? Span{sh, sh} : Span{call.vars[dims[d]].lo + sh, call.vars[dims[d]].hi + sh};
    if (want.lo < in.region[d].lo || want.hi > in.region[d].hi) return false;
    *base += (want.lo - in.region[d].lo) * rs[d];
    if (dims[d] != kNone) (*strides)[dims[d]] += rs[d];
  }
  return true;
}

// ---- GEMMs -------------------------------------------------------------------------------


long long size_of(const TileCall& call, int v) { return v == kNone ? 1 : call.vars[v].size(); }
long long at(const std::vector<long long>& s, int v) { return v == kNone ? 0 : s[v]; }

/// The GEMM calls of a contraction, appended to `steps`; `accumulate`: add onto the output (a bias
/// already written). "" or why not.
std::string add_gemms(const TileCall& call, const Contraction& c, bool accumulate, std::vector<Step>* steps) {
  long long base_a = 0, base_b = 0;
  std::vector<long long> sa, sb;
  if (!view(call, c.a.input, c.a.dims, &base_a, &sa) || !view(call, c.b.input, c.b.dims, &base_b, &sb))
    return "an operand's region does not hold the block";
  const std::vector<long long> sc = output_strides(call);
  const long long m = size_of(call, c.m), n = size_of(call, c.n), k = size_of(call, c.k);
  Layout la, lb, lc;
  if (!blas_layout(m, k, at(sa, c.m), at(sa, c.k), &la) || !blas_layout(k, n, at(sb, c.k), at(sb, c.n), &lb) ||
      !blas_layout(m, n, at(sc, c.m), at(sc, c.n), &lc) || lc.trans)
    return "an operand has no unit stride (not a BLAS matrix)";
  for (long long x : std::initializer_list<long long>{m, n, k, la.ld, lb.ld, lc.ld})
    if (x > INT_MAX) return "a GEMM dimension past cuBLAS's int range";
  // Loops: a reducing loop (the output does not move along it) accumulates, so it is enumerated; the
  // last non-reducing loop becomes cuBLAS's batch; the others are enumerated too.
  bool reduces = false;
  int batch_loop = kNone;
  for (int v : c.loops) {
    if (sc[v] == 0) reduces = true;
    else batch_loop = v;
  }
  if (reduces && !accumulate) {
    Step zero;
    zero.kind = Step::kMap;
    zero.map.fn = static_cast<int>(MapFn::kFill);
    zero.map.dims = 1;
    zero.map.size[0] = zero.map.elements = output_size(call);
    steps->push_back(zero);
    accumulate = true;
  }
  GemmCall g;
  // Row-major C (m x n) = A B is column-major C^T (n x m) = B^T A^T: cuBLAS's A is our B.
  g.transa = lb.trans, g.transb = la.trans;
  g.m = n, g.n = m, g.k = k;
  g.a = c.b.input, g.b = c.a.input;
  g.lda = lb.ld, g.ldb = la.ld, g.ldc = lc.ld;
  g.beta = accumulate ? 1.0f : 0.0f;
  if (batch_loop != kNone) {
    g.batch = call.vars[batch_loop].size();
    g.stride_a = sb[batch_loop], g.stride_b = sa[batch_loop], g.stride_c = sc[batch_loop];
  }
  std::vector<int> outer;
  long long calls = 1;
  for (int v : c.loops)
    if (v != batch_loop) outer.push_back(v), calls *= call.vars[v].size();
  if (calls > kMaxGemmCalls) return "more than " + std::to_string(kMaxGemmCalls) + " GEMM calls for one instruction";
  for (long long t = 0; t < calls; ++t) {
    long long oa = base_b, ob = base_a, oc = 0, rest = t;
    for (int l = static_cast<int>(outer.size()) - 1; l >= 0; --l) {
      const int v = outer[l];
      const long long idx = rest % call.vars[v].size();
      rest /= call.vars[v].size();
      oa += idx * sb[v], ob += idx * sa[v], oc += idx * sc[v];
    }
    Step s;
    s.kind = Step::kGemm;
    s.gemm = g;
    s.gemm.a_offset = oa, s.gemm.b_offset = ob, s.gemm.c_offset = oc;
    steps->push_back(s);
  }
  return "";
}


std::string add_map(const TileCall& call, MapFn fn, std::vector<float> p, const std::vector<Read>& reads,
                    std::vector<Step>* steps) {
  const int rank = static_cast<int>(call.output_vars.size());
  if (rank > kMaxDims) return "more than " + std::to_string(kMaxDims) + " output dimensions";
  if (static_cast<int>(reads.size()) > kMaxReads) return "more than " + std::to_string(kMaxReads) + " reads";
  Step s;
  s.kind = Step::kMap;
  MapArgs& m = s.map;
  m.fn = static_cast<int>(fn);
  m.dims = rank;
  m.reads = static_cast<int>(reads.size());
  for (size_t i = 0; i < p.size() && i < 4; ++i) m.p[i] = p[i];
  m.elements = output_size(call);
  for (int d = 0; d < rank; ++d) m.size[d] = call.vars[call.output_vars[d]].size();
  const std::vector<long long> os = output_strides(call);
  for (size_t r = 0; r < reads.size(); ++r) {
    s.map_inputs[r] = reads[r].input;
    if (reads[r].input == kOutput) {  // the output itself, read in place (an epilogue, add_n's running sum)
      for (int d = 0; d < rank; ++d) m.stride[r][d] = os[call.output_vars[d]];
      continue;
    }
    std::vector<int> dims;
    std::vector<long long> fixed;
    for (size_t d = 0; d < reads[r].at.size(); ++d) {
      const int a = reads[r].at[d];
      dims.push_back(a == kNone ? kNone : call.output_vars[a]);
      fixed.push_back(d < reads[r].shift.size() ? reads[r].shift[d] : 0);
    }
    long long base = 0;
    std::vector<long long> st;
    if (!view(call, reads[r].input, dims, &base, &st, fixed)) return "an input's region does not hold the block";
    m.base[r] = base;
    for (int d = 0; d < rank; ++d) m.stride[r][d] = st[call.output_vars[d]];
  }
  steps->push_back(s);
  return "";
}

/// A map over the box `box` (per output position) inside the block, written in place there.
std::string add_map_box(const TileCall& call, const std::vector<Span>& box, MapFn fn, std::vector<float> p,
                        const std::vector<Read>& reads, std::vector<Step>* steps) {
  const int rank = static_cast<int>(call.output_vars.size());
  if (static_cast<int>(box.size()) != rank) return "a box of the wrong rank";
  TileCall sub = call;
  const std::vector<long long> os = output_strides(call);
  long long base = 0;
  for (int d = 0; d < rank; ++d) {
    const Span v = call.vars[call.output_vars[d]];
    if (box[d].lo < v.lo || box[d].hi > v.hi || box[d].size() <= 0) return "a box outside the block";
    base += (box[d].lo - v.lo) * os[call.output_vars[d]];
    sub.vars[call.output_vars[d]] = box[d];
  }
  for (const Read& r : reads)
    if (r.input == kOutput) return "a box map reading the output";
  const std::string why = add_map(sub, fn, std::move(p), reads, steps);
  if (!why.empty()) return why;
  MapArgs& m = steps->back().map;
  m.out_strided = 1, m.out_base = base;
  for (int d = 0; d < rank; ++d) m.out_stride[d] = os[call.output_vars[d]];
  return "";
}

std::string zero_fill(const TileCall& call, std::vector<Step>* steps) { return add_map(call, MapFn::kFill, {0.0f}, {}, steps); }

std::vector<Span> output_box(const TileCall& call) {
  std::vector<Span> box;
  for (int v : call.output_vars) box.push_back(call.vars[v]);
  return box;
}

Read aligned(const TileCall& call, int input) {
  Read r{input, {}};
  for (size_t d = 0; d < call.output_vars.size(); ++d) r.at.push_back(static_cast<int>(d));
  return r;
}

bool pure_map(const TileCall& call, size_t inputs) {
  if (call.inputs.size() != inputs || call.output_vars.size() != call.vars.size()) return false;
  for (size_t p = 0; p < call.output_vars.size(); ++p)
    if (call.output_vars[p] != static_cast<int>(p)) return false;
  return true;
}

std::string aligned_map(const TileCall& call, size_t n, MapFn fn, std::vector<float> p, std::vector<Step>* steps) {
  if (!pure_map(call, n)) return "not an element-wise map of " + std::to_string(n) + " inputs";
  std::vector<Read> reads;
  for (size_t i = 0; i < n; ++i) reads.push_back(aligned(call, static_cast<int>(i)));
  return add_map(call, fn, std::move(p), reads, steps);
}

// Sum of bias inputs (rank 1, indexed by output position `pos`) written onto the output.
std::string bias_fill(const TileCall& call, const std::vector<int>& biases, int pos, std::vector<Step>* steps) {
  std::vector<Read> reads;
  for (int b : biases) {
    if (call.inputs[b].shape.size() != 1) return "a bias of rank other than 1";
    reads.push_back({b, {pos}});
  }
  const MapFn fn = reads.size() == 1 ? MapFn::kCopy : MapFn::kAdd;
  return add_map(call, fn, {}, reads, steps);
}

bool full(const TileCall& call, int v) { return call.vars[v].lo == 0 && call.vars[v].size() == call.extents[v]; }

// ---- the kernels ---------------------------------------------------------------------------


std::string mat(const TileCall& call, std::vector<int> a, std::vector<int> b, std::vector<Step>* s) {
  if (!outputs_are(call, {0, 1}) || call.inputs.size() != 2 || call.vars.size() != 3) return "not a matrix product";
  return add_gemms(call, {{0, std::move(a)}, {1, std::move(b)}, 0, 1, 2, {}}, false, s);
}

std::string batch_mat(const TileCall& call, std::vector<int> a, std::vector<int> b, std::vector<Step>* s) {
  if (!outputs_are(call, {0, 1, 2}) || call.inputs.size() != 2 || call.vars.size() != 4) return "not a batched product";
  return add_gemms(call, {{0, std::move(a)}, {1, std::move(b)}, 1, 2, 3, {0}}, false, s);
}

std::string batched(const TileCall& call, std::vector<int> a_tail, std::vector<int> b_tail, bool b_batched,
                    std::vector<Step>* s) {
  const int r = static_cast<int>(call.vars.size()) - 1;
  if (r < 2 || call.inputs.size() != 2 || !outputs_first(call, r)) return "not a batched product";
  return add_gemms(call, kernels::batched_contraction(r, a_tail, b_tail, b_batched), false, s);
}

// linear's layout: output i0..i{r-1}, then the reduction k; rows m = i{r-2}, looping over the rest.
bool linear_like(const TileCall& call, Contraction* c, int* r_out) {
  const int r = static_cast<int>(call.vars.size()) - 1;
  if (r < 1 || !outputs_first(call, r)) return false;
  c->m = r >= 2 ? r - 2 : kNone;
  c->n = r - 1;
  c->k = r;
  for (int t = 0; t + 2 < r; ++t) c->loops.push_back(t);
  *r_out = r;
  return true;
}

std::string linear(const TileCall& call, bool bias, std::vector<Step>* s) {
  Contraction c;
  int r = 0;
  if (call.inputs.size() != (bias ? 3u : 2u) || !linear_like(call, &c, &r)) return "not linear's layout";
  c.a.input = 0;
  for (int t = 0; t + 1 < r; ++t) c.a.dims.push_back(t);
  c.a.dims.push_back(r);
  c.b = {1, {r - 1, r}};
  if (!bias) return add_gemms(call, c, false, s);
  if (!full(call, r)) return "a split reduction under a bias";
  std::string why = bias_fill(call, {2}, r - 1, s);
  return why.empty() ? add_gemms(call, c, true, s) : why;
}

std::string linear_grad_input(const TileCall& call, std::vector<Step>* s) {
  Contraction c;
  int r = 0;
  if (call.inputs.size() != 2 || !linear_like(call, &c, &r)) return "not linear's layout";
  c.a.input = 0;
  for (int t = 0; t + 1 < r; ++t) c.a.dims.push_back(t);
  c.a.dims.push_back(r);
  c.b = {1, {r, r - 1}};
  return add_gemms(call, c, false, s);
}

std::string linear_grad_weight(const TileCall& call, std::vector<Step>* s) {
  const int nr = static_cast<int>(call.vars.size()) - 2;
  if (nr < 1 || call.inputs.size() != 2 || !outputs_are(call, {0, 1})) return "not linear_grad_weight's layout";
  Contraction c;
  c.a.input = 0, c.b.input = 1;
  for (int t = 0; t < nr; ++t) c.a.dims.push_back(2 + t), c.b.dims.push_back(2 + t);
  c.a.dims.push_back(0);
  c.b.dims.push_back(1);
  c.m = 0, c.n = 1, c.k = 2 + nr - 1;
  for (int t = 0; t + 1 < nr; ++t) c.loops.push_back(2 + t);
  return add_gemms(call, c, false, s);
}

// x W^T + h U^T onto the summed biases (lstm_gates, rnn_tanh_cell): vars rows 0, j 1, k 2, k' 3.
std::string two_gemms(const TileCall& call, const std::vector<int>& biases, std::vector<Step>* s) {
  if (!outputs_are(call, {0, 1}) || call.vars.size() != 4 || call.inputs.size() != 4 + biases.size())
    return "not lstm_gates' layout";
  if (!full(call, 2) || !full(call, 3)) return "a split reduction under a bias";
  std::string why = bias_fill(call, biases, 1, s);
  if (why.empty()) why = add_gemms(call, {{0, {0, 2}}, {2, {1, 2}}, 0, 1, 2, {}}, true, s);
  if (why.empty()) why = add_gemms(call, {{1, {0, 3}}, {3, {1, 3}}, 0, 1, 3, {}}, true, s);
  return why;
}

// ---- convolutions ---------------------------------------------------------------------------


bool conv_attrs(Attr& a, ConvAttrs* c) {
  c->s = a.integer("stride", 1), c->p = a.integer("padding", 0), c->d = a.integer("dilation", 1);
  return a.ok && c->s >= 1 && c->p >= 0 && c->d >= 1;
}

// The rows of a spatial axis x reads for outputs `o` with kernel extent `kk` over an input of `size`:
// the first row read, the rows held and the padding, which cuDNN takes on both sides alike. With
// top padding pt and bottom padding pb (rows read past the tensor), cuDNN's output size
// floor((rows + 2 pt - d (kk - 1) - 1) / s) + 1 is |o| exactly when 0 <= pt - pb < s (a strided
// convolution that never reads the last rows pads less at the bottom).
// The first and last rows in [0, size) that outputs `o` read with kernel offsets `k` (the rows between
// need not all be read: a dilated, strided window skips some); empty when all reads are padding.
Span rows_read(Span o, Span k, const ConvAttrs& g, long long size) {
  auto floor_div = [](long long x, long long y) { return x >= 0 ? x / y : -((-x + y - 1) / y); };
  long long lo = LLONG_MAX, hi = LLONG_MIN;
  for (long long t = k.lo; t <= k.hi; ++t) {
    const long long o_lo = std::max<long long>(o.lo, -floor_div(g.d * t - g.p, g.s));  // the first o reading row >= 0
    const long long o_hi = std::min<long long>(o.hi, floor_div(size - 1 + g.p - g.d * t, g.s));  // the last < size
    if (o_lo > o_hi) continue;
    lo = std::min(lo, g.s * o_lo + g.d * t - g.p), hi = std::max(hi, g.s * o_hi + g.d * t - g.p);
  }
  return lo > hi ? Span{0, -1} : Span{lo, hi};
}

// The rows of x a cuDNN descriptor frames for outputs `o` (kernel extent kk, x of `size` rows, `held`
// the rows its region holds): [first, first + rows) with `pad` rows of padding on both sides (cuDNN
// pads alike). The frame must hold every row read and give exactly |o| outputs: with top and last the
// window's first and last rows (padding included), pad = first - top and 0 <= pad - (last - end) < s.
// Candidates, in order: the tensor's rows clipped to the window, the rows actually read (a dilated,
// strided window may skip edge rows that the region then lacks), and their mixtures.
std::string window(Span o, long long kk, long long size, const ConvAttrs& g, Span held, long long* first,
                   long long* rows, long long* pad) {
  const long long top = g.s * o.lo - g.p, last = g.s * o.hi - g.p + g.d * (kk - 1);
  const Span read = rows_read(o, {0, kk - 1}, g, size);
  if (read.lo > read.hi) return "a window that reads only padding";
  const long long firsts[2] = {std::max(top, 0LL), read.lo}, ends[2] = {std::min(last, size - 1), read.hi};
  bool symmetric = false;
  for (long long f : firsts)
    for (long long e : ends) {
      const long long pt = f - top, pb = last - e;
      if (pt < pb || pt - pb >= g.s) continue;
      symmetric = true;
      if (f < held.lo || e > held.hi) continue;
      *first = f, *rows = e - f + 1, *pad = pt;
      return "";
    }
  return symmetric ? "the data region does not hold the window"
                   : "a spatially split convolution with an asymmetric halo (cuDNN pads both sides alike)";
}

// A 4-D input as a strided cuDNN tensor: the block box starting at `lo`, strides of its region.
bool tensor4(const TileCall& call, int input, const long long lo[4], const long long size[4], long long* offset,
             long long stride[4]) {
  const TileIn& in = call.inputs[input];
  if (in.shape.size() != 4) return false;
  const std::vector<long long> rs = region_strides(in);
  *offset = 0;
  for (int d = 0; d < 4; ++d) {
    if (lo[d] < in.region[d].lo || lo[d] + size[d] - 1 > in.region[d].hi) return false;
    *offset += (lo[d] - in.region[d].lo) * rs[d];
    stride[d] = rs[d];
  }
  return true;
}

// The filter (k, c, r, s) packed: its region must be exactly the channels used and whole kernels.
std::string packed_filter(const TileCall& call, int input, Span co, Span ci, ConvCall* c) {
  const TileIn& in = call.inputs[input];
  if (in.shape.size() != 4) return "a filter of rank other than 4";
  if (in.region[1].lo != ci.lo || in.region[1].size() != ci.size() || in.region[2].lo != 0 ||
      in.region[2].size() != in.shape[2] || in.region[3].lo != 0 || in.region[3].size() != in.shape[3] ||
      co.lo < in.region[0].lo || co.hi > in.region[0].hi)
    return "a filter region that is not packed for cuDNN (a pack into scratch is the next step)";
  c->w_input = input;
  c->w_offset = (co.lo - in.region[0].lo) * ci.size() * in.shape[2] * in.shape[3];
  c->k = co.size(), c->c = ci.size(), c->r = in.shape[2], c->s = in.shape[3];
  return "";
}

// The convolutions with a geometry per spatial axis (gh rows, g columns): conv1d is conv2d over one row.
std::string conv2d_geom(const TileCall& call, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* steps) {
  if (call.inputs.size() != 2 || call.vars.size() != 7 || !outputs_are(call, {0, 1, 2, 3})) return "not conv2d's layout";
  const Span b = call.vars[0], co = call.vars[1], y = call.vars[2], x = call.vars[3], ci = call.vars[4];
  if (!full(call, 5) || !full(call, 6)) return "a split kernel window";
  ConvCall c;
  c.mode = ConvCall::kForward;
  std::string why = packed_filter(call, 1, co, ci, &c);
  if (!why.empty()) return why;
  const TileIn& in = call.inputs[0];
  if (in.shape.size() != 4) return "data of rank other than 4";
  long long h0 = 0, w0 = 0;
  if (!(why = window(y, c.r, in.shape[2], gh, in.region[2], &h0, &c.h, &c.pad_h)).empty()) return why;
  if (!(why = window(x, c.s, in.shape[3], g, in.region[3], &w0, &c.w, &c.pad_w)).empty()) return why;
  c.n = b.size();
  const long long lo[4] = {b.lo, ci.lo, h0, w0}, size[4] = {c.n, c.c, c.h, c.w};
  c.x_input = 0;
  if (!tensor4(call, 0, lo, size, &c.x_offset, c.x_stride)) return "the data region does not hold the window";
  c.p = y.size(), c.q = x.size();
  c.stride_h = gh.s, c.stride_w = g.s, c.dil_h = gh.d, c.dil_w = g.d;
  c.y_stride[0] = co.size() * c.p * c.q, c.y_stride[1] = c.p * c.q, c.y_stride[2] = c.q, c.y_stride[3] = 1;
  Step s;
  s.kind = Step::kConv;
  s.conv = c;
  steps->push_back(s);
  return "";
}

std::string conv2d_backward_data_geom(const TileCall& call, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* steps) {
  if (call.inputs.size() != 2 || call.vars.size() != 7 || !outputs_are(call, {0, 1, 2, 3}))
    return "not conv2d_backward_data's layout";
  const Span b = call.vars[0], ci = call.vars[1], co = call.vars[4];
  if (!full(call, 2) || !full(call, 3) || !full(call, 5) || !full(call, 6))
    return "a spatially split data gradient (cuDNN computes whole planes)";
  ConvCall c;
  c.mode = ConvCall::kBackwardData;
  std::string why = packed_filter(call, 1, co, ci, &c);
  if (!why.empty()) return why;
  const TileIn& dy = call.inputs[0];
  if (dy.shape.size() != 4) return "dy of rank other than 4";
  c.n = b.size(), c.h = call.extents[2], c.w = call.extents[3], c.p = dy.shape[2], c.q = dy.shape[3];
  c.pad_h = gh.p, c.pad_w = g.p, c.stride_h = gh.s, c.stride_w = g.s, c.dil_h = gh.d, c.dil_w = g.d;
  if ((c.h + 2 * gh.p - gh.d * (c.r - 1) - 1) / gh.s + 1 != c.p || (c.w + 2 * g.p - g.d * (c.s - 1) - 1) / g.s + 1 != c.q)
    return "dy's spatial size is not the convolution's output size";
  const long long lo[4] = {b.lo, co.lo, 0, 0}, size[4] = {c.n, c.k, c.p, c.q};
  c.y_input = 0;
  if (!tensor4(call, 0, lo, size, &c.y_offset, c.y_stride)) return "dy's region does not hold whole planes";
  c.x_stride[0] = c.c * c.h * c.w, c.x_stride[1] = c.h * c.w, c.x_stride[2] = c.w, c.x_stride[3] = 1;
  Step s;
  s.kind = Step::kConv;
  s.conv = c;
  steps->push_back(s);
  return "";
}

std::string conv2d_backward_filter_geom(const TileCall& call, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* steps) {
  if (call.inputs.size() != 2 || call.vars.size() != 7 || !outputs_are(call, {0, 1, 2, 3}))
    return "not conv2d_backward_filter's layout";
  const Span co = call.vars[0], ci = call.vars[1], b = call.vars[4];
  if (!full(call, 2) || !full(call, 3) || !full(call, 5) || !full(call, 6))
    return "a split kernel window or split output positions (cuDNN sums whole planes)";
  const TileIn &x = call.inputs[0], &dy = call.inputs[1];
  if (x.shape.size() != 4 || dy.shape.size() != 4) return "data or dy of rank other than 4";
  ConvCall c;
  c.mode = ConvCall::kBackwardFilter;
  c.n = b.size(), c.c = ci.size(), c.k = co.size(), c.r = call.extents[2], c.s = call.extents[3];
  c.h = x.shape[2], c.w = x.shape[3], c.p = dy.shape[2], c.q = dy.shape[3];
  c.pad_h = gh.p, c.pad_w = g.p, c.stride_h = gh.s, c.stride_w = g.s, c.dil_h = gh.d, c.dil_w = g.d;
  if ((c.h + 2 * gh.p - gh.d * (c.r - 1) - 1) / gh.s + 1 != c.p || (c.w + 2 * g.p - g.d * (c.s - 1) - 1) / g.s + 1 != c.q)
    return "dy's spatial size is not the convolution's output size";
  // x's rows as the forward convolution reads them over whole output planes.
  long long h0 = 0, w0 = 0;
  std::string why = window({0, c.p - 1}, c.r, x.shape[2], gh, x.region[2], &h0, &c.h, &c.pad_h);
  if (why.empty()) why = window({0, c.q - 1}, c.s, x.shape[3], g, x.region[3], &w0, &c.w, &c.pad_w);
  if (!why.empty()) return why;
  const long long xlo[4] = {b.lo, ci.lo, h0, w0}, xsize[4] = {c.n, c.c, c.h, c.w};
  const long long ylo[4] = {b.lo, co.lo, 0, 0}, ysize[4] = {c.n, c.k, c.p, c.q};
  c.x_input = 0, c.y_input = 1;
  if (!tensor4(call, 0, xlo, xsize, &c.x_offset, c.x_stride) || !tensor4(call, 1, ylo, ysize, &c.y_offset, c.y_stride))
    return "a region does not hold whole planes";
  Step s;
  s.kind = Step::kConv;
  s.conv = c;
  steps->push_back(s);
  return "";
}


// cuDNN where its descriptors express the call, else the direct gather (same geometry).
std::string conv_any(const TileCall& call, ConvBuilder build, const ConvAttrs& gh, const ConvAttrs& g, std::vector<Step>* steps) {
  const std::string why = build(call, gh, g, steps);
  if (why.empty()) return why;
  steps->clear();
  const GatherFn fn = build == conv2d_geom ? GatherFn::kConvDirect
                      : build == conv2d_backward_data_geom ? GatherFn::kConvDirectGradData : GatherFn::kConvDirectGradFilter;
  const std::string direct = conv_direct(call, fn, gh, g, steps);
  return direct.empty() ? direct : why + "; and directly: " + direct;
}

std::string conv_2d(const TileCall& call, Attr& a, ConvBuilder build, std::vector<Step>* steps) {
  ConvAttrs g;
  if (!conv_attrs(a, &g)) return "unreadable convolution attributes";
  return conv_any(call, build, g, g, steps);
}

// conv1d and its gradients as conv2d's over one row: a height of 1 inserted into every 3-D input,
// and two variables of extent 1 (the output row and the kernel row, at positions 2 and 5 of conv2d's).
std::string conv_1d(const TileCall& call, Attr& a, ConvBuilder build, std::vector<Step>* steps) {
  ConvAttrs g;
  if (!conv_attrs(a, &g)) return "unreadable convolution attributes";
  if (call.vars.size() != 5 || call.output_vars != std::vector<int>{0, 1, 2}) return "not conv1d's layout";
  TileCall c = call;
  for (int at : {2, 5}) {
    c.vars.insert(c.vars.begin() + at, Span{0, 0});
    c.extents.insert(c.extents.begin() + at, 1);
  }
  c.output_vars = {0, 1, 2, 3};
  c.output_shape.insert(c.output_shape.begin() + 2, 1);
  for (TileIn& in : c.inputs) {
    if (in.shape.size() != 3) return "not conv1d's layout";
    in.shape.insert(in.shape.begin() + 2, 1);
    in.region.insert(in.region.begin() + 2, Span{0, 0});
  }
  return conv_any(c, build, ConvAttrs{1, 0, 1}, g, steps);
}

// ---- reductions ------------------------------------------------------------------------------

// lambda out..: fold(r..: x[dim_var..]) scaled: input dimension d read by variable dim_var[d].
std::string reduce(const TileCall& call, const std::vector<int>& dim_var, ReduceFn fn, double scale,
                   std::vector<Step>* steps, PairTerm term) {
  const size_t inputs = term == PairTerm::kNone ? 1 : 2;
  if (call.inputs.size() != inputs || dim_var.size() != call.inputs[0].shape.size()) return "not a reduction's layout";
  long long base = 0, base2 = 0;
  std::vector<long long> st, st2(call.vars.size(), 0);
  if (!view(call, 0, dim_var, &base, &st)) return "the input's region does not hold the block";
  if (inputs == 2 && (call.inputs[1].shape != call.inputs[0].shape || !view(call, 1, dim_var, &base2, &st2)))
    return "the second input's region does not hold the block";
  Step s;
  s.kind = Step::kReduce;
  s.reduce_input2 = inputs == 2 ? 1 : 0;
  ReduceArgs& r = s.reduce;
  r.fn = static_cast<int>(fn), r.scale = scale, r.base = base;
  r.term = static_cast<int>(term), r.base2 = base2;
  std::vector<bool> is_out(call.vars.size(), false);
  for (int v : call.output_vars) is_out[v] = true;
  if (call.output_vars.size() > static_cast<size_t>(kMaxDims) || call.vars.size() - call.output_vars.size() > static_cast<size_t>(kMaxDims))
    return "more than " + std::to_string(kMaxDims) + " kept or folded dimensions";
  for (int v : call.output_vars) {
    r.keep_stride2[r.keep] = st2[v];
    r.keep_size[r.keep] = call.vars[v].size(), r.keep_stride[r.keep++] = st[v];
    r.outputs *= call.vars[v].size();
  }
  for (size_t v = 0; v < call.vars.size(); ++v) {
    if (is_out[v]) continue;
    r.fold_stride2[r.fold] = st2[v];
    r.fold_size[r.fold] = call.vars[v].size(), r.fold_stride[r.fold++] = st[v];
    r.folded *= call.vars[v].size();
  }
  // Few outputs over a long range (a loss, a bias gradient over a large batch): partials over chunks
  // of kChunk, so that no thread folds more than that many alone, then each output folds its own.
  constexpr long long kChunk = 2048;
  if (r.outputs < 1024 && r.folded > 4 * kChunk) r.split = (r.folded + kChunk - 1) / kChunk;
  steps->push_back(s);
  return "";
}

bool along_axis(const TileCall& call, Attr& a, std::vector<int>* dim_var, long long* extent) {
  if (call.inputs.size() != 1) return false;
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  const long long axis = a.integer("axis", -1);
  if (!a.ok || axis < -nd || axis >= nd || static_cast<int>(call.vars.size()) != nd) return false;
  const int ax = static_cast<int>(axis < 0 ? axis + nd : axis);
  for (int d = 0; d < nd; ++d) dim_var->push_back(d < ax ? d : (d == ax ? nd - 1 : d - 1));
  *extent = call.inputs[0].shape[ax];
  return true;
}

std::string axis_reduce(const TileCall& call, Attr& a, ReduceFn fn, bool mean, std::vector<Step>* s) {
  std::vector<int> dim_var;
  long long n = 0;
  if (!along_axis(call, a, &dim_var, &n)) return "not a reduction along an axis";
  return reduce(call, dim_var, fn, mean ? 1.0 / static_cast<double>(n) : 1.0, s);
}

std::string sum_axes(const TileCall& call, Attr& a, std::vector<Step>* s) {
  if (call.inputs.size() != 1) return "not sum_axes' layout";
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  std::vector<bool> reduced(nd, false);
  for (long long ax : a.ints("axes")) {
    if (ax < -nd || ax >= nd) return "an axis out of range";
    reduced[ax < 0 ? ax + nd : ax] = true;
  }
  if (!a.ok || static_cast<int>(call.vars.size()) != nd) return "not sum_axes' layout";
  const int kept = static_cast<int>(std::count(reduced.begin(), reduced.end(), false));
  if (kept == nd) return "no axis summed";
  std::vector<int> dim_var(nd);
  for (int d = 0, ki = 0, ri = kept; d < nd; ++d) dim_var[d] = reduced[d] ? ri++ : ki++;
  return reduce(call, dim_var, ReduceFn::kSum, 1.0, s);
}

std::string sum_to(const TileCall& call, Attr& a, std::vector<Step>* s) {
  if (call.inputs.size() != 1) return "not sum_to's layout";
  const int rank = static_cast<int>(call.output_vars.size());
  const int lead = static_cast<int>(call.inputs[0].shape.size()) - rank;
  std::vector<bool> bcast(rank, false);
  for (long long ax : a.ints("bcast")) {
    if (ax < 0 || ax >= rank) return "a broadcast axis out of range";
    bcast[ax] = true;
  }
  if (!a.ok || lead < 0) return "not sum_to's layout";
  std::vector<int> dim_var;
  int next = rank;
  for (int d = 0; d < lead; ++d) dim_var.push_back(next++);
  for (int d = 0; d < rank; ++d) dim_var.push_back(bcast[d] ? next++ : d);
  return reduce(call, dim_var, ReduceFn::kSum, 1.0, s);
}

std::string sum_leading(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const long long lead = a.integer("lead", 1);
  if (!a.ok || call.inputs.size() != 1) return "not sum_leading's layout";
  const int nd = static_cast<int>(call.inputs[0].shape.size()), rank = static_cast<int>(call.output_vars.size());
  if (lead < 0 || lead != nd - rank) return "not sum_leading's layout";
  std::vector<int> dim_var;
  for (int d = 0; d < nd; ++d) dim_var.push_back(d < lead ? rank + d : d - static_cast<int>(lead));
  return reduce(call, dim_var, ReduceFn::kSum, 1.0, s);
}

// ---- losses: paired reductions ---------------------------------------------------------------

// Sum(r..: term(a[r..], b[r..])) * scale into one element: `lead` leading output variables of extent
// 1, then the data's variables (sum_of_pairs' layout).
std::string pair_loss(const TileCall& call, PairTerm term, double scale, int lead, std::vector<Step>* s) {
  if (call.inputs.size() != 2 || !outputs_first(call, lead)) return "not a paired loss's layout";
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  if (nd < 1 || static_cast<int>(call.vars.size()) != lead + nd) return "not a paired loss's layout";
  for (int v = 0; v < lead; ++v)
    if (call.extents[v] != 1) return "not a paired loss's layout";
  std::vector<int> dim_var;
  for (int d = 0; d < nd; ++d) dim_var.push_back(lead + d);
  return reduce(call, dim_var, ReduceFn::kSum, scale, s, term);
}

double inverse_numel(const TileCall& call) {
  double n = 1;
  if (!call.inputs.empty())
    for (long long e : call.inputs[0].shape) n *= static_cast<double>(e);
  return 1.0 / n;
}

// ---- row ops ---------------------------------------------------------------------------------



std::string row_read(const TileCall& call, int input, RowIn kind, const RowShape& g, RowArgs* a) {
  const TileIn& in = call.inputs[input];
  const Span cols = call.vars[g.col];
  const int lead = static_cast<int>(g.lead.size());
  if (kind == RowIn::kScalar) {
    if (!in.shape.empty()) return "a scalar input of rank other than 0";
    a->base[input] = 0;
    return "";
  }
  const std::vector<long long> rs = region_strides(in);
  if (kind == RowIn::kVector || kind == RowIn::kWholeVector) {
    const Span need = kind == RowIn::kVector ? cols : Span{0, g.n - 1};
    if (in.shape.size() != 1 || in.shape[0] != g.n || need.lo < in.region[0].lo || need.hi > in.region[0].hi)
      return "a vector input that is not the row's length or does not hold the columns read";
    a->base[input] = -in.region[0].lo;
    return "";
  }
  if (static_cast<int>(in.shape.size()) != lead + 1 || in.shape[lead] != g.n) return "an input that is not rows of the op's length";
  const Span need = kind == RowIn::kRows ? Span{0, g.n - 1} : cols;
  if (need.lo < in.region[lead].lo || need.hi > in.region[lead].hi) return "an input's region does not hold the rows read";
  long long base = -in.region[lead].lo;
  for (int d = 0; d < lead; ++d) {
    const Span v = call.vars[g.lead[d]];
    if (v.lo < in.region[d].lo || v.hi > in.region[d].hi) return "an input's region does not hold the block's rows";
    base += (v.lo - in.region[d].lo) * rs[d];
    a->stride[input][d] = rs[d];
  }
  a->base[input] = base;
  return "";
}


std::string add_row(const TileCall& call, RowFn fn, const RowShape& g, const std::vector<RowIn>& ins, double eps,
                    double scale, RowThreads threads, std::vector<Step>* steps) {
  if (call.inputs.size() != ins.size() || ins.size() > static_cast<size_t>(kMaxReads)) return "not the row op's inputs";
  if (g.lead.size() > static_cast<size_t>(kMaxDims)) return "more than " + std::to_string(kMaxDims) + " leading dimensions";
  Step s;
  s.kind = Step::kRow;
  RowArgs& a = s.row;
  a.fn = static_cast<int>(fn), a.lead = static_cast<int>(g.lead.size()), a.inputs = static_cast<int>(ins.size());
  a.eps = eps, a.scale = scale, a.n = g.n;
  a.col_lo = call.vars[g.col].lo, a.cols = call.vars[g.col].size();
  for (size_t d = 0; d < g.lead.size(); ++d) a.lead_size[d] = call.vars[g.lead[d]].size(), a.rows *= a.lead_size[d];
  for (size_t j = 0; j < ins.size(); ++j) {
    s.row_inputs[j] = static_cast<int>(j);
    const std::string why = row_read(call, static_cast<int>(j), ins[j], g, &a);
    if (!why.empty()) return why;
  }
  a.threads = threads == RowThreads::kPerRow ? a.rows : threads == RowThreads::kOne ? 1 : a.cols;
  steps->push_back(s);
  return "";
}

bool nested_full(const TileCall& call, int from) {
  for (int v = from; v < static_cast<int>(call.vars.size()); ++v)
    if (!full(call, v)) return false;
  return true;
}

// softmax, log-softmax, layer/RMS norm and their input gradients: outputs i0..i{r-1} first (the
// last the column), the nested reductions over the row whole.
std::string row_op(const TileCall& call, Attr& a, RowFn fn, const std::vector<RowIn>& ins, double eps_default,
                   std::vector<Step>* s) {
  const double eps = a.num("eps", eps_default);
  const int r = static_cast<int>(call.output_vars.size());
  if (!a.ok || r < 1 || !outputs_first(call, r) || !nested_full(call, r)) return "not a row op's layout";
  RowShape g;
  for (int d = 0; d + 1 < r; ++d) g.lead.push_back(d);
  g.col = r - 1, g.n = call.extents[r - 1];
  return add_row(call, fn, g, ins, eps, 1.0, RowThreads::kPerRow, s);
}

std::string cross_entropy(const TileCall& call, bool backward, std::vector<Step>* s) {
  const size_t n_in = backward ? 3 : 2;
  if (call.inputs.size() != n_in || call.inputs[0].shape.size() != 2 || call.inputs[1].shape != call.inputs[0].shape ||
      (backward ? !outputs_first(call, 2) : !call.output_vars.empty()) || !nested_full(call, 2) || call.vars.size() < 2)
    return "not cross_entropy's layout";
  RowShape g{{0}, 1, call.inputs[0].shape[1]};
  const double inv_batch = 1.0 / static_cast<double>(call.inputs[0].shape[0]);
  if (backward)
    return add_row(call, RowFn::kCrossEntropyBackward, g, {RowIn::kRows, RowIn::kRows, RowIn::kScalar}, 0, inv_batch,
                   RowThreads::kPerRow, s);
  std::string why = add_row(call, RowFn::kCrossEntropy, g, {RowIn::kRows, RowIn::kBlockCols}, 0, inv_batch, RowThreads::kOne, s);
  if (why.empty()) s->back().row.staged = 1, s->back().row.stage_width = 1;  // a row's term per thread, then their sum
  return why;
}

// (dy, x) -> dgamma[j]: j, the leading row variables (a partial sum when split), then the row
// statistics' variables (whole).
std::string norm_grad_gamma(const TileCall& call, Attr& a, bool rms, std::vector<Step>* s) {
  const double eps = a.num("eps", rms ? 1e-6 : 1e-5);
  if (!a.ok || call.inputs.size() != 2 || !outputs_first(call, 1)) return "not a norm gamma gradient's layout";
  const int lead = static_cast<int>(call.inputs[1].shape.size()) - 1;
  if (lead < 1 || call.inputs[0].shape != call.inputs[1].shape || static_cast<int>(call.vars.size()) < 1 + lead ||
      !nested_full(call, 1 + lead))
    return "not a norm gamma gradient's layout";
  RowShape g;
  for (int d = 0; d < lead; ++d) g.lead.push_back(1 + d);
  g.col = 0, g.n = call.inputs[1].shape[lead];
  std::string why = add_row(call, rms ? RowFn::kRmsNormGradGamma : RowFn::kLayerNormGradGamma, g,
                             {RowIn::kBlockCols, RowIn::kRows}, eps, 1.0, RowThreads::kPerColumn, s);
  // Each row's statistics once (phase 1), not once per column: the column threads then sum rows.
  if (why.empty()) s->back().row.staged = 1, s->back().row.stage_width = 2;
  return why;
}

Builder row(RowFn fn, std::vector<RowIn> ins, double eps_default) {
  return [=](const TileCall& c, Attr& a, std::vector<Step>* s) { return row_op(c, a, fn, ins, eps_default, s); };
}

// ---- LSTM cell maps: (batch, hidden) outputs reading the gates' quarters [i | f | g | o] ---------------

Read shifted(int input, long long col_shift) { return Read{input, {0, 1}, {0, col_shift}}; }

// hidden = the second extent of input `hidden_of`; the gates (input `gates`) 4 hidden wide.
bool lstm_layout(const TileCall& call, size_t inputs, int gates, int hidden_of, long long* hidden) {
  if (!pure_map(call, inputs) || call.vars.size() != 2) return false;
  const TileIn &g = call.inputs[gates], &h = call.inputs[hidden_of];
  if (g.shape.size() != 2 || h.shape.size() != 2) return false;
  *hidden = h.shape[1];
  return g.shape[1] == 4 * *hidden;
}

std::string lstm_map(const TileCall& call, const char* kernel, std::vector<Step>* s) {
  long long n = 0;
  const std::string k = kernel;
  if (k == "lstm_cell" && lstm_layout(call, 2, 0, 1, &n))
    return add_map(call, MapFn::kLstmCell, {}, {shifted(0, n), aligned(call, 1), shifted(0, 0), shifted(0, 2 * n)}, s);
  if (k == "lstm_hidden" && lstm_layout(call, 2, 0, 1, &n))
    return add_map(call, MapFn::kLstmHidden, {}, {shifted(0, 3 * n), aligned(call, 1)}, s);
  if (k == "lstm_cell_grad_c" && lstm_layout(call, 2, 1, 0, &n))
    return add_map(call, MapFn::kMulSigmoid, {}, {aligned(call, 0), shifted(1, n)}, s);
  if (k == "lstm_hidden_grad_c" && lstm_layout(call, 3, 1, 2, &n))
    return add_map(call, MapFn::kLstmGradSigTanh, {}, {aligned(call, 0), aligned(call, 2), shifted(1, 3 * n)}, s);
  return "not the LSTM cell's layout";
}

// The gate gradients (batch, 4 hidden): one box map per quarter the block meets, zeros where the
// formula has none (lstm_cell_grad_gates: [dy tanh(g) si' | dy c sf' | dy si (1 - tanh(g)^2) | 0];
// lstm_hidden_grad_gates: [0 | 0 | 0 | dy tanh(c') so']).
std::string lstm_gate_grad(const TileCall& call, bool hidden, std::vector<Step>* s) {
  if (call.inputs.size() != 3 || call.vars.size() != 2 || !outputs_are(call, {0, 1})) return "not the gate gradients' layout";
  const TileIn& g = call.inputs[1];
  if (g.shape.size() != 2 || call.inputs[0].shape.size() != 2 || g.shape[1] % 4 != 0) return "not the gate gradients' layout";
  const long long n = g.shape[1] / 4;
  if (call.inputs[0].shape[1] != n || call.inputs[2].shape.size() != 2 || call.inputs[2].shape[1] != n)
    return "not the gate gradients' layout";
  const Span b = call.vars[0], j = call.vars[1];
  for (long long q = 0; q < 4; ++q) {
    const Span cols{std::max<int64_t>(j.lo, q * n), std::min<int64_t>(j.hi, q * n + n - 1)};
    if (cols.lo > cols.hi) continue;
    const std::vector<Span> box{b, cols};
    std::string why;
    if (hidden ? q != 3 : q == 3) why = add_map_box(call, box, MapFn::kFill, {0.0f}, {}, s);
    else if (hidden) why = add_map_box(call, box, MapFn::kLstmGradTanhSig, {}, {shifted(0, -3 * n), shifted(1, 0), shifted(2, -3 * n)}, s);
    else if (q == 0) why = add_map_box(call, box, MapFn::kLstmGradTanhSig, {}, {shifted(0, 0), shifted(1, 0), shifted(1, 2 * n)}, s);
    else if (q == 1) why = add_map_box(call, box, MapFn::kLstmGradMulSig, {}, {shifted(0, -n), shifted(1, 0), shifted(2, -n)}, s);
    else why = add_map_box(call, box, MapFn::kLstmGradSigTanh, {}, {shifted(0, -2 * n), shifted(1, 0), shifted(1, -2 * n)}, s);
    if (!why.empty()) return why;
  }
  return "";
}

// ---- layout ops as copies (maps of kCopy over boxes) ------------------------------------------

bool in_order(const TileCall& call, size_t inputs) { return pure_map(call, inputs); }

bool axis_attr(Attr& a, int rank, int* axis, bool negative) {
  const long long x = a.integer("axis", 0);
  if (!a.ok || x < (negative ? -rank : 0) || x >= rank) return false;
  *axis = static_cast<int>(x < 0 ? x + rank : x);
  return true;
}

// The read of an input that lacks output axis `ax` (stack, unselect): the other positions in order.
Read without_axis(const TileCall& call, int input, int ax) {
  Read r{input, {}, {}};
  for (int d = 0; d < static_cast<int>(call.output_vars.size()); ++d)
    if (d != ax) r.at.push_back(d);
  return r;
}

// The box of the block at index t of output position `ax`.
std::vector<Span> slab(const TileCall& call, int ax, long long t) {
  std::vector<Span> box = output_box(call);
  box[ax] = {t, t};
  return box;
}

std::string select_op(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const long long axis = a.integer("axis", 0), index = a.integer("index", 0);
  if (!a.ok || !pure_map(call, 1)) return "not select's layout";
  const int nd = static_cast<int>(call.inputs[0].shape.size());
  const int ax = static_cast<int>(axis < 0 ? axis + nd : axis);
  if (ax < 0 || ax >= nd || nd != static_cast<int>(call.output_vars.size()) + 1) return "not select's layout";
  Read r{0, {}, std::vector<long long>(nd, 0)};
  for (int d = 0; d < nd; ++d) r.at.push_back(d == ax ? kNone : (d < ax ? d : d - 1));
  r.shift[ax] = index;
  return add_map(call, MapFn::kCopy, {}, {r}, s);
}

std::string stack_op(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const size_t n = call.inputs.size();
  const int rank = static_cast<int>(call.output_vars.size());
  int ax = 0;
  if (n == 0 || !in_order(call, n) || !axis_attr(a, rank, &ax) || call.output_shape[ax] != static_cast<long long>(n))
    return "not stack's layout";
  const Span t = call.vars[call.output_vars[ax]];
  for (long long i = t.lo; i <= t.hi; ++i) {
    const std::string why = add_map_box(call, slab(call, ax, i), MapFn::kCopy, {}, {without_axis(call, static_cast<int>(i), ax)}, s);
    if (!why.empty()) return why;
  }
  return "";
}

std::string unselect_op(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const int rank = static_cast<int>(call.output_vars.size());
  const long long index = a.integer("index", 0);
  int ax = 0;
  if (!in_order(call, 1) || !axis_attr(a, rank, &ax)) return "not unselect's layout";
  std::string why = zero_fill(call, s);
  const Span t = call.vars[call.output_vars[ax]];
  if (why.empty() && t.lo <= index && index <= t.hi)
    why = add_map_box(call, slab(call, ax, index), MapFn::kCopy, {}, {without_axis(call, 0, ax)}, s);
  return why;
}

std::string slice_op(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s) {
  const int rank = static_cast<int>(call.output_vars.size());
  const long long start = a.integer("start", 0), step = a.integer("step", 1);
  int ax = 0;
  if (!in_order(call, 1) || !axis_attr(a, rank, &ax, !grad) || start < 0 || step < 1 ||
      static_cast<int>(call.inputs[0].shape.size()) != rank)
    return "not slice_axis' layout";
  if (step != 1) return grad ? slice_grad(call, ax, start, step, s) : strided_read(call, ax, start, step, s);
  Read r = aligned(call, 0);
  r.shift.assign(rank, 0);
  if (!grad) {
    r.shift[ax] = start;
    return add_map(call, MapFn::kCopy, {}, {r}, s);
  }
  // dy's position k lands at start + k, zeros elsewhere.
  r.shift[ax] = -start;
  std::string why = zero_fill(call, s);
  std::vector<Span> box = output_box(call);
  box[ax] = Span{std::max<int64_t>(box[ax].lo, start), std::min<int64_t>(box[ax].hi, start + call.inputs[0].shape[ax] - 1)};
  if (why.empty() && box[ax].lo <= box[ax].hi) why = add_map_box(call, box, MapFn::kCopy, {}, {r}, s);
  return why;
}


bool head_attrs(Attr& a, HeadAttrs* h) {
  h->heads = a.integer("heads", 1), h->dh = a.integer("dim_head", 1);
  h->piece = a.integer("piece", 0), h->pieces = a.integer("pieces", 1);
  return a.ok && h->heads > 0 && h->dh > 0 && h->pieces > 0 && h->piece >= 0 && h->piece < h->pieces;
}

bool rank3(const TileCall& call) {
  return call.inputs.size() == 1 && call.vars.size() == 3 && outputs_are(call, {0, 1, 2}) && call.inputs[0].shape.size() == 3;
}

// out[n, s, d] = x[n / heads, s, off + (n % heads) dh + d]: one copy per n of the block.
std::string split_heads(const TileCall& call, Attr& a, std::vector<Step>* s) {
  HeadAttrs h;
  if (!head_attrs(a, &h) || !rank3(call)) return "not split_heads' layout";
  const Span n = call.vars[0], d = call.vars[2];
  const long long off = h.piece * h.heads * h.dh;
  if (d.hi >= h.dh || call.inputs[0].shape[2] != h.pieces * h.heads * h.dh) return "not split_heads' layout";
  if (n.size() > kMaxGemmCalls) return "too many heads in one block";
  for (long long nn = n.lo; nn <= n.hi; ++nn) {
    const Read r{0, {kNone, 1, 2}, {nn / h.heads, 0, off + (nn % h.heads) * h.dh}};
    const std::string why = add_map_box(call, {{nn, nn}, call.vars[1], d}, MapFn::kCopy, {}, {r}, s);
    if (!why.empty()) return why;
  }
  return "";
}

// out[b, s, c] = x[b heads + (c - off) / dh, s, (c - off) % dh] in this piece's columns, else 0:
// one copy per (b, head) the block meets.
std::string merge_heads(const TileCall& call, Attr& a, std::vector<Step>* s) {
  HeadAttrs h;
  if (!head_attrs(a, &h) || !rank3(call)) return "not merge_heads' layout";
  const Span b = call.vars[0], c = call.vars[2];
  const long long e = h.heads * h.dh, off = h.piece * e;
  if (call.inputs[0].shape[2] != h.dh || call.inputs[0].shape[0] % h.heads != 0) return "not merge_heads' layout";
  if (c.lo < off || c.hi >= off + e) {
    const std::string why = zero_fill(call, s);
    if (!why.empty()) return why;
  }
  if (b.size() * h.heads > kMaxGemmCalls) return "too many heads in one block";
  for (long long bb = b.lo; bb <= b.hi; ++bb)
    for (long long hd = 0; hd < h.heads; ++hd) {
      const long long c0 = off + hd * h.dh;
      const Span cols{std::max<int64_t>(c.lo, c0), std::min<int64_t>(c.hi, c0 + h.dh - 1)};
      if (cols.lo > cols.hi) continue;
      const Read r{0, {kNone, 1, 2}, {bb * h.heads + hd, 0, -c0}};
      const std::string why = add_map_box(call, {{bb, bb}, call.vars[1], cols}, MapFn::kCopy, {}, {r}, s);
      if (!why.empty()) return why;
    }
  return "";
}

// ---- batch norm with batch statistics: a channel step ------------------------------------------

// Input `input` (NCHW) as x or dy of a channel step: base at (0, 0, 0, 0) and its region's strides,
// holding `need` (per dimension).
bool nchw(const TileCall& call, int input, const std::vector<Span>& need, long long* base, long long stride[4]) {
  const TileIn& in = call.inputs[input];
  if (in.shape.size() != 4) return false;
  const std::vector<long long> rs = region_strides(in);
  *base = 0;
  for (int d = 0; d < 4; ++d) {
    if (need[d].lo < in.region[d].lo || need[d].hi > in.region[d].hi) return false;
    *base -= in.region[d].lo * rs[d];
    stride[d] = rs[d];
  }
  return true;
}

bool channel_vector(const TileCall& call, int input, Span c, long long* base) {
  const TileIn& v = call.inputs[input];
  if (v.shape.size() != 1 || c.lo < v.region[0].lo || c.hi > v.region[0].hi) return false;
  *base = -v.region[0].lo;
  return true;
}

std::string batch_norm(const TileCall& call, Attr& a, ChannelFn fn, std::vector<Step>* s) {
  const double eps = a.num("eps", 1e-5);
  const bool gamma_grad = fn == ChannelFn::kBatchNormGradGamma;
  const size_t inputs = gamma_grad ? 2 : 3, vars = fn == ChannelFn::kBatchNormGradInput ? 19 : 13;
  if (!a.ok || call.inputs.size() != inputs || call.vars.size() != vars || !outputs_first(call, gamma_grad ? 1 : 4) ||
      !nested_full(call, 4))
    return "not batch norm's layout";
  Step st;
  st.kind = Step::kChannel;
  ChannelArgs& c = st.channel;
  c.fn = static_cast<int>(fn), c.eps = eps;
  const int xi = fn == ChannelFn::kBatchNormTrain ? 0 : 1;
  const TileIn& x = call.inputs[xi];
  if (x.shape.size() != 4) return "not batch norm's layout";
  c.N = x.shape[0], c.H = x.shape[2], c.W = x.shape[3];
  const Span ch = call.vars[gamma_grad ? 0 : 1];
  const Span b = call.vars[gamma_grad ? 1 : 0], h = call.vars[2], w = call.vars[3];
  c.c_lo = ch.lo, c.cs = ch.size(), c.b_lo = b.lo, c.bs = b.size(), c.h_lo = h.lo, c.hs = h.size(), c.w_lo = w.lo,
  c.ws = w.size();
  c.chunks = channel_chunks(c.N * c.H * c.W);
  const std::vector<Span> whole{{0, c.N - 1}, ch, {0, c.H - 1}, {0, c.W - 1}};
  c.x_in = xi;
  if (!nchw(call, xi, whole, &c.x_base, c.x_stride)) return "x's region does not hold the block's channels";
  if (fn != ChannelFn::kBatchNormTrain) {
    if (call.inputs[0].shape != x.shape) return "not batch norm's layout";
    c.dy_in = 0;
    const std::vector<Span> need = gamma_grad ? std::vector<Span>{b, ch, h, w} : whole;
    if (!nchw(call, 0, need, &c.dy_base, c.dy_stride)) return "dy's region does not hold the block";
  }
  if (!gamma_grad) {
    c.gamma_in = fn == ChannelFn::kBatchNormTrain ? 1 : 2;
    if (!channel_vector(call, c.gamma_in, ch, &c.gamma_base)) return "gamma does not hold the block's channels";
    if (fn == ChannelFn::kBatchNormTrain) {
      c.beta_in = 2;
      if (!channel_vector(call, 2, ch, &c.beta_base)) return "beta does not hold the block's channels";
    }
  }
  for (size_t j = 0; j < inputs; ++j) st.row_inputs[j] = static_cast<int>(j);
  s->push_back(st);
  return "";
}

// ---- gathers: max pooling, reshape -------------------------------------------------------------

// Input `input` with base at the all-zero index, its region's strides, holding `need`.
bool gather_input(const TileCall& call, int input, const std::vector<Span>& need, GatherArgs* g, int slot) {
  const TileIn& in = call.inputs[input];
  if (in.shape.size() != need.size() || need.size() > static_cast<size_t>(kMaxDims)) return false;
  const std::vector<long long> rs = region_strides(in);
  g->base[slot] = 0;
  for (size_t d = 0; d < need.size(); ++d) {
    if (need[d].lo <= need[d].hi && (need[d].lo < in.region[d].lo || need[d].hi > in.region[d].hi)) return false;
    g->base[slot] -= in.region[d].lo * rs[d];
    g->stride[slot][d] = rs[d];
  }
  return true;
}

// The rows [0, n) read by positions o with offsets k: s o + k - p, clipped.
Span window_reads(Span o, long long klo, long long khi, long long s, long long p, long long n) {
  return Span{std::max<int64_t>(0, s * o.lo + klo - p), std::min<int64_t>(n - 1, s * o.hi + khi - p)};
}

void block_of(const TileCall& call, int count, GatherArgs* g) {
  g->dims = count;
  g->elements = 1;
  for (int d = 0; d < count; ++d) g->lo[d] = call.vars[d].lo, g->size[d] = call.vars[d].size(), g->elements *= g->size[d];
}

std::string max_pool2d(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s) {
  const long long k = a.integer("kernel", 2), st = a.integer("stride", 2), p = a.integer("padding", 0);
  if (!a.ok || k < 1 || st < 1 || p < 0 || call.inputs.size() != (grad ? 3u : 1u) || !outputs_first(call, 4) ||
      call.vars.size() != (grad ? 10u : 6u))
    return "not max_pool2d's layout";
  for (size_t v = 4; v < call.vars.size(); ++v)
    if (call.extents[v] != k) return "not max_pool2d's layout";
  if (grad && !nested_full(call, 6)) return "a split nested window";
  const TileIn& x = call.inputs[0];
  if (x.shape.size() != 4) return "not max_pool2d's layout";
  Step step;
  step.kind = Step::kGather;
  GatherArgs& g = step.gather;
  g.fn = static_cast<int>(grad ? GatherFn::kMaxPool2dGrad : GatherFn::kMaxPool2d);
  g.k = k, g.s = st, g.p = p, g.H = x.shape[2], g.W = x.shape[3];
  g.i_lo = call.vars[4].lo, g.i_hi = call.vars[4].hi, g.j_lo = call.vars[5].lo, g.j_hi = call.vars[5].hi;
  block_of(call, 4, &g);
  const Span b = call.vars[0], c = call.vars[1];
  if (!grad) {
    if (!gather_input(call, 0, {b, c, window_reads(call.vars[2], g.i_lo, g.i_hi, st, p, g.H),
                                window_reads(call.vars[3], g.j_lo, g.j_hi, st, p, g.W)}, &g, 0))
      return "x's region does not hold the windows";
  } else {
    const TileIn& y = call.inputs[1];
    if (y.shape.size() != 4 || call.inputs[2].shape != y.shape) return "not max_pool2d_grad's layout";
    g.OH = y.shape[2], g.OW = y.shape[3];
    const Span h = call.vars[2], w = call.vars[3];
    if (h.hi >= g.H || w.hi >= g.W) return "not max_pool2d_grad's layout";
    // The windows reaching the block through offsets in [i_lo, i_hi] (x [j_lo, j_hi]).
    const Span oh{std::max<int64_t>(0, tw_floor_div(h.lo + p - g.i_hi + st - 1, st)),
                  std::min<int64_t>(g.OH - 1, tw_floor_div(h.hi + p - g.i_lo, st))};
    const Span ow{std::max<int64_t>(0, tw_floor_div(w.lo + p - g.j_hi + st - 1, st)),
                  std::min<int64_t>(g.OW - 1, tw_floor_div(w.hi + p - g.j_lo, st))};
    const bool any = oh.lo <= oh.hi && ow.lo <= ow.hi;
    const Span none{0, -1};
    if (!gather_input(call, 0, {b, c, any ? window_reads(oh, 0, k - 1, st, p, g.H) : none,
                                any ? window_reads(ow, 0, k - 1, st, p, g.W) : none}, &g, 0) ||
        !gather_input(call, 1, {b, c, any ? oh : none, any ? ow : none}, &g, 1) ||
        !gather_input(call, 2, {b, c, any ? oh : none, any ? ow : none}, &g, 2))
      return "an input's region does not hold the windows";
  }
  for (size_t j = 0; j < call.inputs.size(); ++j) step.row_inputs[j] = static_cast<int>(j);
  s->push_back(step);
  return "";
}

// Window sums over (kh, kw) blocks without padding, times scale (adaptive_avg_pool2d, the
// nearest-upsampling gradients), or adaptive_avg_pool2d's gradient.
std::string window_sum(const TileCall& call, long long kh, long long kw, double scale, bool grad, std::vector<Step>* s) {
  if (kh < 1 || kw < 1 || call.inputs.size() != 1 || !outputs_first(call, 4) || call.inputs[0].shape.size() != 4)
    return "not a window sum's layout";
  if (!grad && (call.vars.size() != 6 || call.extents[4] != kh || call.extents[5] != kw)) return "not a window sum's layout";
  const TileIn& x = call.inputs[0];
  Step step;
  step.kind = Step::kGather;
  GatherArgs& g = step.gather;
  g.fn = static_cast<int>(grad ? GatherFn::kWindowSumGrad : GatherFn::kWindowSum);
  g.k = kh, g.s = kw, g.scale = scale;
  block_of(call, 4, &g);
  const Span b = call.vars[0], c = call.vars[1], y = call.vars[2], z = call.vars[3];
  if (grad) {
    g.OH = x.shape[2], g.OW = x.shape[3];
    if (!gather_input(call, 0, {b, c, {y.lo / kh, y.hi / kh}, {z.lo / kw, z.hi / kw}}, &g, 0))
      return "dy's region does not hold the block's windows";
  } else {
    g.H = x.shape[2], g.W = x.shape[3];
    g.i_lo = call.vars[4].lo, g.i_hi = call.vars[4].hi, g.j_lo = call.vars[5].lo, g.j_hi = call.vars[5].hi;
    if (!gather_input(call, 0, {b, c, window_reads(y, g.i_lo, g.i_hi, kh, 0, g.H), window_reads(z, g.j_lo, g.j_hi, kw, 0, g.W)},
                      &g, 0))
      return "x's region does not hold the windows";
  }
  step.row_inputs[0] = 0;
  s->push_back(step);
  return "";
}

Builder adaptive_avg(bool grad) {
  return [grad](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
    const long long kh = a.integer("kernel_h", 1), kw = a.integer("kernel_w", 1);
    if (!a.ok || kh < 1 || kw < 1) return "unreadable attributes";
    return window_sum(c, kh, kw, 1.0 / static_cast<double>(kh * kw), grad, s);
  };
}

// Row-major reshape: output flat position f reads x's flat position f.
std::string reshape_op(const TileCall& call, std::vector<Step>* s) {
  const int r = static_cast<int>(call.output_vars.size());
  if (!pure_map(call, 1) || r > kMaxDims) return "not reshape's layout";
  const TileIn& x = call.inputs[0];
  long long count = 1, nout = 1;
  for (long long e : x.shape) count *= e;
  for (long long e : call.output_shape) nout *= e;
  if (count != nout || x.shape.size() > static_cast<size_t>(kMaxDims) || x.region.size() != x.shape.size())
    return "not reshape's layout";
  Step step;
  step.kind = Step::kGather;
  GatherArgs& g = step.gather;
  g.fn = static_cast<int>(GatherFn::kReshape);
  block_of(call, r, &g);
  for (int d = 0; d < r; ++d) g.out_shape[d] = call.output_shape[d];
  g.x_dims = static_cast<int>(x.shape.size());
  for (int d = 0; d < g.x_dims; ++d) g.x_shape[d] = x.shape[d];
  // The flat range the block reads must lie in x's region: every flat position of the block.
  std::vector<Span> none(x.shape.size(), Span{0, -1});
  if (!gather_input(call, 0, none, &g, 0)) return "not reshape's layout";
  for (long long e = 0; e < g.elements; ++e) {  // host check of the region, once per block
    long long rest = e, flat = 0;
    long long idx[kMaxDims];
    for (int d = r - 1; d >= 0; --d) idx[d] = g.lo[d] + rest % g.size[d], rest /= g.size[d];
    for (int d = 0; d < r; ++d) flat = flat * g.out_shape[d] + idx[d];
    for (int d = g.x_dims - 1; d >= 0; --d) {
      const long long at = flat % g.x_shape[d];
      flat /= g.x_shape[d];
      if (at < x.region[d].lo || at > x.region[d].hi) return "x's region does not hold the block's elements";
    }
  }
  step.row_inputs[0] = 0;
  s->push_back(step);
  return "";
}

// ---- embedding: int64 ids --------------------------------------------------------------------

// The ids input (rank = positions, int64) at the positions `pos` (variables) of the block.
std::string ids_read(const TileCall& call, int input, const std::vector<int>& pos, RowArgs* a) {
  const TileIn& ids = call.inputs[input];
  if (ids.dtype != DType::kInt64 && ids.dtype != DType::kFloat32) return "ids of a dtype other than int64 or float32";
  a->ids_float = ids.dtype == DType::kFloat32;
  if (ids.shape.size() != pos.size() || ids.region.size() != pos.size()) return "ids of the wrong rank";
  const std::vector<long long> rs = region_strides(ids);
  a->base[input] = 0;
  for (size_t d = 0; d < pos.size(); ++d) {
    const Span v = call.vars[pos[d]];
    if (v.lo < ids.region[d].lo || v.hi > ids.region[d].hi) return "the ids' region does not hold the block";
    a->base[input] += (v.lo - ids.region[d].lo) * rs[d];
    a->stride[input][d] = rs[d];
  }
  return "";
}

std::string embedding(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s) {
  const int np = static_cast<int>(call.vars.size()) - (grad ? 2 : 1);
  if (call.inputs.size() != 2 || np < 1 || np > kMaxDims) return "not embedding's layout";
  std::vector<int> pos;
  for (int p = 0; p < np; ++p) pos.push_back(grad ? 2 + p : p);
  Step st;
  st.kind = Step::kRow;
  RowArgs& r = st.row;
  r.lead = np, r.inputs = 2;
  const Span d = call.vars[grad ? 1 : np];
  r.col_lo = d.lo, r.cols = d.size();
  for (int p = 0; p < np; ++p) r.lead_size[p] = call.vars[pos[p]].size(), r.rows *= r.lead_size[p];
  st.row_inputs[0] = 0, st.row_inputs[1] = 1;
  if (!grad) {
    if (!pure_map(call, 2)) return "not embedding's layout";
    const TileIn& table = call.inputs[0];
    if (table.shape.size() != 2 || table.dtype != DType::kFloat32) return "not embedding's layout";
    if (table.region[0].lo != 0 || table.region[0].hi != table.shape[0] - 1 || d.lo < table.region[1].lo ||
        d.hi > table.region[1].hi)
      return "the table's region does not hold every row of the block's columns";
    r.fn = static_cast<int>(RowFn::kEmbedding);
    r.table_rows = table.shape[0];
    r.stride[0][0] = region_strides(table)[0];
    r.base[0] = -table.region[1].lo;
    r.threads = r.rows;
    const std::string why = ids_read(call, 1, pos, &r);
    if (!why.empty()) return why;
    s->push_back(st);
    return "";
  }
  const long long padding = a.integer("padding_idx", -1);
  if (!a.ok || !outputs_are(call, {0, 1})) return "not embedding_grad's layout";
  const TileIn& dy = call.inputs[1];
  if (dy.dtype != DType::kFloat32 || static_cast<int>(dy.shape.size()) != np + 1) return "not embedding_grad's layout";
  r.fn = static_cast<int>(RowFn::kEmbeddingGrad);
  r.v_lo = call.vars[0].lo, r.v_hi = call.vars[0].hi, r.padding = padding;
  r.threads = r.cols;
  std::string why = ids_read(call, 0, pos, &r);
  if (!why.empty()) return why;
  RowShape g;
  g.lead = pos, g.col = 1, g.n = dy.shape[np];
  if (!(why = row_read(call, 1, RowIn::kBlockCols, g, &r)).empty()) return why;
  if (!(why = zero_fill(call, s)).empty()) return why;
  s->push_back(st);
  return "";
}

// ---- the table -------------------------------------------------------------------------------

struct Entry {
  const char* library;
  Builder build;
};

Builder unary(MapFn fn) {
  return [fn](const TileCall& c, Attr&, std::vector<Step>* s) { return aligned_map(c, 1, fn, {}, s); };
}
Builder binary(MapFn fn) {
  return [fn](const TileCall& c, Attr&, std::vector<Step>* s) { return aligned_map(c, 2, fn, {}, s); };
}
Builder broadcast(int dim_from_end, MapFn fn, bool from_end) {
  return [=](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
    const int rank = static_cast<int>(c.output_vars.size());
    const int dim = from_end ? rank - dim_from_end : dim_from_end;
    if (!pure_map(c, 2) || dim < 0 || dim >= rank) return "not a broadcast's layout";
    return add_map(c, fn, {}, {aligned(c, 0), Read{1, {dim}}}, s);
  };
}

const std::map<std::string, Entry>& table() {
  static const std::map<std::string, Entry> t = {
      // cuBLAS
      {"matmul", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return mat(c, {0, 2}, {2, 1}, s); }}},
      {"matmul_tn", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return mat(c, {2, 0}, {2, 1}, s); }}},
      {"matmul_nt", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return mat(c, {0, 2}, {1, 2}, s); }}},
      {"matmul_tt", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return mat(c, {2, 0}, {1, 2}, s); }}},
      {"batch_matmul",
       {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return batch_mat(c, {0, 1, 3}, {0, 3, 2}, s); }}},
      {"batch_matmul_nt",
       {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return batch_mat(c, {0, 1, 3}, {0, 2, 3}, s); }}},
      {"batch_matmul_tn",
       {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return batch_mat(c, {0, 3, 1}, {0, 3, 2}, s); }}},
      {"bmatmul", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return batched(c, {0, 2}, {2, 1}, true, s); }}},
      {"bmatmul_nt", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return batched(c, {0, 2}, {1, 2}, true, s); }}},
      {"bmatmul_tn", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return batched(c, {2, 0}, {2, 1}, true, s); }}},
      {"matmul_nd", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return batched(c, {0, 2}, {2, 1}, false, s); }}},
      {"linear", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return linear(c, true, s); }}},
      {"linear_nobias", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return linear(c, false, s); }}},
      {"linear_grad_input", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return linear_grad_input(c, s); }}},
      {"linear_grad_weight", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return linear_grad_weight(c, s); }}},
      {"matvec",
       {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!outputs_are(c, {0}) || c.inputs.size() != 2) return "not matvec's layout";
          return add_gemms(c, {{0, {0, 1}}, {1, {1}}, 0, kNone, 1, {}}, false, s);
        }}},
      {"vecmat",
       {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!outputs_are(c, {0}) || c.inputs.size() != 2) return "not vecmat's layout";
          return add_gemms(c, {{0, {1}}, {1, {1, 0}}, kNone, 0, 1, {}}, false, s);
        }}},
      {"outer",
       {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!outputs_are(c, {0, 1}) || c.inputs.size() != 2) return "not outer's layout";
          return add_gemms(c, {{0, {0}}, {1, {1}}, 0, 1, kNone, {}}, false, s);
        }}},
      {"lstm_gates", {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) { return two_gemms(c, {4, 5}, s); }}},
      {"rnn_tanh_cell",
       {"cublas", [](const TileCall& c, Attr&, std::vector<Step>* s) {
          std::string why = two_gemms(c, {4}, s);
          if (why.empty()) why = add_map(c, MapFn::kTanhOf, {}, {Read{kOutput, {}}}, s);
          return why;
        }}},
      // cuDNN
      {"conv2d", {"cudnn", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return conv_2d(c, a, conv2d_geom, s); }}},
      {"conv2d_backward_data",
       {"cudnn", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return conv_2d(c, a, conv2d_backward_data_geom, s); }}},
      {"conv2d_backward_filter",
       {"cudnn", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return conv_2d(c, a, conv2d_backward_filter_geom, s); }}},
      {"conv1d", {"cudnn", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return conv_1d(c, a, conv2d_geom, s); }}},
      {"conv1d_backward_data",
       {"cudnn", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return conv_1d(c, a, conv2d_backward_data_geom, s); }}},
      {"conv1d_backward_filter",
       {"cudnn", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return conv_1d(c, a, conv2d_backward_filter_geom, s); }}},
      // own kernels: maps
      {"identity", {"kernel", unary(MapFn::kCopy)}},
      {"neg", {"kernel", unary(MapFn::kNeg)}},
      {"relu", {"kernel", unary(MapFn::kRelu)}},
      {"relu_grad", {"kernel", binary(MapFn::kReluGrad)}},
      {"add", {"kernel", binary(MapFn::kAdd)}},
      {"sub", {"kernel", binary(MapFn::kSub)}},
      {"mul", {"kernel", binary(MapFn::kMul)}},
      {"div", {"kernel", binary(MapFn::kDiv)}},
      {"exp", {"kernel", unary(MapFn::kExp)}},
      {"log", {"kernel", unary(MapFn::kLog)}},
      {"sqrt", {"kernel", unary(MapFn::kSqrt)}},
      {"rsqrt", {"kernel", unary(MapFn::kRsqrt)}},
      {"reciprocal", {"kernel", unary(MapFn::kReciprocal)}},
      {"abs", {"kernel", unary(MapFn::kAbs)}},
      {"square", {"kernel", unary(MapFn::kSquare)}},
      {"sigmoid", {"kernel", unary(MapFn::kSigmoid)}},
      {"tanh", {"kernel", unary(MapFn::kTanh)}},
      {"silu", {"kernel", unary(MapFn::kSilu)}},
      {"gelu", {"kernel", unary(MapFn::kGelu)}},
      {"gelu_tanh", {"kernel", unary(MapFn::kGeluTanh)}},
      {"sqrt_grad", {"kernel", binary(MapFn::kSqrtGrad)}},
      {"rsqrt_grad", {"kernel", binary(MapFn::kRsqrtGrad)}},
      {"reciprocal_grad", {"kernel", binary(MapFn::kReciprocalGrad)}},
      {"square_grad", {"kernel", binary(MapFn::kSquareGrad)}},
      {"sigmoid_grad", {"kernel", binary(MapFn::kSigmoidGrad)}},
      {"tanh_grad", {"kernel", binary(MapFn::kTanhGrad)}},
      {"silu_grad", {"kernel", binary(MapFn::kSiluGrad)}},
      {"gelu_grad", {"kernel", binary(MapFn::kGeluGrad)}},
      {"maximum", {"kernel", binary(MapFn::kMaximum)}},
      {"minimum", {"kernel", binary(MapFn::kMinimum)}},
      {"squared_difference", {"kernel", binary(MapFn::kSquaredDifference)}},
      {"bias_add", {"kernel", broadcast(1, MapFn::kAdd, true)}},
      {"bias_add_channel", {"kernel", broadcast(1, MapFn::kAdd, false)}},
      {"add_row", {"kernel", broadcast(1, MapFn::kAdd, false)}},
      {"add_col", {"kernel", broadcast(0, MapFn::kAdd, false)}},
      {"mul_row", {"kernel", broadcast(1, MapFn::kMul, false)}},
      {"mul_col", {"kernel", broadcast(0, MapFn::kMul, false)}},
      {"scale",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) {
          const float al = static_cast<float>(a.num("alpha", 1.0)), be = static_cast<float>(a.num("beta", 0.0));
          return a.ok ? aligned_map(c, 1, MapFn::kScale, {al, be}, s) : std::string("unreadable attributes");
        }}},
      {"axpy",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) {
          const float al = static_cast<float>(a.num("alpha", 1.0));
          return a.ok ? aligned_map(c, 2, MapFn::kAxpy, {al}, s) : std::string("unreadable attributes");
        }}},
      {"sgd",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) {
          const float lr = static_cast<float>(a.num("lr", 0.01)), wd = static_cast<float>(a.num("weight_decay", 0.0));
          return a.ok ? aligned_map(c, 2, MapFn::kSgd, {lr, wd}, s) : std::string("unreadable attributes");
        }}},
      {"momentum_velocity",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) {
          const float m = static_cast<float>(a.num("momentum", 0.9));
          const float keep = static_cast<float>(1.0 - a.num("dampening", 0.0));
          return a.ok ? aligned_map(c, 2, MapFn::kMomentumVelocity, {m, keep}, s) : std::string("unreadable attributes");
        }}},
      {"momentum_weight",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) {
          const float lr = static_cast<float>(a.num("lr", 0.01));
          return a.ok ? aligned_map(c, 2, MapFn::kMomentumWeight, {lr}, s) : std::string("unreadable attributes");
        }}},
      {"adam_m",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) {
          const double b = a.num("beta1", 0.9);
          return a.ok ? aligned_map(c, 2, MapFn::kAdamM, {static_cast<float>(b), static_cast<float>(1.0 - b)}, s)
                      : std::string("unreadable attributes");
        }}},
      {"adam_v",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) {
          const double b = a.num("beta2", 0.999);
          return a.ok ? aligned_map(c, 2, MapFn::kAdamV, {static_cast<float>(b), static_cast<float>(1.0 - b)}, s)
                      : std::string("unreadable attributes");
        }}},
      {"dropout",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) {
          const double p = a.num("p", 0.5);
          if (!a.ok || p >= 1.0) return std::string("unreadable attributes or p >= 1");
          return aligned_map(c, 2, MapFn::kDropout, {static_cast<float>(1.0 / (1.0 - p))}, s);
        }}},
      {"fill_like",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const float v = static_cast<float>(a.num("value", 1.0));
          if (!a.ok || !pure_map(c, 1)) return "not fill_like's layout";
          return add_map(c, MapFn::kFill, {v}, {}, s);
        }}},
      {"add_n",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          // The first up to 4 inputs, then 3 at a time onto the running sum in the output.
          const size_t n = c.inputs.size();
          if (n == 0 || !pure_map(c, n)) return "not add_n's layout";
          static const MapFn sums[] = {MapFn::kCopy, MapFn::kAdd, MapFn::kAdd3, MapFn::kAdd4};
          size_t done = std::min<size_t>(n, 4);
          std::vector<Read> reads;
          for (size_t i = 0; i < done; ++i) reads.push_back(aligned(c, static_cast<int>(i)));
          std::string why = add_map(c, sums[done - 1], {}, reads, s);
          while (why.empty() && done < n) {
            const size_t take = std::min<size_t>(n - done, 3);
            reads = {Read{kOutput, {}}};
            for (size_t i = 0; i < take; ++i) reads.push_back(aligned(c, static_cast<int>(done + i)));
            why = add_map(c, sums[take], {}, reads, s);
            done += take;
          }
          return why;
        }}},
      {"mse_loss_backward",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!pure_map(c, 3) || !c.inputs[2].shape.empty()) return "not mse_loss_backward's layout";
          double numel = 1;
          for (long long e : c.inputs[0].shape) numel *= static_cast<double>(e);
          return add_map(c, MapFn::kMseLossBackward, {static_cast<float>(1.0 / numel)},
                         {aligned(c, 0), aligned(c, 1), Read{2, {}}}, s);
        }}},
      // own kernels: more activations, gradients, selections, optimizers (elementwise_kernels.cpp's formulas)
      {"sign", {"kernel", unary(MapFn::kSign)}},
      {"erf", {"kernel", unary(MapFn::kErf)}},
      {"softplus", {"kernel", unary(MapFn::kSoftplus)}},
      {"relu6", {"kernel", unary(MapFn::kRelu6)}},
      {"step_count", {"kernel", aligned_with(1, MapFn::kScale, [](Attr&) { return std::vector<float>{1.0f, 1.0f}; })}},
      {"leaky_relu", {"kernel", aligned_with(1, MapFn::kLeakyRelu, attr("slope", 0.01))}},
      {"elu", {"kernel", aligned_with(1, MapFn::kElu, attr("alpha", 1.0))}},
      {"clip", {"kernel", aligned_with(1, MapFn::kClip, attrs2("lo", -1.0, "hi", 1.0))}},
      {"power", {"kernel", aligned_with(1, MapFn::kPower, attr("exponent", 2.0))}},
      {"abs_grad", {"kernel", binary(MapFn::kAbsGrad)}},
      {"erf_grad", {"kernel", binary(MapFn::kErfGrad)}},
      {"relu6_grad", {"kernel", binary(MapFn::kRelu6Grad)}},
      {"softplus_grad", {"kernel", binary(MapFn::kSoftplusGrad)}},
      {"gelu_tanh_grad", {"kernel", binary(MapFn::kGeluTanhGrad)}},
      {"leaky_relu_grad", {"kernel", aligned_with(2, MapFn::kLeakyReluGrad, attr("slope", 0.01))}},
      {"elu_grad", {"kernel", aligned_with(2, MapFn::kEluGrad, attr("alpha", 1.0))}},
      {"clip_grad", {"kernel", aligned_with(2, MapFn::kClipGrad, attrs2("lo", -1.0, "hi", 1.0))}},
      {"hardtanh_grad", {"kernel", aligned_with(2, MapFn::kHardtanhGrad, attrs2("lo", -1.0, "hi", 1.0))}},
      {"power_grad", {"kernel", aligned_with(2, MapFn::kPowerGrad, attr("exponent", 2.0))}},
      {"squared_difference_grad", {"kernel", aligned_with(3, MapFn::kSquaredDifferenceGrad, none())}},
      {"maximum_grad", {"kernel", aligned_with(3, MapFn::kMaximumGrad, none())}},
      {"div_grad_divisor", {"kernel", aligned_with(3, MapFn::kDivGradDivisor, none())}},
      {"where", {"kernel", aligned_with(3, MapFn::kWhere, none())}},
      {"where_grad",
       {"kernel", aligned_with(2, MapFn::kWhereGrad,
                               [](Attr& a) { return std::vector<float>{a.integer("branch", 0) == 0 ? 1.0f : 0.0f}; })}},
      {"masked_fill", {"kernel", masked_fill}},
      {"rmsprop_sq",
       {"kernel", aligned_with(2, MapFn::kAdamV, [](Attr& a) {
          const double r = a.num("alpha", 0.99);
          return std::vector<float>{static_cast<float>(r), static_cast<float>(1.0 - r)};
        })}},
      {"rmsprop_weight", {"kernel", aligned_with(3, MapFn::kRmspropWeight, attrs2("lr", 0.01, "eps", 1e-8))}},
      {"running_stat_update",
       {"kernel", aligned_with(2, MapFn::kAdamM, [](Attr& a) {
          const double m = a.num("momentum", 0.1);
          return std::vector<float>{static_cast<float>(1.0 - m), static_cast<float>(m)};
        })}},
      {"adam_weight", {"kernel", adam_weight}},
      {"mse_loss_grad",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (c.inputs.size() != 2) return "not mse_loss_grad's layout";
          return aligned_map(c, 2, MapFn::kScaledDifference, {static_cast<float>(2.0 / numel(c.inputs[0]))}, s);
        }}},
      {"l1_loss_backward", {"kernel", loss_backward(MapFn::kL1LossBackward, none())}},
      {"smooth_l1_loss_backward", {"kernel", loss_backward(MapFn::kSmoothL1LossBackward, attr("beta", 1.0))}},
      {"bce_with_logits_backward", {"kernel", loss_backward(MapFn::kBceWithLogitsBackward, none())}},
      {"nll_loss_backward",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!pure_map(c, 2) || !c.inputs[1].shape.empty() || c.inputs[0].shape.size() != 2) return "not nll_loss_backward's layout";
          return add_map(c, MapFn::kNllLossBackward, {static_cast<float>(c.inputs[0].shape[0])}, {aligned(c, 0), Read{1, {}}}, s);
        }}},
      {"mul_scalar_tensor",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!pure_map(c, 2) || c.inputs[1].shape.size() != 1) return "not mul_scalar_tensor's layout";
          return add_map(c, MapFn::kMul, {}, {aligned(c, 0), Read{1, {kNone}, {0}}}, s);
        }}},
      {"broadcast_add", {"kernel", broadcast_binary(MapFn::kAdd)}},
      {"broadcast_sub", {"kernel", broadcast_binary(MapFn::kSub)}},
      {"broadcast_mul", {"kernel", broadcast_binary(MapFn::kMul)}},
      {"broadcast_div", {"kernel", broadcast_binary(MapFn::kDiv)}},
      {"broadcast_maximum", {"kernel", broadcast_binary(MapFn::kMaximum)}},
      {"broadcast_minimum", {"kernel", broadcast_binary(MapFn::kMinimum)}},
      {"expand", {"kernel", expand_op}},
      {"broadcast_to", {"kernel", broadcast_to}},
      {"squeeze", {"kernel", squeeze_op}},
      {"unsqueeze", {"kernel", unsqueeze_op}},
      {"reduce_mean_grad", {"kernel", reduce_mean_grad}},
      {"logsumexp_grad", {"kernel", logsumexp_grad}},
      {"global_avg_pool2d_grad",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const double area = a.num("in_h", 1.0) * a.num("in_w", 1.0);
          if (!a.ok || !pure_map(c, 1) || c.output_vars.size() != 4 || area <= 0) return "not global_avg_pool2d_grad's layout";
          return add_map(c, MapFn::kDivBy, {static_cast<float>(area)}, {Read{0, {0, 1}}}, s);
        }}},
      {"batch_norm_mean_grad",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!pure_map(c, 2) || c.output_vars.size() != 4 || c.inputs[1].shape.size() != 4) return "not batch_norm_mean_grad's layout";
          const auto& x = c.inputs[1].shape;
          return add_map(c, MapFn::kDivBy, {static_cast<float>(static_cast<double>(x[0] * x[2] * x[3]))}, {Read{0, {1}}}, s);
        }}},
      {"batch_norm_inference", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return batch_norm_inference(c, a, false, s); }}},
      {"batch_norm_inference_grad_input",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return batch_norm_inference(c, a, true, s); }}},
      // own kernels: more layouts (strided box copies, permutations, upsampling as window gathers)
      {"concat", {"kernel", concat_op}},
      {"pad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return pad_op(c, a, false, s); }}},
      {"unpad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return pad_op(c, a, true, s); }}},
      {"flip",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          int ax = 0;
          if (!in_order(c, 1) || !axis_attr(a, static_cast<int>(c.output_vars.size()), &ax) ||
              c.inputs[0].shape.size() != c.output_vars.size())
            return "not flip's layout";
          return strided_read(c, ax, c.inputs[0].shape[ax] - 1, -1, s);
        }}},
      {"split",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const long long sections = a.integer("sections", 2), index = a.integer("index", 0);
          int ax = 0;
          if (!in_order(c, 1) || !axis_attr(a, static_cast<int>(c.output_vars.size()), &ax) || sections < 1 || index < 0 ||
              c.inputs[0].shape.size() != c.output_vars.size())
            return "not split's layout";
          return strided_read(c, ax, index * (c.inputs[0].shape[ax] / sections), 1, s);
        }}},
      {"permute", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const std::vector<long long> perm = a.ints("perm");
          return a.ok ? permute_op(c, perm, s) : std::string("unreadable attributes");
        }}},
      {"transpose", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return permute_op(c, {1, 0}, s); }}},
      {"batch_diagonal",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!in_order(c, 1) || c.vars.size() != 2 || c.inputs[0].shape.size() != 3) return "not batch_diagonal's layout";
          return add_map(c, MapFn::kCopy, {}, {Read{0, {0, 1, 1}}}, s);
        }}},
      {"batch_diagonal_grad", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return batch_diagonal_grad(c, s); }}},
      {"upsample_nearest2d",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const long long k = a.integer("scale", 2);
          return a.ok ? window_sum(c, k, k, 1.0, true, s) : std::string("unreadable attributes");
        }}},
      {"upsample_nearest2d_hw",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const long long sh = a.integer("sh", 1), sw = a.integer("sw", 1);
          return a.ok ? window_sum(c, sh, sw, 1.0, true, s) : std::string("unreadable attributes");
        }}},
      {"upsample_nearest2d_hw_grad",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const long long sh = a.integer("sh", 1), sw = a.integer("sw", 1);
          return a.ok ? window_sum(c, sh, sw, 1.0, false, s) : std::string("unreadable attributes");
        }}},
      // own kernels: whole-row reductions and their gradients, more pooling, one-hot
      {"logsumexp", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_row(c, a, GatherFn::kLogSumExp, s); }}},
      {"argmax", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_row(c, a, GatherFn::kArgMax, s); }}},
      {"argmin", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_row(c, a, GatherFn::kArgMin, s); }}},
      {"reduce_var", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_row(c, a, GatherFn::kReduceVar, s); }}},
      {"reduce_var_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_row_grad(c, a, GatherFn::kReduceVarGrad, s); }}},
      {"reduce_prod_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_row_grad(c, a, GatherFn::kReduceProdGrad, s); }}},
      {"reduce_extremum_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_row_grad(c, a, GatherFn::kExtremumGrad, s); }}},
      {"reduce_first_extremum_grad",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_row_grad(c, a, GatherFn::kFirstExtremumGrad, s); }}},
      {"reduce_prod", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_reduce(c, a, ReduceFn::kProd, false, s); }}},
      {"cumsum", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return cumsum_op(c, false, s); }}},
      {"cumsum_grad", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return cumsum_op(c, true, s); }}},
      {"cross_entropy_grad", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return cross_entropy_grad(c, s); }}},
      {"global_avg_pool2d",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (c.inputs.size() != 1 || c.inputs[0].shape.size() != 4) return "not global_avg_pool2d's layout";
          const auto& x = c.inputs[0].shape;
          return reduce(c, {0, 1, 2, 3}, ReduceFn::kSum, 1.0 / static_cast<double>(x[2] * x[3]), s);
        }}},
      {"global_max_pool2d", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return reduce(c, {0, 1, 2, 3}, ReduceFn::kMax, 1.0, s); }}},
      {"global_max_pool2d_grad", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return global_max_pool2d_grad(c, s); }}},
      {"batch_norm_mean",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (c.inputs.size() != 1 || c.inputs[0].shape.size() != 4) return "not batch_norm_mean's layout";
          const auto& x = c.inputs[0].shape;
          return reduce(c, {1, 0, 2, 3}, ReduceFn::kSum, 1.0 / static_cast<double>(x[0] * x[2] * x[3]), s);
        }}},
      {"smooth_l1_loss",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const double beta = a.num("beta", 1.0);
          if (!a.ok) return "unreadable attributes";
          const std::string why = pair_loss(c, PairTerm::kSmoothL1, inverse_numel(c), 0, s);
          if (why.empty()) s->back().reduce.param = beta;
          return why;
        }}},
      {"avg_pool2d", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return avg_pool2d(c, a, false, s); }}},
      {"avg_pool2d_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return avg_pool2d(c, a, true, s); }}},
      {"max_pool1d", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return max_pool1d(c, a, false, s); }}},
      {"max_pool1d_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return max_pool1d(c, a, true, s); }}},
      {"one_hot", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return one_hot(c, s); }}},
      {"batch_norm_var", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return channel_stats(c, a, ChannelFn::kBatchNormVar, s); }}},
      {"batch_norm_var_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return channel_stats(c, a, ChannelFn::kBatchNormVarGrad, s); }}},
      {"batch_norm_inference_grad_gamma",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return channel_stats(c, a, ChannelFn::kBatchNormInferenceGradGamma, s); }}},
      {"gru_cell", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return gru_cell(c, s); }}},
      {"gru_cell_grad_h",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          long long n = 0;
          if (!gru_layout(c, 3, 1, 0, &n)) return "not the GRU cell's layout";
          return add_map(c, MapFn::kGruGradH, {}, {aligned(c, 0), shifted(1, n), shifted(2, n)}, s);
        }}},
      {"gru_cell_grad_gi", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return gru_gate_grads(c, false, s); }}},
      {"gru_cell_grad_gh", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return gru_gate_grads(c, true, s); }}},
      {"depthwise_conv2d", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return depthwise(c, a, GatherFn::kDepthwiseConv, s); }}},
      {"depthwise_conv2d_backward_data",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return depthwise(c, a, GatherFn::kDepthwiseConvGradData, s); }}},
      {"depthwise_conv2d_backward_filter",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return depthwise(c, a, GatherFn::kDepthwiseConvGradFilter, s); }}},
      // own kernels: losses (paired reductions) and row ops
      {"mse_loss", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return pair_loss(c, PairTerm::kSquaredDifference, inverse_numel(c), 0, s); }}},
      {"l1_loss", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return pair_loss(c, PairTerm::kAbsDifference, inverse_numel(c), 0, s); }}},
      {"bce_with_logits", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return pair_loss(c, PairTerm::kBceWithLogits, inverse_numel(c), 0, s); }}},
      {"sum_product", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return pair_loss(c, PairTerm::kProduct, 1.0, 1, s); }}},
      {"nll_loss",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (c.inputs.empty() || c.inputs[0].shape.size() != 2 || c.inputs[0].shape[0] < 1) return "not nll_loss' layout";
          return pair_loss(c, PairTerm::kProduct, -1.0 / static_cast<double>(c.inputs[0].shape[0]), 0, s);
        }}},
      {"cross_entropy", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return cross_entropy(c, false, s); }}},
      {"cross_entropy_backward", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return cross_entropy(c, true, s); }}},
      {"softmax", {"kernel", row(RowFn::kSoftmax, {RowIn::kRows})}},
      {"log_softmax", {"kernel", row(RowFn::kLogSoftmax, {RowIn::kRows})}},
      {"softmax_grad", {"kernel", row(RowFn::kSoftmaxGrad, {RowIn::kRows, RowIn::kRows})}},
      {"log_softmax_grad", {"kernel", row(RowFn::kLogSoftmaxGrad, {RowIn::kRows, RowIn::kRows})}},
      {"layer_norm", {"kernel", row(RowFn::kLayerNorm, {RowIn::kRows, RowIn::kVector, RowIn::kVector}, 1e-5)}},
      {"layer_norm_grad_input",
       {"kernel", row(RowFn::kLayerNormGradInput, {RowIn::kRows, RowIn::kRows, RowIn::kWholeVector}, 1e-5)}},
      {"rms_norm", {"kernel", row(RowFn::kRmsNorm, {RowIn::kRows, RowIn::kVector}, 1e-6)}},
      {"rms_norm_grad_input",
       {"kernel", row(RowFn::kRmsNormGradInput, {RowIn::kRows, RowIn::kRows, RowIn::kWholeVector}, 1e-6)}},
      {"layer_norm_grad_gamma", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return norm_grad_gamma(c, a, false, s); }}},
      {"rms_norm_grad_gamma", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return norm_grad_gamma(c, a, true, s); }}},
      // own kernels: batch norm (training statistics)
      {"batch_norm_train", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return batch_norm(c, a, ChannelFn::kBatchNormTrain, s); }}},
      {"batch_norm_grad_input", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return batch_norm(c, a, ChannelFn::kBatchNormGradInput, s); }}},
      {"batch_norm_grad_gamma", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return batch_norm(c, a, ChannelFn::kBatchNormGradGamma, s); }}},
      // own kernels: embedding lookups (int64 ids)
      {"embedding", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return embedding(c, a, false, s); }}},
      {"embedding_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return embedding(c, a, true, s); }}},
      // own kernels: gathers
      {"max_pool2d", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return max_pool2d(c, a, false, s); }}},
      {"max_pool2d_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return max_pool2d(c, a, true, s); }}},
      {"reshape", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return reshape_op(c, s); }}},
      {"adaptive_avg_pool2d", {"kernel", adaptive_avg(false)}},
      {"adaptive_avg_pool2d_grad", {"kernel", adaptive_avg(true)}},
      {"upsample_nearest2d_grad",
       {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
          const long long k = a.integer("scale", 2);
          return a.ok ? window_sum(c, k, k, 1.0, false, s) : std::string("unreadable attributes");
        }}},
      // own kernels: the LSTM cell
      {"lstm_cell", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return lstm_map(c, "lstm_cell", s); }}},
      {"lstm_hidden", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return lstm_map(c, "lstm_hidden", s); }}},
      {"lstm_cell_grad_c", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return lstm_map(c, "lstm_cell_grad_c", s); }}},
      {"lstm_hidden_grad_c", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return lstm_map(c, "lstm_hidden_grad_c", s); }}},
      {"lstm_cell_grad_gates", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return lstm_gate_grad(c, false, s); }}},
      {"lstm_hidden_grad_gates", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return lstm_gate_grad(c, true, s); }}},
      // own kernels: layouts (copies over boxes of the block)
      {"select", {"kernel", select_op}},
      {"stack", {"kernel", stack_op}},
      {"unselect", {"kernel", unselect_op}},
      {"slice_axis", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return slice_op(c, a, false, s); }}},
      {"slice_axis_grad", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return slice_op(c, a, true, s); }}},
      {"split_heads", {"kernel", split_heads}},
      {"merge_heads", {"kernel", merge_heads}},
      {"add_broadcast",
       {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) -> std::string {
          if (!pure_map(c, 2)) return "not add_broadcast's layout";
          const int rank = static_cast<int>(c.output_vars.size()), nd = static_cast<int>(c.inputs[1].shape.size());
          if (nd > rank) return "not add_broadcast's layout";
          Read y{1, {}, {}};
          for (int d = rank - nd; d < rank; ++d) y.at.push_back(d);
          return add_map(c, MapFn::kAdd, {}, {aligned(c, 0), y}, s);
        }}},
      // own kernels: reductions
      {"sum_axes", {"kernel", sum_axes}},
      {"sum_to", {"kernel", sum_to}},
      {"sum_leading", {"kernel", sum_leading}},
      {"reduce_sum", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_reduce(c, a, ReduceFn::kSum, false, s); }}},
      {"reduce_mean", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_reduce(c, a, ReduceFn::kSum, true, s); }}},
      {"reduce_max", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_reduce(c, a, ReduceFn::kMax, false, s); }}},
      {"reduce_min", {"kernel", [](const TileCall& c, Attr& a, std::vector<Step>* s) { return axis_reduce(c, a, ReduceFn::kMin, false, s); }}},
      {"conv2d_bias_grad", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return reduce(c, {1, 0, 2, 3}, ReduceFn::kSum, 1.0, s); }}},
      {"sum_rows", {"kernel", [](const TileCall& c, Attr&, std::vector<Step>* s) { return reduce(c, {1, 0}, ReduceFn::kSum, 1.0, s); }}},
  };
  return t;
}

// Integer and bool operands of float ops (masks, labels) are read as float32 where they are read:
// by maps and reshape's gather; any other step reading one is refused.
std::string typed_reads(const TileCall& call, std::vector<Step>* steps) {
  auto type_of = [&](int j) {
    switch (call.inputs[j].dtype) {
      case DType::kFloat32: return ReadType::kFloat32;
      case DType::kInt64: return ReadType::kInt64;
      case DType::kInt32: return ReadType::kInt32;
      case DType::kBool: return ReadType::kBool;
    }
    return ReadType::kFloat32;
  };
  for (Step& s : *steps) {
    if (s.kind == Step::kMap) {
      for (int r = 0; r < s.map.reads; ++r)
        if (s.map_inputs[r] != kOutput) s.map.type[r] = static_cast<int>(type_of(s.map_inputs[r]));
      continue;
    }
    if (s.kind == Step::kGather && s.gather.fn == static_cast<int>(GatherFn::kReshape)) {
      s.gather.type0 = static_cast<int>(type_of(s.row_inputs[0]));
      continue;
    }
    std::vector<int> read;
    if (s.kind == Step::kGemm) read = {s.gemm.a, s.gemm.b};
    else if (s.kind == Step::kConv) read = {s.conv.x_input, s.conv.w_input, s.conv.y_input};
    else if (s.kind == Step::kReduce) read = {s.reduce_input, s.reduce.term ? s.reduce_input2 : kOutput};
    else read.assign(s.row_inputs, s.row_inputs + kMaxReads);
    for (int j : read)
      if (j != kOutput && j >= 0 && call.inputs[j].dtype != DType::kFloat32)
        return "an integer or bool input read by a step other than a map (only maps and reshape convert them)";
  }
  return "";
}

}  // namespace select

using namespace select;

Selection select_kernel(const kernels::TileCall& call) {
  Selection out;
  if (call.kernel.empty()) {
    out.why_not = "op '" + call.type + "' declares no native kernel (the CPU runs it in the TDL interpreter)";
    return out;
  }
  const auto& t = table();
  auto it = t.find(call.kernel);
  if (it == t.end()) {
    out.why_not = "kernel '" + call.kernel + "' has no CUDA implementation yet";
    return out;
  }
  const bool reads_ids = call.kernel == "embedding" || call.kernel == "embedding_grad" || call.kernel == "one_hot";
  for (const Span& v : call.vars)
    if (v.size() <= 0) {
      out.why_not = "an empty block";
      return out;
    }
  out.library = it->second.library;
  Attr attrs{call.attrs};
  std::string why = it->second.build(call, attrs, &out.steps);
  // A convolution cuDNN cannot take runs as the backend's own gather.
  if (why.empty() && !out.steps.empty() &&
      std::all_of(out.steps.begin(), out.steps.end(), [](const Step& st) { return st.kind == Step::kGather; }))
    out.library = "kernel";
  if (why.empty() && !reads_ids && !all_float(call)) why = typed_reads(call, &out.steps);
  if (!why.empty()) {
    out.steps.clear();
    out.why_not = "kernel '" + call.kernel + "': " + why;
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> cuda_kernels() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, e] : table()) out.emplace_back(name, e.library);
  return out;
}

}  // namespace tilewise::exec::cuda

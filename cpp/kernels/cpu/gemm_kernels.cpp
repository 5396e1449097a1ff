// Products as GEMMs on a device's block: out[loops.., m, n] (+)= sum_k A[.., m, k] B[.., k, n].
// Each op names which variable plays m, n and k and which input dimension each variable indexes;
// the region's strides then give the matrices' pointers and leading dimensions, so no operand is
// copied. A restricted k is a partial GEMM; a restricted reduction variable among the loops
// accumulates over the loop with beta = 1.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/gemm_contraction.h"
#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {
namespace {

constexpr int kNone = kNoGemmVar;

using Layout = BlasLayout;
using Operand = GemmOperand;

/// A checked contraction: pointers at the block's corner, strides per variable, BLAS layouts.
struct Plan {
  const float* a = nullptr;
  const float* b = nullptr;
  int64_t m = 1, n = 1, k = 1;
  Layout la, lb, lc;
  std::vector<int> loops;
  std::vector<int64_t> sa, sb, sc;  // per variable
  bool reduces_in_loop = false;     // a loop variable is a reduction: accumulate over it
};

int64_t size_of(const TileCall& call, int v) { return v == kNone ? 1 : call.vars[v].size(); }
int64_t stride_of(const std::vector<int64_t>& s, int v) { return v == kNone ? 0 : s[v]; }

// Corner pointer and per-variable strides of an operand; false when its region lacks the block.
bool operand_view(const TileCall& call, const Operand& op, const float** base, std::vector<int64_t>* strides) {
  if (op.input < 0 || static_cast<size_t>(op.input) >= call.inputs.size()) return false;
  const TileIn& in = call.inputs[op.input];
  if (in.shape.size() != op.dims.size()) return false;
  std::vector<Span> box = box_of(call, op.dims);
  for (size_t d = 0; d < box.size(); ++d) {
    if (box[d].hi >= in.shape[d]) return false;  // products never read padding
  }
  if (!holds(in, box)) return false;
  std::vector<int64_t> rs = region_strides(in), at(box.size());
  strides->assign(call.vars.size(), 0);
  for (size_t d = 0; d < box.size(); ++d) {
    (*strides)[op.dims[d]] += rs[d];
    at[d] = box[d].lo;
  }
  *base = element(in, at);
  return true;
}

bool make_plan(const TileCall& call, const Contraction& c, Plan* p) {
  // Every variable plays exactly one role.
  std::vector<int> role(call.vars.size(), 0);
  for (int v : {c.m, c.n, c.k}) {
    if (v != kNone) ++role[v];
  }
  for (int v : c.loops) ++role[v];
  for (int r : role) {
    if (r != 1) return false;
  }
  if (!operand_view(call, c.a, &p->a, &p->sa) || !operand_view(call, c.b, &p->b, &p->sb)) return false;
  p->sc = output_strides(call);
  p->m = size_of(call, c.m);
  p->n = size_of(call, c.n);
  p->k = size_of(call, c.k);
  p->loops = c.loops;
  for (int v : c.loops) {
    if (p->sc[v] == 0) p->reduces_in_loop = true;
  }
  if (!blas_layout(p->m, p->k, stride_of(p->sa, c.m), stride_of(p->sa, c.k), &p->la)) return false;
  if (!blas_layout(p->k, p->n, stride_of(p->sb, c.k), stride_of(p->sb, c.n), &p->lb)) return false;
  if (!blas_layout(p->m, p->n, stride_of(p->sc, c.m), stride_of(p->sc, c.n), &p->lc) || p->lc.trans) return false;
  return fits_blas({p->m, p->n, p->k, p->la.ld, p->lb.ld, p->lc.ld});
}

// Runs the plan. accumulate: add to the output (already initialised); otherwise overwrite it.
void run_plan(const TileCall& call, const Plan& p, bool accumulate) {
  if (!accumulate && p.reduces_in_loop) {
    std::fill(call.out, call.out + output_size(call), 0.0f);
    accumulate = true;
  }
  const float beta = accumulate ? 1.0f : 0.0f;
  const size_t nl = p.loops.size();
  std::vector<int64_t> idx(nl, 0);
  int64_t oa = 0, ob = 0, oc = 0;
  while (true) {
    gemm(p.la.trans, p.lb.trans, p.m, p.n, p.k, 1.0f, p.a + oa, p.la.ld, p.b + ob, p.lb.ld, beta, call.out + oc,
         p.lc.ld);
    // Odometer over the loop variables' ranges, last fastest.
    size_t l = nl;
    while (l > 0) {
      --l;
      int v = p.loops[l];
      if (++idx[l] < call.vars[v].size()) {
        oa += p.sa[v];
        ob += p.sb[v];
        oc += p.sc[v];
        break;
      }
      oa -= p.sa[v] * (idx[l] - 1);
      ob -= p.sb[v] * (idx[l] - 1);
      oc -= p.sc[v] * (idx[l] - 1);
      idx[l] = 0;
      if (l == 0) return;
    }
    if (nl == 0) return;
  }
}

bool contract(const TileCall& call, const Contraction& c) {
  Plan p;
  if (!make_plan(call, c, &p)) return false;
  run_plan(call, p, false);
  return true;
}

// The output's last variable `j` gets the sum of the bias inputs at j on every row; the products
// then accumulate onto it. False (nothing written) when a bias region lacks the range.
bool holds_bias(const TileCall& call, const std::vector<int>& biases, int j) {
  for (int b : biases) {
    if (call.inputs[b].shape.size() != 1 || !holds(call.inputs[b], {call.vars[j]})) return false;
  }
  return true;
}

void fill_bias(const TileCall& call, const std::vector<int>& biases, int j) {
  const int64_t nj = call.vars[j].size(), rows = output_size(call) / nj;
  float* row0 = call.out;
  std::fill(row0, row0 + nj, 0.0f);
  for (int b : biases) {
    const float* bias = element(call.inputs[b], {call.vars[j].lo});
    for (int64_t t = 0; t < nj; ++t) row0[t] += bias[t];
  }
  for (int64_t r = 1; r < rows; ++r) std::copy(row0, row0 + nj, call.out + r * nj);
}

// The roles i0..i{r-1} (the output) plus a last reduction variable: the layout of linear,
// linear_nobias and linear_grad_input. The product's rows are i{r-2}, looping over i0..i{r-3}.
bool linear_like(const TileCall& call, Contraction* c, int* r_out) {
  const int r = static_cast<int>(call.vars.size()) - 1;
  if (r < 1) return false;
  if (static_cast<int>(call.output_vars.size()) != r) return false;
  for (int t = 0; t < r; ++t) {
    if (call.output_vars[t] != t) return false;
  }
  c->m = r >= 2 ? r - 2 : kNone;
  c->n = r - 1;
  c->k = r;
  for (int t = 0; t + 2 < r; ++t) c->loops.push_back(t);
  *r_out = r;
  return true;
}

// Rows of a two-variable op's output are the variables in output order.
bool outputs_are(const TileCall& call, std::initializer_list<int> vars) {
  return call.output_vars == std::vector<int>(vars);
}

bool mat(const TileCall& call, std::vector<int> a_dims, std::vector<int> b_dims) {
  // vars: i = 0, j = 1, k = 2
  if (!outputs_are(call, {0, 1}) || call.inputs.size() != 2) return false;
  return contract(call, {{0, std::move(a_dims)}, {1, std::move(b_dims)}, 0, 1, 2, {}});
}

bool batch_mat(const TileCall& call, std::vector<int> a_dims, std::vector<int> b_dims) {
  // vars: n = 0, i = 1, j = 2, k = 3
  if (!outputs_are(call, {0, 1, 2}) || call.inputs.size() != 2) {
    return false;
  }
  return contract(call, {{0, std::move(a_dims)}, {1, std::move(b_dims)}, 1, 2, 3, {0}});
}

}  // namespace

// Batched products over any number r - 2 of leading batch axes: roles i0..i{r-1} (the output,
// rows m = i{r-2}, columns n = i{r-1}) then k. `a_tail` / `b_tail` give the last two dimensions of
// each operand in terms of m, n, k (as 0, 1, 2); `b_batched`: b has the batch axes too.
static bool batched(const TileCall& call, std::vector<int> a_tail, std::vector<int> b_tail, bool b_batched) {
  const int r = static_cast<int>(call.vars.size()) - 1;
  if (r < 2 || call.inputs.size() != 2 || static_cast<int>(call.output_vars.size()) != r) return false;
  for (int t = 0; t < r; ++t)
    if (call.output_vars[t] != t) return false;
  return contract(call, batched_contraction(r, a_tail, b_tail, b_batched));
}

bool matmul(const TileCall& call, const Attrs&) { return mat(call, {0, 2}, {2, 1}); }
bool bmatmul(const TileCall& call, const Attrs&) { return batched(call, {0, 2}, {2, 1}, true); }
bool bmatmul_nt(const TileCall& call, const Attrs&) { return batched(call, {0, 2}, {1, 2}, true); }
bool bmatmul_tn(const TileCall& call, const Attrs&) { return batched(call, {2, 0}, {2, 1}, true); }
bool matmul_nd(const TileCall& call, const Attrs&) { return batched(call, {0, 2}, {2, 1}, false); }
bool matmul_tn(const TileCall& call, const Attrs&) { return mat(call, {2, 0}, {2, 1}); }
bool matmul_nt(const TileCall& call, const Attrs&) { return mat(call, {0, 2}, {1, 2}); }
bool matmul_tt(const TileCall& call, const Attrs&) { return mat(call, {2, 0}, {1, 2}); }
bool batch_matmul(const TileCall& call, const Attrs&) { return batch_mat(call, {0, 1, 3}, {0, 3, 2}); }
bool batch_matmul_nt(const TileCall& call, const Attrs&) { return batch_mat(call, {0, 1, 3}, {0, 2, 3}); }
bool batch_matmul_tn(const TileCall& call, const Attrs&) { return batch_mat(call, {0, 3, 1}, {0, 3, 2}); }

// x[i0.., k] W[i_last, k] (+ b[i_last]): B is W read transposed.
static bool linear_impl(const TileCall& call, bool bias) {
  Contraction c;
  int r = 0;
  if (call.inputs.size() != (bias ? 3u : 2u) || !linear_like(call, &c, &r)) return false;
  c.a.input = 0;
  for (int t = 0; t + 1 < r; ++t) c.a.dims.push_back(t);
  c.a.dims.push_back(r);
  c.b = {1, {r - 1, r}};
  if (!bias) return contract(call, c);
  // k is not a reduction at the top of linear's body (the bias is added once): no partial sums.
  if (!full_range(call, r, r + 1) || !holds_bias(call, {2}, r - 1)) return false;
  Plan p;
  if (!make_plan(call, c, &p)) return false;
  fill_bias(call, {2}, r - 1);
  run_plan(call, p, true);
  return true;
}

bool linear(const TileCall& call, const Attrs&) { return linear_impl(call, true); }
bool linear_nobias(const TileCall& call, const Attrs&) { return linear_impl(call, false); }

// dy[i0.., j] W[j, i_last].
bool linear_grad_input(const TileCall& call, const Attrs&) {
  Contraction c;
  int r = 0;
  if (call.inputs.size() != 2 || !linear_like(call, &c, &r)) return false;
  c.a.input = 0;
  for (int t = 0; t + 1 < r; ++t) c.a.dims.push_back(t);
  c.a.dims.push_back(r);
  c.b = {1, {r, r - 1}};
  return contract(call, c);
}

// sum over r0.. of dy[r.., j] x[r.., k]: the last r is the GEMM's k, the others loop.
bool linear_grad_weight(const TileCall& call, const Attrs&) {
  const int nr = static_cast<int>(call.vars.size()) - 2;
  if (nr < 1 || call.inputs.size() != 2 || !outputs_are(call, {0, 1})) return false;
  Contraction c;
  c.a.input = 0;
  c.b.input = 1;
  for (int t = 0; t < nr; ++t) {
    c.a.dims.push_back(2 + t);
    c.b.dims.push_back(2 + t);
  }
  c.a.dims.push_back(0);
  c.b.dims.push_back(1);
  c.m = 0;
  c.n = 1;
  c.k = 2 + nr - 1;
  for (int t = 0; t + 1 < nr; ++t) c.loops.push_back(2 + t);
  return contract(call, c);
}

bool matvec(const TileCall& call, const Attrs&) {
  if (!outputs_are(call, {0}) || call.inputs.size() != 2) return false;
  return contract(call, {{0, {0, 1}}, {1, {1}}, 0, kNone, 1, {}});
}

bool vecmat(const TileCall& call, const Attrs&) {
  if (!outputs_are(call, {0}) || call.inputs.size() != 2) return false;
  return contract(call, {{0, {1}}, {1, {1, 0}}, kNone, 0, 1, {}});
}

bool outer(const TileCall& call, const Attrs&) {
  if (!outputs_are(call, {0, 1}) || call.inputs.size() != 2) return false;
  return contract(call, {{0, {0}}, {1, {1}}, 0, 1, kNone, {}});
}

// x W^T + h U^T onto the bias inputs `biases` (inputs 0-3: x, h, W, U; vars: rows = 0, j = 1, k = 2,
// k' = 3, both reductions whole: they sit under the bias sums or a tanh, never split).
bool two_gemms_onto_biases(const TileCall& call, const std::vector<int>& biases) {
  if (!outputs_are(call, {0, 1}) || call.inputs.size() != 4 + biases.size()) return false;
  if (!full_range(call, 2, 4) || !holds_bias(call, biases, 1)) return false;
  Plan px, ph;
  // Each GEMM sees the other's reduction variable as a size-1 loop: give it a role, then drop it.
  Contraction cx{{0, {0, 2}}, {2, {1, 2}}, 0, 1, 2, {3}};
  Contraction ch{{1, {0, 3}}, {3, {1, 3}}, 0, 1, 3, {2}};
  if (!make_plan(call, cx, &px) || !make_plan(call, ch, &ph)) return false;
  px.loops.clear();
  ph.loops.clear();
  fill_bias(call, biases, 1);
  run_plan(call, px, true);
  run_plan(call, ph, true);
  return true;
}

// x W_ih^T + b_ih + h W_hh^T + b_hh: two GEMMs onto the summed biases.
bool lstm_gates(const TileCall& call, const Attrs&) { return two_gemms_onto_biases(call, {4, 5}); }

// tanh(x W_ih^T + h W_hh^T + b): lstm_gates' two GEMMs onto one bias, then tanh (nn.RNN's cell).
bool rnn_tanh_cell(const TileCall& call, const Attrs&) {
  if (!two_gemms_onto_biases(call, {4})) return false;
  const int64_t n = output_size(call);
  for (int64_t t = 0; t < n; ++t) call.out[t] = std::tanh(call.out[t]);
  return true;
}

}  // namespace tilewise::kernels::tile

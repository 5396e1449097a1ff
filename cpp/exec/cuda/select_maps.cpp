// Kernel selection of the element-wise families: activations and their gradients, selections, optimizers,
// broadcasts, batch norm with running statistics (maps over typed reads, device_math.h).
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "exec/cuda/select_parts.h"

namespace tilewise::exec::cuda::select {

// ---- more maps: activations, gradients, selections, optimizers, broadcasts ---------------------

Params none() {
  return [](Attr&) { return std::vector<float>{}; };
}
Params attr(const char* key, double fallback) {
  return [=](Attr& a) { return std::vector<float>{static_cast<float>(a.num(key, fallback))}; };
}
Params attrs2(const char* k0, double f0, const char* k1, double f1) {
  return [=](Attr& a) { return std::vector<float>{static_cast<float>(a.num(k0, f0)), static_cast<float>(a.num(k1, f1))}; };
}

// fn over the call's n inputs read at the output index, with float attributes from `params`.
Builder aligned_with(size_t n, MapFn fn, Params params) {
  return [=](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
    std::vector<float> p = params(a);
    if (!a.ok) return "unreadable attributes";
    return aligned_map(c, n, fn, std::move(p), s);
  };
}

double numel(const TileIn& in) {
  double n = 1;
  for (long long e : in.shape) n *= static_cast<double>(e);
  return n;
}

// A loss's gradient f(a, b, dy): a and b at the output index, dy a rank-0 tensor; p0.. from `params`,
// the element count of a appended (the CPU divides by it in float).
Builder loss_backward(MapFn fn, Params params) {
  return [=](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
    std::vector<float> p = params(a);
    if (!a.ok || !pure_map(c, 3) || !c.inputs[2].shape.empty()) return "not a loss gradient's layout";
    p.push_back(static_cast<float>(numel(c.inputs[0])));
    return add_map(c, fn, std::move(p), {aligned(c, 0), aligned(c, 1), Read{2, {}}}, s);
  };
}

// The axes of a rank-`nd` input listed in attribute `key` (negative counting from the end).
bool axes_of(Attr& a, const char* key, int nd, std::vector<bool>* axes) {
  axes->assign(nd, false);
  for (long long x : a.ints(key)) {
    if (x < -nd || x >= nd) return false;
    (*axes)[x < 0 ? x + nd : x] = true;
  }
  return a.ok;
}

// Input `input` right-aligned against the output, its axes listed in `key` read at index 0.
bool right_aligned(const TileCall& call, int input, Attr& a, const char* key, Read* r) {
  const int nd = static_cast<int>(call.inputs[input].shape.size());
  const int off = static_cast<int>(call.output_vars.size()) - nd;
  std::vector<bool> bcast;
  if (off < 0 || !axes_of(a, key, nd, &bcast)) return false;
  *r = Read{input, {}, {}};
  for (int d = 0; d < nd; ++d) r->at.push_back(bcast[d] ? kNone : off + d);
  return true;
}

// a op b, broadcast against each other (attributes a_bcast, b_bcast: their axes read at 0).
Builder broadcast_binary(MapFn fn) {
  return [=](const TileCall& c, Attr& a, std::vector<Step>* s) -> std::string {
    Read x, y;
    if (!pure_map(c, 2) || !right_aligned(c, 0, a, "a_bcast", &x) || !right_aligned(c, 1, a, "b_bcast", &y))
      return "not a broadcast's layout";
    return add_map(c, fn, {}, {x, y}, s);
  };
}

// The input read at the output index with output position `axis` left out.
Read skipping(const TileCall& call, int input, int axis) { return without_axis(call, input, axis); }

std::string adam_weight(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const double lr = a.num("lr", 1e-3), b1 = a.num("beta1", 0.9), b2 = a.num("beta2", 0.999);
  const double eps = a.num("eps", 1e-8), wd = a.num("weight_decay", 0.0);
  if (!a.ok || !pure_map(call, 4) || call.inputs[3].shape.size() != 1) return "not adam_weight's layout";
  // The step count t[0] is read by every thread (the CPU reads it once on the host; here it lives on the device).
  const std::string why = add_map(call, MapFn::kAdamWeight,
                                  {static_cast<float>(lr), static_cast<float>(eps), static_cast<float>(wd)},
                                  {aligned(call, 0), aligned(call, 1), aligned(call, 2), Read{3, {kNone}, {0}}}, s);
  if (why.empty()) s->back().map.q[0] = b1, s->back().map.q[1] = b2;
  return why;
}

std::string masked_fill(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const float value = static_cast<float>(a.num("value", 0.0));
  Read mask;
  if (!a.ok || !pure_map(call, 2) || !right_aligned(call, 1, a, "mask_bcast", &mask)) return "not masked_fill's layout";
  return add_map(call, MapFn::kMaskedFill, {value}, {aligned(call, 0), mask}, s);
}

std::string expand_op(const TileCall& call, Attr& a, std::vector<Step>* s) {
  Read x;
  if (!pure_map(call, 1) || !right_aligned(call, 0, a, "bcast", &x)) return "not expand's layout";
  return add_map(call, MapFn::kCopy, {}, {x}, s);
}

std::string broadcast_to(const TileCall& call, Attr& a, std::vector<Step>* s) {
  if (!pure_map(call, 1)) return "not broadcast_to's layout";
  const int rank = static_cast<int>(call.output_vars.size()), nd = static_cast<int>(call.inputs[0].shape.size());
  std::vector<bool> fresh;
  if (nd > rank || !axes_of(a, "new_axes", rank, &fresh)) return "not broadcast_to's layout";
  if (a.ints("new_axes").empty())
    for (int d = 0; d < rank - nd; ++d) fresh[d] = true;
  Read x{0, {}, {}};
  for (int d = 0; d < rank; ++d)
    if (!fresh[d]) x.at.push_back(d);
  if (static_cast<int>(x.at.size()) != nd) return "not broadcast_to's layout";
  return add_map(call, MapFn::kCopy, {}, {x}, s);
}

bool output_axis(Attr& a, int rank, int* axis) {
  const long long x = a.integer("axis", 0);
  if (!a.ok || x < -rank || x >= rank) return false;
  *axis = static_cast<int>(x < 0 ? x + rank : x);
  return true;
}

std::string squeeze_op(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const int nd = static_cast<int>(call.inputs.empty() ? 0 : call.inputs[0].shape.size());
  int ax = 0;
  if (!pure_map(call, 1) || nd != static_cast<int>(call.output_vars.size()) + 1 || !output_axis(a, nd, &ax))
    return "not squeeze's layout";
  Read r{0, {}, {}};
  for (int d = 0; d < nd; ++d) r.at.push_back(d == ax ? kNone : (d < ax ? d : d - 1));
  return add_map(call, MapFn::kCopy, {}, {r}, s);
}

std::string unsqueeze_op(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const int rank = static_cast<int>(call.output_vars.size());
  int ax = 0;
  if (!pure_map(call, 1) || !output_axis(a, rank, &ax) || static_cast<int>(call.inputs[0].shape.size()) != rank - 1)
    return "not unsqueeze's layout";
  return add_map(call, MapFn::kCopy, {}, {skipping(call, 0, ax)}, s);
}

std::string reduce_mean_grad(const TileCall& call, Attr& a, std::vector<Step>* s) {
  const int rank = static_cast<int>(call.output_vars.size());
  const long long axis = a.integer("axis", 0);
  const double size = a.num("size", 1.0);
  if (!a.ok || !pure_map(call, 1) || axis < 0 || axis >= rank || size <= 0 ||
      static_cast<int>(call.inputs[0].shape.size()) != rank - 1)
    return "not reduce_mean_grad's layout";
  return add_map(call, MapFn::kDivBy, {static_cast<float>(size)}, {skipping(call, 0, static_cast<int>(axis))}, s);
}

std::string logsumexp_grad(const TileCall& call, Attr& a, std::vector<Step>* s) {  // (dy, x, y)
  int ax = 0;
  if (!pure_map(call, 3) || !output_axis(a, static_cast<int>(call.output_vars.size()), &ax)) return "not logsumexp_grad's layout";
  return add_map(call, MapFn::kExpDifferenceTimes, {}, {skipping(call, 0, ax), aligned(call, 1), skipping(call, 2, ax)}, s);
}

std::string batch_norm_inference(const TileCall& call, Attr& a, bool grad, std::vector<Step>* s) {
  const float eps = static_cast<float>(a.num("eps", 1e-5));
  if (!a.ok || !pure_map(call, grad ? 3 : 5) || call.output_vars.size() != 4) return "not batch norm's layout";
  if (grad) return add_map(call, MapFn::kBatchNormInferenceGradInput, {eps}, {aligned(call, 0), Read{1, {1}}, Read{2, {1}}}, s);
  return add_map(call, MapFn::kBatchNormInference, {eps},
                 {aligned(call, 0), Read{1, {1}}, Read{2, {1}}, Read{3, {1}}, Read{4, {1}}}, s);
}

}  // namespace tilewise::exec::cuda::select

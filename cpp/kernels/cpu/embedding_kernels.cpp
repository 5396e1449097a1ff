// Embedding lookups and their table gradients. The op library describes a lookup through an
// opaque function (the only data-dependent indexing in TDL), which the interpreter evaluates per
// id over the whole table; here a lookup copies one row segment per id, and the gradient adds each
// dy row into the row its id names. Ids are int64 (or int32, or whole float32 numbers).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {
namespace {

// The value at full-tensor coordinates `at` of an ids input: int64 and int32 ids as they are, bool
// as 0/1, float32 ids (graphs built with float ids) when they are whole numbers (else -1: no row).
int64_t id_at(const TileIn& ids, const std::vector<int64_t>& at) {
  int64_t off = 0;
  for (size_t d = 0; d < at.size(); ++d) off = off * ids.region[d].size() + (at[d] - ids.region[d].lo);
  switch (ids.dtype) {
    case DType::kInt64: return static_cast<const int64_t*>(ids.raw)[off];
    case DType::kInt32: return static_cast<const int32_t*>(ids.raw)[off];
    case DType::kBool: return static_cast<const uint8_t*>(ids.raw)[off] != 0;
    case DType::kFloat32: break;
  }
  const float v = ids.data[off];
  if (!(v >= 0.0f) || v != std::floor(v) || v >= 9.2e18f) return -1;
  return static_cast<int64_t>(v);
}

// The id at `at`, checked against the table's rows: an id naming no row fails the step (torch's
// IndexError), it never reads another row.
int64_t checked_id(const TileCall& call, const TileIn& ids, const std::vector<int64_t>& at, int64_t rows) {
  const int64_t v = id_at(ids, at);
  if (v < 0 || v >= rows) {
    std::string where;
    for (int64_t a : at) where += (where.empty() ? "" : ", ") + std::to_string(a);
    const std::string shown = ids.dtype == DType::kFloat32 ? std::to_string(*element(ids, at)) : std::to_string(v);
    throw InvalidInput("op '" + call.type + "': id " + shown + " at [" + where +
                       "] is not a row of the table (0 .. " + std::to_string(rows - 1) + ")");
  }
  return v;
}

// out[p..., d] = table[ids[p...], d] for the positions p (roles before the last) and the columns d.
bool lookup(const TileCall& call) {
  const int np = static_cast<int>(call.vars.size()) - 1;  // position roles: b (and t)
  if (call.inputs.size() != 2 || np < 1 || call.output_vars.size() != call.vars.size()) return false;
  for (int p = 0; p <= np; ++p)
    if (call.output_vars[p] != p) return false;
  const TileIn &table = call.inputs[0], &ids = call.inputs[1];
  if (table.shape.size() != 2 || static_cast<int>(ids.shape.size()) != np) return false;
  const Span d = call.vars[np];
  const int64_t rows = table.shape[0];
  if (!holds(table, {{0, rows - 1}, d})) return false;
  std::vector<int> pos(np);
  for (int p = 0; p < np; ++p) pos[p] = p;
  if (!holds(ids, box_of(call, pos))) return false;
  std::vector<int64_t> at(np);
  for (int p = 0; p < np; ++p) at[p] = call.vars[p].lo;
  float* out = call.out;
  const int64_t width = d.size();
  // Validate every id before writing anything: a declined or failed call leaves the output alone.
  int64_t count = 1;
  for (int p = 0; p < np; ++p) count *= call.vars[p].size();
  Scratch scratch(call);
  int64_t* rows_of = scratch.ints(count);  // lookup_scratch
  int64_t* next = rows_of;
  while (true) {
    *next++ = checked_id(call, ids, at, rows);
    int p = np - 1;
    while (p >= 0 && at[p] == call.vars[p].hi) at[p] = call.vars[p].lo, --p;
    if (p < 0) break;
    ++at[p];
  }
  for (const int64_t* r = rows_of; r != next; ++r) {
    const float* src = element(table, {*r, d.lo});
    std::copy(src, src + width, out);
    out += width;
  }
  return true;
}

// dtable[v, d] = sum over positions p in this device's range of (ids[p] == v) dy[p, d]: roles v, d,
// then the positions. An id that names no row of this block adds nothing, as in the description;
// nor does the padding id (torch's padding_idx: that row gets no gradient; -1: none).
bool lookup_grad(const TileCall& call, int64_t padding) {
  const int np = static_cast<int>(call.vars.size()) - 2;
  if (call.inputs.size() != 2 || np < 1 || call.output_vars.size() != 2 || call.output_vars[0] != 0 ||
      call.output_vars[1] != 1)
    return false;
  const TileIn &ids = call.inputs[0], &dy = call.inputs[1];
  if (static_cast<int>(ids.shape.size()) != np || static_cast<int>(dy.shape.size()) != np + 1) return false;
  const Span v = call.vars[0], d = call.vars[1];
  std::vector<int> pos(np);
  for (int p = 0; p < np; ++p) pos[p] = 2 + p;
  std::vector<Span> dy_box = box_of(call, pos);
  if (!holds(ids, dy_box)) return false;
  dy_box.push_back(d);
  if (!holds(dy, dy_box)) return false;
  const int64_t width = d.size();
  std::fill(call.out, call.out + v.size() * width, 0.0f);
  std::vector<int64_t> at(np), at_dy(np + 1);
  for (int p = 0; p < np; ++p) at[p] = call.vars[2 + p].lo;
  while (true) {
    const int64_t id = id_at(ids, at);
    if (id >= v.lo && id <= v.hi && id != padding) {
      std::copy(at.begin(), at.end(), at_dy.begin());
      at_dy[np] = d.lo;
      const float* src = element(dy, at_dy);
      float* dst = call.out + (static_cast<int64_t>(id) - v.lo) * width;
      for (int64_t k = 0; k < width; ++k) dst[k] += src[k];
    }
    int p = np - 1;
    while (p >= 0 && at[p] == call.vars[2 + p].hi) at[p] = call.vars[2 + p].lo, --p;
    if (p < 0) break;
    ++at[p];
  }
  return true;
}

}  // namespace

bool embedding(const TileCall& call, const Attrs&) { return lookup(call); }
bool embedding_grad(const TileCall& call, const Attrs& attrs) {
  const int64_t padding = attrs.integer("padding_idx", -1);
  return attrs.ok() && lookup_grad(call, padding);
}

// lambda i.., v: ids[i..] == v: one-hot rows of `depth` (an id that names no row, a fraction or NaN
// gives a zero row, as the comparison does).
bool one_hot(const TileCall& call, const Attrs&) {
  if (call.inputs.size() != 1 || call.vars.size() != call.output_vars.size()) return false;
  const TileIn& ids = call.inputs[0];
  const size_t nd = ids.shape.size();
  if (call.output_vars.size() != nd + 1) return false;
  for (size_t d = 0; d <= nd; ++d)
    if (call.output_vars[d] != static_cast<int>(d)) return false;
  const std::vector<Span> box(call.vars.begin(), call.vars.begin() + static_cast<int64_t>(nd));
  for (size_t d = 0; d < nd; ++d)
    if (box[d].hi >= ids.shape[d]) return false;
  if (!holds(ids, box)) return false;
  const Span v = call.vars[nd];
  std::vector<int64_t> at(nd);
  for (size_t d = 0; d < nd; ++d) at[d] = box[d].lo;
  float* out = call.out;
  while (true) {
    const int64_t id = id_at(ids, at);
    for (int64_t k = v.lo; k <= v.hi; ++k) *out++ = id == k ? 1.0f : 0.0f;
    int d = static_cast<int>(nd) - 1;
    while (d >= 0 && at[d] == box[d].hi) at[d] = box[d].lo, --d;
    if (d < 0) return true;
    ++at[d];
  }
}

int64_t lookup_scratch(const TileCall& call, const Attrs&) {
  const int np = static_cast<int>(call.vars.size()) - 1;  // lookup's position roles
  if (np < 1) return 0;
  int64_t count = 1;
  for (int p = 0; p < np; ++p) count *= call.vars[p].size();
  return scratch_piece(count * static_cast<int64_t>(sizeof(int64_t)));
}

}  // namespace tilewise::kernels::tile

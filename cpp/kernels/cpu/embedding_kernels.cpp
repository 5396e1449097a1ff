// Embedding lookups and their table gradients. The op library describes a lookup through an
// opaque function (the only data-dependent indexing in TDL), which the interpreter evaluates per
// id over the whole table; here a lookup copies one row segment per id, and the gradient adds each
// dy row into the row its id names. Ids are integer-valued floats until buffers carry dtypes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/tile_kernel_util.h"

namespace tilewise::kernels::tile {
namespace {

// The id at full-tensor coordinates `at` of the ids input, checked against the table's rows.
int64_t checked_id(const TileCall& call, const TileIn& ids, const std::vector<int64_t>& at, int64_t rows) {
  const float v = *element(ids, at);
  if (!(v >= 0.0f) || v >= static_cast<float>(rows) || v != std::floor(v)) {
    std::string where;
    for (int64_t a : at) where += (where.empty() ? "" : ", ") + std::to_string(a);
    throw InvalidInput("op '" + call.type + "': id " + std::to_string(v) + " at [" + where +
                       "] is not a row of the table (0 .. " + std::to_string(rows - 1) + ")");
  }
  return static_cast<int64_t>(v);
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
  std::vector<int64_t> rows_of;
  while (true) {
    rows_of.push_back(checked_id(call, ids, at, rows));
    int p = np - 1;
    while (p >= 0 && at[p] == call.vars[p].hi) at[p] = call.vars[p].lo, --p;
    if (p < 0) break;
    ++at[p];
  }
  for (int64_t row : rows_of) {
    const float* src = element(table, {row, d.lo});
    std::copy(src, src + width, out);
    out += width;
  }
  return true;
}

// dtable[v, d] = sum over positions p in this device's range of (ids[p] == v) dy[p, d]: roles v, d,
// then the positions. An id that names no row of this block adds nothing, as in the description.
bool lookup_grad(const TileCall& call) {
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
    const float id = *element(ids, at);
    if (id >= static_cast<float>(v.lo) && id <= static_cast<float>(v.hi) && id == std::floor(id)) {
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
bool embedding_grad(const TileCall& call, const Attrs&) { return lookup_grad(call); }

}  // namespace tilewise::kernels::tile

#include "exec/lowering.h"

#include <algorithm>
#include <unordered_map>

#include "cost/comm_cost.h"
#include "cost/transfers.h"
#include "exec/errors.h"
#include "exec/kernel_call.h"
#include "tdl/op_cost.h"

namespace tilewise::exec {

namespace {

// `in_place`: (tensor, the computed tensor whose storage it takes), checked by check_in_place.
void buffer_lifetimes(const graph::Graph& g, const std::vector<int>& keep,
                      const std::vector<std::pair<int, int>>& in_place, Lowered& low) {
  const int nt = static_cast<int>(g.tensors().size());
  std::vector<int> into(nt, -1);
  for (const auto& [t, total] : in_place) into[t] = total;
  low.storage_of.resize(nt);
  low.last_use.assign(nt, -1);
  for (const auto& t : g.tensors()) {
    int s = t.id;
    for (;;) {  // in place of the tensor it updates, or of the running total it adds to
      if (g.tensor(s).updates >= 0) s = g.tensor(s).updates;
      else if (into[s] >= 0) s = into[s];
      else break;
    }
    low.storage_of[t.id] = s;
    if (s != t.id)
      for (int d = 0; d < low.devices; ++d)
        TW_ASSERT(low.tiles[t.id][d].dims == low.tiles[s][d].dims, "an update shares its tensor's tiles");
  }
  // A computed storage lives from its producer to the last reader of any tensor stored in it, and
  // is kept after the step when one of them is a result (read by no op) or asked for.
  std::vector<int> last(nt, -1);
  std::vector<char> kept(nt, 0);
  for (const auto& t : g.tensors()) {
    const int s = low.storage_of[t.id];
    if (g.tensor(s).producer < 0) continue;  // a parameter, state or input (or an update of one)
    last[s] = std::max(last[s], t.producer);
    for (int c : t.consumers) last[s] = std::max(last[s], c);
    if (t.consumers.empty() || std::find(keep.begin(), keep.end(), t.id) != keep.end()) kept[s] = 1;
  }
  for (int s = 0; s < nt; ++s) {
    if (low.storage_of[s] != s || g.tensor(s).producer < 0) continue;
    if (kept[s]) low.kept.push_back(s);
    else low.last_use[s] = last[s];
  }
}

// In-place sums must be safe to run in place: the tensor is computed by an op that reads `total`
// at exactly its output index (an element-wise add), `total` is computed, read by that op alone,
// of the tensor's shape and dtype, not asked to be kept, and not the storage of two sums.
void check_in_place(const graph::Graph& g, const std::vector<int>& keep,
                    const std::vector<std::pair<int, int>>& in_place) {
  const int nt = static_cast<int>(g.tensors().size());
  std::vector<char> taken(nt, 0), stored(nt, 0);
  for (const auto& [t, total] : in_place) {
    if (t < 0 || t >= nt || total < 0 || total >= nt)
      throw ExecError("in-place sum (" + std::to_string(t) + ", " + std::to_string(total) + "): tensor id out of range");
    const auto &out = g.tensor(t), &into = g.tensor(total);
    const std::string what = "'" + out.name + "' cannot be stored in place of '" + into.name + "': ";
    if (out.producer < 0 || into.producer < 0) throw ExecError(what + "both must be computed by an op");
    if (out.shape != into.shape || out.dtype != into.dtype) throw ExecError(what + "shapes or dtypes differ");
    if (std::find(keep.begin(), keep.end(), total) != keep.end())
      throw ExecError(what + "'" + into.name + "' is kept after the step, the sum would overwrite it");
    if (into.consumers.size() != 1 || into.consumers[0] != out.producer)
      throw ExecError(what + "'" + into.name + "' must be read by '" + g.op(out.producer).name + "' alone");
    const auto& op = g.op(out.producer);
    const auto aligned = tdl::aligned_inputs(*op.desc);
    bool reads_aligned = false;
    for (size_t j = 0; j < op.inputs.size(); ++j) reads_aligned = reads_aligned || (op.inputs[j] == total && aligned[j]);
    if (!reads_aligned) throw ExecError(what + "'" + op.name + "' does not read it at exactly its output index");
    if (taken[total]++) throw ExecError(what + "another tensor is already stored there");
    if (stored[t]++) throw ExecError(what + "it is given twice");
  }
}

double op_flops(const cost::OpView& view, const std::vector<Range>& vars) {
  auto work = tdl::op_work(*view.desc, view.extents, view.input_shapes);
  double out_elems = 1, iter = 1, share = 1;
  for (int64_t s : view.output_shape) out_elems *= static_cast<double>(s);
  for (int64_t e : view.extents) iter *= static_cast<double>(std::max<int64_t>(e, 1));
  for (const auto& r : vars) share *= static_cast<double>(std::max<int64_t>(r.size(), 1));
  return work.flops_per_element * out_elems * share / iter;
}

// Builds every device's program, op by op. Per op and device the order is: fetch sends, region
// allocations, local copies and fetch receives, compute, partial sends, partial receives and
// combines, result sends, result receives, frees. Sends never wait (the communicator buffers or
// the transport copies), and every receive of a phase is matched by a send its peer posts before
// any receive of that phase or a later one, so the programs cannot deadlock.
class ProgramBuilder {
 public:
  ProgramBuilder(const graph::Graph& g, Lowered& low) : g_(g), low_(low) {
    const int n = low.devices;
    low.programs.resize(n);
    tile_.assign(n, std::vector<int>(g.tensors().size(), -1));
    allocated_.assign(n, std::vector<char>(g.tensors().size(), 0));
    last_stream_.assign(n, -1);
    for (int d = 0; d < n; ++d) {
      Program& p = low.programs[d];
      p.device = d, p.devices = n;
      p.streams = {"compute", "comm"};
      for (const auto& op : g.ops()) p.op_names.push_back(op.name);
      for (const auto& t : g.tensors())
        if (t.producer < 0 && !low.tiles[t.id][d].empty()) {
          tile_buffer(d, t.id).resident = true;
          allocated_[d][t.id] = 1;
        }
    }
  }

  // `scratch[d]`: the bytes device d's Compute takes as scratch (scratch_layout; 0: none).
  void op(const OpPlan& op, const cost::OpView& view, const std::vector<int64_t>& scratch) {
    const auto& node = g_.op(op.op);
    const int n = low_.devices;
    const int out_t = low_.storage_of[node.output];
    std::vector<std::vector<int>> region(n, std::vector<int>(node.inputs.size(), -1));
    std::vector<int> computed(n, -1);
    // A: fetches. Sends first, from the sources' tiles.
    for (int d = 0; d < n; ++d)
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const SlotPlan& slot = op.devices[d].slots[j];
        const int t = low_.storage_of[node.inputs[j]];
        for (const Transfer& tr : slot.parts)
          if (tr.src != d) {
            int64_t tag = next_tag_++;
            fetch_tags_.push_back(tag);
            Instr in = comm(InstrKind::kSend, op.op, tile_[tr.src][t], tr.what, t);
            in.peer = d, in.tag = tag;
            emit(tr.src, in, 1);
          }
      }
    size_t next_fetch = 0;
    for (int d = 0; d < n; ++d) {
      const DeviceOp& dev = op.devices[d];
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const SlotPlan& slot = dev.slots[j];
        if (slot.region.empty() || slot.use_tile) continue;
        region[d][j] = add_buffer(d, g_.tensor(node.inputs[j]).name + "@" + node.name, BufferRole::kRegion,
                                  node.inputs[j], slot.region);
        emit_alloc(d, op.op, region[d][j]);
      }
    }
    for (int d = 0; d < n; ++d)
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const SlotPlan& slot = op.devices[d].slots[j];
        const int t = low_.storage_of[node.inputs[j]];
        for (const Transfer& tr : slot.parts) {
          if (tr.src == d) {
            Instr in = comm(InstrKind::kCopy, op.op, region[d][j], tr.what, t);
            in.src = tile_[d][t];
            emit(d, in, 0);
          } else {
            Instr in = comm(InstrKind::kRecv, op.op, region[d][j], tr.what, t);
            in.peer = tr.src, in.tag = fetch_tags_[next_fetch++];
            emit(d, in, 1);
          }
        }
      }
    fetch_tags_.clear();
    // B: compute.
    for (int d = 0; d < n; ++d) {
      const DeviceOp& dev = op.devices[d];
      if (!dev.tile.empty() && !allocated_[d][out_t]) {
        allocated_[d][out_t] = 1;
        emit_alloc(d, op.op, tile_buffer_id(d, out_t));
      }
      if (!dev.active) continue;
      if (dev.direct) {
        computed[d] = tile_[d][out_t];
      } else {
        computed[d] = add_buffer(d, "computed(" + g_.tensor(node.output).name + ")", BufferRole::kComputed,
                                 node.output, dev.computed);
        emit_alloc(d, op.op, computed[d]);
      }
      Instr in;
      in.kind = InstrKind::kCompute, in.op = op.op, in.buffer = computed[d];
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const SlotPlan& slot = dev.slots[j];
        int b = slot.region.empty() ? -1 : slot.use_tile ? tile_[d][low_.storage_of[node.inputs[j]]] : region[d][j];
        in.inputs.push_back(b);
        if (b >= 0) in.bytes += slot.region.volume() * graph::dtype_size(g_.tensor(node.inputs[j]).dtype);
      }
      in.bytes += dev.computed.volume() * graph::dtype_size(g_.tensor(node.output).dtype);
      in.flops = op_flops(view, dev.vars);
      if (scratch[d] > 0) {
        in.scratch = add_scratch(d, "scratch(" + node.name + ")", scratch[d]);
        emit_alloc(d, op.op, in.scratch);
      }
      const int scratch_buffer = in.scratch;
      emit(d, std::move(in), 0);
      if (scratch_buffer >= 0) emit_free(d, op.op, scratch_buffer);
    }
    // C: partials to their owners (sends, then each owner receives into staging and combines).
    std::vector<int64_t> partial_tags;
    for (int d = 0; d < n; ++d)
      for (const Transfer& tr : op.devices[d].reduce_in) {
        int64_t tag = next_tag_++;
        partial_tags.push_back(tag);
        Instr in = comm(InstrKind::kSend, op.op, computed[tr.src], tr.what, out_t);
        in.peer = d, in.tag = tag;
        emit(tr.src, in, 1);
      }
    size_t next_partial = 0;
    for (int d = 0; d < n; ++d) {
      const DeviceOp& dev = op.devices[d];
      if (dev.reduce_in.empty()) continue;
      std::vector<int> stages;
      for (const Transfer& tr : dev.reduce_in) {
        stages.push_back(add_buffer(d, "partial" + std::to_string(stages.size()) + "(" + g_.tensor(node.output).name + ")",
                                    BufferRole::kStaging, node.output, tr.what));
        emit_alloc(d, op.op, stages.back());
      }
      for (size_t i = 0; i < dev.reduce_in.size(); ++i) {
        const Transfer& tr = dev.reduce_in[i];
        Instr rv = comm(InstrKind::kRecv, op.op, stages[i], tr.what, out_t);
        rv.peer = tr.src, rv.tag = partial_tags[next_partial++];
        emit(d, rv, 1);
        Instr cb = comm(InstrKind::kCombine, op.op, computed[d], tr.what, out_t);
        cb.src = stages[i], cb.reducer = op.reducer, cb.flops = static_cast<double>(tr.what.volume());
        emit(d, cb, 0);
      }
      for (int b : stages) emit_free(d, op.op, b);
    }
    // D: results to the holders.
    std::vector<int64_t> result_tags;
    for (int d = 0; d < n; ++d)
      for (const Transfer& tr : op.devices[d].result_in)
        if (tr.src != d) {
          int64_t tag = next_tag_++;
          result_tags.push_back(tag);
          Instr in = comm(InstrKind::kSend, op.op, computed[tr.src], tr.what, out_t);
          in.peer = d, in.tag = tag;
          emit(tr.src, in, 1);
        }
    size_t next_result = 0;
    for (int d = 0; d < n; ++d)
      for (const Transfer& tr : op.devices[d].result_in) {
        if (tr.src == d) {
          Instr in = comm(InstrKind::kCopy, op.op, tile_[d][out_t], tr.what, out_t);
          in.src = computed[d];
          emit(d, in, 0);
        } else {
          Instr in = comm(InstrKind::kRecv, op.op, tile_[d][out_t], tr.what, out_t);
          in.peer = tr.src, in.tag = result_tags[next_result++];
          emit(d, in, 1);
        }
      }
    // Frees: regions, the computed buffer, inputs and the output at their last use.
    for (int d = 0; d < n; ++d) {
      for (int b : region[d])
        if (b >= 0) emit_free(d, op.op, b);
      if (computed[d] >= 0 && computed[d] != tile_[d][out_t]) emit_free(d, op.op, computed[d]);
      auto dead = [&](int t) {
        if (low_.last_use[t] == op.op && low_.storage_of[t] == t && allocated_[d][t]) {
          allocated_[d][t] = 0;
          emit_free(d, op.op, tile_[d][t]);
        }
      };
      for (int t : node.inputs) dead(t);
      dead(node.output);
    }
  }

  void finish() {
    for (int d = 0; d < low_.devices; ++d) {
      Program& p = low_.programs[d];
      p.tile_of = tile_[d];
    }
  }

 private:
  BufferDesc& tile_buffer(int d, int t) { return low_.programs[d].buffers[tile_buffer_id(d, t)]; }
  int tile_buffer_id(int d, int t) {
    if (tile_[d][t] < 0) tile_[d][t] = add_buffer(d, g_.tensor(t).name, BufferRole::kTile, t, low_.tiles[t][d]);
    return tile_[d][t];
  }
  int add_buffer(int d, std::string name, BufferRole role, int tensor, const Box& box) {
    auto& bufs = low_.programs[d].buffers;
    BufferDesc b;
    b.name = std::move(name), b.role = role, b.tensor = tensor, b.box = box, b.dtype = g_.tensor(tensor).dtype;
    bufs.push_back(std::move(b));
    return static_cast<int>(bufs.size()) - 1;
  }
  int add_scratch(int d, std::string name, int64_t bytes) {
    auto& bufs = low_.programs[d].buffers;
    BufferDesc b;
    b.name = std::move(name), b.role = BufferRole::kScratch, b.dtype = "float32";
    b.box.dims = {Range{0, (bytes + 3) / 4 - 1}};
    bufs.push_back(std::move(b));
    return static_cast<int>(bufs.size()) - 1;
  }
  // A transfer, copy or combine of `box` of tensor `tensor` (its dtype sizes the bytes).
  Instr comm(InstrKind kind, int op, int buffer, const Box& box, int tensor) const {
    Instr in;
    in.kind = kind, in.op = op, in.buffer = buffer, in.box = box;
    in.bytes = box.volume() * graph::dtype_size(g_.tensor(tensor).dtype);
    return in;
  }
  void emit_alloc(int d, int op, int b) { emit_mem(d, op, b, InstrKind::kAlloc); }
  void emit_free(int d, int op, int b) { emit_mem(d, op, b, InstrKind::kFree); }
  void emit_mem(int d, int op, int b, InstrKind kind) {
    Instr in;
    in.kind = kind, in.op = op, in.buffer = b;
    const BufferDesc& buf = low_.programs[d].buffers[b];
    in.bytes = buf.bytes();
    emit(d, in, 0);
  }
  // Appends `in` on `stream`; where the stream changes, the new one waits for an event the previous
  // one records (the data the next instruction reads was written there).
  void emit(int d, Instr in, int stream) {
    Program& p = low_.programs[d];
    int& last = last_stream_[d];
    if (last >= 0 && last != stream) {
      Instr rec, wait;
      rec.kind = InstrKind::kRecord, rec.stream = last, rec.event = next_event_[d], rec.op = in.op;
      wait.kind = InstrKind::kWait, wait.stream = stream, wait.event = next_event_[d]++, wait.op = in.op;
      p.instrs.push_back(rec);
      p.instrs.push_back(wait);
    }
    last = stream;
    in.stream = stream;
    p.instrs.push_back(std::move(in));
  }

  const graph::Graph& g_;
  Lowered& low_;
  std::vector<std::vector<int>> tile_;        // [device][tensor]: its tile's buffer id
  std::vector<std::vector<char>> allocated_;  // [device][tensor]: tile held at this point
  std::vector<int> last_stream_;
  std::unordered_map<int, int> next_event_;
  std::vector<int64_t> fetch_tags_;
  int64_t next_tag_ = 0;
};

}  // namespace

std::pair<std::vector<int64_t>, std::vector<int64_t>> predicted_traffic(const graph::Graph& g,
                                                                        const cost::Placement& plan) {
  std::string misfit = cost::placement_misfit(g, plan);
  if (!misfit.empty()) throw ExecError(misfit);
  const int steps = static_cast<int>(plan.parts.size());
  const int n = static_cast<int>(cost::device_count(plan.parts));
  const auto& a = plan.assignment;
  std::vector<std::vector<Box>> tiles;
  for (const auto& t : g.tensors()) tiles.push_back(cost::device_tiles(t.shape, a.tilings[t.id], plan.parts, steps));
  std::vector<int64_t> sent(n, 0), received(n, 0);
  for (const auto& node : g.ops()) {
    std::vector<cost::Shape> shapes;
    for (int t : node.inputs) shapes.push_back(g.tensor(t).shape);
    cost::OpView view = cost::make_view(*node.desc, shapes, g.tensor(node.output).shape);
    const auto& split = a.splits[node.id];
    auto reads = cost::device_reads(view, split, plan.parts, steps);
    auto computed = cost::device_outputs(view, split, plan.parts, steps);
    auto classes = cost::partial_classes(split, plan.parts, steps);
    int64_t element = 0;  // bytes per element of the tensor whose transfers are visited
    auto box_visit = [&](cost::TransferKind, int src, int dst, const Box& cell) {
      if (src != dst) sent[src] += cell.volume() * element;
    };
    // Sent: who sends each box (the enumeration with boxes). Received: the cost model's counts.
    for (size_t j = 0; j < node.inputs.size(); ++j)
      for (int d = 0; d < n; ++d) {
        element = graph::dtype_size(g.tensor(node.inputs[j]).dtype);
        cost::for_each_fetch(reads[j][d], tiles[node.inputs[j]], d, box_visit);
        if (!reads[j][d].empty())
          received[d] += (reads[j][d].volume() - tdl::intersect_volume(reads[j][d], tiles[node.inputs[j]][d])) * element;
      }
    const auto& out_tiles = tiles[node.output];
    element = graph::dtype_size(g.tensor(node.output).dtype);
    cost::for_each_conversion(computed, classes, out_tiles, cost::outputs_are_disjoint(split), box_visit);
    std::vector<int64_t> rec;
    cost::output_elements(computed, classes, out_tiles, cost::outputs_are_disjoint(split), &rec);
    for (int d = 0; d < n && d < static_cast<int>(rec.size()); ++d) received[d] += rec[d] * element;
  }
  return {sent, received};
}

Lowered lower(const graph::Graph& g, const cost::Placement& plan, const std::vector<int>& keep,
              const std::vector<std::pair<int, int>>& in_place) {
  std::string misfit = cost::placement_misfit(g, plan);
  if (!misfit.empty()) throw ExecError(misfit);
  check_in_place(g, keep, in_place);
  Lowered low;
  low.parts = plan.parts;
  const int steps = static_cast<int>(plan.parts.size());
  low.devices = static_cast<int>(cost::device_count(plan.parts));
  const int n = low.devices;
  const auto& a = plan.assignment;
  for (const auto& t : g.tensors()) low.tiles.push_back(cost::device_tiles(t.shape, a.tilings[t.id], plan.parts, steps));
  buffer_lifetimes(g, keep, in_place, low);
  ProgramBuilder programs(g, low);

  for (const auto& node : g.ops()) {
    std::vector<cost::Shape> shapes;
    for (int t : node.inputs) shapes.push_back(g.tensor(t).shape);
    cost::OpView view = cost::make_view(*node.desc, shapes, g.tensor(node.output).shape);
    const auto& split = a.splits[node.id];
    OpPlan op;
    op.op = node.id;
    op.extents = view.extents;
    for (const auto& s : split)
      if (s.kind == tdl::StrategyKind::kReduce) op.reducer = s.reducer;
    auto reads = cost::device_reads(view, split, plan.parts, steps);
    auto computed = cost::device_outputs(view, split, plan.parts, steps);
    auto classes = cost::partial_classes(split, plan.parts, steps);
    const bool reduced = cost::reduces(split);
    const auto& out_tiles = low.tiles[node.output];
    op.devices.resize(n);
    for (int d = 0; d < n; ++d) {
      DeviceOp& dev = op.devices[d];
      dev.vars = cost::var_ranges(view.extents, split, plan.parts, cost::device_coords(d, plan.parts, steps));
      dev.active = std::none_of(dev.vars.begin(), dev.vars.end(), [](const Range& r) { return r.empty(); });
      dev.tile = out_tiles[d];
      dev.computed = dev.active ? computed[d] : Box::nothing(view.output_shape.size());
      dev.direct = dev.active && cost::writes_in_place(reduced, dev.computed, dev.tile);
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        SlotPlan slot;
        const auto& tiles = low.tiles[node.inputs[j]];
        slot.region = dev.active ? reads[j][d] : Box::nothing(shapes[j].size());
        if (slot.region.empty()) {
          dev.slots.push_back(std::move(slot));
          continue;
        }
        slot.use_tile = tdl::same_box(slot.region, tiles[d]);
        if (!slot.use_tile)
          cost::for_each_fetch(slot.region, tiles, d, [&](cost::TransferKind, int src, int, const Box& cell) {
            slot.parts.push_back({src, cell});
          });
        dev.slots.push_back(std::move(slot));
      }
    }
    // Output conversion: partials to the owners, results to the holders (a direct device's own
    // final values are already in place). `computed` is empty for idle devices, as dev.computed.
    cost::for_each_conversion(computed, classes, out_tiles, cost::outputs_are_disjoint(split),
                              [&](cost::TransferKind kind, int src, int dst, const Box& cell) {
                                DeviceOp& to = op.devices[dst];
                                if (kind == cost::TransferKind::kPartial) to.reduce_in.push_back({src, cell});
                                else if (src != dst || !to.direct) to.result_in.push_back({src, cell});
                              });
    for (int d = 0; d < n; ++d) {
      op.reduces = op.reduces || !op.devices[d].reduce_in.empty();
      for (const Transfer& tr : op.devices[d].result_in) op.remote_results = op.remote_results || tr.src != d;
    }
    op.remote_results = op.remote_results || op.reduces;
    std::vector<int64_t> scratch(n, 0);
    for (int d = 0; d < n; ++d)
      if (op.devices[d].active) scratch[d] = scratch_layout(g, node.id, kernel_call(g, op, d)).bytes;
    programs.op(op, view, scratch);
    low.ops.push_back(std::move(op));
  }
  programs.finish();
  return low;
}

}  // namespace tilewise::exec

#include "frontier/graph_frontier.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <thread>

#include "cost/tiling.h"
#include "exec/program.h"
#include "partition/exact_sum.h"
#include "sim/program_sim.h"
#include "tdl/errors.h"
#include "tdl/op_cost.h"
#include "tdl/interrupt.h"

namespace tilewise::frontier {

using cost::kReplicated;
using graph::Role;
using partition::PlanError;
using partition::Point;

std::vector<int> hierarchy_parts(const sim::Cluster& cluster, int devices) {
  if (devices <= 1) return {};
  const int per = cluster.devices_per_machine;
  if (devices <= per) return {devices};
  if (devices % per == 0) {
    if (per == 1) return {devices};
    return {devices / per, per};
  }
  return cost::factorize(devices);
}

namespace {

// What stays in memory across the step (docs/FRONTIERS.md "Memory"): resident tensors, parameter
// gradients (alive until the update), forward activations the backward pass reads.
bool kept(const graph::Graph& g, int t) {
  const auto& node = g.tensor(t);
  if (node.updates >= 0) return false;  // written in place of the tensor it updates
  switch (node.role) {
    case Role::kParameter:
    case Role::kOptimizerState:
    case Role::kConstant:
    case Role::kInput:
    case Role::kLabel: return true;
    case Role::kGradient: return node.grad_of >= 0 && g.tensor(node.grad_of).role == Role::kParameter;
    default: break;
  }
  if (node.producer < 0 || g.op(node.producer).phase != graph::Phase::kForward) return false;
  for (int c : node.consumers)
    if (g.op(c).phase == graph::Phase::kBackward) return true;
  return false;
}

std::vector<int> split_key(const cost::OpSplit& s) {
  std::vector<int> k;
  for (const auto& st : s) k.push_back(static_cast<int>(st.kind) * 65536 + st.var + 1);
  return k;
}

// Runs f(i) for i in [0, n) over `threads` threads; stops early past the deadline.
template <class F>
bool parallel_for(int n, int threads, std::chrono::steady_clock::time_point deadline, F f) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min(threads, n));
  std::atomic<int> next{0};
  std::atomic<bool> late{false};
  auto work = [&] {
    for (int i; (i = next.fetch_add(1)) < n;) {
      if (interrupt_requested() || std::chrono::steady_clock::now() > deadline) {
        late = true;
        return;
      }
      f(i);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  check_interrupt();
  return !late;
}

}  // namespace

FrontierModel::FrontierModel(const graph::Graph& g, const sim::Cluster& cluster, std::vector<int> parts,
                             const ModelOptions& options)
    : graph_(&g), parts_(std::move(parts)) {
  const auto start = std::chrono::steady_clock::now();
  int64_t product = 1;
  for (int k : parts_) {
    if (k < 2) throw PlanError("every part count must be at least 2, got " + std::to_string(k));
    product *= k;
  }
  if (product > cluster.devices)
    throw PlanError("parts multiply to " + std::to_string(product) + " devices; cluster '" + cluster.name +
                    "' has " + std::to_string(cluster.devices));
  devices_ = static_cast<int>(product);
  const int m = static_cast<int>(parts_.size());
  policy_.replicate_tensors = true;
  policy_.reduce_ops = true;
  policy_.replicate_ops = true;
  if (options.batch_split_inputs)
    policy_.restrict_cuts = [&g](int t, int, const std::vector<int>& candidates) -> std::vector<int> {
      const Role role = g.tensor(t).role;
      if (role != Role::kInput && role != Role::kLabel) return {};
      if (std::find(candidates.begin(), candidates.end(), 0) != candidates.end()) return {0};
      return {};  // the batch is already cut as far as it goes: any cut (or replication) as before
    };
  problem_ = partition::make_problem(g, parts_, policy_);
  const int nt = static_cast<int>(problem_.class_tensors.size());
  const int no = static_cast<int>(problem_.class_ops.size());
  auto report = [&](const std::string& what) {
    if (options.progress) options.progress(what, 0, 1);
  };

  // Configurations and bytes: build_step over the first s steps, s = 1..m (the last gives the domains).
  std::vector<partition::StepProblem> blocks;
  for (int s = 1; s <= m; ++s) {
    report("costing bytes, steps 1-" + std::to_string(s));
    std::vector<int> block;
    for (int i = 0; i < s; ++i) block.push_back(i);
    blocks.push_back(partition::build_step(problem_, policy_, partition::empty_assignment(problem_), block, m,
                                           options.threads, options.deadline));
  }
  if (m == 0) {
    tensor_configs_.assign(nt, {cost::Tiling{}});
    op_configs_.assign(no, {cost::OpSplit{}});
  } else {
    tensor_configs_ = blocks.back().tensor_domain;
    op_configs_ = blocks.back().op_domain;
  }

  // Op classes: the busiest device's share of every member, priced as the simulator prices a
  // Compute instruction.
  report("costing compute");
  node_costs_.assign(nt + no, {});
  const bool in_time = parallel_for(no, options.threads, options.deadline, [&](int oc) {
    auto& out = node_costs_[nt + oc];
    for (const auto& split : op_configs_[oc]) {
      std::vector<double> seconds;
      for (int o : problem_.class_ops[oc]) {
        const cost::OpView& view = problem_.ops[o];
        const std::string kind = sim::compute_kind(g, o);
        const bool by_bytes = !sim::priced_by_flops(kind);
        const auto work = tdl::op_work(*view.desc, view.extents, view.input_shapes);
        double out_elems = 1, iter = 1;
        for (int64_t s : view.output_shape) out_elems *= static_cast<double>(s);
        for (int64_t e : view.extents) iter *= static_cast<double>(std::max<int64_t>(e, 1));
        std::vector<std::vector<cost::Box>> reads;
        std::vector<cost::Box> outs;
        if (by_bytes && m > 0) reads = cost::device_reads(view, split, parts_, m), outs = cost::device_outputs(view, split, parts_, m);
        double busiest = 0;
        for (int d = 0; d < devices_; ++d) {
          auto ranges = cost::var_ranges(view.extents, split, parts_, cost::device_coords(d, parts_, m));
          double share = 1;
          bool empty = false;
          for (const auto& r : ranges) share *= static_cast<double>(std::max<int64_t>(r.size(), 1)), empty |= r.size() <= 0;
          if (empty) continue;
          exec::Instr in;
          in.kind = exec::InstrKind::kCompute;
          in.op = o;
          in.flops = work.flops_per_element * out_elems * share / iter;
          if (by_bytes) {
            int64_t elems = 0;
            if (m == 0) {
              for (const auto& shape : view.input_shapes) elems += cost::Box::whole(shape).volume();
              elems += cost::Box::whole(view.output_shape).volume();
            } else {
              for (const auto& per_input : reads) elems += per_input[d].volume();
              elems += outs[d].volume();
            }
            in.bytes = elems * 4;  // float32, as the lowering counts a Compute instruction
          }
          busiest = std::max(busiest, sim::instruction_seconds(g, in, cluster));
          if (!by_bytes) break;  // device 0 has the largest share of every variable (array_split)
        }
        seconds.push_back(busiest);
      }
      out.push_back({partition::exact_sum(seconds), 0.0});
    }
  });
  if (!in_time) throw partition::SearchTimeout("time limit reached while costing compute");

  // Tensor classes: the busiest device's tile of what stays in memory.
  report("costing memory");
  for (int tc = 0; tc < nt; ++tc) {
    auto& out = node_costs_[tc];
    for (const auto& tiling : tensor_configs_[tc]) {
      std::vector<double> bytes;
      for (int t : problem_.class_tensors[tc]) {
        if (!kept(g, t)) continue;
        const auto& shape = g.tensor(t).shape;
        int64_t most = 0;
        if (m == 0) most = cost::Box::whole(shape).volume();
        else
          for (const auto& box : cost::device_tiles(shape, tiling, parts_, m)) most = std::max(most, box.volume());
        bytes.push_back(static_cast<double>(most * problem_.bytes_per_element(t)));
      }
      out.push_back({0.0, partition::exact_sum(bytes)});
    }
  }

  // Pairs: the bytes each step adds, over the link it crosses.
  report("costing transfers");
  if (m > 0) {
    // Each full configuration's prefix in the tables of the first s steps.
    auto prefix_index = [](const auto& full, const auto& shorter, int s, auto key) {
      std::map<std::vector<int>, int> at;
      for (size_t i = 0; i < shorter.size(); ++i) at[key(shorter[i])] = static_cast<int>(i);
      std::vector<int> out;
      for (const auto& seq : full) {
        auto k = key(seq);
        k.resize(s);
        auto it = at.find(k);
        TW_ASSERT(it != at.end(), "a configuration's prefix is a configuration of the first steps");
        out.push_back(it->second);
      }
      return out;
    };
    auto tiling_key = [](const cost::Tiling& t) { return t; };
    std::vector<std::vector<std::vector<int>>> tprefix(m, std::vector<std::vector<int>>(nt)), oprefix(m, std::vector<std::vector<int>>(no));
    for (int s = 1; s <= m; ++s) {
      for (int tc = 0; tc < nt; ++tc)
        tprefix[s - 1][tc] = prefix_index(tensor_configs_[tc], blocks[s - 1].tensor_domain[tc], s, tiling_key);
      for (int oc = 0; oc < no; ++oc)
        oprefix[s - 1][oc] = prefix_index(op_configs_[oc], blocks[s - 1].op_domain[oc], s, split_key);
    }
    // Transfers per pair: one per member op and slot of the pair.
    std::map<std::pair<int, int>, int> transfers;
    for (const auto& op : g.ops()) {
      for (int t : op.inputs) ++transfers[{problem_.op_class[op.id], problem_.tensor_class[t]}];
      ++transfers[{problem_.op_class[op.id], problem_.tensor_class[op.output]}];
    }
    std::vector<std::map<std::pair<int, int>, const std::vector<int64_t>*>> tables(m);
    for (int s = 0; s < m; ++s)
      for (const auto& pair : blocks[s].pairs) tables[s][{pair.op_class, pair.tensor_class}] = &pair.table;
    // Step s crosses the link between device 0 and its neighbour in coordinate s.
    std::vector<const sim::Link*> links;
    std::vector<double> share;
    for (int s = 0; s < m; ++s) {
      int64_t stride = 1;
      for (int i = s + 1; i < m; ++i) stride *= parts_[i];
      const sim::Link& link = cluster.link(0, static_cast<int>(stride));
      links.push_back(&link);
      share.push_back(link.shared ? std::min(cluster.devices_per_machine, devices_) : 1);
    }
    // A device's share of a step's bytes goes as one message to (or from) each peer of its step
    // group, per member transfer: the lowering sends boxes peer by peer, and each message pays the
    // link's latency and the packing and unpacking the simulator prices.
    auto message_seconds = [&](int s, double bytes_per_device, int n) {
      if (bytes_per_device <= 0) return 0.0;
      n *= parts_[s] - 1;
      const double each = bytes_per_device / n;
      const sim::Link& link = *links[s];
      exec::Instr send, recv;
      send.kind = exec::InstrKind::kSend, recv.kind = exec::InstrKind::kRecv;
      send.bytes = recv.bytes = static_cast<int64_t>(each + 0.5);
      const double wire = link.latency + share[s] * each / link.bandwidth.at(each);
      return n * (wire + sim::instruction_seconds(g, send, cluster) + sim::instruction_seconds(g, recv, cluster));
    };
    for (const auto& pair : blocks.back().pairs) {
      const int oc = pair.op_class, tc = pair.tensor_class;
      const int ns = static_cast<int>(op_configs_[oc].size()), nc = static_cast<int>(tensor_configs_[tc].size());
      const int n = transfers.at({oc, tc});
      partition::ParetoEdge e{nt + oc, tc, std::vector<Point>(static_cast<size_t>(ns) * nc)};
      for (int si = 0; si < ns; ++si)
        for (int ci = 0; ci < nc; ++ci) {
          int64_t before = 0;
          std::vector<double> seconds;
          for (int s = 0; s < m; ++s) {
            const auto* table = tables[s].at({oc, tc});
            const int ncs = static_cast<int>(blocks[s].tensor_domain[tc].size());
            const int64_t now = (*table)[static_cast<size_t>(oprefix[s][oc][si]) * ncs + tprefix[s][tc][ci]];
            seconds.push_back(message_seconds(s, static_cast<double>(std::max<int64_t>(now - before, 0)) / devices_, n));
            before = std::max(before, now);
          }
          e.table[static_cast<size_t>(si) * nc + ci] = {partition::exact_sum(seconds), 0.0};
        }
      edges_.push_back(std::move(e));
    }
  }

  fold_copies(options.copy_ops);

  // Pruning (exact): a configuration goes when another is no worse in its own costs and in every
  // entry of every incident table against the neighbours' remaining configurations; of equal
  // ones the first stays.
  const int nv = nt + no;
  kept_.assign(nv, {});
  for (int v = 0; v < nv; ++v)
    for (int c = 0; c < static_cast<int>(node_costs_[v].size()); ++c) kept_[v].push_back(c);
  std::vector<std::vector<int>> incident(nv);
  for (size_t e = 0; e < edges_.size(); ++e) incident[edges_[e].u].push_back(static_cast<int>(e)), incident[edges_[e].v].push_back(static_cast<int>(e));
  auto entry = [&](int e, int v, int cv, int cw) -> const Point& {
    const auto& ed = edges_[e];
    const size_t nvv = node_costs_[ed.v].size();
    return v == ed.u ? ed.table[static_cast<size_t>(cv) * nvv + cw] : ed.table[static_cast<size_t>(cw) * nvv + cv];
  };
  auto no_worse = [](const Point& a, const Point& b) { return a.time <= b.time && a.memory <= b.memory; };
  for (bool changed = options.prune; changed;) {
    changed = false;
    for (int v = 0; v < nv; ++v) {
      auto& ks = kept_[v];
      if (ks.size() < 2) continue;
      std::vector<char> gone(ks.size(), 0);
      for (size_t a = 0; a < ks.size(); ++a)
        for (size_t b = 0; b < ks.size() && !gone[a]; ++b) {
          if (a == b || gone[b]) continue;
          const int ca = ks[a], cb = ks[b];
          bool covers = no_worse(node_costs_[v][cb], node_costs_[v][ca]);
          bool equal = node_costs_[v][cb].time == node_costs_[v][ca].time &&
                       node_costs_[v][cb].memory == node_costs_[v][ca].memory;
          for (size_t i = 0; i < incident[v].size() && covers; ++i) {
            const int e = incident[v][i];
            const int w = edges_[e].u == v ? edges_[e].v : edges_[e].u;
            for (int cw : kept_[w]) {
              const Point &pa = entry(e, v, ca, cw), &pb = entry(e, v, cb, cw);
              if (!no_worse(pb, pa)) {
                covers = false;
                break;
              }
              equal = equal && pa.time == pb.time && pa.memory == pb.memory;
            }
          }
          if (covers && (!equal || b < a)) gone[a] = 1;
        }
      std::vector<int> next;
      for (size_t a = 0; a < ks.size(); ++a)
        if (!gone[a]) next.push_back(ks[a]);
      if (next.size() != ks.size()) ks = std::move(next), changed = true;
    }
  }
  for (int v = 0; v < nv; ++v) {
    std::vector<Point> costs;
    for (int c : kept_[v]) costs.push_back(node_costs_[v][c]);
    pruned_.nodes.push_back(std::move(costs));
  }
  for (const auto& e : edges_) {
    partition::ParetoEdge pe{e.u, e.v, {}};
    const size_t nvv = node_costs_[e.v].size();
    for (int cu : kept_[e.u])
      for (int cv : kept_[e.v]) pe.table.push_back(e.table[static_cast<size_t>(cu) * nvv + cv]);
    pruned_.edges.push_back(std::move(pe));
  }
  ties_ = elementwise_ties(problem_, tensor_configs_, op_configs_, kept_);
  build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void FrontierModel::fold_copies(const std::vector<int>& copy_ops) {
  if (copy_ops.empty()) return;
  const auto& g = *graph_;
  const int nt = num_tensor_classes(), no = num_op_classes();
  std::vector<char> is_copy(g.ops().size(), 0);
  for (int o : copy_ops) {
    if (o < 0 || o >= static_cast<int>(g.ops().size()))
      throw PlanError("copy op id " + std::to_string(o) + " is not an op of the graph");
    const auto& op = g.op(o);
    if (op.inputs.size() != 1 || g.tensor(op.inputs[0]).shape != g.tensor(op.output).shape)
      throw PlanError("op '" + op.name + "' is not a copy (one input of its output's shape)");
    is_copy[o] = 1;
  }
  std::vector<char> done(no, 0);
  for (int o : copy_ops) {
    const int oc = problem_.op_class[o];
    if (done[oc]) continue;
    done[oc] = 1;
    CopyFactor f{oc, problem_.tensor_class[g.op(o).inputs[0]], problem_.tensor_class[g.op(o).output], {}};
    for (int member : problem_.class_ops[oc])
      if (!is_copy[member] || problem_.tensor_class[g.op(member).inputs[0]] != f.source ||
          problem_.tensor_class[g.op(member).output] != f.copy)
        throw PlanError("op '" + g.op(member).name + "' shares a class with the copy '" + g.op(o).name +
                        "' but is not a copy of the same tensors");
    for (int t : problem_.class_tensors[f.copy])
      if (g.tensor(t).producer < 0 || !is_copy[g.tensor(t).producer])
        throw PlanError("tensor '" + g.tensor(t).name + "' shares a class with a copy but no copy writes it");
    // The copy op's tables against its source and its copy (none with one device).
    const partition::ParetoEdge *in = nullptr, *out = nullptr;
    std::vector<partition::ParetoEdge> rest;
    for (auto& e : edges_) {
      if (e.u == nt + oc && e.v == f.source) in = &e;
      else if (e.u == nt + oc && e.v == f.copy) out = &e;
    }
    const auto& splits = node_costs_[nt + oc];
    const int nx = static_cast<int>(tensor_configs_[f.source].size()), ny = static_cast<int>(tensor_configs_[f.copy].size());
    partition::ParetoEdge factor{f.source, f.copy, std::vector<Point>(static_cast<size_t>(nx) * ny)};
    f.split.assign(static_cast<size_t>(nx) * ny, 0);
    for (int x = 0; x < nx; ++x)
      for (int y = 0; y < ny; ++y) {
        // The cheapest split of the copy for this pair (its costs are time only: the least time is exact).
        double best = std::numeric_limits<double>::infinity();
        for (int s = 0; s < static_cast<int>(splits.size()); ++s) {
          std::vector<double> parts{splits[s].time};
          if (in) parts.push_back(in->table[static_cast<size_t>(s) * nx + x].time);
          if (out) parts.push_back(out->table[static_cast<size_t>(s) * ny + y].time);
          const double t = partition::exact_sum(parts);
          if (t < best) best = t, f.split[static_cast<size_t>(x) * ny + y] = s;
        }
        // Tiled alike, the copy is the source itself: the plan leaves it out.
        if (tensor_configs_[f.source][x] != tensor_configs_[f.copy][y])
          factor.table[static_cast<size_t>(x) * ny + y] = {best, node_costs_[f.copy][y].memory};
      }
    for (auto& e : edges_)
      if (&e != in && &e != out) rest.push_back(std::move(e));
    rest.push_back(std::move(factor));
    edges_ = std::move(rest);
    for (auto& p : node_costs_[f.copy]) p.memory = 0;  // in the factor now
    node_costs_[nt + oc] = {Point{0.0, 0.0}};           // not a variable of the search any more
    copies_.push_back(std::move(f));
  }
}

std::vector<std::tuple<int, int, int>> FrontierModel::copy_classes() const {
  std::vector<std::tuple<int, int, int>> out;
  for (const auto& f : copies_) out.emplace_back(num_tensor_classes() + f.op_class, f.source, f.copy);
  return out;
}

std::vector<int> FrontierModel::kept_copy_ops(const std::vector<int>& choice) const {
  costs(choice);  // checks the choice
  std::vector<int> out;
  for (const auto& f : copies_)
    if (tensor_configs_[f.source][kept_[f.source][choice[f.source]]] != tensor_configs_[f.copy][kept_[f.copy][choice[f.copy]]])
      out.insert(out.end(), problem_.class_ops[f.op_class].begin(), problem_.class_ops[f.op_class].end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> FrontierModel::configs_before() const {
  std::vector<int> out;
  for (const auto& c : node_costs_) out.push_back(static_cast<int>(c.size()));
  return out;
}

std::vector<int> FrontierModel::configs_after() const {
  std::vector<int> out;
  for (const auto& k : kept_) out.push_back(static_cast<int>(k.size()));
  return out;
}

std::vector<int> FrontierModel::representatives() const {
  std::vector<int> out;
  for (const auto& m : problem_.class_tensors) out.push_back(m[0]);
  for (const auto& m : problem_.class_ops) out.push_back(m[0]);
  return out;
}

partition::ParetoSolution FrontierModel::solve(const partition::ParetoOptions& options, bool coarse) const {
  if (!coarse) return partition::solve_pareto(pruned_, options);
  const Coarsened c = coarsen(pruned_, ties_);
  partition::ParetoSolution sol = partition::solve_pareto(c.problem, options);
  // Choices over every class, costed on the full problem (sums in another order can differ in the
  // last bit from the coarse ones), reduced again.
  std::vector<Point> points;
  std::vector<std::vector<int>> choices;
  for (const auto& choice : sol.choices) {
    choices.push_back(expand(choice, c, ties_));
    points.push_back(partition::evaluate_pareto(pruned_, choices.back()));
  }
  sol.points.clear(), sol.choices.clear();
  for (int i : partition::reduce_indices(points)) sol.points.push_back(points[i]), sol.choices.push_back(choices[i]);
  // Statistics name the classes the coarse variables stand for.
  for (auto& step : sol.stats.steps) step.var = c.variable[step.var];
  for (int& v : sol.stats.conditioned) v = c.variable[v];
  for (auto& [v, x] : sol.stats.fixed) {
    const int full = c.variable[v];
    const int g = ties_.group[full];
    if (g >= 0) {
      const auto& members = ties_.members[g];
      x = ties_.of[g][std::find(members.begin(), members.end(), full) - members.begin()][x];
    }
    v = full;
  }
  return sol;
}

partition::ParetoSolution FrontierModel::solve_mesh(const std::vector<int>& mesh,
                                                   const partition::ParetoOptions& options) const {
  const int m = static_cast<int>(parts_.size());
  if (static_cast<int>(mesh.size()) != m)
    throw PlanError("a mesh layout has one entry per step: " + std::to_string(mesh.size()) + " given, " +
                    std::to_string(m) + " steps");
  for (int r : mesh)
    if (r != kMeshFirst && r != kMeshLast && r != kReplicated)
      throw PlanError("mesh entry " + std::to_string(r) + "; valid: 0 (first dimension), 1 (last), -1 (replicated)");
  const int nt = num_tensor_classes();
  std::vector<int> pick(nt, -1);
  for (int tc = 0; tc < nt; ++tc) {
    const auto& shape = graph_->tensor(problem_.class_tensors[tc][0]).shape;
    const int rank = static_cast<int>(shape.size());
    std::vector<int64_t> shares(shape.begin(), shape.end());
    cost::Tiling want;
    for (int s = 0; s < m; ++s) {
      int d = mesh[s] == kReplicated || rank == 0 ? kReplicated : mesh[s] == kMeshFirst ? 0 : rank - 1;
      if (d != kReplicated && shares[d] < parts_[s]) d = kReplicated;
      if (d != kReplicated) shares[d] /= parts_[s];
      want.push_back(d);
    }
    // Not found: a class the policy restricts (inputs under batch_split_inputs) keeps its own.
    auto it = std::find(tensor_configs_[tc].begin(), tensor_configs_[tc].end(), want);
    if (it != tensor_configs_[tc].end()) pick[tc] = static_cast<int>(it - tensor_configs_[tc].begin());
  }
  auto allowed = [&](int v) {
    std::vector<int> c;
    for (int i = 0; i < static_cast<int>(node_costs_[v].size()); ++i)
      if (v >= nt || pick[v] < 0 || pick[v] == i) c.push_back(i);
    return c;
  };
  partition::ParetoProblem pr;
  for (int v = 0; v < static_cast<int>(node_costs_.size()); ++v) {
    pr.nodes.emplace_back();
    for (int c : allowed(v)) pr.nodes.back().push_back(node_costs_[v][c]);
  }
  for (const auto& e : edges_) {
    partition::ParetoEdge pe{e.u, e.v, {}};
    const size_t nvv = node_costs_[e.v].size();
    const auto cv = allowed(e.v);
    for (int cu : allowed(e.u))
      for (int c : cv) pe.table.push_back(e.table[static_cast<size_t>(cu) * nvv + c]);
    pr.edges.push_back(std::move(pe));
  }
  return partition::solve_pareto(pr, options);
}

Costs FrontierModel::sum(const std::vector<int>& full) const {
  const int nt = num_tensor_classes();
  std::vector<double> compute, memory, network;
  for (size_t v = 0; v < full.size(); ++v) {
    const Point& p = node_costs_[v][full[v]];
    (static_cast<int>(v) < nt ? memory : compute).push_back(static_cast<int>(v) < nt ? p.memory : p.time);
  }
  for (const auto& e : edges_) {
    const Point& p = e.table[static_cast<size_t>(full[e.u]) * node_costs_[e.v].size() + full[e.v]];
    network.push_back(p.time);
    if (p.memory != 0) memory.push_back(p.memory);  // a reuse copy's tiles
  }
  Costs c;
  c.compute = partition::exact_sum(compute);
  c.network = partition::exact_sum(network);
  c.memory = partition::exact_sum(memory);
  std::vector<double> both = compute;
  both.insert(both.end(), network.begin(), network.end());
  c.time = partition::exact_sum(both);
  return c;
}

Costs FrontierModel::costs(const std::vector<int>& choice) const {
  if (choice.size() != kept_.size())
    throw PlanError("a choice has one configuration per class: " + std::to_string(choice.size()) + " given, " +
                    std::to_string(kept_.size()) + " classes");
  std::vector<int> full;
  for (size_t v = 0; v < choice.size(); ++v) {
    if (choice[v] < 0 || choice[v] >= static_cast<int>(kept_[v].size()))
      throw PlanError("class " + std::to_string(v) + " has " + std::to_string(kept_[v].size()) +
                      " configurations; " + std::to_string(choice[v]) + " given");
    full.push_back(kept_[v][choice[v]]);
  }
  return sum(full);
}

Costs FrontierModel::evaluate(const cost::Placement& plan) const { return sum(full_choice(plan)); }

std::vector<int> FrontierModel::choice_of(const cost::Placement& plan) const {
  std::vector<int> full = full_choice(plan), choice;
  const auto names = representatives();
  for (size_t v = 0; v < full.size(); ++v) {
    auto it = std::find(kept_[v].begin(), kept_[v].end(), full[v]);
    if (it == kept_[v].end()) {
      const bool tensor = static_cast<int>(v) < num_tensor_classes();
      throw PlanError(std::string("the ") + (tensor ? "tiling of tensor '" + graph_->tensor(names[v]).name
                                                     : "split of op '" + graph_->op(names[v]).name) +
                      "' is a configuration pruning removed (dominated in every cost)");
    }
    choice.push_back(static_cast<int>(it - kept_[v].begin()));
  }
  return choice;
}

std::vector<int> FrontierModel::full_choice(const cost::Placement& plan) const {
  const auto& g = *graph_;
  std::string why = cost::placement_misfit(g, plan);
  if (!why.empty()) throw PlanError(why);
  if (plan.parts != parts_) {
    auto str = [](const std::vector<int>& v) {
      std::string s;
      for (int k : v) s += (s.empty() ? "" : ", ") + std::to_string(k);
      return "[" + s + "]";
    };
    throw PlanError("the plan's parts " + str(plan.parts) + " are not the frontier's " + str(parts_) +
                    ": plan with tw.partition(..., parts=" + str(parts_) + ")");
  }
  const int nt = num_tensor_classes();
  std::vector<int> full;
  for (int tc = 0; tc < nt; ++tc) {
    const auto& members = problem_.class_tensors[tc];
    const cost::Tiling& t = plan.assignment.tilings[members[0]];
    for (int other : members)
      if (plan.assignment.tilings[other] != t)
        throw PlanError("tensors '" + g.tensor(members[0]).name + "' and '" + g.tensor(other).name +
                        "' share a class but not a tiling");
    auto it = std::find(tensor_configs_[tc].begin(), tensor_configs_[tc].end(), t);
    if (it == tensor_configs_[tc].end())
      throw PlanError("the tiling of tensor '" + g.tensor(members[0]).name + "' is not a configuration of the frontier");
    full.push_back(static_cast<int>(it - tensor_configs_[tc].begin()));
  }
  std::vector<char> copy_class(num_op_classes(), 0);
  for (const auto& f : copies_) copy_class[f.op_class] = 1;
  for (int oc = 0; oc < num_op_classes(); ++oc) {
    if (copy_class[oc]) {  // priced with its tensors' tilings (the cheapest split)
      full.push_back(0);
      continue;
    }
    const auto& members = problem_.class_ops[oc];
    const auto key = split_key(plan.assignment.splits[members[0]]);
    for (int other : members)
      if (split_key(plan.assignment.splits[other]) != key)
        throw PlanError("ops '" + g.op(members[0]).name + "' and '" + g.op(other).name +
                        "' share a class but not a split");
    int found = -1;
    for (size_t c = 0; c < op_configs_[oc].size() && found < 0; ++c)
      if (split_key(op_configs_[oc][c]) == key) found = static_cast<int>(c);
    if (found < 0) throw PlanError("the split of op '" + g.op(members[0]).name + "' is not a configuration of the frontier");
    full.push_back(found);
  }
  return full;
}

partition::Plan FrontierModel::plan(const std::vector<int>& choice, int threads, bool count_bytes) const {
  costs(choice);  // checks the choice
  const int nt = num_tensor_classes();
  partition::Plan p;
  p.algorithm = "frontier";
  p.devices = devices_;
  p.parts = parts_;
  p.assignment = partition::empty_assignment(problem_);
  for (int tc = 0; tc < nt; ++tc)
    for (int t : problem_.class_tensors[tc]) p.assignment.tilings[t] = tensor_configs_[tc][kept_[tc][choice[tc]]];
  for (int oc = 0; oc < num_op_classes(); ++oc)
    for (int o : problem_.class_ops[oc]) p.assignment.splits[o] = op_configs_[oc][kept_[nt + oc][choice[nt + oc]]];
  for (const auto& f : copies_) {
    const size_t x = kept_[f.source][choice[f.source]], y = kept_[f.copy][choice[f.copy]];
    const auto& split = op_configs_[f.op_class][f.split[x * tensor_configs_[f.copy].size() + y]];
    for (int o : problem_.class_ops[f.op_class]) p.assignment.splits[o] = split;
  }
  const int m = static_cast<int>(parts_.size());
  if (!count_bytes) {
    p.step_bytes.assign(static_cast<size_t>(m), 0);
    return p;
  }
  auto prefix = partition::prefix_bytes(problem_, p.assignment, m, threads);
  p.step_bytes = partition::step_deltas(prefix);
  p.comm_bytes = prefix.empty() ? 0 : prefix.back();
  return p;
}

}  // namespace tilewise::frontier

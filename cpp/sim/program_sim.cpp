#include "sim/program_sim.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "exec/arena.h"
#include "exec/share_timing.h"
#include "kernels/cpu/tile_kernels.h"

namespace tilewise::sim {

using exec::InstrKind;

std::string compute_kind(const graph::Graph& g, int op) {
  const auto& desc = *g.op(op).desc;
  if (desc.kernel.empty()) return "interpreter";
  std::string kind = kernels::kernel_kind(desc.kernel);
  return kind.empty() ? "interpreter" : kind;
}

bool priced_by_flops(const std::string& kind) { return kind == "gemm" || kind == "conv" || kind == "interpreter"; }

namespace {

struct Priced {
  std::string kind;
  double work = 0;
};

// What one instruction costs on its device, as a kernel kind and its work.
Priced price(const graph::Graph& g, const exec::Instr& in, const DeviceProfile& device) {
  switch (in.kind) {
    case InstrKind::kCompute: {
      std::string kind = compute_kind(g, in.op);
      const double work = priced_by_flops(kind) ? in.flops : static_cast<double>(in.bytes);
      return {std::move(kind), work};
    }
    case InstrKind::kSend:  // a profile without "send" (given, not calibrated) prices the packing as a copy
      return {device.kernels.count("send") ? "send" : "copy", 2.0 * static_cast<double>(in.bytes)};
    case InstrKind::kRecv:
    case InstrKind::kCopy: return {"copy", 2.0 * static_cast<double>(in.bytes)};
    case InstrKind::kCombine: return {"combine", 3.0 * static_cast<double>(in.bytes)};
    default: return {"", 0};
  }
}

// g(w) = a + w / R: the per-call time of the kind's smallest measured call plus the work at its
// best rate (OpScales). Monotone in w whatever the profile's bins do, so a share never costs more
// than the whole.
double size_cost(const DeviceProfile& device, const std::string& kind, double work) {
  auto it = device.kernels.find(kind);
  if (it == device.kernels.end() || it->second.rate.empty()) return work;
  const Profile& r = it->second.rate;
  const double a = it->second.overhead + r.sizes.front() / r.values.front();
  const double best = *std::max_element(r.values.begin(), r.values.end());
  return a + work / best;
}

}  // namespace

// Per instruction of a device's step: its reuse distance, the bytes of the distinct buffers the
// device touched since the buffers it reads were last touched (by this step's earlier instructions,
// or the previous step's later ones: the step repeats) — an LRU stack distance over buffers, each
// counted once at its size however often it was touched in between. A call whose distance plus its
// own bytes fits the last-level cache's share reads from the cache, not the memory bus. (Counting
// the traffic instead counted a buffer read by every time step of an RNN once per read, and put
// weights fetched every time step in memory.)
std::vector<double> reuse_distances(const exec::Program& prog) {
  std::vector<double> out(prog.instrs.size(), 0.0);
  const size_t nb = prog.buffers.size();
  std::vector<int64_t> last(nb, -1);  // the time of a buffer's latest touch
  std::vector<double> size(nb, 0.0);
  for (size_t b = 0; b < nb; ++b) size[b] = static_cast<double>(prog.buffers[b].bytes());
  auto reads = [](const exec::Instr& in, auto&& f) {
    switch (in.kind) {
      case InstrKind::kCompute:
        for (int b : in.inputs) f(b);
        break;
      case InstrKind::kCopy: f(in.src); break;  // its destination is written (copy_cached: a cold one)
      case InstrKind::kCombine: f(in.src); f(in.buffer); break;
      case InstrKind::kSend:
      case InstrKind::kSwapOut: f(in.buffer); break;
      default: break;
    }
  };
  auto writes = [](const exec::Instr& in, auto&& f) {
    if (in.kind == InstrKind::kCompute || in.kind == InstrKind::kCopy || in.kind == InstrKind::kCombine ||
        in.kind == InstrKind::kRecv || in.kind == InstrKind::kSwapIn)
      f(in.buffer);
    if (in.kind == InstrKind::kCompute) f(in.scratch);
  };
  auto touches = [](const exec::Instr& in) {  // not Alloc/Free: their bytes are no traffic
    return in.bytes > 0 && (in.kind == InstrKind::kCompute || in.kind == InstrKind::kCopy ||
                            in.kind == InstrKind::kCombine || in.kind == InstrKind::kSend ||
                            in.kind == InstrKind::kRecv || in.kind == InstrKind::kSwapIn ||
                            in.kind == InstrKind::kSwapOut);
  };
  auto valid = [&](int b) { return b >= 0 && static_cast<size_t>(b) < nb; };
  // Touch times over both passes; a Fenwick tree over them holds each buffer's size at its latest
  // touch, so the bytes touched between two times are a difference of prefix sums.
  int64_t times = 0;
  for (const auto& in : prog.instrs)
    if (touches(in)) {
      reads(in, [&](int b) { times += valid(b); });
      writes(in, [&](int b) { times += valid(b); });
    }
  times *= 2;
  std::vector<double> tree(static_cast<size_t>(times) + 1, 0.0);
  auto add = [&](int64_t t, double v) {
    for (++t; t <= times; t += t & -t) tree[static_cast<size_t>(t)] += v;
  };
  auto prefix = [&](int64_t t) {  // the sum over times < t
    double s = 0;
    for (; t > 0; t -= t & -t) s += tree[static_cast<size_t>(t)];
    return s;
  };
  int64_t now = 0;
  auto touch = [&](int b) {
    if (!valid(b)) return;
    if (last[b] >= 0) add(last[b], -size[b]);
    add(now, size[b]);
    last[b] = now++;
  };
  for (int pass = 0; pass < 2; ++pass) {  // the first pass finds where the previous step left each buffer
    for (size_t k = 0; k < prog.instrs.size(); ++k) {
      const exec::Instr& in = prog.instrs[k];
      if (!touches(in)) continue;
      double distance = 0;
      bool any = false;
      const double touched = prefix(now);  // the sizes at every buffer's latest touch so far
      reads(in, [&](int b) {
        if (!valid(b)) return;
        any = true;
        distance = std::max(distance, last[b] < 0 ? 1e300 : touched - prefix(last[b] + 1));
      });
      out[k] = any ? distance : 0.0;  // a call reading nothing (a receive) writes fresh lines
      reads(in, touch);
      writes(in, touch);
    }
  }
  return out;
}

namespace {

// The seconds of an instruction already priced as `p` (a measured op: its share by its timed ratio
// when `share_ratio` > 0, else by size_cost).
double priced_seconds(const Priced& p, const exec::Instr& in, const Cluster& cluster, const OpScales* scales,
                      double share_ratio = 0) {
  if (p.kind.empty()) return 0;
  if (scales && in.kind == InstrKind::kCompute && in.op >= 0 && static_cast<size_t>(in.op) < scales->seconds.size() &&
      scales->seconds[in.op] > 0 && scales->work[in.op] > 0) {
    if (share_ratio > 0) return scales->seconds[in.op] * share_ratio;
    return scales->seconds[in.op] * size_cost(cluster.device, p.kind, p.work) /
           size_cost(cluster.device, p.kind, scales->work[in.op]);
  }
  return cluster.device.kernel_seconds(p.kind, p.work);
}

// Per device, per op: the timed ratio of its share (OpScales::shares), 0 where none was timed.
std::vector<std::vector<double>> share_ratios(const exec::Lowered& low, const OpScales* scales) {
  std::vector<std::vector<double>> out(static_cast<size_t>(low.devices));
  if (!scales || scales->shares.empty()) return out;
  for (auto& row : out) row.assign(scales->shares.size(), 0.0);
  for (const exec::OpPlan& op : low.ops) {
    if (op.op < 0 || static_cast<size_t>(op.op) >= scales->shares.size() || scales->shares[op.op].empty()) continue;
    const auto& timed = scales->shares[op.op];
    for (size_t d = 0; d < op.devices.size() && d < out.size(); ++d) {
      if (!op.devices[d].active) continue;
      auto it = timed.find(exec::share_signature(op.devices[d]));
      if (it != timed.end()) out[d][op.op] = it->second;
    }
  }
  return out;
}

}  // namespace

double instruction_seconds(const graph::Graph& g, const exec::Instr& in, const Cluster& cluster,
                           const OpScales* scales) {
  return priced_seconds(price(g, in, cluster.device), in, cluster, scales);
}

int64_t program_peak_memory(const exec::Program& prog) {
  int64_t resident = 0;
  for (const auto& b : prog.buffers)
    if (b.resident) resident += b.bytes();
  // The arena's clock: one tick per allocation or release in the step, in program order.
  std::vector<exec::BufferLife> lives;
  std::unordered_map<int, size_t> live;
  int64_t clock = 0;
  for (const auto& in : prog.instrs) {
    if (in.kind == InstrKind::kAlloc) {
      live[in.buffer] = lives.size();
      lives.push_back({prog.buffers[in.buffer].bytes(), clock++, -1});
    } else if (in.kind == InstrKind::kFree) {
      auto it = live.find(in.buffer);
      if (it != live.end()) lives[it->second].dies = clock++, live.erase(it);
    }
  }
  for (auto& l : lives)
    if (l.dies < 0) l.dies = clock;  // kept for reading after the step
  return resident + exec::plan_block(lives);
}

Prediction simulate_programs(const graph::Graph& g, const exec::Lowered& low, const Cluster& cluster,
                             const OpScales* scales, bool keep_tasks) {
  cluster.validate();
  const int n = low.devices;
  if (cluster.devices < n)
    throw std::invalid_argument("the plan runs on " + std::to_string(n) + " devices but cluster '" + cluster.name +
                                "' has " + std::to_string(cluster.devices));
  Prediction out;
  std::vector<Task>& tasks = out.tasks;
  std::vector<TaskInfo>& info = out.info;
  std::vector<std::string>& streams = out.streams;
  std::vector<Resource> resources;

  // Streams: a device's own (one per program stream when they overlap, else one). The copy streams
  // of a swapped program ("swap-in", "swap-out") always have their own: copy workers are threads.
  const bool overlap = cluster.device.concurrent_streams;
  std::vector<std::vector<int>> stream_of(n);
  std::vector<char> workers(n, 0);  // per device: a stream on a thread of its own besides the device's
  int copiers = 0;
  for (int d = 0; d < n; ++d) {
    const auto& prog = low.programs[d];
    const size_t ns = std::max<size_t>(prog.streams.size(), 1);
    for (size_t s = 0; s < ns; ++s) {
      const bool copier = s < prog.streams.size() && prog.streams[s].rfind("swap", 0) == 0;
      workers[d] = workers[d] || copier;
      copiers += copier;
      if (overlap || s == 0 || copier) {
        streams.push_back(overlap || copier ? "d" + std::to_string(d) + "/" + prog.streams[s] : "d" + std::to_string(d));
        stream_of[d].push_back(static_cast<int>(streams.size()) - 1);
      } else {
        stream_of[d].push_back(stream_of[d][0]);
      }
    }
  }

  // Cores shared by the threads (a worker per device, a copy worker per copy stream), when fewer
  // than the threads; one machine's memory bus shared by its threads' memory-bound calls and copies.
  // Both in units of one device's speed alone.
  const int threads = n + copiers;
  const bool share_cores = cluster.concurrent_devices > 0 && cluster.concurrent_devices < threads;
  if (share_cores) resources.push_back({"cores", static_cast<double>(cluster.concurrent_devices)});
  const bool share_memory = cluster.memory_concurrency > 0 && threads > 1;
  const int memory_base = static_cast<int>(resources.size());
  if (share_memory)
    for (int m = 0; m < cluster.machine_of(n - 1) + 1; ++m)
      resources.push_back({"memory m" + std::to_string(m), cluster.memory_concurrency});
  constexpr double kCacheBytes = 1 << 20;  // below this a call's data stays in the core's cache

  auto add = [&](Task t, TaskInfo i) {
    tasks.push_back(std::move(t));
    info.push_back(std::move(i));
    return static_cast<int>(tasks.size()) - 1;
  };
  auto busy_task = [&](double seconds, int stream, int device, const Priced& p, bool in_cache) {
    Task t;
    t.stream = stream;
    if (share_cores) t.resources.push_back(0);
    if (share_memory && !priced_by_flops(p.kind) && p.work >= kCacheBytes && !in_cache)
      t.resources.push_back(memory_base + cluster.machine_of(device));
    if (t.resources.empty()) t.seconds = seconds;
    else t.work = seconds, t.max_rate = 1;
    return t;
  };

  // Swaps (SwapAdvisor §4.3.1): latency + bytes at the host link's bandwidth; each direction its own
  // resource, both together capped by duplex_bandwidth (a half-duplex link: one resource for both).
  // Work is in seconds at the link's peak, so that a copy also shares the cores and the memory bus
  // (a copy worker's memcpy on a CPU machine) in those resources' units.
  std::map<std::string, int> resource_of;
  auto resource = [&](const std::string& name, double capacity) {
    auto [it, fresh] = resource_of.emplace(name, static_cast<int>(resources.size()));
    if (fresh) resources.push_back({name, capacity});
    return it->second;
  };
  auto host_task = [&](const exec::Instr& in, int stream, int d) {
    const Link& host = cluster.host;
    if (host.bandwidth.empty())
      throw std::invalid_argument("cluster '" + cluster.name + "' has no host link; swap instructions are priced on it");
    const double bytes = static_cast<double>(in.bytes);
    const double peak = *std::max_element(host.bandwidth.values.begin(), host.bandwidth.values.end());
    const std::string dev = "host d" + std::to_string(d);
    Task t;
    t.stream = stream;
    t.seconds = bytes > 0 ? host.latency : 0;
    t.work = bytes / peak;
    t.max_rate = bytes > 0 ? host.bandwidth.at(bytes) / peak : 0;
    if (bytes > 0) {
      t.resources.push_back(host.duplex ? resource(dev + (in.kind == InstrKind::kSwapIn ? " in" : " out"), 1.0)
                                        : resource(dev, 1.0));
      if (host.duplex && host.duplex_bandwidth > 0) t.resources.push_back(resource(dev + " both", host.duplex_bandwidth / peak));
      if (share_cores) t.resources.push_back(0);
      if (share_memory && bytes >= kCacheBytes) t.resources.push_back(memory_base + cluster.machine_of(d));
    }
    return t;
  };

  // Device tasks, program order; sends and receives remembered by tag.
  std::unordered_map<int64_t, std::pair<int, int>> send_of;  // tag -> (task, device)
  std::vector<std::pair<int, int64_t>> recvs;                // (task, tag)
  const double cache_share = cluster.cache_bytes / std::max(1, std::min(n, cluster.devices_per_machine));
  const std::vector<std::vector<double>> ratios = share_ratios(low, scales);
  // The profile's "*_cached" kinds, by the kind they stand in for (looked up once, not per instruction).
  std::map<std::string, std::string> cached_kind;
  for (const std::string& kind : cached_kernel_kinds())
    if (cluster.device.kernels.count(kind)) cached_kind[kind.substr(0, kind.size() - 7)] = kind;  // "_cached"
  for (int d = 0; d < n; ++d) {
    const auto& prog = low.programs[d];
    const std::vector<double> distance = share_memory && cache_share > 0 ? reuse_distances(prog)
                                                                          : std::vector<double>(prog.instrs.size(), 1e300);
    std::unordered_map<int, int> recorded;  // event -> task
    std::vector<std::pair<int, int>> waits;  // (task, event)
    for (size_t k = 0; k < prog.instrs.size(); ++k) {
      const exec::Instr& in = prog.instrs[k];
      const int stream = stream_of[d][in.stream];
      TaskInfo ti;
      ti.device = d, ti.instr = static_cast<int>(k), ti.op = in.op;
      switch (in.kind) {
        case InstrKind::kAlloc:
        case InstrKind::kFree: continue;
        case InstrKind::kRecord:
        case InstrKind::kWait: {
          if (!overlap && !workers[d]) continue;  // one worker: program order holds every event
          Task t;
          t.stream = stream;
          ti.kind = "event";
          int id = add(std::move(t), ti);
          if (in.kind == InstrKind::kRecord) recorded[in.event] = id;
          else waits.push_back({id, in.event});
          continue;
        }
        default: break;
      }
      if (in.kind == InstrKind::kSwapIn || in.kind == InstrKind::kSwapOut) {
        ti.kind = in.kind == InstrKind::kSwapIn ? "swap_in" : "swap_out";
        ti.kernel = "host", ti.work = static_cast<double>(in.bytes), ti.bytes = in.bytes;
        out.host_bytes += in.bytes;
        add(host_task(in, stream, d), ti);
        continue;
      }
      Priced p = price(g, in, cluster.device);
      const bool in_cache = distance[k] + static_cast<double>(in.bytes) <= cache_share;
      if (in_cache && in.kind != InstrKind::kCompute && !cached_kind.empty()) {
        auto it = cached_kind.find(p.kind);
        if (it != cached_kind.end()) p.kind = it->second;  // its source in the cache: faster than from memory
      }
      const double ratio = in.kind == InstrKind::kCompute && in.op >= 0 && static_cast<size_t>(in.op) < ratios[d].size()
                                ? ratios[d][in.op]
                                : 0.0;
      Task t = busy_task(priced_seconds(p, in, cluster, scales, ratio), stream, d, p, in_cache);
      ti.kernel = p.kind, ti.work = p.work, ti.bytes = in.bytes;
      ti.kind = in.kind == InstrKind::kCompute ? "compute"
                : in.kind == InstrKind::kSend  ? "send"
                : in.kind == InstrKind::kRecv  ? "recv"
                : in.kind == InstrKind::kCombine ? "combine"
                : in.kind == InstrKind::kCopy  ? "copy"
                                               : exec::kind_name(in.kind);
      int id = add(std::move(t), ti);
      if (in.kind == InstrKind::kSend) send_of[in.tag] = {id, d};
      if (in.kind == InstrKind::kRecv) recvs.push_back({id, in.tag});
    }
    for (auto [task, event] : waits) {
      auto it = recorded.find(event);
      if (it == recorded.end()) throw std::invalid_argument("device " + std::to_string(d) + " waits for event " +
                                                            std::to_string(event) + " that no stream records");
      tasks[task].after.push_back(it->second);
    }
  }

  // Links: one task per message, after its send, on a stream per ordered pair (messages keep their
  // order); concurrent transfers share what the link level shares.
  std::map<std::pair<int, int>, int> pair_stream;
  std::unordered_map<int64_t, int> link_of;  // tag -> link task
  // Deterministic order: by sender task index.
  std::vector<std::pair<int, int64_t>> sends;
  for (const auto& [tag, sd] : send_of) sends.push_back({sd.first, tag});
  std::sort(sends.begin(), sends.end());
  for (const auto& [send_task, tag] : sends) {
    const int src = info[send_task].device;
    const exec::Instr& in = low.programs[src].instrs[info[send_task].instr];
    const int dst = in.peer;
    const Link& link = cluster.link(src, dst);
    const bool inter = cluster.machine_of(src) != cluster.machine_of(dst);
    (inter ? out.inter_bytes : out.intra_bytes) += in.bytes;
    auto [ps, fresh] = pair_stream.emplace(std::make_pair(src, dst), static_cast<int>(streams.size()));
    if (fresh) streams.push_back("link d" + std::to_string(src) + "->d" + std::to_string(dst));
    Task t;
    t.stream = ps->second;
    t.after = {send_task};
    const double bytes = static_cast<double>(in.bytes);
    t.seconds = bytes > 0 ? link.latency : 0;
    t.work = bytes;
    t.max_rate = bytes > 0 ? link.bandwidth.at(bytes) : 0;
    const double peak = link.bandwidth.values.empty() ? 0 : *std::max_element(link.bandwidth.values.begin(),
                                                                               link.bandwidth.values.end());
    if (bytes > 0) {
      // Who shares: a shared level per machine (both ends' machines when between machines); an
      // unshared one per pair of devices (one direction each when duplex).
      const std::string lvl = link.name.empty() ? (inter ? "inter" : "intra") : link.name;
      std::vector<std::string> names;
      if (link.shared) {
        const int ms = cluster.machine_of(src), md = cluster.machine_of(dst);
        const std::string dir_out = link.duplex ? "/out" : "", dir_in = link.duplex ? "/in" : "";
        names.push_back(lvl + " m" + std::to_string(ms) + dir_out);
        if (md != ms) names.push_back(lvl + " m" + std::to_string(md) + dir_in);
      } else {
        const int a = link.duplex ? src : std::min(src, dst), b = link.duplex ? dst : std::max(src, dst);
        names.push_back(lvl + " d" + std::to_string(a) + (link.duplex ? "->d" : "<->d") + std::to_string(b));
      }
      for (const auto& nm : names) t.resources.push_back(resource(nm, peak));
      if (link.duplex && link.duplex_bandwidth > 0) {
        const int a = std::min(src, dst), b = std::max(src, dst);
        const std::string both = link.shared ? lvl + " m" + std::to_string(cluster.machine_of(src)) + " both"
                                             : lvl + " d" + std::to_string(a) + "<->d" + std::to_string(b) + " both";
        t.resources.push_back(resource(both, link.duplex_bandwidth));
      }
    }
    TaskInfo ti;
    ti.device = src, ti.instr = info[send_task].instr, ti.op = in.op, ti.kind = "link";
    ti.kernel = inter ? "inter" : "intra", ti.work = bytes, ti.bytes = in.bytes;
    link_of[tag] = add(std::move(t), ti);
  }
  for (const auto& [task, tag] : recvs) {
    auto it = link_of.find(tag);
    if (it == link_of.end())
      throw std::invalid_argument("device " + std::to_string(info[task].device) + " receives tag " +
                                  std::to_string(tag) + " that no device sends");
    tasks[task].after.push_back(it->second);
  }

  out.timeline = simulate(tasks, static_cast<int>(streams.size()), resources);
  out.step_seconds = out.timeline.makespan;
  out.compute_seconds.assign(n, 0), out.comm_seconds.assign(n, 0), out.idle_seconds.assign(n, 0);
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskInfo& ti = info[i];
    const double span = out.timeline.end[i] - out.timeline.start[i];
    if (ti.kind == "compute" || ti.kind == "combine" || ti.kind == "copy") out.compute_seconds[ti.device] += span;
    else if (ti.kind == "send" || ti.kind == "recv") out.comm_seconds[ti.device] += span;
  }
  for (int d = 0; d < n; ++d) {
    out.idle_seconds[d] = std::max(0.0, out.step_seconds - out.compute_seconds[d] - out.comm_seconds[d]);
    out.peak_memory.push_back(program_peak_memory(low.programs[d]));
  }
  if (!keep_tasks) out.tasks.clear(), out.info.clear(), out.streams.clear();
  return out;
}

}  // namespace tilewise::sim

// Clusters (TensorOpt §2.1, §3.2, §5; SwapAdvisor §4.2, §5.1; Tofu §7): the devices a plan runs on,
// what each computes how fast, and the links between them. The simulator (simulator.h) prices every
// instruction of the per-device programs against one Cluster; nothing else holds a time model.
//
// Rates and bandwidths are measured (or given) at sizes 2^i and interpolated between the two
// neighbouring points linearly in log2(size) (TensorOpt §3.2); below the first point and above the
// last, the end point's value holds.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tilewise::sim {

/// The kernel kinds a device profile prices (see DeviceProfile::kernels), in the order tables show
/// them; Python reads this list rather than keeping its own.
inline const std::vector<std::string>& kernel_kinds() {
  static const std::vector<std::string> kinds = {"gemm",      "conv",        "elementwise", "reduction",
                                                 "norm",      "layout",      "embedding",   "interpreter",
                                                 "copy",      "combine",     "send"};
  return kinds;
}

/// Kinds a profile may add (calibration does): a copy, combine or send whose source the simulator's
/// reuse distance puts in the last-level cache. Where a profile lacks one, the plain kind prices it.
inline const std::vector<std::string>& cached_kernel_kinds() {
  static const std::vector<std::string> kinds = {"copy_cached", "combine_cached", "send_cached"};
  return kinds;
}

/// A quantity measured at sizes: `values[i]` at `sizes[i]` (sizes ascending, positive).
struct Profile {
  std::vector<double> sizes;
  std::vector<double> values;
  /// The value at `size`, interpolated linearly in log2(size) between neighbours; clamped to the
  /// end points outside them. An empty profile throws std::logic_error, a NaN size
  /// std::invalid_argument.
  double at(double size) const;
  bool empty() const { return sizes.empty(); }
  /// Throws std::invalid_argument naming `what` when sizes are not ascending and positive, values
  /// not positive and finite, or the lengths differ.
  void validate(const std::string& what) const;
};

/// How fast one kind of kernel runs: `rate` maps the work of one call (FLOPs for the "gemm" and
/// "conv" kinds, bytes read and written for the others) to work per second; `overhead` is paid
/// once per call (launch, dispatch, thread wake-up).
struct KernelRate {
  Profile rate;
  double overhead = 0;
};

/// One device: its memory and what its kernels cost.
struct DeviceProfile {
  std::string name;       ///< e.g. "NVIDIA V100 16 GB", "this machine's core"
  int64_t memory = 0;     ///< bytes; 0 = unlimited
  /// Kernel kinds (kernels::kernel_kind): "gemm", "conv", "elementwise", "reduction", "norm",
  /// "layout", "embedding", "interpreter" (ops without a native kernel: work = FLOPs), "copy"
  /// (box copies of the runtime; a received message unpacked), "combine" (adding partials),
  /// "send" (a message packed and handed over: a copy plus the hand-over's fixed cost); optionally
  /// "copy_cached", "combine_cached", "send_cached": the same from a source in the last-level cache
  /// (the simulator's reuse distance says so) into a destination out of it (calibration measures
  /// copies of 1 MiB and more both ways; below that the suite's copies, which run warm, price both).
  std::map<std::string, KernelRate> kernels;
  /// Whether a device's compute and copy streams run at the same time (a GPU) or one worker runs
  /// its program in order (a CPU device of the thread or MPI executor).
  bool concurrent_streams = false;
  /// The seconds one call of `kind` takes for `work` (throws std::invalid_argument for a kind the
  /// profile lacks, naming the kinds it has).
  double kernel_seconds(const std::string& kind, double work) const;
};

/// A link level: every pair of devices at that level is connected by one such link.
struct Link {
  std::string name;    ///< "intra" (inside a machine), "inter" (between machines), "host" (device <-> host)
  Profile bandwidth;   ///< bytes -> bytes per second, for one transfer alone on the link
  double latency = 0;  ///< seconds per transfer, independent of size
  /// Both directions at full bandwidth at once; `duplex_bandwidth` caps the two together (0: 2x).
  bool duplex = true;
  double duplex_bandwidth = 0;
  /// Concurrent transfers through one machine's link share it (PCIe switch, NIC); false: every pair
  /// of devices has its own (NVLink mesh, in-process copies).
  bool shared = false;
  /// latency + bytes / bandwidth(bytes): the link alone.
  double transfer_seconds(double bytes) const;
};

/// Devices grouped into machines; device d sits on machine d / devices_per_machine. Factors of the
/// device count map onto this hierarchy slowest link first: the planners' first cut separates
/// machines (device ids are ordered machine-major).
struct Cluster {
  std::string name;
  int devices = 1;
  int devices_per_machine = 1;
  /// How many devices compute at once (the cores a thread executor's workers share); 0 = all.
  int concurrent_devices = 0;
  /// How many of one machine's devices stream memory at full speed at once (the machine's memory
  /// bandwidth over one device's: CPU cores share one memory bus); 0 = each device has its own
  /// memory (GPUs). Memory-bound calls of 1 MiB and more share it (smaller ones stay in cache).
  double memory_concurrency = 0;
  /// Bytes of last-level cache one machine's devices share (0: not modelled). A memory-bound call
  /// whose device touched its data within its share of the cache (the cache over the machine's
  /// devices at work) reads the cache, not the memory bus, and does not share the bus.
  double cache_bytes = 0;
  DeviceProfile device;
  Link intra, inter, host;
  // Written so that devices near INT_MAX do not overflow (devices + devices_per_machine - 1 would).
  int machines() const { return devices / devices_per_machine + (devices % devices_per_machine != 0); }
  int machine_of(int device) const { return device / devices_per_machine; }
  /// The link between two distinct devices (intra when on one machine, else inter).
  const Link& link(int a, int b) const { return machine_of(a) == machine_of(b) ? intra : inter; }
  /// Throws std::invalid_argument naming the first field out of range.
  void validate() const;
};

}  // namespace tilewise::sim

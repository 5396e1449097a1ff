#include "sim/cluster.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tilewise::sim {

double Profile::at(double size) const {
  if (sizes.empty()) throw std::logic_error("an empty profile has no value");
  // NaN fails both clamps below and upper_bound would then return end(): read past the points.
  if (std::isnan(size)) throw std::invalid_argument("a profile has no value at size NaN");
  if (size <= sizes.front()) return values.front();
  if (size >= sizes.back()) return values.back();
  const auto hi = static_cast<size_t>(std::upper_bound(sizes.begin(), sizes.end(), size) - sizes.begin());
  const size_t lo = hi - 1;
  const double x0 = std::log2(sizes[lo]), x1 = std::log2(sizes[hi]);
  const double t = x1 > x0 ? (std::log2(size) - x0) / (x1 - x0) : 0.0;
  return values[lo] + t * (values[hi] - values[lo]);
}

void Profile::validate(const std::string& what) const {
  if (sizes.size() != values.size())
    throw std::invalid_argument(what + ": " + std::to_string(sizes.size()) + " sizes but " +
                                std::to_string(values.size()) + " values");
  if (sizes.empty()) throw std::invalid_argument(what + ": no measured points");
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!(sizes[i] > 0) || !std::isfinite(sizes[i]))
      throw std::invalid_argument(what + ": size " + std::to_string(sizes[i]) + " is not positive and finite");
    if (i && !(sizes[i] > sizes[i - 1])) throw std::invalid_argument(what + ": sizes are not strictly ascending");
    if (!(values[i] > 0) || !std::isfinite(values[i]))
      throw std::invalid_argument(what + ": value " + std::to_string(values[i]) + " at size " +
                                  std::to_string(sizes[i]) + " is not positive and finite");
  }
}

double DeviceProfile::kernel_seconds(const std::string& kind, double work) const {
  auto it = kernels.find(kind);
  if (it == kernels.end()) {
    std::string have;
    for (const auto& [k, _] : kernels) have += (have.empty() ? "" : ", ") + k;
    throw std::invalid_argument("device profile '" + name + "' has no rate for kernel kind '" + kind +
                                "' (it has: " + have + ")");
  }
  const KernelRate& r = it->second;
  return work > 0 ? r.overhead + work / r.rate.at(work) : r.overhead;
}

double Link::transfer_seconds(double bytes) const {
  return bytes > 0 ? latency + bytes / bandwidth.at(bytes) : 0.0;
}

void Cluster::validate() const {
  auto fail = [&](const std::string& m) { throw std::invalid_argument("cluster '" + name + "': " + m); };
  if (devices < 1) fail("devices must be at least 1, got " + std::to_string(devices));
  if (devices_per_machine < 1) fail("devices_per_machine must be at least 1, got " + std::to_string(devices_per_machine));
  if (concurrent_devices < 0) fail("concurrent_devices must be 0 (all) or positive");
  if (!(memory_concurrency >= 0) || !std::isfinite(memory_concurrency))
    fail("memory_concurrency must be 0 (own memory per device) or positive and finite");
  if (!(cache_bytes >= 0) || !std::isfinite(cache_bytes)) fail("cache_bytes must be 0 (not modelled) or positive and finite");
  if (device.memory < 0) fail("device memory must be 0 (unlimited) or positive");
  for (const auto& [kind, r] : device.kernels) {
    r.rate.validate("kernel kind '" + kind + "' rate");
    if (!(r.overhead >= 0) || !std::isfinite(r.overhead)) fail("kernel kind '" + kind + "' overhead must be >= 0");
  }
  for (const Link* l : {&intra, &inter, &host}) {
    if (l->bandwidth.empty()) continue;  // a level the cluster does not use (one machine: no inter link)
    l->bandwidth.validate("link '" + l->name + "' bandwidth");
    if (!(l->latency >= 0) || !std::isfinite(l->latency)) fail("link '" + l->name + "' latency must be >= 0");
    if (!(l->duplex_bandwidth >= 0) || !std::isfinite(l->duplex_bandwidth))
      fail("link '" + l->name + "' duplex_bandwidth must be 0 (twice the bandwidth) or positive and finite");
  }
  if (machines() > 1 && inter.bandwidth.empty()) fail("devices span several machines but the inter link has no bandwidth");
  if (devices > 1 && intra.bandwidth.empty() && devices_per_machine > 1) fail("the intra link has no bandwidth");
}

}  // namespace tilewise::sim

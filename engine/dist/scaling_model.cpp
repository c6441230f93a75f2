// The ring all-reduce scaling projection (see scaling_model.h).
#include "engine/dist/scaling_model.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace lathe::dist {

using detail::concat;

namespace {

void check_link(double bus_bytes_per_s, double hop_latency_s) {
  if (!(bus_bytes_per_s > 0) || !std::isfinite(bus_bytes_per_s))
    throw ConfigError(concat("bus bandwidth = ", bus_bytes_per_s, " B/s: must be a finite number > 0"));
  if (!(hop_latency_s >= 0) || !std::isfinite(hop_latency_s))
    throw ConfigError(concat("hop latency = ", hop_latency_s, " s: must be a finite number >= 0"));
}

}  // namespace

double steady_value(std::vector<double> samples) {
  if (samples.empty())
    return std::nan("");
  if (samples.size() > 1)
    samples.erase(samples.begin());
  const size_t n = samples.size(), mid = n / 2;
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid), samples.end());
  const double upper = samples[mid];
  if (n % 2 == 1)
    return upper;
  const double lower = *std::max_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

double ring_allreduce_s(double bytes, int ranks, double bus_bytes_per_s, double hop_latency_s) {
  check_link(bus_bytes_per_s, hop_latency_s);
  if (ranks < 1)
    throw ConfigError(concat("ranks = ", ranks, ": must be >= 1"));
  if (!(bytes >= 0))
    throw ConfigError(concat("gradient bytes = ", bytes, ": must be >= 0"));
  if (ranks == 1)
    return 0;
  const double n = ranks;
  return 2 * (n - 1) / n * bytes / bus_bytes_per_s + 2 * (n - 1) * hop_latency_s;
}

ScalingPoint project_scaling(const ScalingInputs& in, int ranks) {
  if (!(in.compute_s > 0) || !std::isfinite(in.compute_s))
    throw ConfigError(concat("per-rank compute time = ", in.compute_s, " s: must be a finite number > 0"));
  if (in.batch_per_rank < 1)
    throw ConfigError(concat("batch per rank = ", in.batch_per_rank, ": must be >= 1"));
  if (!(in.hidden_fraction >= 0 && in.hidden_fraction <= 1))
    throw ConfigError(concat("hidden fraction = ", in.hidden_fraction, ": must be in [0, 1]"));
  ScalingPoint p;
  p.ranks = ranks;
  p.allreduce_s = ring_allreduce_s(in.grad_bytes, ranks, in.bus_bytes_per_s, in.hop_latency_s);
  p.exposed_s = (1 - in.hidden_fraction) * p.allreduce_s;
  p.step_s = in.compute_s + p.exposed_s;
  p.samples_per_s = static_cast<double>(ranks) * static_cast<double>(in.batch_per_rank) / p.step_s;
  p.efficiency = in.compute_s / p.step_s;  // = samples_per_s / (ranks x batch / compute_s)
  return p;
}

std::vector<ScalingPoint> project_scaling(const ScalingInputs& in, const std::vector<int>& ranks) {
  std::vector<ScalingPoint> out;
  for (int n : ranks)
    out.push_back(project_scaling(in, n));
  return out;
}

double fitted_hidden_fraction(double exposed_s, double bytes, int ranks, double bus_bytes_per_s, double hop_latency_s) {
  if (ranks < 2)
    throw ConfigError(concat("ranks = ", ranks, ": a hidden fraction is measured on >= 2 ranks"));
  const double t = ring_allreduce_s(bytes, ranks, bus_bytes_per_s, hop_latency_s);
  if (!(t > 0))
    return 0;
  return std::clamp(1 - exposed_s / t, 0.0, 1.0);
}

}  // namespace lathe::dist

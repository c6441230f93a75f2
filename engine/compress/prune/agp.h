// Automated gradual pruning (Zhu & Gupta 2017, "To prune, or not to prune"): the target sparsity
// rises from `initial` to `final` along a cubic, fast at first and slowly at the end, so the network
// recovers from each pruning step while it still trains at a useful learning rate.
#pragma once

#include <cstdint>

namespace lathe {

/// s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (end - t0))^3 for t in [start, end], where t is the last
/// update step (start + a multiple of `frequency`, or `end` once reached). Before start: `initial`;
/// from end on: `final`.
struct AgpSchedule {
  double initial = 0.0, final = 0.5;
  int64_t start = 0, end = 1, frequency = 1;

  /// Throws ConfigError unless 0 <= initial <= final <= 1, start < end and frequency > 0.
  void validate() const;
  /// Target sparsity in effect at optimizer step `step`.
  double at(int64_t step) const;
  /// True at the steps where the masks are recomputed: start, start + k * frequency up to end, and end.
  bool update_at(int64_t step) const;
};

}  // namespace lathe

// Projected data-parallel throughput on N ranks (issue 15, item 10). Each rank computes its batch
// in the measured per-rank step time; the gradients are then all-reduced by a ring, which sends
// 2(N-1)/N x bytes through every rank's link (NCCL's "bus bandwidth" convention) plus 2(N-1) hop
// latencies; the share of that all-reduce the backward pass hides (fitted from a measured multi-rank
// run, or given) is free, the rest lengthens the step. Everything here is a projection, and callers
// label it so; docs/ARCHITECTURE.md ("scaling model") derives it and bench/scaling_check.py checks
// it against 1- and 2-rank measurements.
#pragma once

#include <cstdint>
#include <vector>

namespace lathe::dist {

struct ScalingInputs {
  double compute_s = 0;        ///< one rank's step without exposed communication (s), > 0
  int64_t batch_per_rank = 0;  ///< samples per rank and step, >= 1
  double grad_bytes = 0;       ///< bytes all-reduced per step (4 x params, half with 16-bit buckets)
  double bus_bytes_per_s = 0;  ///< the link's bus bandwidth, > 0
  double hidden_fraction = 0;  ///< share of the all-reduce overlapped by the backward pass, 0..1
  double hop_latency_s = 0;    ///< per ring hop, >= 0
};

struct ScalingPoint {
  int ranks = 1;
  double allreduce_s = 0;    ///< the ring all-reduce's duration
  double exposed_s = 0;      ///< what of it the backward pass does not hide
  double step_s = 0;         ///< compute_s + exposed_s
  double samples_per_s = 0;  ///< ranks x batch_per_rank / step_s
  double efficiency = 0;     ///< samples_per_s / (ranks x one rank's samples_per_s)
};

/// The steady value of a metric a run logs during training, in logging order: the median of its
/// samples after the first (the first logging interval holds the warm-up: first-touch allocation,
/// primitive creation, the ranks' threads starting), so neither the warm-up nor one disturbed
/// interval (the last one is often short, or shares the machine with the evaluation) moves it.
/// The only sample when there is one; NaN when there is none.
double steady_value(std::vector<double> samples);

/// 2(N-1)/N x bytes / bus bandwidth + 2(N-1) x hop latency; 0 for one rank.
double ring_allreduce_s(double bytes, int ranks, double bus_bytes_per_s, double hop_latency_s);
/// The projection at `ranks`; throws ConfigError naming the input that is out of range.
ScalingPoint project_scaling(const ScalingInputs& in, int ranks);
/// The projection at each of `ranks`.
std::vector<ScalingPoint> project_scaling(const ScalingInputs& in, const std::vector<int>& ranks);
/// The hidden fraction a measured run on `ranks` > 1 implies: 1 - exposed / ring_allreduce_s,
/// clamped to [0, 1] (an exposed time above the model's all-reduce means a slower link than given).
double fitted_hidden_fraction(double exposed_s, double bytes, int ranks, double bus_bytes_per_s, double hop_latency_s);

}  // namespace lathe::dist

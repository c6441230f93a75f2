// Measured inference latency and throughput of a model (or any forward function) on the current
// device, for the dense vs compressed comparisons every compression stage reports. Inputs are
// random images of the dataset's shape; timings are the median of repeated runs after warm-up.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/core/tensor.h"
#include "engine/nn/model.h"
#include "engine/run/metrics_sink.h"
#include "engine/run/telemetry.h"

namespace lathe {

struct LatencyResult {
  int64_t batch = 0;
  double ms_per_batch = 0;   ///< median over the timed repetitions
  double samples_per_s = 0;  ///< batch / median seconds
  int repetitions = 0;
  double p10_ms = 0, p90_ms = 0;  ///< the spread of the repetitions around the median
  /// Other processes' share of the machine's CPUs while this batch size was timed (LoadMeter);
  /// NaN when unknown. Above kContendedShare the figure is marked contended.
  double others_cpu_share = NAN;
  bool contended() const { return others_cpu_share > kContendedShare; }
  /// (p90 - p10) / median, in percent.
  double spread_pct() const { return ms_per_batch > 0 ? 100.0 * (p90_ms - p10_ms) / ms_per_batch : 0; }
};

struct LatencyOptions {
  std::vector<int64_t> batches = {1, 256};
  int warmup = 3;
  double min_seconds = 0.3;  ///< per batch size: repeat until at least this long (and >= min_reps)
  int min_reps = 5;
  int max_reps = 2000;
};

/// Times `forward(input)` for inputs of shape [batch, C, H, W] (sample_shape = {C, H, W}) on `be`.
/// `forward` must finish its work before returning (call be.synchronize() inside on async devices;
/// this function synchronizes after each call too).
std::vector<LatencyResult> measure_latency(Backend& be, const std::vector<int64_t>& sample_shape,
                                           const std::function<void(const Tensor& input)>& forward,
                                           const LatencyOptions& options = {});

/// The same for a Model in evaluation mode.
std::vector<LatencyResult> measure_model_latency(Model& model, Backend& be, const std::vector<int64_t>& sample_shape,
                                                 const LatencyOptions& options = {});

/// Logs latency/<label>/b<N>_ms (median), latency/<label>/b<N>_spread_pct, throughput/<label>/
/// b<N>_samples_per_s and latency/<label>/b<N>_others_cpu_share for each result at `step`, plus an
/// event saying what was measured on which device, with p10/p90 and whether it was contended.
void log_latency(MetricsSink& sink, int64_t step, double wall_ms, const std::string& label,
                 const std::vector<LatencyResult>& results, const std::string& device);

}  // namespace lathe

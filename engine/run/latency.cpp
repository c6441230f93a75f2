// measure_latency: warm-up, repeated timed forwards, median; and the metric names they are logged as.
#include "engine/core/timing.h"
#include "engine/run/latency.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/core/rng.h"

namespace lathe {

std::vector<LatencyResult> measure_latency(Backend& be, const std::vector<int64_t>& sample_shape,
                                           const std::function<void(const Tensor& input)>& forward,
                                           const LatencyOptions& options) {
  LATHE_CHECK(sample_shape.size() == 3, "measure_latency: sample_shape must be {C, H, W}");
  std::vector<LatencyResult> out;
  Rng rng(1234);
  for (int64_t batch : options.batches) {
    LATHE_CHECK(batch > 0, "measure_latency: batch sizes must be positive, got ", batch);
    Tensor host = Tensor::empty({batch, sample_shape[0], sample_shape[1], sample_shape[2]}, DType::f32);
    float* p = host.data<float>();
    for (int64_t i = 0; i < host.numel(); ++i)
      p[i] = static_cast<float>(rng.normal());
    Tensor input = host;
    if (!be.device().is_cpu()) {
      input = be.empty(host.shape(), DType::f32);
      be.copy(host, input);
    }
    for (int i = 0; i < options.warmup; ++i)
      forward(input);
    be.synchronize();
    const LoadMeter load;
    std::vector<double> times;
    double total = 0;
    while ((total < options.min_seconds || static_cast<int>(times.size()) < options.min_reps) &&
           static_cast<int>(times.size()) < options.max_reps) {
      const auto t0 = std::chrono::steady_clock::now();
      forward(input);
      be.synchronize();
      const double s = seconds_since(t0);
      times.push_back(s);
      total += s;
    }
    const double others = load.others_share();
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    const auto at = [&](double q) { return times[static_cast<size_t>(q * static_cast<double>(times.size() - 1))]; };
    LatencyResult r{batch, median * 1000.0, static_cast<double>(batch) / median, static_cast<int>(times.size())};
    r.p10_ms = at(0.1) * 1000.0;
    r.p90_ms = at(0.9) * 1000.0;
    r.others_cpu_share = others;
    out.push_back(r);
  }
  return out;
}

std::vector<LatencyResult> measure_model_latency(Model& model, Backend& be, const std::vector<int64_t>& sample_shape,
                                                 const LatencyOptions& options) {
  LayerContext ctx{be, false, 0};
  return measure_latency(
      be, sample_shape, [&](const Tensor& x) { model.forward(ctx, x); }, options);
}

void log_latency(MetricsSink& sink, int64_t step, double wall_ms, const std::string& label,
                 const std::vector<LatencyResult>& results, const std::string& device) {
  nlohmann::json measured = nlohmann::json::array();
  for (const LatencyResult& r : results) {
    const std::string b = 'b' + std::to_string(r.batch);  // (not "b" + ...: GCC 12's false -Wrestrict, PR 105329)
    sink.sample("latency/" + label + "/" + b + "_ms", step, wall_ms, r.ms_per_batch);
    sink.sample("latency/" + label + "/" + b + "_spread_pct", step, wall_ms, r.spread_pct());
    sink.sample("throughput/" + label + "/" + b + "_samples_per_s", step, wall_ms, r.samples_per_s);
    if (!std::isnan(r.others_cpu_share))
      sink.sample("latency/" + label + "/" + b + "_others_cpu_share", step, wall_ms, r.others_cpu_share);
    measured.push_back(
        {{"batch", r.batch},
         {"ms_per_batch", r.ms_per_batch},
         {"p10_ms", r.p10_ms},
         {"p90_ms", r.p90_ms},
         {"samples_per_s", r.samples_per_s},
         {"repetitions", r.repetitions},
         {"others_cpu_share", std::isnan(r.others_cpu_share) ? nlohmann::json() : nlohmann::json(r.others_cpu_share)},
         {"contended", r.contended()}});
  }
  sink.event("latency", {{"label", label},
                         {"device", device},
                         {"what",
                          "median wall time of an evaluation-mode forward pass of random inputs, with the "
                          "10th and 90th percentiles of the repetitions; contended: other processes used "
                          "more than 20% of the CPUs meanwhile"},
                         {"results", measured}});
}

}  // namespace lathe

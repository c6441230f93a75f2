// measure_latency: warm-up, repeated timed forwards, median; and the metric names they are logged as.
#include "engine/run/latency.h"

#include <algorithm>
#include <chrono>

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
    std::vector<double> times;
    double total = 0;
    while ((total < options.min_seconds || static_cast<int>(times.size()) < options.min_reps) &&
           static_cast<int>(times.size()) < options.max_reps) {
      const auto t0 = std::chrono::steady_clock::now();
      forward(input);
      be.synchronize();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      times.push_back(s);
      total += s;
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    out.push_back({batch, median * 1000.0, static_cast<double>(batch) / median, static_cast<int>(times.size())});
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
    sink.sample("throughput/" + label + "/" + b + "_samples_per_s", step, wall_ms, r.samples_per_s);
    measured.push_back({{"batch", r.batch},
                        {"ms_per_batch", r.ms_per_batch},
                        {"samples_per_s", r.samples_per_s},
                        {"repetitions", r.repetitions}});
  }
  sink.event("latency", {{"label", label},
                         {"device", device},
                         {"what", "median wall time of an evaluation-mode forward pass of random inputs"},
                         {"results", measured}});
}

}  // namespace lathe

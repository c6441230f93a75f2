// Structured pruning speed: for a zoo model and several ratios (fraction of filters/neurons removed
// per layer, L1), the FLOPs and parameters left and the measured eval-mode latency of the pruned
// model against the dense one at batch 1 and 256, both timed in this process, alternating, on the
// CPU backend. Speed is reported as a ratio (dense ms / pruned ms); weights are random (latency does
// not depend on their values).
//   structured_speedup [model=cnn] [ratios=0.25,0.4,0.5,0.75]
#include <cstdio>
#include <sstream>

#include "engine/backend/backend.h"
#include "engine/compress/prune/structured.h"
#include "engine/nn/zoo.h"
#include "engine/run/latency.h"

using namespace lathe;

namespace {

std::vector<double> parse_ratios(const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ','))
    out.push_back(std::stod(part));
  return out;
}

std::vector<LatencyResult> fastest(std::vector<LatencyResult> a, const std::vector<LatencyResult>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (b[i].ms_per_batch < a[i].ms_per_batch)
      a[i] = b[i];
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string name = argc > 1 ? argv[1] : "cnn";
    const std::vector<double> ratios = parse_ratios(argc > 2 ? argv[2] : "0.25,0.4,0.5,0.75");
    auto be = make_backend("cpu");
    auto dense = build_zoo_model(name);
    Rng rng(0);
    dense->create_params(*be, DType::f32, rng);
    const std::vector<int64_t> sample = {1, 28, 28};
    std::printf("structured pruning speed, model %s, measured on %s (CPU backend), L1 per-layer ranking\n",
                name.c_str(), be->device_name().c_str());
    std::printf("%6s %10s %10s %12s %12s %9s %12s %12s %9s\n", "ratio", "flops", "params", "dense b1 ms",
                "pruned b1 ms", "speedup", "dense b256", "pruned b256", "speedup");
    for (double r : ratios) {
      StructuredOptions o;
      o.ratio = r;
      StructuredReport rep;
      auto pruned = prune_structured(*dense, *be, o, &rep);
      // Alternate dense / pruned twice and keep each one's faster median.
      auto d = measure_model_latency(*dense, *be, sample);
      auto p = measure_model_latency(*pruned, *be, sample);
      d = fastest(d, measure_model_latency(*dense, *be, sample));
      p = fastest(p, measure_model_latency(*pruned, *be, sample));
      std::printf("%6.2f %10.3f %10.3f %12.3f %12.3f %8.2fx %12.2f %12.2f %8.2fx\n", r, rep.flops_ratio(),
                  static_cast<double>(rep.params_after) / rep.params_before, d[0].ms_per_batch, p[0].ms_per_batch,
                  d[0].ms_per_batch / p[0].ms_per_batch, d[1].ms_per_batch, p[1].ms_per_batch,
                  d[1].ms_per_batch / p[1].ms_per_batch);
    }
    std::printf("(flops, params: pruned / dense; speedup: dense ms / pruned ms, medians, same process)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "structured_speedup: %s\n", e.what());
    return 1;
  }
  return 0;
}

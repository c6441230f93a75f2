// speedup_contended (see contention.h).
#include "widgets/common/contention.h"

#include <cmath>

#include "engine/run/telemetry.h"

namespace lathe::widgets {
namespace {

double last_of(const std::vector<MetricSummary>& summaries, const std::string& metric) {
  for (const MetricSummary& s : summaries)
    if (s.metric == metric)
      return s.last;
  return NAN;
}

}  // namespace

bool speedup_contended(const std::vector<MetricSummary>& summaries, const std::string& metric) {
  // "<stage>/speedup_b<N>" -> the latency labels it divides.
  const size_t at = metric.find("/speedup_b");
  if (at == std::string::npos)
    return false;
  const std::string stage = metric.substr(0, at), batch = metric.substr(at + 9);  // "b256"
  const char* base = stage == "prune" ? "dense" : stage == "quant" ? "f32" : nullptr;
  const char* compressed = stage == "prune" ? "pruned" : stage == "quant" ? "int8" : nullptr;
  if (!base)
    return false;
  for (const char* label : {base, compressed}) {
    const double share = last_of(summaries, "latency/" + std::string(label) + "/" + batch + "_others_cpu_share");
    if (std::isfinite(share) && share > kContendedShare)
      return true;
  }
  return false;
}

}  // namespace lathe::widgets

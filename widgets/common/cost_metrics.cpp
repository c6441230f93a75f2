// Derived cost summaries (see cost_metrics.h).
#include "widgets/common/cost_metrics.h"

#include <algorithm>
#include <cmath>

namespace lathe::widgets {
namespace {

const MetricSummary* find(const std::vector<MetricSummary>& summaries, const std::string& metric) {
  for (const MetricSummary& s : summaries)
    if (s.metric == metric)
      return &s;
  return nullptr;
}

/// A one-value summary at the step and time of `from`, lower is better.
MetricSummary constant(const std::string& metric, double value, const MetricSummary& from) {
  MetricSummary s;
  s.metric = metric;
  s.count = 1;
  s.first_step = s.last_step = s.min_step = s.max_step = from.last_step;
  s.last = s.min = s.max = value;
  s.last_wall_ms = from.last_wall_ms;
  s.direction = Direction::minimize;  // the name says "accuracy", the value is dollars
  return s;
}

}  // namespace

std::vector<MetricSummary> derived_cost_summaries(const std::vector<MetricSummary>& summaries) {
  std::vector<MetricSummary> out;
  const MetricSummary* usd = find(summaries, "cost/usd");
  if (!usd || !std::isfinite(usd->last))
    return out;
  out.push_back(constant(kUsdPerRun, usd->last, *usd));
  const MetricSummary* acc = find(summaries, "test/accuracy");
  if (acc && std::isfinite(acc->last) && acc->last > 0)
    out.push_back(constant(kUsdPerAccuracyPoint, usd->last / (acc->last * 100.0), *usd));
  return out;
}

void add_derived_cost_summaries(std::vector<MetricSummary>& summaries) {
  for (MetricSummary& d : derived_cost_summaries(summaries))
    if (!find(summaries, d.metric))
      summaries.push_back(std::move(d));
  std::sort(summaries.begin(), summaries.end(),
            [](const MetricSummary& a, const MetricSummary& b) { return a.metric < b.metric; });
}

}  // namespace lathe::widgets

// The dollars a comparison weighs runs by, derived from what every run logs: "$ per run" (the run's
// final cost/usd, which counts all of its work: every recovery and restart included) and "$ per
// accuracy point" ($ per run / (test/accuracy x 100)). Compare and the reports show them as two
// more metrics, lower is better.
#pragma once

#include <string>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe::widgets {

constexpr const char* kUsdPerRun = "cost/usd_per_run";
constexpr const char* kUsdPerAccuracyPoint = "cost/usd_per_accuracy_point";

/// The derived summaries of one run's summaries (sorted by metric name); none when the run logged
/// no cost/usd, no $ per accuracy point without a positive test/accuracy.
std::vector<MetricSummary> derived_cost_summaries(const std::vector<MetricSummary>& summaries);

/// `summaries` with the derived ones added, still sorted by metric name.
void add_derived_cost_summaries(std::vector<MetricSummary>& summaries);

}  // namespace lathe::widgets

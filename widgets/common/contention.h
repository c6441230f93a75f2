// Whether a speedup was computed from latencies timed under contention: a run logs, beside each
// latency, the share of the CPUs other processes used meanwhile
// (latency/<label>/b<N>_others_cpu_share); a speedup (prune/speedup_bN: dense over pruned,
// quant/speedup_bN: f32 over INT8) whose two inputs include one above kContendedShare is marked
// wherever it is shown (run overview, Compare, reports).
#pragma once

#include <string>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe::widgets {

/// True when `metric` is a speedup the stages log and one of its two latencies was contended.
bool speedup_contended(const std::vector<MetricSummary>& summaries, const std::string& metric);

/// The note shown with a marked speedup.
constexpr const char* kContendedSpeedupNote =
    "contended: other processes used more than 20% of the CPUs while a latency this speedup is built on was "
    "timed; the speedup is not trustworthy";

}  // namespace lathe::widgets

// Stage results of one run: every model the pipeline produced (the dense baseline, the pruned
// model, the f32 model before INT8, the INT8 model, or the trained model alone) side by side,
// with accuracy, bytes, batch-1 and batch-256 latency, throughput and the speedup over the stage's
// baseline, read from the metrics the stages log. Shown by the single-run report and the app's
// run overview.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "widgets/report/report_data.h"

namespace lathe::report {

struct StageRow {
  std::string model;     ///< "dense", "pruned", "f32 (before INT8)", "INT8", "trained", "distillation teacher"
  std::string baseline;  ///< the row its speedup is over ("" for a baseline)
  std::optional<double> accuracy, bytes, b1_ms, b256_ms, b256_samples_per_s, speedup_b1, speedup_b256;
  std::optional<double> b1_spread_pct, b256_spread_pct;  ///< (p90 - p10) / median of the repetitions
  /// The highest share of the CPUs other processes used while this model's latency was timed;
  /// above 0.2 its latency figures are marked contended.
  std::optional<double> others_cpu_share;
  bool contended() const { return others_cpu_share && *others_cpu_share > 0.2; }
  /// Its speedups divide a contended latency (its own or its baseline's): marked, not trusted.
  bool speedup_contended = false;
};

/// The stage rows of a run, in pipeline order; one "trained" row when no compression stage ran
/// ("student (distilled)" after a "distillation teacher" row for a distilled run).
std::vector<StageRow> stage_rows(const ReportRun& run);

namespace html {
/// The "Stage results" section: a table of stage_rows() with units (%, KiB/MiB, ms, samples/s, x).
void write_stage_results(std::string& out, const ReportRun& run);
}  // namespace html

}  // namespace lathe::report

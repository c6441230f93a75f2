// A run's history for the report: the segments it trained in (the first start, then each resume
// from a checkpoint after a spot notice, a kill or a cancel), how each ended, the training-phase
// means over them (a finished event's means cover its own segment only), and a simulated spot
// market's figures (interruptions, restarts, redone work, $ on spot against the same work
// on-demand). The facts a report states about how a run was run (ranks, precision, the MFU peak)
// are read here too. Data functions need no Qt; the writers append HTML.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "widgets/report/report_data.h"

namespace lathe::report {

struct RunSegment {
  int64_t start_ms = 0;
  std::optional<int64_t> end_ms;  ///< none: still running, or the store saw no end
  int64_t from_step = 0;          ///< 0, or the step of the checkpoint it resumed from
  std::optional<int64_t> reached_step;
  std::string checkpoint;  ///< the checkpoint folder it resumed from ("" for the first segment)
  std::string ended;       ///< "finished", "interrupted: spot notice", "interrupted: writer process ... gone", ...
  std::optional<double> train_seconds, samples_per_s_mean, mfu_mean;  ///< from its end event
};

struct RunHistory {
  std::vector<RunSegment> segments;
  /// The training phase over every segment whose end event gave its means (samples / seconds,
  /// MFU weighted by seconds); `with_means` says how many did.
  std::optional<double> samples_per_s_mean, mfu_mean;
  int with_means = 0;
  int resumes() const { return segments.empty() ? 0 : static_cast<int>(segments.size()) - 1; }
};

RunHistory run_history(const ReportRun& run);

/// A simulated spot run's figures (the supervisor's spot/* metrics and spot/summary event).
struct SpotFigures {
  double interruptions = 0, kills = 0, restarts = 0, steps_redone = 0, seconds_redone = 0;
  double restart_wait_s = 0, restart_setup_s = 0, wall_s = 0, on_demand_equivalent_s = 0;
  std::optional<double> cost_spot_usd, cost_on_demand_usd;
};
std::optional<SpotFigures> spot_figures(const ReportRun& run);

/// The run's flattened config value of `key` ("" when absent).
std::string run_param(const ReportRun& run, const std::string& key);
/// "2 data-parallel ranks x 1 thread, optimizer state sharded (ZeRO-1)", "1 thread", "" when unknown.
std::string ranks_text(const ReportRun& run);
/// "bf16: native bf16 kernels on ..." / "fp32"; "" when the config has no train.precision.
std::string precision_text(const ReportRun& run);
/// What device/mfu divides by: "202.7 GFLOP/s f32 per rank (measured: ...)" or, for a GPU, "989.5
/// TFLOP/s bf16 (datasheet (...) ...)", and whether the run raised it; "none, unknown: ..." when the
/// run had no peak and said why; "" when the started event has no peak and no reason.
std::string mfu_peak_text(const ReportRun& run);
/// The data type of the peak device/mfu divides by ("f32", "bf16"; "" when the started event has none).
std::string mfu_peak_dtype(const ReportRun& run);

/// The markers of a run's charts: the start of each training phase after the first (teacher ->
/// train, train -> finetune / qat) by its phase name, and each resume when there are at most
/// five (a spot run's many resumes are in the Run history table instead).
std::vector<std::pair<double, std::string>> chart_markers(const ReportRun& run);

namespace html {
/// "Run history" (only for a run with more than one segment) and "Spot" (only for a spot run).
void write_history(std::string& out, const ReportRun& run);
}  // namespace html

}  // namespace lathe::report

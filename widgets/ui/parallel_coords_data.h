// ParallelCoordsData: what the parallel coordinates panel reads from the store for all runs of a
// filter (the run browser's query, every page, or a sweep's name prefix): each run's flattened
// config and metric summaries, the knobs that differ between the runs and the metrics they logged;
// and how that becomes a ParallelCoordsModel for the axes chosen. Read on a worker thread with its
// own connection.
#pragma once

#include <QString>
#include <map>
#include <string>
#include <vector>

#include "engine/store/store_types.h"
#include "widgets/ui/parallel_coords_model.h"

namespace lathe::ui {

struct ParallelRuns {
  std::vector<std::string> ids, names;
  std::vector<std::map<std::string, std::string>> params;  ///< per run: flattened config
  std::vector<std::vector<MetricSummary>> summaries;       ///< per run, sorted by metric
  std::vector<std::string> knobs;    ///< config keys with more than one value over the runs, sorted
  std::vector<std::string> metrics;  ///< every metric any run logged, sorted
  QString error;                     ///< non-empty: nothing else is valid
};

/// Reads every run `query` matches (its offset, limit and with_metrics are ignored: every run, every
/// metric). Never throws.
ParallelRuns load_parallel_runs(const QString& dbPath, RunQuery query);

/// The axis choices of a metric: "last <metric>" and "best <metric>" (its summaries).
std::vector<std::string> metric_axis_names(const std::string& metric);

/// A model of `runs` with these axes (knob names, or metric_axis_names entries), in order. Unknown
/// names are refused (std::invalid_argument naming the axis and what is allowed).
void fill_parallel_model(ParallelCoordsModel& model, const ParallelRuns& runs, const std::vector<std::string>& axes);

/// Axes to start with: up to `maxKnobs` differing knobs, then "last test/accuracy" (or the first
/// metric when the runs have no accuracy).
std::vector<std::string> default_parallel_axes(const ParallelRuns& runs, size_t maxKnobs = 5);

}  // namespace lathe::ui

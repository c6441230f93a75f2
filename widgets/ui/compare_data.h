// CompareData: everything the compare view shows about 2-100 runs, read from the store in one go
// (on a worker thread, with its own connection): run rows, config diff and flattened configs,
// metric summaries, where each run's model came from and went (provenance.h), downsampled
// (min/max preserving) curves of every metric, and each run's steps per epoch.
#pragma once

#include <QString>
#include <map>
#include <string>
#include <vector>

#include "engine/store/provenance.h"
#include "engine/store/store_types.h"

namespace lathe::ui {

/// The most runs the compare view takes at once (a study of seeds x knobs is dozens of runs: the
/// Groups tab folds them).
constexpr int kMaxCompareRuns = 100;

struct CompareData {
  std::vector<RunRecord> runs;
  ConfigDiff diff;
  std::vector<std::vector<std::pair<std::string, std::string>>> params;  ///< per run, sorted by key
  std::vector<std::vector<MetricSummary>> summaries;                     ///< per run, sorted by metric
  std::vector<std::vector<ProvenanceRow>> provenance;             ///< per run: where its model came from and went
  std::map<std::string, std::vector<std::vector<Point>>> curves;  ///< metric -> per run
  /// Per run: training steps an epoch (its started event's train_steps over train.epochs); 0 when
  /// unknown. Two ranks take half the steps of one for an epoch: Curves by epoch line them up.
  std::vector<double> stepsPerEpoch;
  QString error;  ///< non-empty: nothing else is valid

  std::vector<std::string> metricNames() const;
  const MetricSummary* summary(size_t run, const std::string& metric) const;
};

/// Reads CompareData. Never throws: a problem goes to `error` with what to do.
CompareData load_compare_data(const QString& dbPath, const QStringList& runIds, int buckets = 1000);

/// Whether smaller is better for a metric: the store's direction of the summary, else the declared
/// direction (default_direction) of its name.
bool lower_is_better(const std::string& metric, const MetricSummary* summary);

/// The run with the best value of `metric` by its direction (last or best value); -1 when fewer
/// than two runs have it or all tie.
int best_run(const CompareData& data, const std::string& metric, bool use_last);

}  // namespace lathe::ui

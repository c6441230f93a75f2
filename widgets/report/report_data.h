// Everything a report shows, read from the store in one place (no Qt): the runs with their
// config, metric summaries, events, artifacts, the instance and price from the "started" event,
// the config diff of a comparison and the chart series (min/max-preserving downsampled).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/analysis/run_groups.h"
#include "engine/store/store.h"

namespace lathe::report {

struct ReportRun {
  RunRecord record;                                         ///< with config_json
  std::vector<std::pair<std::string, std::string>> params;  ///< flattened config, sorted by key
  std::vector<MetricSummary> summaries;                     ///< sorted by metric name
  std::vector<EventRecord> events;
  std::vector<ArtifactRecord> artifacts;
  std::string device;                  ///< the devices, comma-separated
  std::string instance;                ///< from the "started" event; empty when unknown
  std::optional<double> usd_per_hour;  ///< the instance price the run was costed at
  std::string cost_projection;         ///< why its cost is a projection ("started" event); "" : it is not
  std::optional<double> cost_usd;      ///< the last cost/usd sample
  std::string label;                   ///< legend / column name: the run name, plus the id when names repeat
  /// Chart points of every metric with at least two samples that are not all equal (at most
  /// kChartBuckets buckets each).
  std::map<std::string, std::vector<Point>> series;

  const MetricSummary* summary(const std::string& metric) const;
};

struct ReportData {
  std::vector<ReportRun> runs;
  ConfigDiff diff;                   ///< filled for 2+ runs
  std::vector<std::string> metrics;  ///< every metric of any run, in report order
  std::vector<std::string> charted;  ///< the metrics that get a chart, in report order
  int64_t generated_ms = 0;
  std::string store_path;
  /// Filled by add_groups() (report_groups.h) when the report is asked for groups.
  std::vector<RunGroup> groups;
  std::string group_by;  ///< GroupBy::describe() of the grouping; empty: no groups
  bool comparison() const { return runs.size() > 1; }
};

/// One report chart: its title and the metrics drawn in it. Every rank's series of a
/// data-parallel metric (dist/rank0/util, dist/rank1/util, ...) share one chart,
/// "dist/rank*/util", a line per rank; any other metric is a chart of its own.
struct ChartGroup {
  std::string title;
  std::vector<std::string> metrics;  ///< ranks in rank order
  std::vector<std::string> parts;    ///< per metric: "rank 0", ... ("" for a metric of its own)
};
std::vector<ChartGroup> chart_groups(const std::vector<std::string>& charted);

/// Buckets per chart series (each keeps first/min/max/last, so spikes survive).
constexpr int kChartBuckets = 1200;

/// One row of the report's Artifacts table.
struct ArtifactRow {
  ArtifactRecord record;  ///< the last write of its path (or the newest checkpoint)
  std::string note;       ///< "written 19 times: the last write", "the newest of 53 checkpoints ..."; "" otherwise
};

/// The artifacts as the report lists them, in recording order: a path written several times (a
/// resumed run saves its model at every stop) once, as its last write; a run's checkpoint files
/// as one row, the newest (older ones are deleted as checkpoint.keep says).
std::vector<ArtifactRow> artifact_rows(const std::vector<ArtifactRecord>& artifacts);

/// Resolves each reference (Store::resolve_run) to a run id. ConfigError for an empty list or a run
/// given twice; DataError for an unknown or ambiguous reference.
std::vector<std::string> resolve_report_runs(const Store& store, const std::vector<std::string>& run_refs);

/// Resolves each reference (id, unique prefix or name: Store::resolve_run) and reads the runs.
/// ConfigError for an empty list or a run given twice; DataError for an unknown run.
ReportData collect_report_data(const Store& store, const std::vector<std::string>& run_refs);

/// Report order of metric names: losses, accuracies, throughput, utilisation, memory, cost, the
/// rest alphabetically.
std::vector<std::string> order_metrics(std::vector<std::string> names);

}  // namespace lathe::report

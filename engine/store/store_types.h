// The store's value types: what a run is, what the GUI and lathe-cli get back from queries
// (run rows with metric summaries, series points, downsampled buckets, config diffs, events,
// artifacts). Plain structs with no SQLite in sight, so widgets/ can use them directly.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe {

/// Unix milliseconds as local "YYYY-MM-DD HH:MM:SS" (for listings and messages).
std::string format_local_time(int64_t unix_ms);

/// queued (created, not started) -> running -> finished | failed | cancelled | interrupted |
/// incomplete. `interrupted` = the writer vanished (crash, kill -9, power loss) or closed without
/// finish(); such a run can be resumed. `incomplete` = the run ended, but some of its samples could
/// not be stored (the store stayed locked): its status event names how many, the status it really
/// ended with and the metrics.jsonl they are in; `lathe-cli repair` re-imports them and restores
/// that status.
enum class RunStatus { queued, running, finished, failed, cancelled, interrupted, incomplete };
std::string_view status_name(RunStatus s);
/// Throws DataError naming the allowed spellings.
RunStatus parse_status(std::string_view s);

/// Which way is better for a metric: decides metric_summary's "best", the bold "best run" of the
/// reports and the compare view, `lathe-cli list --sort best:` and the Pareto defaults. The declared
/// direction of every metric is default_direction(name): lower is better for losses, sizes (bytes,
/// params, FLOPs, memory), times (latency, seconds, *_ms), cost, skipped steps, accuracy drops and
/// ratios (compressed / dense); higher for accuracy, rates (samples/s, throughput), speedups, MFU and
/// utilisation, and for any other name. A run can override per metric (RunWriter::set_direction,
/// Store::set_direction).
enum class Direction { minimize = -1, maximize = 1 };
Direction default_direction(std::string_view metric);

/// The unit a metric's values are in, by the naming conventions of the metrics the engine logs:
/// "samples/s", "s", "ms", "bytes", "bytes/step", "USD", "W", "MHz", "%", "points" (percentage
/// points), "FLOP/sample", "x" (speedups), "ratio" (compressed / dense), "fraction" (0..1: accuracy,
/// utilisation, MFU, activity, sparsity, shares); "" where the name says none (losses, the learning
/// rate, counts). The reports print it beside each metric.
std::string default_unit(std::string_view metric);

/// The metric's name with its unit in parentheses, for an axis ("train/samples_per_s (samples/s)");
/// the bare name where default_unit has none.
std::string metric_label(std::string_view metric);

/// What a run is before it starts (RunWriter::begin_run, Store::create_run).
struct RunInfo {
  std::string id;                    ///< empty: a new id from make_run_id()
  std::string name;                  ///< the experiment name (not unique)
  nlohmann::json config;             ///< the validated config; flattened into params
  std::string backend;               ///< may be filled later from the trainer's "started" event
  std::vector<std::string> devices;  ///< device names
  std::string code_version;          ///< empty: LATHE_VERSION
};

/// One row of `runs`.
struct RunRecord {
  std::string id, name;
  RunStatus status = RunStatus::queued;
  int64_t created_ms = 0;  ///< Unix time in milliseconds
  std::optional<int64_t> started_ms, finished_ms, heartbeat_ms;
  std::string host, backend, code_version;
  std::vector<std::string> devices;
  std::optional<int64_t> pid;  ///< the writer process (while running)
  std::string config_json;     ///< filled by Store::run(); empty in list_runs() rows
  std::string note;            ///< free text (Store::set_note); "" when none
  std::vector<std::string> tags;  ///< sorted (Store::add_tags)
};

/// One sample of a series.
struct Point {
  int64_t step = 0;
  double wall_ms = 0;
  double value = 0;  ///< NaN for samples that were not finite numbers
};

/// metric_summary for one (run, metric): maintained in the same transaction as the samples.
/// NaN samples count but are not candidates for min/max/best.
struct MetricSummary {
  std::string metric;
  int64_t count = 0;
  int64_t first_step = 0, last_step = 0;
  double last = 0, last_wall_ms = 0;  ///< the value at the highest step
  double min = std::numeric_limits<double>::quiet_NaN(), max = std::numeric_limits<double>::quiet_NaN();
  int64_t min_step = 0, max_step = 0;
  Direction direction = Direction::maximize;
  double best() const { return direction == Direction::minimize ? min : max; }
  int64_t best_step() const { return direction == Direction::minimize ? min_step : max_step; }
};

struct RunListItem {
  RunRecord run;
  std::vector<MetricSummary> metrics;  ///< sorted by metric name
  const MetricSummary* metric(std::string_view name) const;
};

/// Filters and ordering for Store::list_runs. All filters combine with AND.
struct RunQuery {
  std::vector<RunStatus> statuses;  ///< empty: any
  std::string name_glob;            ///< shell glob on runs.name (`*`, `?`, `[..]`, case-sensitive); empty: any
  std::vector<std::pair<std::string, std::string>> params;  ///< flattened config key == value
  std::vector<std::string> tags;                            ///< runs carrying every one of these tags
  std::string sweep;  ///< the runs of this sweep id (sweep_members); empty: any
  /// Case-insensitive substring of the run's id, name, note or one of its tags; empty: any.
  std::string search;
  enum class Sort { created, started, name, status, metric_last, metric_best };
  Sort sort = Sort::created;
  std::string sort_metric;  ///< for metric_last / metric_best; runs without it sort last
  /// Unset: newest first for times, A-Z for name/status, best first (by the metric's direction)
  /// for metric sorts.
  std::optional<bool> descending;
  int64_t offset = 0;
  int64_t limit = 100;                    ///< <= 0: no limit
  std::vector<std::string> with_metrics;  ///< summaries to include; empty: all of each run's metrics
};

struct RunPage {
  std::vector<RunListItem> runs;
  int64_t total = 0;  ///< runs matching the filters, ignoring offset/limit
};

/// A min/max-preserving bucket of a series: every sample with step in [step_lo, step_hi].
struct Bucket {
  int64_t step_lo = 0, step_hi = 0;
  int64_t count = 0;
  Point first, last;
  Point min, max;  ///< value NaN when the bucket holds only NaN samples
};

struct DownsampledSeries {
  int64_t bucket_width = 1;     ///< steps per bucket
  std::vector<Bucket> buckets;  ///< non-empty buckets in step order
  /// first, min, max, last of each bucket in step order, without repeating a sample: what a chart
  /// draws so no spike is ever lost.
  std::vector<Point> points() const;
};

/// Flattened config keys that differ between runs.
struct ConfigDiff {
  struct Row {
    std::string key;
    std::vector<std::optional<std::string>> values;  ///< one per run, nullopt: key absent
  };
  std::vector<std::string> run_ids;
  std::vector<Row> differing;  ///< sorted by key
  int64_t same = 0;            ///< keys equal in every run
};

struct EventRecord {
  int64_t id = 0;  ///< increasing: tail with events(run, after_id)
  int64_t at_ms = 0;
  std::string kind;
  nlohmann::json fields;
};

struct ArtifactRecord {
  int64_t id = 0;
  std::string kind, path;
  int64_t bytes = -1;  ///< -1 when the file was missing when recorded
  std::string sha256;  ///< lowercase hex; empty when the file was missing
  std::optional<int64_t> step;
  int64_t created_ms = 0;
};

struct TelemetryPoint {
  int device = -1;  ///< device index; -1 for the host
  double wall_ms = 0;
  double value = 0;
};

/// What Store::delete_run removed.
struct DeleteResult {
  int64_t samples = 0;
  std::vector<std::string> files_deleted;
  std::vector<std::string> files_missing;  ///< recorded, but already gone
  std::vector<std::string> files_failed;   ///< "path: reason": kept because it could not be proven the run's
  std::string folder;                      ///< the run's folder, "" when none was found or trusted
  bool folder_removed = false;
};

}  // namespace lathe

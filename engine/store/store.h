// The run store: one SQLite file (WAL) that every run writes to and the GUI / lathe-cli read.
// Store::open creates the file on first use, migrates old schemas and marks runs whose writer
// died as interrupted. The queries here are the ones the GUI and lathe-cli need: runs page by
// page with summaries, resolve by id prefix or name, live tails, min/max-preserving downsampling,
// config diffs, full export, delete. Writing a run is RunWriter's job (run_writer.h).
//
// A Store is one connection: use it from one thread at a time (give each thread its own Store).
// Every query is a single statement or a short read transaction, so readers never hold up a
// writer, and a reader always sees whole committed batches.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/store/store_types.h"

namespace lathe {

namespace sql {
class Db;
}

class Store {
 public:
  /// A writer on another host is presumed dead after this long without a heartbeat (writers beat
  /// every ~2 s). On this host a dead pid is noticed at once.
  static constexpr int64_t kDefaultStaleAfterMs = 60'000;

  struct OpenOptions {
    bool reap_stale = true;  ///< mark runs with a dead writer interrupted
    int64_t stale_after_ms = kDefaultStaleAfterMs;
    int busy_timeout_ms = 5000;
    /// Opens without writing anything (no folder, no migration, no reaping): for list, show,
    /// compare, export and report on a store this process may not write. DataError when the file
    /// does not exist or needs a migration first.
    bool read_only = false;
  };
  /// OpenOptions for read-only use.
  static OpenOptions read_only_options() {
    OpenOptions o;
    o.read_only = true;
    o.reap_stale = false;
    return o;
  }

  /// Opens `path`, creating it and its folder on first use, applying migrations and (unless
  /// options say otherwise) reaping stale runs. DataError for files that are not a lathe store, are
  /// newer than this code, or cannot be created.
  static Store open(const std::string& path, const OpenOptions& options);
  static Store open(const std::string& path) { return open(path, OpenOptions{}); }
  /// $XDG_DATA_HOME/lathe/lathe.db, else ~/.local/share/lathe/lathe.db (not created here).
  static std::string default_path();

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  const std::string& path() const;
  int schema_version() const;

  // ---- runs ------------------------------------------------------------------------------------

  /// Inserts a run (and its flattened config into params) with created_ms = now; returns its id.
  /// `running` also stamps started_ms and this process as the writer (RunWriter does that).
  /// DataError when the id exists.
  std::string create_run(const RunInfo& info, RunStatus status = RunStatus::queued);
  /// Marks `running` runs whose writer is gone as interrupted, with a status event saying why: on
  /// this host when the pid is dead; anywhere when the heartbeat is older than stale_after_ms.
  /// Returns how many were marked. open() calls it; a GUI may call it on a timer.
  int reap_stale_runs(int64_t stale_after_ms = kDefaultStaleAfterMs);
  std::optional<RunRecord> find_run(const std::string& id) const;
  /// The run with its config JSON. DataError when there is no such id.
  RunRecord run(const std::string& id) const;
  /// An exact id, a unique id prefix or a run name -> the id. DataError when nothing matches or
  /// several runs do (the message lists the candidates: id, name, status, created).
  std::string resolve_run(const std::string& ref) const;
  RunPage list_runs(const RunQuery& query = {}) const;
  /// The flattened config (key, value) sorted by key.
  std::vector<std::pair<std::string, std::string>> params(const std::string& run_id) const;
  ConfigDiff diff_configs(const std::vector<std::string>& run_ids) const;
  /// Deletes the run and all its rows in one transaction, then (if asked) its artifact files.
  /// DataError for a run that is still running with a live writer.
  DeleteResult delete_run(const std::string& run_id, bool delete_files = true);

  // ---- notes and tags (store_notes.cpp) ----------------------------------------------------------

  /// Replaces the run's note ("" clears it). ConfigError for a note over 64 KiB.
  void set_note(const std::string& run_id, const std::string& text);
  /// Adds tags (those it has already are kept once). ConfigError naming the tag for an empty one,
  /// one over 64 characters, or one with whitespace, a comma or a control character.
  void add_tags(const std::string& run_id, const std::vector<std::string>& tags);
  /// Removes these tags (absent ones are ignored).
  void remove_tags(const std::string& run_id, const std::vector<std::string>& tags);
  /// Every tag in the store with how many runs carry it, by tag.
  std::vector<std::pair<std::string, int64_t>> all_tags() const;

  // ---- metrics ---------------------------------------------------------------------------------

  /// Summaries of every metric of the run, sorted by name.
  std::vector<MetricSummary> summaries(const std::string& run_id) const;
  std::optional<MetricSummary> summary(const std::string& run_id, const std::string& metric) const;
  /// Every metric name any run of this store has written, sorted.
  std::vector<std::string> metric_names() const;
  /// Sets which way is better for `metric` in every run (metric_keys.direction).
  void set_direction(const std::string& metric, Direction direction);
  /// Samples with step >= from_step in step order, at most max_points (<= 0: all). The live tail:
  /// ask again from the last step seen + 1. Unknown metric: empty. DataError for an unknown run.
  std::vector<Point> series(const std::string& run_id, const std::string& metric,
                            int64_t from_step = std::numeric_limits<int64_t>::min(), int64_t max_points = 0) const;
  /// The series between from_step and to_step (default: all of it) in at most `buckets` buckets
  /// of equal step width, each with its exact count, first, last, min and max: every minimum and
  /// maximum of the data survives (no sampling). Coarse widths are read from the block pyramid
  /// (the requested range is then widened to whole blocks: bucket bounds say what each covers).
  DownsampledSeries downsample(const std::string& run_id, const std::string& metric, int buckets,
                               std::optional<int64_t> from_step = std::nullopt,
                               std::optional<int64_t> to_step = std::nullopt) const;
  /// Every sample of the run, by metric name then step (the export path).
  void for_each_sample(const std::string& run_id,
                       const std::function<void(const std::string& metric, const Point&)>& fn) const;
  /// Device telemetry of one metric with wall_ms >= from_wall_ms, in time order.
  std::vector<TelemetryPoint> telemetry(const std::string& run_id, const std::string& metric,
                                        double from_wall_ms = -std::numeric_limits<double>::infinity()) const;
  /// Events with id > after_id, oldest first.
  std::vector<EventRecord> events(const std::string& run_id, int64_t after_id = 0) const;
  std::vector<ArtifactRecord> artifacts(const std::string& run_id) const;

  /// The connection itself, for the writer, tests and benchmarks.
  sql::Db& db() const { return *m_db; }

 private:
  explicit Store(std::unique_ptr<sql::Db> db);
  static Store open_read_only(const std::string& path, const OpenOptions& options);
  int64_t rid_of(const std::string& run_id) const;
  /// (metric id, direction), nullopt when the name was never written.
  std::optional<std::pair<int64_t, Direction>> metric_key(const std::string& metric) const;

  std::unique_ptr<sql::Db> m_db;
};

}  // namespace lathe

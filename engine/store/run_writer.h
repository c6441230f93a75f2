// RunWriter: the one writer of a run, and a MetricsSink so the trainer writes to it like any sink.
// sample() / event() / telemetry() only append to an in-memory queue (no I/O on the training
// thread); a background thread commits the queue every ~250 ms or every 4096 rows in one
// transaction that also updates metric_summary, the sample_blocks pyramid and the heartbeat; an
// event is committed at once (with the samples queued before it). A reader therefore sees whole
// batches, and a kill -9 loses at most the samples not yet committed (metrics.jsonl has them:
// repair) and the events of the last few milliseconds.
//
// Lifecycle: construct (opens its own connection), then begin_run() for a new run or resume() to
// take over an existing one (interrupted, cancelled, failed, queued...), then sample away, then
// finish(status). The destructor flushes and, when finish() was never called, marks the run
// interrupted (resumable); it never throws.
//
// Resume: resume() returns the last committed step of every metric; samples at or below it are
// dropped (and the (run, metric, step) key makes any repeat an INSERT OR IGNORE no-op), so a
// resumed run continues its numbering and nothing is written twice. A repeated (metric, step)
// within a run keeps the first value.
//
// A locked store (another process in a write transaction) never loses a sample: the writer keeps
// its queue and retries with a growing pause. Memory is bounded: past max_queued_rows, samples
// that are also in the run's metrics.jsonl (the recovery file, named by the trainer's "started"
// event) are dropped from memory and counted as unstored; without a recovery file producers wait
// instead. finish() waits up to final_retry_ms for the lock; a run that still could not store
// every sample ends `incomplete`, its status event naming the missing count, the status it really
// ended with and the file, and `lathe-cli repair` (engine/store/repair.h) re-imports them.
//
// Recognised events: besides storing every event, "started" fills runs.backend / runs.devices
// when begin_run() left them empty and its "metrics_file" field names the recovery file;
// "metrics_file_failed" says that file stopped being written; and "artifact" {kind, path, [step]}
// records an artifact row (size and sha256 computed on the writer thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/run/metrics_sink.h"
#include "engine/store/sample_inserter.h"
#include "engine/store/store.h"

namespace lathe {

struct WriterOptions {
  int commit_interval_ms = 250;  ///< commit at least this often while there is data
  size_t batch_rows = 4096;      ///< ... or as soon as this many rows are queued
  /// Rows held in memory at most: beyond, samples in the recovery file are dropped from memory
  /// (the store is then behind: unstored_samples()), or producers wait when there is no such file.
  size_t max_queued_rows = 1 << 20;
  int heartbeat_interval_ms = 2000;   ///< an idle writer still beats this often
  int64_t give_up_after_ms = 30'000;  ///< an error other than "locked" lasting this long is fatal
  /// finish() (and flush()) wait this long for a locked store; then the run ends incomplete.
  int64_t final_retry_ms = 30'000;
  Store::OpenOptions open;
};

/// Where a resumed run stands.
struct ResumePoint {
  std::map<std::string, int64_t> last_step;  ///< per metric
  int64_t max_step = -1;                     ///< over all metrics, -1 for none
  double max_wall_ms = 0;                    ///< offset a resumed clock by this to keep wall_ms increasing
};

class RunWriter final : public MetricsSink {
 public:
  explicit RunWriter(const std::string& db_path, WriterOptions options = {});
  ~RunWriter() override;
  RunWriter(const RunWriter&) = delete;
  RunWriter& operator=(const RunWriter&) = delete;

  /// Creates the run (status running, this process as its writer) and starts the writer thread.
  /// Returns the run id (info.id or a new one). DataError when the id exists.
  std::string begin_run(const RunInfo& info);
  /// Takes over an existing run: status back to running with this process as the writer, a status
  /// event, then the writer thread. DataError when the run is unknown or its writer is alive.
  ResumePoint resume(const std::string& run_id);

  // ---- MetricsSink: thread-safe, cheap, never block on the database ----
  void sample(const std::string& metric, int64_t step, double wall_ms, double value) override;
  void event(const std::string& kind, const nlohmann::json& fields) override;
  /// Waits until everything queued so far is committed, or final_retry_ms while the store is
  /// locked (the rows then stay queued). Throws lathe::Error when the writer has failed for good
  /// (the message says why).
  void flush() override;

  /// A device sample (GPU utilisation, memory, power...), kept apart from training metrics.
  /// device -1 is the host.
  void telemetry(int device, const std::string& metric, double wall_ms, double value);
  /// Records an artifact file; bytes and sha256 are computed on the writer thread.
  void artifact(const std::string& kind, const std::string& path, std::optional<int64_t> step = std::nullopt);
  /// Overrides which way is better for `metric` (metric_keys.direction, shared by all runs).
  void set_direction(const std::string& metric, Direction direction);

  /// Commits what is queued, sets the final status (finished, failed, cancelled or interrupted;
  /// incomplete instead when samples could not all be stored) and finished_ms, and stops the
  /// writer thread. Returns the status written. Throws like flush(), and when the store stayed
  /// locked so long that even the status could not be written (the message says how to repair).
  RunStatus finish(RunStatus status, const nlohmann::json& fields = nlohmann::json::object());
  /// Names the recovery file (the run's metrics.jsonl) when no "started" event does.
  void set_recovery_file(const std::string& path);

  const std::string& run_id() const { return m_run_id; }
  /// Rows committed so far (samples actually inserted; ignored repeats excluded).
  int64_t committed_samples() const { return m_committed_samples.load(); }
  /// Samples dropped: at or below a resume point, or after a fatal error.
  int64_t dropped_samples() const { return m_dropped.load(); }
  /// Samples logged but not in the store: in the recovery file (repairable) or lost (not).
  int64_t unstored_samples() const { return m_unstored.load() + m_lost.load(); }
  int64_t lost_samples() const { return m_lost.load(); }
  /// The last commit error ("" when the last commit succeeded).
  std::string last_error() const;

 private:
  using QueuedSample = store_detail::QueuedSample;  // metric = index into m_metric_names
  struct QueuedTelemetry {
    int32_t device, metric;
    double wall_ms, value;
  };
  struct QueuedEvent {
    int64_t at_ms;
    std::string kind;
    nlohmann::json fields;
  };
  struct Batch {
    std::vector<QueuedSample> samples;
    std::vector<QueuedTelemetry> telemetry;
    std::vector<QueuedEvent> events;
    std::vector<std::pair<std::string, Direction>> directions;
    uint64_t seq = 0;  // the last sequence number this batch covers
    size_t rows() const { return samples.size() + telemetry.size() + events.size() + directions.size(); }
  };
  class Statements;

  void start_thread();
  int32_t intern(const std::string& metric);  // with m_mutex held
  void enqueue_wait(std::unique_lock<std::mutex>& lock);
  void thread_main();
  struct FileFacts {  // an artifact's size and digest, -1 / "" when the file was missing
    int64_t bytes = -1;
    std::string sha;
  };
  void write_batch(Batch& batch);
  void write_batch_once(const Batch& batch, const std::vector<FileFacts>& facts, bool safe);
  /// The batch could not be stored: its samples are unstored (in the recovery file) or lost.
  void abandon(Batch& batch);  // with m_mutex held
  void stop_thread();

  WriterOptions m_opt;
  Store m_store;
  std::unique_ptr<Statements> m_stmts;
  std::string m_run_id;
  int64_t m_rid = -1;
  int64_t m_pid = 0;
  std::string m_host;

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;       // to the writer thread
  std::condition_variable m_committed;  // to flush() and waiting producers
  Batch m_queue;
  uint64_t m_seq = 0, m_committed_seq = 0;
  bool m_flush_requested = false, m_stop = false, m_fatal = false, m_finished = false;
  std::string m_error;
  std::unordered_map<std::string, int32_t> m_metric_index;
  std::vector<std::string> m_metric_names;
  std::vector<int64_t> m_floor;  // per metric: drop steps <= this (resume point)
  std::map<std::string, int64_t> m_resume_floor;
  std::string m_recovery_file;      // "" when none (or it stopped being written)
  int64_t m_stop_requested_ms = 0;  // when the final period began (finish(), or a flush() that timed out)
  int64_t m_final_wait_from_ms = 0;

  // Writer-thread state.
  std::vector<int64_t> m_metric_ids;  // per interned metric: metric_keys.id, -1 until resolved
  int64_t m_last_heartbeat_ms = 0;
  bool m_backend_known = false;
  std::thread m_thread;
  std::atomic<int64_t> m_committed_samples{0}, m_dropped{0}, m_unstored{0}, m_lost{0};
  std::atomic<int64_t> m_unstored_events{0};
};

}  // namespace lathe

// RunWriter: the queue (producer side), the writer thread and its batch transaction, and the run's
// lifecycle (begin, resume, finish). The writer thread is the only user of the connection while it
// runs; begin_run/resume/finish use it only while the thread is not running.
#include "engine/store/run_writer.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "engine/store/aggregate.h"
#include "engine/store/process_info.h"
#include "engine/core/sha256.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store_sql.h"

namespace lathe {

using namespace store_detail;

namespace {

/// The run's writer row names another process: someone resumed it. Never retried.
class TakenOver : public Error {
 public:
  using Error::Error;
};

}  // namespace

class RunWriter::Statements {
 public:
  explicit Statements(sql::Db& db)
      : samples(db),
        insert_telemetry(db.prepare("INSERT INTO telemetry(run, device, metric, wall_ms, value)"
                                    " VALUES(?1, ?2, ?3, ?4, ?5)")),
        insert_event(db.prepare("INSERT INTO events(run, at_ms, kind, fields) VALUES(?1, ?2, ?3, ?4)")),
        insert_artifact(db.prepare("INSERT INTO artifacts(run, kind, path, bytes, sha256, step, created_ms)"
                                   " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)")),
        key_insert(db.prepare("INSERT INTO metric_keys(name, direction) VALUES(?1, ?2) ON CONFLICT(name) DO NOTHING")),
        key_select(db.prepare("SELECT id FROM metric_keys WHERE name = ?1")),
        direction_upsert(db.prepare("INSERT INTO metric_keys(name, direction) VALUES(?1, ?2)"
                                    " ON CONFLICT(name) DO UPDATE SET direction = ?2")),
        owner(db.prepare("SELECT status, pid, host FROM runs WHERE rid = ?1")),
        heartbeat(db.prepare("UPDATE runs SET heartbeat_ms = ?2 WHERE rid = ?1")),
        restore(db.prepare("UPDATE runs SET status = 'running', finished_ms = NULL WHERE rid = ?1")),
        set_backend(db.prepare("UPDATE runs SET backend = ?2 WHERE rid = ?1 AND backend = ''")),
        set_devices(db.prepare("UPDATE runs SET devices = ?2 WHERE rid = ?1 AND devices = '[]'")) {}

  SampleInserter samples;
  sql::Stmt insert_telemetry, insert_event, insert_artifact;
  sql::Stmt key_insert, key_select, direction_upsert, owner, heartbeat, restore, set_backend, set_devices;

  /// After a failed attempt a statement may be left mid-step: start every batch from a clean slate.
  void reset_all() {
    samples.reset();
    for (sql::Stmt* s : {&insert_telemetry, &insert_event, &insert_artifact, &key_insert, &key_select,
                         &direction_upsert, &owner, &heartbeat, &restore, &set_backend, &set_devices})
      s->reset();
  }
};

RunWriter::RunWriter(const std::string& db_path, WriterOptions options)
    : m_opt(options),
      m_store(Store::open(db_path, options.open)),
      m_stmts(std::make_unique<Statements>(m_store.db())),
      m_pid(current_pid()),
      m_host(host_name()) {}

RunWriter::~RunWriter() {
  try {
    if (m_rid >= 0 && !m_finished)
      finish(RunStatus::interrupted, {{"reason", "the writer was closed before finish()"}});
  } catch (...) {
  }
  try {
    stop_thread();
  } catch (...) {
  }
}

// ---- lifecycle ---------------------------------------------------------------------------------

std::string RunWriter::begin_run(const RunInfo& info) {
  LATHE_CHECK(m_rid < 0, "RunWriter::begin_run: this writer already writes run ", m_run_id);
  m_run_id = sql::retry_busy(m_opt.give_up_after_ms, [&] { return m_store.create_run(info, RunStatus::running); });
  sql::Stmt q = m_store.db().prepare("SELECT rid FROM runs WHERE id = ?");
  q.bind(1, m_run_id).step();
  m_rid = q.col_int(0);
  m_backend_known = !info.backend.empty();
  m_last_heartbeat_ms = unix_ms();
  start_thread();
  return m_run_id;
}

ResumePoint RunWriter::resume(const std::string& run_id) {
  LATHE_CHECK(m_rid < 0, "RunWriter::resume: this writer already writes run ", m_run_id);
  sql::Db& db = m_store.db();
  ResumePoint point;
  const int64_t now = unix_ms();
  const auto txn_ptr =
      sql::retry_busy(m_opt.give_up_after_ms, [&] { return std::make_unique<sql::Txn>(db, sql::Txn::Kind::write); });
  sql::Txn& txn = *txn_ptr;
  int64_t rid = 0;
  sql::Stmt q = db.prepare(std::string("SELECT ") + kRunColumns + " FROM runs r WHERE r.id = ?");
  if (!q.bind(1, run_id).step())
    throw DataError("no run with id " + run_id + " in " + m_store.path() + " to resume");
  const RunRecord run = read_run(q, &rid);
  q.reset();
  if (run.status == RunStatus::running && stale_reason(run, now, m_opt.open.stale_after_ms).empty())
    throw DataError("run " + run_id + " is still being written by process " + std::to_string(run.pid.value_or(0)) +
                    " on " + run.host + ": cannot resume it twice");
  sql::Stmt up = db.prepare(
      "UPDATE runs SET status = 'running', pid = ?2, host = ?3, heartbeat_ms = ?4,"
      " started_ms = coalesce(started_ms, ?4), finished_ms = NULL WHERE rid = ?1");
  up.bind(1, rid).bind(2, m_pid).bind(3, m_host).bind(4, now).run();
  insert_event(db, rid, "status",
               {{"from", status_name(run.status)}, {"to", "running"}, {"resumed", run.status != RunStatus::queued}},
               now);
  sql::Stmt last = db.prepare(
      "SELECT k.name, s.last_step, s.last_wall FROM metric_summary s JOIN metric_keys k ON k.id = s.metric"
      " WHERE s.run = ?");
  last.bind(1, rid);
  while (last.step()) {
    point.last_step[last.col_text(0)] = last.col_int(1);
    point.max_step = std::max(point.max_step, last.col_int(1));
    point.max_wall_ms = std::max(point.max_wall_ms, last.col_double(2));
  }
  txn.commit();
  m_rid = rid;
  m_run_id = run_id;
  m_resume_floor = point.last_step;
  m_backend_known = !run.backend.empty();
  m_last_heartbeat_ms = now;
  start_thread();
  return point;
}

RunStatus RunWriter::finish(RunStatus status, const nlohmann::json& fields) {
  LATHE_CHECK(status != RunStatus::queued && status != RunStatus::running && status != RunStatus::incomplete,
              "RunWriter::finish(", status_name(status),
              "): the final status must be finished, failed, cancelled or interrupted");
  {
    std::lock_guard lock(m_mutex);
    LATHE_CHECK(m_rid >= 0 && !m_finished, "RunWriter::finish: no run begun, or finish() already called");
  }
  stop_thread();  // drains the queue, or gives up after final_retry_ms
  std::string recovery, error;
  bool fatal = false;
  {
    std::lock_guard lock(m_mutex);
    m_finished = true;
    recovery = m_recovery_file;
    error = m_error;
    fatal = m_fatal;
  }
  const int64_t unstored = m_unstored.load(), lost = m_lost.load();
  const RunStatus final_status = unstored + lost > 0 ? RunStatus::incomplete : status;
  nlohmann::json e = fields.is_object() ? fields : nlohmann::json::object();
  e["from"] = "running";
  e["to"] = status_name(final_status);
  if (final_status == RunStatus::incomplete) {
    e["ended"] = status_name(status);
    e["missing_samples"] = unstored + lost;
    e["recoverable_samples"] = unstored;
    if (m_unstored_events > 0)
      e["missing_events"] = m_unstored_events.load();
    e["metrics_file"] = recovery.empty() ? nlohmann::json(nullptr) : nlohmann::json(recovery);
    e["reason"] = error.empty() ? std::string("the store was locked") : error;
    e["recover"] = "lathe-cli repair " + m_run_id;
  }
  sql::Db& db = m_store.db();
  // The lock that kept the samples out may still be held: wait out what is left of the final
  // period, but try at least once (each try waits the connection's busy timeout).
  const int64_t waited = m_stop_requested_ms > 0 ? unix_ms() - m_stop_requested_ms : 0;
  try {
    sql::retry_busy(std::max<int64_t>(m_opt.final_retry_ms - waited, 0), [&] {
      const int64_t now = unix_ms();
      sql::Txn txn(db, sql::Txn::Kind::write);
      sql::Stmt up = db.prepare(
          "UPDATE runs SET status = ?2, finished_ms = ?3, heartbeat_ms = ?3 WHERE rid = ?1 AND pid IS ?4 AND host = "
          "?5");
      up.bind(1, m_rid).bind(2, status_name(final_status)).bind(3, now).bind(4, m_pid).bind(5, m_host).run();
      if (db.changes() > 0)
        insert_event(db, m_rid, "status", e, now);
      txn.commit();
    });
  } catch (const sql::SqliteError& busy) {
    if (!busy.busy())
      throw;
    std::string msg = "run " + m_run_id + ": the store " + m_store.path() + " stayed locked by another process";
    if (unstored + lost > 0)
      msg += "; " + std::to_string(unstored + lost) + " sample(s)";
    msg += std::string(unstored + lost > 0 ? " and" : ";") + " the final status (" + std::string(status_name(status)) +
           ") could not be stored";
    if (!recovery.empty())
      msg += ". The samples are in " + recovery + ": run `lathe-cli repair " + m_run_id + "` once the lock is gone";
    throw Error(msg);
  }
  if (fatal)
    throw Error("run " + m_run_id + ": the store writer failed: " + error);
  return final_status;
}

void RunWriter::set_recovery_file(const std::string& path) {
  std::lock_guard lock(m_mutex);
  m_recovery_file = path;
}

// ---- producer side -----------------------------------------------------------------------------

int32_t RunWriter::intern(const std::string& metric) {
  const auto it = m_metric_index.find(metric);
  if (it != m_metric_index.end())
    return it->second;
  const auto idx = static_cast<int32_t>(m_metric_names.size());
  m_metric_index.emplace(metric, idx);
  m_metric_names.push_back(metric);
  const auto floor = m_resume_floor.find(metric);
  m_floor.push_back(floor == m_resume_floor.end() ? std::numeric_limits<int64_t>::min() : floor->second);
  return idx;
}

void RunWriter::enqueue_wait(std::unique_lock<std::mutex>& lock) {
  if (m_queue.rows() < m_opt.max_queued_rows)
    return;
  m_wake.notify_one();
  m_committed.wait(lock, [&] { return m_queue.rows() < m_opt.max_queued_rows || m_fatal || m_stop; });
}

void RunWriter::sample(const std::string& metric, int64_t step, double wall_ms, double value) {
  std::unique_lock lock(m_mutex);
  LATHE_CHECK(m_rid >= 0 && !m_finished, "RunWriter::sample(", metric, "): no run begun, or already finished");
  const int32_t idx = intern(metric);
  if (m_fatal || step <= m_floor[idx]) {
    ++m_dropped;
    return;
  }
  enqueue_wait(lock);
  m_queue.samples.push_back({idx, step, std::isnan(wall_ms) ? 0.0 : wall_ms, value});  // wall_ms is NOT NULL
  ++m_seq;
  if (m_queue.rows() == m_opt.batch_rows)
    m_wake.notify_one();
}

void RunWriter::telemetry(int device, const std::string& metric, double wall_ms, double value) {
  std::unique_lock lock(m_mutex);
  LATHE_CHECK(m_rid >= 0 && !m_finished, "RunWriter::telemetry(", metric, "): no run begun, or already finished");
  if (m_fatal)
    return;
  const int32_t idx = intern(metric);
  enqueue_wait(lock);
  m_queue.telemetry.push_back({device, idx, std::isnan(wall_ms) ? 0.0 : wall_ms, value});
  ++m_seq;
  if (m_queue.rows() == m_opt.batch_rows)
    m_wake.notify_one();
}

void RunWriter::event(const std::string& kind, const nlohmann::json& fields) {
  std::unique_lock lock(m_mutex);
  LATHE_CHECK(m_rid >= 0 && !m_finished, "RunWriter::event(", kind, "): no run begun, or already finished");
  if (m_fatal)
    return;
  if (kind == "started" && fields.is_object() && fields.contains("metrics_file") && fields["metrics_file"].is_string())
    m_recovery_file = fields["metrics_file"].get<std::string>();
  else if (kind == "metrics_file_failed")
    m_recovery_file.clear();  // what is dropped from now on is lost: keep it in memory instead
  m_queue.events.push_back({unix_ms(), kind, fields});
  ++m_seq;
  // Events are few and each one matters (a phase, a checkpoint, the recovery file's name), and
  // none is in metrics.jsonl for repair to bring back: committed at once, not at the next tick,
  // so that a kill -9 loses at most the events of the last commit's milliseconds.
  m_wake.notify_one();
}

void RunWriter::artifact(const std::string& kind, const std::string& path, std::optional<int64_t> step) {
  nlohmann::json f{{"kind", kind}, {"path", path}};
  if (step)
    f["step"] = *step;
  event("artifact", f);
}

void RunWriter::set_direction(const std::string& metric, Direction direction) {
  std::unique_lock lock(m_mutex);
  LATHE_CHECK(m_rid >= 0 && !m_finished, "RunWriter::set_direction: no run begun, or already finished");
  m_queue.directions.emplace_back(metric, direction);
  ++m_seq;
}

void RunWriter::flush() {
  std::unique_lock lock(m_mutex);
  if (!m_thread.joinable()) {
    if (m_fatal)
      throw Error("run " + m_run_id + ": the store writer failed: " + m_error);
    return;
  }
  const uint64_t target = m_seq;
  m_flush_requested = true;
  m_wake.notify_one();
  // A store locked for longer leaves the rows queued: finish() has the last word on them, and
  // its final period counts from here (the end of a run waits final_retry_ms once, not twice).
  const int64_t started = unix_ms();
  if (!m_committed.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(m_opt.final_retry_ms, 0)),
                            [&] { return m_committed_seq >= target || m_fatal; }) &&
      m_stop_requested_ms == 0)
    m_final_wait_from_ms = started;
  if (m_fatal)
    throw Error("run " + m_run_id + ": the store writer failed: " + m_error);
}

std::string RunWriter::last_error() const {
  std::lock_guard lock(m_mutex);
  return m_error;
}

// ---- writer thread -----------------------------------------------------------------------------

void RunWriter::start_thread() {
  m_stop = false;
  m_thread = std::thread([this] { thread_main(); });
}

void RunWriter::stop_thread() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
    if (m_stop_requested_ms == 0)
      m_stop_requested_ms = m_final_wait_from_ms > 0 ? m_final_wait_from_ms : unix_ms();
  }
  m_wake.notify_one();
  m_committed.notify_all();
  if (m_thread.joinable())
    m_thread.join();
}

namespace {
template <class T>
void append(std::vector<T>& to, std::vector<T>& from) {
  if (to.empty()) {
    to.swap(from);
  } else {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
    from.clear();
  }
}
}  // namespace

void RunWriter::abandon(Batch& batch) {
  const auto n = static_cast<int64_t>(batch.samples.size());
  (m_recovery_file.empty() ? m_lost : m_unstored) += n;
  m_unstored_events += static_cast<int64_t>(batch.events.size());
  batch = Batch{};
}

void RunWriter::thread_main() {
  Batch pending;
  int64_t failing_since = 0;
  int pause_ms = 50;  // after a failed commit, growing to 1 s
  bool failing = false, stop_seen = false;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock lock(m_mutex);
      const int tick_ms = std::min(m_opt.commit_interval_ms, m_opt.heartbeat_interval_ms);
      if (failing)
        m_wake.wait_for(lock, std::chrono::milliseconds(pause_ms), [&] { return m_stop && !stop_seen; });
      else
        m_wake.wait_for(lock, std::chrono::milliseconds(tick_ms),
                        [&] {
                          return m_stop || m_flush_requested || !m_queue.events.empty() ||
                                 m_queue.rows() >= m_opt.batch_rows;
                        });
      // Bounded memory while the store is locked: samples that are in the recovery file can go
      // (the store is then behind; repair re-imports them); without one, producers wait.
      const bool full = pending.rows() >= m_opt.max_queued_rows;
      if (full && !m_recovery_file.empty()) {
        m_unstored += static_cast<int64_t>(pending.samples.size());
        pending.samples.clear();
        pending.samples.shrink_to_fit();
        pending.telemetry.clear();  // device telemetry is not in the file: the gap stays
      }
      if (!full || !m_recovery_file.empty()) {
        append(pending.samples, m_queue.samples);
        append(pending.telemetry, m_queue.telemetry);
        append(pending.events, m_queue.events);
        append(pending.directions, m_queue.directions);
        pending.seq = m_seq;
      }
      m_flush_requested = false;
      stopping = stop_seen = m_stop;
    }
    m_committed.notify_all();  // producers waiting for queue room

    const int64_t now = unix_ms();
    const bool due = now - m_last_heartbeat_ms >= m_opt.heartbeat_interval_ms;
    bool fatal = false, give_up = false;
    if (pending.rows() > 0 || due || pending.seq > m_committed_seq) {
      std::string error;
      try {
        write_batch(pending);
        m_last_heartbeat_ms = now;
        failing_since = 0;
      } catch (const TakenOver& e) {
        error = e.what();
        fatal = true;
      } catch (const std::exception& e) {
        error = e.what();
        if (failing_since == 0)
          failing_since = now;
        const auto* sqlite = dynamic_cast<const sql::SqliteError*>(&e);
        const bool busy = sqlite && sqlite->busy();
        // A lock is waited out for as long as the run lasts, then final_retry_ms after finish();
        // any other error is fatal after give_up_after_ms.
        fatal = !busy && now - failing_since >= m_opt.give_up_after_ms;
        std::lock_guard lock(m_mutex);
        give_up = stopping && now - m_stop_requested_ms >= m_opt.final_retry_ms;
      }
      std::lock_guard lock(m_mutex);
      if (error.empty()) {
        m_committed_seq = pending.seq;
        m_error.clear();
        if (!stopping)
          m_final_wait_from_ms = 0;  // the lock went: a later one gets a whole final period
        pending = Batch{};
      } else {
        m_error = error;
        if (fatal) {
          m_fatal = true;
          m_dropped += static_cast<int64_t>(pending.samples.size() + m_queue.samples.size());
          pending = Batch{};
          m_queue = Batch{};
        } else if (give_up) {
          abandon(pending);
          abandon(m_queue);
        }
      }
      m_committed.notify_all();
    }
    failing = !m_error.empty();
    pause_ms = failing ? std::min(pause_ms * 2, 1000) : 50;
    if (fatal || give_up)
      break;
    if (stopping && pending.rows() == 0) {
      std::lock_guard lock(m_mutex);
      if (m_queue.rows() == 0)  // (rows held back while pending was full still go in)
        break;
    }
  }
}

void RunWriter::write_batch(Batch& batch) {
  // Checksums first: hashing a large checkpoint must not hold the write lock.
  std::vector<FileFacts> facts(batch.events.size());
  for (size_t i = 0; i < batch.events.size(); ++i) {
    const QueuedEvent& e = batch.events[i];
    if (e.kind != "artifact" || !e.fields.is_object() || !e.fields.contains("path") || !e.fields["path"].is_string())
      continue;
    try {
      facts[i].sha = sha256_file(e.fields["path"].get<std::string>(), &facts[i].bytes);
    } catch (const DataError&) {
      facts[i] = FileFacts{};  // recorded as missing
    }
  }
  try {
    write_batch_once(batch, facts, false);
  } catch (const FastPathMismatch&) {
    write_batch_once(batch, facts, true);  // someone else wrote rows of this run: one row at a time
  }
}

void RunWriter::write_batch_once(const Batch& batch, const std::vector<FileFacts>& facts, bool safe) {
  sql::Db& db = m_store.db();
  Statements& st = *m_stmts;
  st.reset_all();
  sql::Txn txn(db, sql::Txn::Kind::write);
  if (!st.owner.bind(1, m_rid).step())
    throw TakenOver("run " + m_run_id + " was deleted while being written");
  const std::string status = st.owner.col_text(0);
  const int64_t pid = st.owner.col_int(1);
  const std::string host = st.owner.col_text(2);
  st.owner.reset();
  if (pid != m_pid || host != m_host)
    throw TakenOver("run " + m_run_id + " was taken over by process " + std::to_string(pid) + " on " + host);
  const int64_t now = unix_ms();
  if (status == "interrupted") {  // reaped while we were stalled (suspended, SIGSTOP): we are alive
    st.restore.bind(1, m_rid).run();
    st.insert_event.bind(1, m_rid).bind(2, now).bind(3, "status");
    st.insert_event.bind(
        4, nlohmann::json{{"from", "interrupted"}, {"to", "running"}, {"reason", "writer alive again"}}.dump());
    st.insert_event.run();
  }
  st.heartbeat.bind(1, m_rid).bind(2, now).run();

  for (const auto& [name, direction] : batch.directions)
    st.direction_upsert.bind(1, name).bind(2, static_cast<int64_t>(direction)).run();

  // Metric ids resolved in this transaction only become ours once it commits.
  std::vector<std::string> names;
  std::vector<int64_t> floors;
  {
    std::lock_guard lock(m_mutex);
    names.assign(
        m_metric_names.begin() + static_cast<std::ptrdiff_t>(std::min(m_metric_ids.size(), m_metric_names.size())),
        m_metric_names.end());
    floors = m_floor;
  }
  std::vector<int64_t> ids = m_metric_ids;
  for (const std::string& name : names) {
    st.key_insert.bind(1, name).bind(2, static_cast<int64_t>(default_direction(name))).run();
    LATHE_CHECK(st.key_select.bind(1, name).step(), "metric key ", name, " vanished");
    ids.push_back(st.key_select.col_int(0));
    st.key_select.reset();
  }
  const auto id_of = [&](int32_t idx) { return ids.at(static_cast<size_t>(idx)); };

  const int64_t inserted = st.samples.insert(m_rid, batch.samples, ids, floors, safe);
  if (inserted > 0)
    refresh_summary_pack(db, m_rid);

  for (const QueuedTelemetry& t : batch.telemetry)
    st.insert_telemetry.bind(1, m_rid)
        .bind(2, t.device)
        .bind(3, id_of(t.metric))
        .bind(4, t.wall_ms)
        .bind(5, t.value)
        .run();

  for (size_t i = 0; i < batch.events.size(); ++i) {
    const QueuedEvent& e = batch.events[i];
    st.insert_event.bind(1, m_rid).bind(2, e.at_ms).bind(3, e.kind).bind(4, e.fields.dump()).run();
    if (!e.fields.is_object())
      continue;
    if (e.kind == "artifact" && e.fields.contains("path") && e.fields["path"].is_string()) {
      const nlohmann::json& f = e.fields;
      st.insert_artifact.bind(1, m_rid)
          .bind(2, f.value("kind", std::string("file")))
          .bind(3, f["path"].get<std::string>());
      st.insert_artifact.bind(4, facts[i].bytes).bind(5, facts[i].sha);
      if (f.contains("step") && f["step"].is_number_integer())
        st.insert_artifact.bind(6, f["step"].get<int64_t>());
      else
        st.insert_artifact.bind_null(6);
      st.insert_artifact.bind(7, e.at_ms).run();
    } else if (e.kind == "started" && !m_backend_known) {
      if (e.fields.contains("backend") && e.fields["backend"].is_string())
        st.set_backend.bind(1, m_rid).bind(2, e.fields["backend"].get<std::string>()).run();
      nlohmann::json devices = nlohmann::json::array();
      if (e.fields.contains("devices") && e.fields["devices"].is_array())
        devices = e.fields["devices"];
      else if (e.fields.contains("device") && e.fields["device"].is_string())
        devices.push_back(e.fields["device"]);
      if (!devices.empty())
        st.set_devices.bind(1, m_rid).bind(2, devices.dump()).run();
    }
  }
  txn.commit();
  st.samples.committed();
  m_metric_ids = std::move(ids);
  m_committed_samples += inserted;
  // A started event that went in settles the question for good.
  for (const QueuedEvent& e : batch.events)
    if (e.kind == "started")
      m_backend_known = true;
}

}  // namespace lathe

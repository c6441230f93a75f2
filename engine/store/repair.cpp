// repair_run: stream metrics.jsonl in batches of 4096 samples, each batch one write transaction
// through SampleInserter (safe mode: one INSERT OR IGNORE per row), then restore the run's status.
#include "engine/store/repair.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <unordered_map>
#include <vector>

#include "engine/store/aggregate.h"
#include "engine/store/process_info.h"
#include "engine/store/sample_inserter.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store_sql.h"

namespace lathe {

using namespace store_detail;

namespace {

constexpr size_t kBatch = 4096;

double sample_value(const nlohmann::json& j) {
  const auto v = j.find("value");
  if (v != j.end() && v->is_number())
    return v->get<double>();
  const auto nf = j.find("nonfinite");
  if (nf != j.end() && nf->is_string()) {
    if (*nf == "inf")
      return std::numeric_limits<double>::infinity();
    if (*nf == "-inf")
      return -std::numeric_limits<double>::infinity();
  }
  return std::nan("");
}

/// The status the run really ended with, from its last `incomplete` status event.
std::optional<RunStatus> ended_status(const Store& store, const std::string& run_id) {
  std::optional<RunStatus> ended;
  for (const EventRecord& e : store.events(run_id))
    if (e.kind == "status" && e.fields.is_object() && e.fields.value("to", "") == "incomplete" &&
        e.fields.contains("ended") && e.fields["ended"].is_string())
      ended = parse_status(e.fields["ended"].get<std::string>());
  return ended;
}

}  // namespace

std::string recorded_metrics_file(const Store& store, const std::string& run_id) {
  std::string file;
  for (const EventRecord& e : store.events(run_id))
    if ((e.kind == "started" || e.kind == "status") && e.fields.is_object() && e.fields.contains("metrics_file") &&
        e.fields["metrics_file"].is_string())
      file = e.fields["metrics_file"].get<std::string>();
  return file;
}

RepairReport repair_run(Store& store, const std::string& run_id, const RepairOptions& options) {
  sql::Db& db = store.db();
  RepairReport rep;
  rep.run_id = run_id;
  const RunRecord run = store.run(run_id);
  rep.status_before = rep.status_after = run.status;
  if (run.status == RunStatus::running && stale_reason(run, unix_ms(), Store::kDefaultStaleAfterMs).empty())
    throw DataError("run " + run_id + " is still being written by process " + std::to_string(run.pid.value_or(0)) +
                    " on " + run.host + ": repair it once it has ended");
  rep.metrics_file = options.metrics_file.empty() ? recorded_metrics_file(store, run_id) : options.metrics_file;
  if (rep.metrics_file.empty()) {
    // The "started" event never reached the store (locked from the start): the run folder follows
    // from the config, <output.dir>/<id>/metrics.jsonl (a relative output.dir: from here).
    const nlohmann::json cfg = nlohmann::json::parse(run.config_json, nullptr, false);
    std::string root = "runs";
    if (cfg.is_object() && cfg.contains("output") && cfg["output"].is_object() && cfg["output"].contains("dir") &&
        cfg["output"]["dir"].is_string())
      root = cfg["output"]["dir"].get<std::string>();
    const std::string guess = root + "/" + run_id + "/metrics.jsonl";
    if (std::ifstream(guess).good())
      rep.metrics_file = guess;
  }
  if (rep.metrics_file.empty())
    throw DataError("run " + run_id + " names no metrics.jsonl (it predates repair, or ran without a run folder):" +
                    " give the file with --from runs/" + run_id + "/metrics.jsonl");
  std::ifstream in(rep.metrics_file);
  if (!in)
    throw DataError("cannot read " + rep.metrics_file + " (the metrics of run " + run_id + ")");

  int64_t rid = 0;
  {
    sql::Stmt q = db.prepare("SELECT rid FROM runs WHERE id = ?");
    q.bind(1, run_id).step();
    rid = q.col_int(0);
  }
  SampleInserter inserter(db);
  std::unordered_map<std::string, int32_t> index;
  std::vector<std::string> names;
  std::vector<int64_t> ids, floors;
  std::vector<QueuedSample> batch;
  std::optional<RunStatus> file_end;  // the trainer's last "finished" / "cancelled" event

  const auto commit_batch = [&] {
    if (batch.empty())
      return;
    rep.inserted += sql::retry_busy(options.wait_ms, [&] {
      inserter.reset();
      sql::Txn txn(db, sql::Txn::Kind::write);
      std::vector<int64_t> batch_ids = ids;
      sql::Stmt key_insert =
          db.prepare("INSERT INTO metric_keys(name, direction) VALUES(?1, ?2) ON CONFLICT(name) DO NOTHING");
      sql::Stmt key_select = db.prepare("SELECT id FROM metric_keys WHERE name = ?1");
      for (size_t i = batch_ids.size(); i < names.size(); ++i) {
        key_insert.bind(1, names[i]).bind(2, static_cast<int64_t>(default_direction(names[i]))).run();
        LATHE_CHECK(key_select.bind(1, names[i]).step(), "metric key ", names[i], " vanished");
        batch_ids.push_back(key_select.col_int(0));
        key_select.reset();
      }
      floors.resize(batch_ids.size(), std::numeric_limits<int64_t>::min());
      const int64_t n = inserter.insert(rid, batch, batch_ids, floors, /*safe=*/true);
      if (n > 0)
        refresh_summary_pack(db, rid);
      txn.commit();
      inserter.committed();
      ids = std::move(batch_ids);
      return n;
    });
    batch.clear();
  };

  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) {
      ++rep.bad_lines;
      continue;
    }
    if (j.contains("event") && j["event"].is_string()) {
      const std::string kind = j["event"].get<std::string>();
      if (kind == "finished" || kind == "cancelled")
        file_end = parse_status(kind);
      continue;
    }
    const auto m = j.find("metric");
    const auto st = j.find("step");
    if (m == j.end() || !m->is_string() || st == j.end() || !st->is_number_integer()) {
      ++rep.bad_lines;
      continue;
    }
    const std::string name = m->get<std::string>();
    auto it = index.find(name);
    if (it == index.end()) {
      it = index.emplace(name, static_cast<int32_t>(names.size())).first;
      names.push_back(name);
    }
    const auto w = j.find("wall_ms");
    batch.push_back(
        {it->second, st->get<int64_t>(), w != j.end() && w->is_number() ? w->get<double>() : 0.0, sample_value(j)});
    ++rep.samples_in_file;
    if (batch.size() >= kBatch)
      commit_batch();
  }
  commit_batch();

  std::optional<RunStatus> restore;
  if (run.status == RunStatus::incomplete)
    restore = ended_status(store, run_id).value_or(file_end.value_or(RunStatus::finished));
  else if (run.status == RunStatus::interrupted && file_end)
    restore = file_end;
  else if (run.status == RunStatus::running)  // its writer is gone (checked above), not yet reaped
    restore = file_end.value_or(RunStatus::interrupted);
  if (restore || rep.inserted > 0) {
    sql::retry_busy(options.wait_ms, [&] {
      const int64_t now = unix_ms();
      sql::Txn txn(db, sql::Txn::Kind::write);
      const nlohmann::json counts{{"metrics_file", rep.metrics_file},
                                  {"samples_in_file", rep.samples_in_file},
                                  {"reimported", rep.inserted},
                                  {"bad_lines", rep.bad_lines}};
      if (restore) {
        sql::Stmt up = db.prepare(
            "UPDATE runs SET status = ?2, finished_ms = coalesce(finished_ms, heartbeat_ms, ?3)"
            " WHERE rid = ?1 AND status = ?4");
        up.bind(1, rid).bind(2, status_name(*restore)).bind(3, now).bind(4, status_name(run.status)).run();
        if (db.changes() > 0) {
          nlohmann::json e = counts;
          e["from"] = status_name(run.status);
          e["to"] = status_name(*restore);
          e["reason"] = "lathe-cli repair";
          insert_event(db, rid, "status", e, now);
          rep.status_after = *restore;
        }
      } else {
        insert_event(db, rid, "repair", counts, now);
      }
      txn.commit();
    });
  }
  return rep;
}

}  // namespace lathe

// Store-to-store import (see store_import.h): the source is ATTACHed to the destination's
// connection and copied with INSERT ... SELECT in one write transaction per file; summaries and
// the block pyramid of runs that gained samples are rebuilt from their samples (the truth).
#include "engine/store/store_import.h"

#include <algorithm>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/store/aggregate.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"

namespace lathe {

namespace {

namespace fs = std::filesystem;

/// Rebuilds metric_summary, sample_blocks and the summary pack of one run from its samples.
void rebuild_series(sql::Db& db, int64_t rid) {
  db.prepare("DELETE FROM metric_summary WHERE run = ?").bind(1, rid).run();
  db.prepare("DELETE FROM sample_blocks WHERE run = ?").bind(1, rid).run();
  sql::Stmt read = db.prepare("SELECT metric, step, wall_ms, value FROM samples WHERE run = ? ORDER BY metric, step");
  read.bind(1, rid);
  sql::Stmt block_upsert = db.prepare(store_detail::block_upsert_sql());
  sql::Stmt summary_upsert = db.prepare(store_detail::summary_upsert_sql());
  store_detail::SeriesBuilder builder;
  int64_t metric = -1;
  while (read.step()) {
    const int64_t m = read.col_int(0);
    if (m != metric && !builder.empty())
      store_detail::upsert_series(block_upsert, summary_upsert, rid, metric, builder);
    metric = m;
    builder.add({read.col_int(1), read.col_double(2), read.col_double(3)});
  }
  if (!builder.empty())
    store_detail::upsert_series(block_upsert, summary_upsert, rid, metric, builder);
  store_detail::refresh_summary_pack(db, rid);
}

/// Copies one attached source (schema `src`) into `main`.
void import_attached(sql::Db& db, ImportResult& result) {
  const char* const kStatusColumns = "status, started_ms, finished_ms, host, backend, devices, pid, heartbeat_ms, note";
  db.exec("INSERT OR IGNORE INTO main.metric_keys(name, direction) SELECT name, direction FROM src.metric_keys");
  db.exec(
      "INSERT INTO main.runs(id, name, status, config, created_ms, started_ms, finished_ms, host, backend, devices,"
      " code_version, pid, heartbeat_ms, note)"
      " SELECT id, name, status, config, created_ms, started_ms, finished_ms, host, backend, devices, code_version,"
      " pid, heartbeat_ms, note FROM src.runs WHERE id NOT IN (SELECT id FROM main.runs)");
  result.runs_added += static_cast<int>(db.changes());
  std::string differs;
  for (const char* c : {"status", "started_ms", "finished_ms", "host", "backend", "devices", "pid", "heartbeat_ms",
                        "note"})
    differs += std::string(differs.empty() ? "" : " OR ") + "m." + c + " IS NOT s." + c;
  db.exec(std::string("UPDATE main.runs AS d SET (") + kStatusColumns + ") = (SELECT " + kStatusColumns +
          " FROM src.runs s WHERE s.id = d.id) WHERE d.id IN (SELECT s.id FROM src.runs s JOIN main.runs m"
          " ON m.id = s.id WHERE " + differs + ")");
  result.runs_updated += static_cast<int>(db.changes());

  db.exec(
      "CREATE TEMP TABLE IF NOT EXISTS import_map(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
      "DELETE FROM import_map;"
      "INSERT INTO import_map SELECT s.rid, m.rid FROM src.runs s JOIN main.runs m ON m.id = s.id;"
      "CREATE TEMP TABLE IF NOT EXISTS import_keys(src INTEGER PRIMARY KEY, dst INTEGER NOT NULL);"
      "DELETE FROM import_keys;"
      "INSERT INTO import_keys SELECT s.id, m.id FROM src.metric_keys s JOIN main.metric_keys m ON m.name = s.name;");
  db.exec(
      "INSERT OR IGNORE INTO main.params(run, key, value) SELECT map.dst, p.key, p.value FROM src.params p"
      " JOIN import_map map ON map.src = p.run");
  db.exec(
      "INSERT OR IGNORE INTO main.run_tags(run, tag) SELECT map.dst, t.tag FROM src.run_tags t"
      " JOIN import_map map ON map.src = t.run");

  std::vector<int64_t> grown;
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (sql::Stmt q = db.prepare("SELECT src, dst FROM import_map"); q.step();)
    runs.emplace_back(q.col_int(0), q.col_int(1));
  sql::Stmt samples = db.prepare(
      "INSERT OR IGNORE INTO main.samples(run, metric, step, wall_ms, value) SELECT ?2, k.dst, s.step, s.wall_ms,"
      " s.value FROM src.samples s JOIN import_keys k ON k.src = s.metric WHERE s.run = ?1");
  sql::Stmt events = db.prepare(
      "INSERT INTO main.events(run, at_ms, kind, fields) SELECT ?2, e.at_ms, e.kind, e.fields FROM src.events e"
      " WHERE e.run = ?1 AND NOT EXISTS (SELECT 1 FROM main.events d WHERE d.run = ?2 AND d.at_ms = e.at_ms AND"
      " d.kind = e.kind AND d.fields = e.fields) ORDER BY e.id");
  sql::Stmt artifacts = db.prepare(
      "INSERT INTO main.artifacts(run, kind, path, bytes, sha256, created_ms, step) SELECT ?2, a.kind, a.path,"
      " a.bytes, a.sha256, a.created_ms, a.step FROM src.artifacts a WHERE a.run = ?1 AND NOT EXISTS (SELECT 1"
      " FROM main.artifacts d WHERE d.run = ?2 AND d.kind = a.kind AND d.path = a.path) ORDER BY a.id");
  sql::Stmt telemetry = db.prepare(
      "INSERT INTO main.telemetry(run, device, metric, wall_ms, value) SELECT ?2, t.device, k.dst, t.wall_ms,"
      " t.value FROM src.telemetry t JOIN import_keys k ON k.src = t.metric WHERE t.run = ?1 AND NOT EXISTS"
      " (SELECT 1 FROM main.telemetry d WHERE d.run = ?2 AND d.metric = k.dst AND d.wall_ms = t.wall_ms AND"
      " d.device = t.device)");
  for (const auto& [src, dst] : runs) {
    samples.bind(1, src).bind(2, dst).run();
    const int64_t added = db.changes();
    result.samples_added += added;
    if (added > 0)
      grown.push_back(dst);
    events.bind(1, src).bind(2, dst).run();
    result.events_added += db.changes();
    artifacts.bind(1, src).bind(2, dst).run();
    telemetry.bind(1, src).bind(2, dst).run();
  }
  for (int64_t rid : grown)
    rebuild_series(db, rid);
}

std::vector<std::string> store_files(const std::string& path) {
  if (!fs::exists(path))
    throw DataError("import: " + path + " does not exist; allowed: a store file or a folder of store files (*.db)");
  if (!fs::is_directory(path))
    return {path};
  std::vector<std::string> out;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(path))
    if (e.is_regular_file() && e.path().extension() == ".db")
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

ImportResult import_stores(Store& dest, const std::string& path) {
  ImportResult result;
  const bool named = !fs::is_directory(path);
  std::error_code ec;
  for (const std::string& file : store_files(path)) {
    if (fs::equivalent(file, dest.path(), ec))
      continue;
    try {
      // Brings an older file to this schema (and refuses a newer one or a non-store) without
      // touching its runs: no reaping, since their writers live on other hosts.
      Store::OpenOptions o;
      o.reap_stale = false;
      { Store::open(file, o); }
      sql::Db& db = dest.db();
      sql::Stmt attach = db.prepare("ATTACH DATABASE ? AS src");
      attach.bind(1, file).run();
      try {
        sql::Txn txn(db, sql::Txn::Kind::write);
        import_attached(db, result);
        txn.commit();
      } catch (...) {
        db.exec("DETACH DATABASE src");
        throw;
      }
      db.exec("DETACH DATABASE src");
      ++result.files;
    } catch (const DataError& e) {
      if (named)
        throw;
      result.skipped.push_back(file + ": " + e.what());
    }
  }
  return result;
}

}  // namespace lathe

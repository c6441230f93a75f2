// Migrations v1 to v6 and the runner that applies them. Never edit a shipped migration: add the
// next one. Timestamps are Unix milliseconds; runs.rid is the compact integer key every other table
// uses, runs.id the public text id.
#include "engine/store/schema.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "engine/store/aggregate.h"
#include "engine/store/process_info.h"

namespace lathe::store_detail {

namespace {

// ---- v1: runs, params, metric_keys, samples, a small summary, events, artifacts ----------------

const char* const kV1 = R"sql(
CREATE TABLE schema_version(
  version INTEGER PRIMARY KEY,
  applied_ms INTEGER NOT NULL,
  description TEXT NOT NULL);
CREATE TABLE runs(
  rid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK(status IN ('queued','running','finished','failed','cancelled','interrupted')),
  config TEXT NOT NULL DEFAULT '{}',
  created_ms INTEGER NOT NULL,
  started_ms INTEGER,
  finished_ms INTEGER,
  host TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '',
  devices TEXT NOT NULL DEFAULT '[]',
  code_version TEXT NOT NULL DEFAULT '');
CREATE INDEX runs_by_created ON runs(created_ms);
CREATE TABLE params(
  run INTEGER NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY(run, key)) WITHOUT ROWID;
CREATE TABLE metric_keys(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE);
CREATE TABLE samples(
  run INTEGER NOT NULL,
  metric INTEGER NOT NULL,
  step INTEGER NOT NULL,
  wall_ms REAL NOT NULL,
  value REAL,
  PRIMARY KEY(run, metric, step)) WITHOUT ROWID;
CREATE TABLE metric_summary(
  run INTEGER NOT NULL,
  metric INTEGER NOT NULL,
  count INTEGER NOT NULL,
  last_step INTEGER NOT NULL,
  last_value REAL,
  min_value REAL,
  max_value REAL,
  PRIMARY KEY(run, metric)) WITHOUT ROWID;
CREATE TABLE events(
  id INTEGER PRIMARY KEY,
  run INTEGER NOT NULL,
  at_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  fields TEXT NOT NULL DEFAULT '{}');
CREATE INDEX events_by_run ON events(run, id);
CREATE TABLE artifacts(
  id INTEGER PRIMARY KEY,
  run INTEGER NOT NULL,
  kind TEXT NOT NULL,
  path TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  sha256 TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL);
)sql";

void apply_v1(sql::Db& db) { db.exec(kV1); }

// ---- v2: liveness, directions, full summaries, blocks, telemetry, indexes ------------------------

// Summaries with each metric's best value and step (by its direction). v2 creates it; v3, which
// rebuilds the runs table it reads, drops and recreates it.
const char* const kMetricSummaryView = R"sql(
CREATE VIEW metric_summary_view AS
  SELECT r.id AS run_id, k.name AS metric, s.count, s.first_step, s.last_step, s.last_value,
         s.min_value, s.min_step, s.max_value, s.max_step,
         iif(k.direction < 0, s.min_value, s.max_value) AS best_value,
         iif(k.direction < 0, s.min_step, s.max_step) AS best_step
  FROM metric_summary s JOIN runs r ON r.rid = s.run JOIN metric_keys k ON k.id = s.metric;
)sql";

const char* const kV2Ddl = R"sql(
ALTER TABLE runs ADD COLUMN pid INTEGER;
ALTER TABLE runs ADD COLUMN heartbeat_ms INTEGER;
ALTER TABLE runs ADD COLUMN summary_pack BLOB;
CREATE INDEX runs_by_name ON runs(name);
CREATE INDEX runs_by_status ON runs(status);
CREATE INDEX params_by_key ON params(key, value);

ALTER TABLE metric_keys ADD COLUMN direction INTEGER NOT NULL DEFAULT 1;
UPDATE metric_keys SET direction = -1 WHERE instr(lower(name), 'loss') > 0;

ALTER TABLE metric_summary RENAME TO metric_summary_v1;
CREATE TABLE metric_summary(
  run INTEGER NOT NULL,
  metric INTEGER NOT NULL,
  count INTEGER NOT NULL,
  first_step INTEGER NOT NULL, first_wall REAL NOT NULL, first_value REAL,
  last_step INTEGER NOT NULL, last_wall REAL NOT NULL, last_value REAL,
  min_step INTEGER, min_wall REAL, min_value REAL,
  max_step INTEGER, max_wall REAL, max_value REAL,
  PRIMARY KEY(run, metric)) WITHOUT ROWID;
CREATE INDEX summary_by_metric ON metric_summary(metric, run);

CREATE TABLE sample_blocks(
  run INTEGER NOT NULL,
  metric INTEGER NOT NULL,
  level INTEGER NOT NULL,
  block INTEGER NOT NULL,
  count INTEGER NOT NULL,
  first_step INTEGER NOT NULL, first_wall REAL NOT NULL, first_value REAL,
  last_step INTEGER NOT NULL, last_wall REAL NOT NULL, last_value REAL,
  min_step INTEGER, min_wall REAL, min_value REAL,
  max_step INTEGER, max_wall REAL, max_value REAL,
  PRIMARY KEY(run, metric, level, block)) WITHOUT ROWID;

CREATE TABLE telemetry(
  run INTEGER NOT NULL,
  device INTEGER NOT NULL,
  metric INTEGER NOT NULL,
  wall_ms REAL NOT NULL,
  value REAL);
CREATE INDEX telemetry_by_series ON telemetry(run, metric, wall_ms);

ALTER TABLE artifacts ADD COLUMN step INTEGER;
CREATE INDEX artifacts_by_run ON artifacts(run);

)sql";

/// v1 kept no steps for min/max and no blocks: rebuild both from the samples, which are the truth.
void backfill_series(sql::Db& db) {
  sql::Stmt read = db.prepare("SELECT run, metric, step, wall_ms, value FROM samples ORDER BY run, metric, step");
  sql::Stmt block_upsert = db.prepare(block_upsert_sql());
  sql::Stmt summary_upsert = db.prepare(summary_upsert_sql());
  SeriesBuilder builder;
  int64_t run = -1, metric = -1, pending = 0;
  while (read.step()) {
    const int64_t r = read.col_int(0), m = read.col_int(1);
    if ((r != run || m != metric || pending >= 4096) && !builder.empty()) {
      upsert_series(block_upsert, summary_upsert, run, metric, builder);
      pending = 0;
    }
    run = r;
    metric = m;
    builder.add({read.col_int(2), read.col_double(3), read.col_double(4)});
    ++pending;
  }
  if (!builder.empty())
    upsert_series(block_upsert, summary_upsert, run, metric, builder);
  std::vector<int64_t> runs;
  for (sql::Stmt q = db.prepare("SELECT DISTINCT run FROM metric_summary"); q.step();)
    runs.push_back(q.col_int(0));
  for (int64_t rid : runs)
    refresh_summary_pack(db, rid);
}

void apply_v2(sql::Db& db) {
  db.exec(kV2Ddl);
  db.exec(kMetricSummaryView);
  backfill_series(db);
  db.exec("DROP TABLE metric_summary_v1");
}

// ---- v3: the `incomplete` status (SQLite cannot alter a CHECK: the runs table is rebuilt) -------

const char* const kV3 = R"sql(
DROP VIEW metric_summary_view;
CREATE TABLE runs_v3(
  rid INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK(status IN ('queued','running','finished','failed','cancelled','interrupted','incomplete')),
  config TEXT NOT NULL DEFAULT '{}',
  created_ms INTEGER NOT NULL,
  started_ms INTEGER,
  finished_ms INTEGER,
  host TEXT NOT NULL DEFAULT '',
  backend TEXT NOT NULL DEFAULT '',
  devices TEXT NOT NULL DEFAULT '[]',
  code_version TEXT NOT NULL DEFAULT '',
  pid INTEGER,
  heartbeat_ms INTEGER,
  summary_pack BLOB);
INSERT INTO runs_v3(rid, id, name, status, config, created_ms, started_ms, finished_ms, host, backend, devices,
                    code_version, pid, heartbeat_ms, summary_pack)
  SELECT rid, id, name, status, config, created_ms, started_ms, finished_ms, host, backend, devices,
         code_version, pid, heartbeat_ms, summary_pack FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v3 RENAME TO runs;
CREATE INDEX runs_by_created ON runs(created_ms);
CREATE INDEX runs_by_name ON runs(name);
CREATE INDEX runs_by_status ON runs(status);
)sql";

void apply_v3(sql::Db& db) {
  db.exec(kV3);
  db.exec(kMetricSummaryView);
}

// ---- v4: metric directions from the one declared rule ----------------------------------------

/// Keys written before default_direction() knew that bytes, latency, cost... are lower-is-better
/// still carry the old rule (minimize only for "loss"). Those get today's direction; a key whose
/// direction differs from the old rule was set on purpose (Store::set_direction) and stays.
void apply_v4(sql::Db& db) {
  std::vector<std::pair<int64_t, std::string>> keys;
  sql::Stmt q = db.prepare("SELECT id, name, direction FROM metric_keys");
  while (q.step()) {
    std::string lower = q.col_text(1);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    const int64_t old_rule = lower.find("loss") != std::string::npos ? -1 : 1;
    if (q.col_int(2) == old_rule)
      keys.emplace_back(q.col_int(0), q.col_text(1));
  }
  sql::Stmt u = db.prepare("UPDATE metric_keys SET direction = ? WHERE id = ?");
  for (const auto& [id, name] : keys) {
    u.bind(1, static_cast<int64_t>(default_direction(name))).bind(2, id).run();
    u.reset();
  }
}

// ---- v5: notes and tags on runs ------------------------------------------------------------------

const char* const kV5 = R"sql(
ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT '';
CREATE TABLE run_tags(
  run INTEGER NOT NULL,
  tag TEXT NOT NULL,
  PRIMARY KEY(run, tag)) WITHOUT ROWID;
CREATE INDEX tags_by_tag ON run_tags(tag, run);
)sql";

void apply_v5(sql::Db& db) { db.exec(kV5); }

// ---- v6: sweeps and their members ------------------------------------------------------------------

// A sweep's members are planned up front (their configs), so its progress is queryable before any
// run exists; run_id is '' until a member starts and changes when a killed member is restarted.
// slurm_job / folder are set for a sweep submitted to Slurm (each task writes its own store file
// in that folder; `lathe-cli import` merges them).
const char* const kV6 = R"sql(
CREATE TABLE sweeps(
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  definition TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('pending','running','finished','failed','cancelled','submitted')),
  slurm_job TEXT NOT NULL DEFAULT '',
  folder TEXT NOT NULL DEFAULT '');
CREATE TABLE sweep_members(
  sweep TEXT NOT NULL,
  idx INTEGER NOT NULL,
  name TEXT NOT NULL,
  config TEXT NOT NULL,
  run_id TEXT NOT NULL DEFAULT '',
  state TEXT NOT NULL CHECK(state IN ('pending','running','finished','failed','cancelled')),
  PRIMARY KEY(sweep, idx)) WITHOUT ROWID;
CREATE INDEX sweep_members_by_run ON sweep_members(run_id);
)sql";

void apply_v6(sql::Db& db) { db.exec(kV6); }

struct Migration {
  int version;
  const char* description;
  void (*apply)(sql::Db&);
};

constexpr Migration kMigrations[] = {
    {1, "runs, params, metric keys, samples, summaries, events, artifacts", apply_v1},
    {2, "writer heartbeat, metric directions, min/max steps, sample blocks, telemetry, indexes", apply_v2},
    {3, "the incomplete run status (samples left in metrics.jsonl for lathe-cli repair)", apply_v3},
    {4, "metric directions from the declared rule (bytes, latency, cost... lower is better)", apply_v4},
    {5, "notes and tags on runs", apply_v5},
    {6, "sweeps and their members", apply_v6},
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion);

}  // namespace

void configure_connection(sql::Db& db) {
  // journal_mode cannot change inside a transaction and returns the mode in force.
  const std::optional<std::string> mode = db.query_text("PRAGMA journal_mode=WAL");
  if (!mode || *mode != "wal")
    throw DataError("the store " + db.path() + " cannot use write-ahead logging (journal mode " + mode.value_or("?") +
                    "): is it on a network file system?");
  db.exec(
      "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY;"
      " PRAGMA journal_size_limit=67108864; PRAGMA mmap_size=268435456; PRAGMA cache_size=-32768");
}

int schema_version(sql::Db& db) {
  try {
    const bool has_table =
        db.query_int("SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='schema_version'").value_or(0) > 0;
    if (!has_table) {
      const int64_t tables = db.query_int("SELECT count(*) FROM sqlite_schema").value_or(0);
      if (tables > 0)
        throw DataError("the file " + db.path() +
                        " is an SQLite database but not a lathe store (it has no schema_version table)");
      return 0;
    }
    return static_cast<int>(db.query_int("SELECT max(version) FROM schema_version").value_or(0));
  } catch (const sql::SqliteError& e) {
    if ((e.code() & 0xff) == SQLITE_NOTADB)
      throw DataError("the file " + db.path() + " is not a lathe store (not an SQLite database)");
    throw;
  }
}

void migrate(sql::Db& db, int target) {
  LATHE_CHECK(target >= 0 && target <= kSchemaVersion, "migration target ", target);
  const auto too_new = [&](int v) {
    return DataError("the store " + db.path() + " has schema version " + std::to_string(v) +
                     ", newer than this lathe understands (" + std::to_string(kSchemaVersion) +
                     "): upgrade lathe or use another --db");
  };
  int v = schema_version(db);
  if (v > kSchemaVersion)
    throw too_new(v);
  while (v < target) {
    sql::Txn txn(db, sql::Txn::Kind::write);
    v = schema_version(db);  // another process may have migrated while we waited for the lock
    if (v > kSchemaVersion)
      throw too_new(v);
    if (v >= target)
      break;
    const Migration& m = kMigrations[v];
    m.apply(db);
    sql::Stmt rec = db.prepare("INSERT INTO schema_version(version, applied_ms, description) VALUES(?, ?, ?)");
    rec.bind(1, m.version).bind(2, unix_ms()).bind(3, m.description).run();
    txn.commit();
    v = m.version;
  }
}

}  // namespace lathe::store_detail

// Schema and opening: a new file gets the current version in WAL mode; a v1 file written by hand
// migrates to v2 with its data intact and the new columns, summaries and blocks rebuilt from the
// samples; newer and foreign files are refused; concurrent openers migrate once; default path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/store/run_writer.h"
#include "engine/store/schema.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;

TEST(Schema, NewStoreIsCurrentAndUsesWal) {
  StoreDir dir;
  const std::string path = dir.file("sub/folder/lathe.db");  // folders created on first use
  Store s = Store::open(path);
  EXPECT_EQ(s.schema_version(), store_detail::kSchemaVersion);
  EXPECT_EQ(s.db().query_text("PRAGMA journal_mode").value_or(""), "wal");
  EXPECT_EQ(s.db().query_int("PRAGMA synchronous").value_or(-1), 1);  // NORMAL
  for (const char* table : {"runs", "params", "metric_keys", "samples", "metric_summary", "telemetry", "events",
                            "artifacts", "sample_blocks", "schema_version", "run_tags", "sweeps", "sweep_members"})
    EXPECT_EQ(s.db().query_int(std::string("SELECT count(*) FROM sqlite_schema WHERE name='") + table + "'"), 1)
        << table;
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM schema_version"), 6);  // v1 to v6 applied in order
  // samples is keyed (run, metric, step) without a rowid.
  EXPECT_NE(s.db().query_text("SELECT sql FROM sqlite_schema WHERE name='samples'")->find("WITHOUT ROWID"),
            std::string::npos);
}

TEST(Schema, OpeningAgainChangesNothing) {
  StoreDir dir;
  { Store::open(dir.db()); }
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.schema_version(), 6);
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM schema_version"), 6);
}

/// A v1 file as lathe v1 would have left it, with data typed in by hand.
void make_v1_store(const std::string& path) {
  sql::Db db(path);
  store_detail::configure_connection(db);
  store_detail::migrate(db, 1);
  db.exec(R"sql(
    INSERT INTO runs(rid, id, name, status, config, created_ms, started_ms, finished_ms, host, backend, devices,
                     code_version)
      VALUES(1, '20250101-000000-aaaaaa', 'old-run', 'finished', '{"train":{"lr":0.1}}', 1000, 1000, 9000,
             'h', 'cpu', '["cpu0"]', '0.0.1');
    INSERT INTO params VALUES(1, 'train.lr', '0.1');
    INSERT INTO metric_keys(id, name) VALUES(1, 'train/loss'), (2, 'test/accuracy');
    INSERT INTO events(run, at_ms, kind, fields) VALUES(1, 1000, 'started', '{}');
    INSERT INTO artifacts(run, kind, path, bytes, sha256, created_ms) VALUES(1, 'model', '/x/model.st', 10, 'ab', 9000);
  )sql");
  // train/loss: 1000 steps, minimum 0.05 at step 777, maximum 9 at step 3; test/accuracy every 100 steps.
  sql::Stmt ins = db.prepare("INSERT INTO samples VALUES(1, ?, ?, ?, ?)");
  for (int step = 0; step < 1000; ++step) {
    double v = 1.0 + 0.5 * std::sin(step * 0.1);
    if (step == 777)
      v = 0.05;
    if (step == 3)
      v = 9.0;
    ins.bind(1, 1).bind(2, step).bind(3, step * 2.0).bind(4, v).run();
    if (step % 100 == 99)
      ins.bind(1, 2).bind(2, step).bind(3, step * 2.0).bind(4, step / 1000.0).run();
  }
  db.exec("INSERT INTO metric_summary VALUES(1, 1, 1000, 999, 1.2, 0.05, 9.0), (1, 2, 10, 999, 0.999, 0.099, 0.999)");
}

TEST(Schema, MigratesV1ToV2KeepingData) {
  StoreDir dir;
  make_v1_store(dir.db());
  {
    sql::Db raw(dir.db());
    EXPECT_EQ(store_detail::schema_version(raw), 1);
  }
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.schema_version(), store_detail::kSchemaVersion);
  const RunRecord r = s.run("20250101-000000-aaaaaa");
  EXPECT_EQ(r.name, "old-run");
  EXPECT_EQ(r.status, RunStatus::finished);
  EXPECT_EQ(r.devices, std::vector<std::string>{"cpu0"});
  EXPECT_FALSE(r.pid.has_value());  // new column, empty for old rows

  // Summaries were rebuilt from the samples: min/max now carry their steps, loss is minimized.
  const auto loss = s.summary(r.id, "train/loss");
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss->count, 1000);
  EXPECT_EQ(loss->first_step, 0);
  EXPECT_EQ(loss->last_step, 999);
  EXPECT_DOUBLE_EQ(loss->min, 0.05);
  EXPECT_EQ(loss->min_step, 777);
  EXPECT_DOUBLE_EQ(loss->max, 9.0);
  EXPECT_EQ(loss->max_step, 3);
  EXPECT_EQ(loss->direction, Direction::minimize);
  EXPECT_EQ(loss->best_step(), 777);
  const auto acc = s.summary(r.id, "test/accuracy");
  ASSERT_TRUE(acc);
  EXPECT_EQ(acc->direction, Direction::maximize);
  EXPECT_EQ(acc->count, 10);
  EXPECT_DOUBLE_EQ(acc->best(), 0.999);

  // The block pyramid was built: a coarse downsample (block path) finds the spikes.
  const DownsampledSeries d = s.downsample(r.id, "train/loss", 4);
  ASSERT_FALSE(d.buckets.empty());
  EXPECT_GE(d.bucket_width, 16);
  int64_t total = 0;
  bool saw_min = false, saw_max = false;
  for (const Point& p : d.points()) {
    saw_min |= p.step == 777 && p.value == 0.05;
    saw_max |= p.step == 3 && p.value == 9.0;
  }
  for (const Bucket& b : d.buckets)
    total += b.count;
  EXPECT_EQ(total, 1000);
  EXPECT_TRUE(saw_min && saw_max);

  EXPECT_EQ(s.series(r.id, "train/loss").size(), 1000u);
  const RunPage listed = s.list_runs();  // the packed summaries were built too
  ASSERT_EQ(listed.runs.size(), 1u);
  ASSERT_NE(listed.runs[0].metric("train/loss"), nullptr);
  EXPECT_EQ(listed.runs[0].metric("train/loss")->min_step, 777);
  EXPECT_EQ(listed.runs[0].metric("test/accuracy")->count, 10);
  EXPECT_EQ(s.params(r.id).at(0), std::make_pair(std::string("train.lr"), std::string("0.1")));
  ASSERT_EQ(s.artifacts(r.id).size(), 1u);
  EXPECT_FALSE(s.artifacts(r.id)[0].step.has_value());
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM sqlite_schema WHERE name='metric_summary_v1'"), 0);

  // And the migrated run can be resumed and extended.
  RunWriter w(dir.db());
  const ResumePoint rp = w.resume(r.id);
  EXPECT_EQ(rp.last_step.at("train/loss"), 999);
  w.sample("train/loss", 999, 0, 123.0);  // already there: ignored
  w.sample("train/loss", 1000, 0, 0.01);
  w.finish(RunStatus::finished);
  const auto after = s.summary(r.id, "train/loss");
  EXPECT_EQ(after->count, 1001);
  EXPECT_DOUBLE_EQ(after->min, 0.01);
  EXPECT_EQ(after->min_step, 1000);
}

TEST(Schema, TwoOpenersMigrateOnce) {
  StoreDir dir;
  make_v1_store(dir.db());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&] {
      try {
        Store s = Store::open(dir.db());
        if (s.schema_version() == store_detail::kSchemaVersion)
          ++ok;
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
      }
    });
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(ok.load(), 3);
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM schema_version WHERE version = 2"), 1);
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM schema_version WHERE version = 3"), 1);
  EXPECT_EQ(s.summary("20250101-000000-aaaaaa", "train/loss")->count, 1000);  // not double-counted
}

TEST(Schema, MigratesV2ToV3KeepingRunsAndAllowingIncomplete) {
  StoreDir dir;
  {
    sql::Db raw(dir.db());
    store_detail::configure_connection(raw);
    store_detail::migrate(raw, 2);
    raw.exec(
        "INSERT INTO runs(rid, id, name, status, created_ms, pid, heartbeat_ms, summary_pack)"
        " VALUES(7, 'v2run', 'old', 'finished', 5, 42, 6, x'00')");
    raw.exec("INSERT INTO metric_keys(id, name) VALUES(1, 'm')");
    raw.exec("INSERT INTO samples VALUES(7, 1, 0, 0.0, 1.5)");
    EXPECT_THROW(raw.exec("UPDATE runs SET status = 'incomplete'"), sql::SqliteError);  // v2's CHECK
  }
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.schema_version(), store_detail::kSchemaVersion);
  const RunRecord r = s.run("v2run");
  EXPECT_EQ(r.status, RunStatus::finished);
  EXPECT_EQ(r.pid, 42);
  EXPECT_EQ(r.heartbeat_ms, 6);
  EXPECT_EQ(s.series("v2run", "m").size(), 1u);
  EXPECT_EQ(s.db().query_int("SELECT rid FROM runs WHERE id = 'v2run'"), 7);   // keys other tables use
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM metric_summary_view"), 0);  // the view survives
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'runs'"
                             " AND name LIKE 'runs_by_%'"),
            3);
  s.db().exec("UPDATE runs SET status = 'incomplete'");
  EXPECT_EQ(s.run("v2run").status, RunStatus::incomplete);
  EXPECT_THROW(s.db().exec("UPDATE runs SET status = 'bogus'"), sql::SqliteError);
}

TEST(Schema, RefusesNewerStore) {
  StoreDir dir;
  {
    Store::open(dir.db()).db().exec("INSERT INTO schema_version VALUES(" +
                                    std::to_string(store_detail::kSchemaVersion + 1) + ", 0, 'from the future')");
  }
  try {
    Store::open(dir.db());
    FAIL() << "a store from a newer version must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("version " + std::to_string(store_detail::kSchemaVersion + 1)),
              std::string::npos)
        << e.what();
  }
}

TEST(Schema, RefusesFilesThatAreNotStores) {
  StoreDir dir;
  const std::string text = dir.file("notes.txt");
  std::ofstream(text) << "this is not a database, it is a long enough text file to have a header.......";
  EXPECT_THROW(Store::open(text), DataError);
  const std::string other = dir.file("other.db");
  { sql::Db(other).exec("CREATE TABLE t(x)"); }
  try {
    Store::open(other);
    FAIL() << "a foreign SQLite file must be refused";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("not a lathe store"), std::string::npos) << e.what();
  }
}

// A store whose first page (the table list) is overwritten: opening it, for writing or read-only,
// is a DataError that names the file and says it is corrupt, not a bare SQLite error.
TEST(Schema, CorruptStoreIsRefusedNamingTheFile) {
  StoreDir dir;
  const std::string path = dir.file("lathe.db");
  { Store::open(path); }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);  // past the 100-byte file header: the table list's page
    const std::string garbage(400, '\x7f');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  for (bool read_only : {false, true}) {
    try {
      if (read_only)
        Store::open(path, Store::read_only_options());
      else
        Store::open(path);
      FAIL() << "a corrupt store must be refused (read_only " << read_only << ")";
    } catch (const DataError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("the store " + path + " is corrupt"), std::string::npos) << what;
    }
  }
}

TEST(Schema, DefaultPathFollowsXdg) {
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  const std::string saved_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("XDG_DATA_HOME", "/data/x", 1);
  EXPECT_EQ(Store::default_path(), "/data/x/lathe/lathe.db");
  setenv("XDG_DATA_HOME", "relative/ignored", 1);  // the XDG spec says relative paths are invalid
  setenv("HOME", "/home/someone", 1);
  EXPECT_EQ(Store::default_path(), "/home/someone/.local/share/lathe/lathe.db");
  unsetenv("XDG_DATA_HOME");
  EXPECT_EQ(Store::default_path(), "/home/someone/.local/share/lathe/lathe.db");
  if (old_xdg)
    setenv("XDG_DATA_HOME", saved_xdg.c_str(), 1);
  else
    unsetenv("XDG_DATA_HOME");
  setenv("HOME", saved_home.c_str(), 1);
}

TEST(Schema, DefaultLocationIsCreatedOnFirstUse) {
  StoreDir dir;
  const char* old_xdg = std::getenv("XDG_DATA_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  setenv("XDG_DATA_HOME", dir.path().c_str(), 1);
  const std::string path = Store::default_path();
  EXPECT_FALSE(std::filesystem::exists(path));
  { Store::open(path); }
  EXPECT_TRUE(std::filesystem::exists(dir.file("lathe/lathe.db")));
  if (old_xdg)
    setenv("XDG_DATA_HOME", saved_xdg.c_str(), 1);
  else
    unsetenv("XDG_DATA_HOME");
}

}  // namespace
}  // namespace lathe

namespace lathe {
namespace {

TEST(Schema, MigrationV4GivesOldKeysTheDeclaredDirectionAndKeepsChosenOnes) {
  test::StoreDir dir;
  {
    sql::Db raw(dir.db());
    store_detail::configure_connection(raw);
    store_detail::migrate(raw, 3);
    // As v2/v3 writers left them: minimize only for "loss", maximize for the rest, except one key
    // a user set on purpose (test/accuracy to minimize, against the old rule).
    raw.exec(
        "INSERT INTO metric_keys(id, name, direction) VALUES(1, 'model/bytes', 1), (2, 'cost/usd', 1),"
        " (3, 'train/loss', -1), (4, 'test/accuracy', -1), (5, 'latency/dense/b1_ms', 1),"
        " (6, 'train/samples_per_s', 1)");
  }
  Store s = Store::open(dir.db());
  auto dir_of = [&](const char* name) {
    return s.db().query_int(std::string("SELECT direction FROM metric_keys WHERE name = '") + name + "'");
  };
  EXPECT_EQ(dir_of("model/bytes"), -1);  // lower is better now
  EXPECT_EQ(dir_of("cost/usd"), -1);
  EXPECT_EQ(dir_of("latency/dense/b1_ms"), -1);
  EXPECT_EQ(dir_of("train/loss"), -1);
  EXPECT_EQ(dir_of("train/samples_per_s"), 1);
  EXPECT_EQ(dir_of("test/accuracy"), -1);  // chosen on purpose: kept
}

}  // namespace
}  // namespace lathe

// The run-level queries lathe-cli and the GUI use: list with filters, sorting by a metric's
// last/best and paging; resolve by id, id prefix or name (ambiguity lists candidates); config
// diff; full export; delete with artifact files; stale-run reaping.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "engine/core/error.h"
#include "engine/store/process_info.h"
#include "engine/store/run_writer.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;

/// Runs a1..a5: name "cnn" (a1-a3) or "mlp" (a4, a5); lr 0.01 * i; test/accuracy last = i/10 but
/// best = 0.9 for a2; train/loss min = 1/i.
void seed_runs(const std::string& db) {
  for (int i = 1; i <= 5; ++i) {
    RunWriter w(db);
    RunInfo info;
    info.id = "2025010" + std::to_string(i) + "-120000-abc" + std::to_string(i) + "00";
    info.name = i <= 3 ? "cnn" : "mlp";
    info.config = {{"name", info.name}, {"train", {{"lr", 0.01 * i}, {"epochs", 5}}}};
    if (i == 5)
      info.config["prune"] = {{"ratio", 0.5}};
    w.begin_run(info);
    w.sample("test/accuracy", 1, 0, i == 2 ? 0.9 : 0.0);
    w.sample("test/accuracy", 2, 0, i / 10.0);
    w.sample("train/loss", 1, 0, 1.0 / i);
    w.sample("train/loss", 2, 0, 2.0);
    w.finish(i == 4 ? RunStatus::failed : RunStatus::finished);
  }
}

std::vector<std::string> ids(const RunPage& p) {
  std::vector<std::string> out;
  for (const RunListItem& r : p.runs)
    out.push_back(r.run.id.substr(7, 1));  // the i of 2025010i-...
  return out;
}

using V = std::vector<std::string>;

TEST(StoreQuery, ListFiltersSortsAndPages) {
  StoreDir dir;
  seed_runs(dir.db());
  Store s = Store::open(dir.db());
  RunQuery q;
  RunPage all = s.list_runs(q);
  EXPECT_EQ(all.total, 5);
  EXPECT_EQ(ids(all), (V{"5", "4", "3", "2", "1"}));  // newest first by default
  ASSERT_EQ(all.runs[0].metrics.size(), 2u);
  const MetricSummary* acc = all.runs[0].metric("test/accuracy");
  ASSERT_NE(acc, nullptr);
  EXPECT_DOUBLE_EQ(acc->last, 0.5);
  EXPECT_EQ(all.runs[0].metric("nope"), nullptr);
  EXPECT_TRUE(all.runs[0].run.config_json.empty());  // lists stay light

  q.statuses = {RunStatus::failed};
  EXPECT_EQ(ids(s.list_runs(q)), V{"4"});
  q.statuses = {RunStatus::finished};
  q.name_glob = "c*";
  EXPECT_EQ(ids(s.list_runs(q)), (V{"3", "2", "1"}));
  q.params = {{"train.lr", "0.02"}};
  EXPECT_EQ(ids(s.list_runs(q)), V{"2"});
  q = RunQuery{};
  q.params = {{"prune.ratio", "0.5"}, {"train.epochs", "5"}};
  EXPECT_EQ(ids(s.list_runs(q)), V{"5"});

  q = RunQuery{};
  q.sort = RunQuery::Sort::metric_last;
  q.sort_metric = "test/accuracy";
  EXPECT_EQ(ids(s.list_runs(q)), (V{"5", "4", "3", "2", "1"}));  // maximized: highest first
  q.sort = RunQuery::Sort::metric_best;
  EXPECT_EQ(ids(s.list_runs(q)).front(), "2");  // best 0.9
  q.sort_metric = "train/loss";                 // minimized: lowest first
  EXPECT_EQ(ids(s.list_runs(q)), (V{"5", "4", "3", "2", "1"}));
  q.descending = true;
  EXPECT_EQ(ids(s.list_runs(q)), (V{"1", "2", "3", "4", "5"}));
  q = RunQuery{};
  q.sort = RunQuery::Sort::name;
  EXPECT_EQ(ids(s.list_runs(q)), (V{"3", "2", "1", "5", "4"}));  // cnn before mlp, then newest

  q = RunQuery{};
  q.limit = 2;
  q.offset = 2;
  RunPage page = s.list_runs(q);
  EXPECT_EQ(page.total, 5);
  EXPECT_EQ(ids(page), (V{"3", "2"}));
  q.with_metrics = {"train/loss"};
  page = s.list_runs(q);
  ASSERT_EQ(page.runs[0].metrics.size(), 1u);
  EXPECT_EQ(page.runs[0].metrics[0].metric, "train/loss");
  EXPECT_DOUBLE_EQ(page.runs[0].metrics[0].best(), 1.0 / 3);
  EXPECT_EQ(page.runs[0].metrics[0].best_step(), 1);
}

TEST(StoreQuery, ResolveByIdPrefixOrName) {
  StoreDir dir;
  seed_runs(dir.db());
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.resolve_run("20250103-120000-abc300"), "20250103-120000-abc300");
  EXPECT_EQ(s.resolve_run("20250104"), "20250104-120000-abc400");
  try {
    s.resolve_run("mlp");
    FAIL() << "two runs are named mlp";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("matches 2 runs"), std::string::npos) << m;
    EXPECT_NE(m.find("20250104-120000-abc400"), std::string::npos) << m;
    EXPECT_NE(m.find("20250105-120000-abc500"), std::string::npos) << m;
    EXPECT_NE(m.find("failed"), std::string::npos) << m;
  }
  EXPECT_THROW(s.resolve_run("2025"), DataError);
  EXPECT_THROW(s.resolve_run("zzz"), DataError);
  EXPECT_THROW(s.resolve_run(""), DataError);
}

TEST(StoreQuery, ConfigDiff) {
  StoreDir dir;
  seed_runs(dir.db());
  Store s = Store::open(dir.db());
  const ConfigDiff d = s.diff_configs({"20250101-120000-abc100", "20250105-120000-abc500"});
  ASSERT_EQ(d.differing.size(), 3u);
  EXPECT_EQ(d.differing[0].key, "name");
  EXPECT_EQ(d.differing[0].values[0], "cnn");
  EXPECT_EQ(d.differing[0].values[1], "mlp");
  EXPECT_EQ(d.differing[1].key, "prune.ratio");
  EXPECT_FALSE(d.differing[1].values[0].has_value());
  EXPECT_EQ(d.differing[1].values[1], "0.5");
  EXPECT_EQ(d.differing[2].key, "train.lr");
  EXPECT_EQ(d.same, 1);  // train.epochs
  EXPECT_THROW(s.diff_configs({"nope"}), DataError);
}

TEST(StoreQuery, ExportEverySample) {
  StoreDir dir;
  seed_runs(dir.db());
  Store s = Store::open(dir.db());
  std::vector<std::pair<std::string, int64_t>> seen;
  s.for_each_sample("20250102-120000-abc200",
                    [&](const std::string& m, const Point& p) { seen.emplace_back(m, p.step); });
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, int64_t>>{
                      {"test/accuracy", 1}, {"test/accuracy", 2}, {"train/loss", 1}, {"train/loss", 2}}));
}

TEST(StoreQuery, DeleteRemovesRowsAndArtifactFiles) {
  StoreDir dir;
  std::filesystem::create_directories(dir.file("del"));  // the run's own folder (named by its id)
  const std::string ckpt = dir.file("del/ckpt.bin");
  std::ofstream(ckpt) << "weights";
  {
    RunWriter w(dir.db());
    RunInfo info;
    info.id = "del";
    info.config = {{"a", 1}};
    w.begin_run(info);
    w.sample("m", 1, 0, 1.0);
    w.telemetry(0, "gpu/util", 0, 1.0);
    w.artifact("checkpoint", ckpt, 1);
    w.artifact("model", dir.file("del/never-written.bin"));
    w.finish(RunStatus::finished);
  }
  seed_runs(dir.db());
  Store s = Store::open(dir.db());
  const auto arts = s.artifacts("del");
  ASSERT_EQ(arts.size(), 2u);
  EXPECT_EQ(arts[1].bytes, -1);  // recorded as missing
  const DeleteResult r = s.delete_run("del");
  EXPECT_EQ(r.samples, 1);
  EXPECT_EQ(r.files_deleted, V{ckpt});
  EXPECT_EQ(r.files_missing.size(), 1u);  // never written
  EXPECT_TRUE(r.files_failed.empty());
  EXPECT_TRUE(r.folder_removed);
  EXPECT_FALSE(std::filesystem::exists(ckpt));
  EXPECT_FALSE(std::filesystem::exists(dir.file("del")));
  EXPECT_FALSE(s.find_run("del"));
  for (const char* t : {"samples", "sample_blocks", "metric_summary", "params", "events", "artifacts", "telemetry"})
    EXPECT_EQ(s.db().query_int(std::string("SELECT count(*) FROM ") + t + " WHERE run NOT IN (SELECT rid FROM runs)"),
              0)
        << t;
  EXPECT_EQ(s.list_runs().total, 5);  // the others are untouched
  EXPECT_THROW(s.delete_run("del"), DataError);

  RunWriter live(dir.db());
  live.begin_run(RunInfo{"live", "x", {}, {}, {}, {}});
  EXPECT_THROW(s.delete_run("live"), DataError);  // its writer is alive
  live.finish(RunStatus::cancelled);
  EXPECT_NO_THROW(s.delete_run("live"));
}

/// A pid that certainly names no process: a child that has exited and been reaped.
int64_t dead_pid() {
  const pid_t child = fork();
  if (child == 0)
    _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

TEST(StoreQuery, ReapsRunsWhoseWriterIsGone) {
  StoreDir dir;
  const int64_t now = store_detail::unix_ms();
  const std::string me = store_detail::host_name();
  {
    Store s = Store::open(dir.db());
    for (const char* id : {"dead-here", "alive-here", "quiet-there", "fresh-there", "old-but-mine"})
      s.create_run(RunInfo{id, id, {}, {}, {}, {}}, RunStatus::running);
    sql::Stmt up = s.db().prepare("UPDATE runs SET pid = ?2, host = ?3, heartbeat_ms = ?4 WHERE id = ?1");
    up.bind(1, "dead-here").bind(2, dead_pid()).bind(3, me).bind(4, now).run();
    up.bind(1, "alive-here").bind(2, store_detail::current_pid()).bind(3, me).bind(4, now).run();
    up.bind(1, "quiet-there").bind(2, 1).bind(3, "elsewhere").bind(4, now - 120'000).run();
    up.bind(1, "fresh-there").bind(2, 1).bind(3, "elsewhere").bind(4, now - 5000).run();
    up.bind(1, "old-but-mine").bind(2, store_detail::current_pid()).bind(3, me).bind(4, now - 120'000).run();
  }
  Store s = Store::open(dir.db());  // open reaps
  EXPECT_EQ(s.run("dead-here").status, RunStatus::interrupted);
  EXPECT_EQ(s.run("alive-here").status, RunStatus::running);
  EXPECT_EQ(s.run("quiet-there").status, RunStatus::interrupted);
  EXPECT_EQ(s.run("fresh-there").status, RunStatus::running);
  EXPECT_EQ(s.run("old-but-mine").status, RunStatus::interrupted);  // alive pid, no heartbeat: reused/hung
  const auto ev = s.events("dead-here");
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().kind, "status");
  EXPECT_NE(ev.back().fields["reason"].get<std::string>().find("is gone"), std::string::npos);
  EXPECT_EQ(s.run("dead-here").finished_ms, now);  // the last sign of life
  EXPECT_EQ(s.reap_stale_runs(), 0);               // nothing left to reap
  EXPECT_EQ(s.reap_stale_runs(3000), 1);           // fresh-there is 5 s quiet: stale at 3 s
}

}  // namespace
}  // namespace lathe

// A store locked by another process near the end of a run (issue 11, item 3): the writer keeps its
// queue and retries, so every sample gets in; samples spilled from a bounded queue leave the run
// `incomplete` and `repair_run` re-imports them from metrics.jsonl, summaries and blocks included.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/run/metrics_sink.h"
#include "engine/store/repair.h"
#include "engine/store/run_writer.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;
using namespace std::chrono_literals;

RunInfo info(const std::string& id) {
  RunInfo i;
  i.id = id;
  i.name = "locked";
  i.config = {{"name", "locked"}};
  return i;
}

double locked_value_of(int64_t step) { return 1000.0 - static_cast<double>(step); }

/// Another connection holding the write lock (BEGIN EXCLUSIVE) for `hold`, from a thread.
class Locker {
 public:
  Locker(const std::string& db_path, std::chrono::milliseconds hold) : m_db(db_path, 1000) {
    m_db.exec("BEGIN EXCLUSIVE");
    m_thread = std::thread([this, hold] {
      std::this_thread::sleep_for(hold);
      m_db.exec("COMMIT");
    });
  }
  ~Locker() { m_thread.join(); }

 private:
  sql::Db m_db;
  std::thread m_thread;
};

void expect_whole_series(Store& s, const std::string& run, int64_t n) {
  const test::SeriesSnapshot snap = test::snapshot_series(s.db(), run, "train/loss", locked_value_of);
  EXPECT_EQ(snap.samples, n);
  EXPECT_TRUE(snap.consistent()) << "samples " << snap.samples << " summary " << snap.summary_count << " pack "
                                 << snap.pack_count << " level-1 blocks " << snap.block_counts[0];
}

// The reproduction, scaled down: the lock outlasts what the writer used to wait at the end
// (min(give_up_after_ms, 5 s); give_up_after_ms is 1 s here), and before the fix the run showed
// `finished` with 0 of 133 samples.
TEST(WriterLock, LockAtTheEndOfARunLosesNoSample) {
  StoreDir dir;
  WriterOptions o;
  o.commit_interval_ms = 20;
  o.give_up_after_ms = 1000;
  o.open.busy_timeout_ms = 100;
  RunWriter w(dir.db(), o);
  w.begin_run(info("r"));
  {
    Locker lock(dir.db(), 2000ms);
    for (int64_t step = 0; step < 133; ++step)
      w.sample("train/loss", step, static_cast<double>(step), locked_value_of(step));
    w.event("finished", {{"steps", 133}});
    EXPECT_EQ(w.finish(RunStatus::finished), RunStatus::finished);  // waits the lock out
  }
  EXPECT_EQ(w.unstored_samples(), 0);
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.run("r").status, RunStatus::finished);
  expect_whole_series(s, "r", 133);
}

// Memory is bounded: with the queue over max_queued_rows while the store is locked, samples that
// are in metrics.jsonl leave memory; the run ends incomplete and repair brings back every one.
TEST(WriterLock, SpilledSamplesMakeTheRunIncompleteAndRepairRestoresThem) {
  StoreDir dir;
  const std::string jsonl = dir.file("metrics.jsonl");
  WriterOptions o;
  o.commit_interval_ms = 10;
  o.max_queued_rows = 50;
  o.open.busy_timeout_ms = 50;
  {
    JsonlSink file(jsonl);
    RunWriter w(dir.db(), o);
    FanoutSink sinks;  // the trainer's order: the file first, then the store
    sinks.add(&file);
    sinks.add(&w);
    w.begin_run(info("spill"));
    sinks.event("started", {{"metrics_file", jsonl}});
    for (int64_t step = 0; step < 20; ++step)
      sinks.sample("train/loss", step, static_cast<double>(step), locked_value_of(step));
    w.flush();
    {
      Locker lock(dir.db(), 600ms);
      for (int64_t step = 20; step < 400; ++step) {
        sinks.sample("train/loss", step, static_cast<double>(step), locked_value_of(step));
        if (step % 20 == 0)
          std::this_thread::sleep_for(10ms);  // let the writer see its queue grow
      }
    }
    sinks.event("finished", {{"steps", 400}});
    EXPECT_EQ(w.finish(RunStatus::finished), RunStatus::incomplete);
    EXPECT_GT(w.unstored_samples(), 0);
    EXPECT_EQ(w.lost_samples(), 0);
  }
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.run("spill").status, RunStatus::incomplete);
  const std::vector<Point> before = s.series("spill", "train/loss");
  EXPECT_LT(before.size(), 400u);
  bool named = false;
  for (const EventRecord& e : s.events("spill"))
    if (e.kind == "status" && e.fields.value("to", "") == "incomplete") {
      named = true;
      EXPECT_EQ(e.fields.value("ended", ""), "finished");
      EXPECT_EQ(e.fields.value("missing_samples", int64_t{0}), 400 - static_cast<int64_t>(before.size()));
      EXPECT_EQ(e.fields.value("metrics_file", ""), jsonl);
      EXPECT_EQ(e.fields.value("recover", ""), "lathe-cli repair spill");
    }
  EXPECT_TRUE(named);

  const RepairReport r = repair_run(s, "spill");
  EXPECT_EQ(r.metrics_file, jsonl);
  EXPECT_EQ(r.samples_in_file, 400);
  EXPECT_EQ(r.inserted, 400 - static_cast<int64_t>(before.size()));
  EXPECT_EQ(r.status_before, RunStatus::incomplete);
  EXPECT_EQ(r.status_after, RunStatus::finished);
  EXPECT_EQ(s.run("spill").status, RunStatus::finished);
  expect_whole_series(s, "spill", 400);
  const MetricSummary sum = *s.summary("spill", "train/loss");
  EXPECT_EQ(sum.first_step, 0);
  EXPECT_EQ(sum.last_step, 399);
  EXPECT_DOUBLE_EQ(sum.min, locked_value_of(399));
  EXPECT_EQ(sum.min_step, 399);
  EXPECT_DOUBLE_EQ(sum.max, locked_value_of(0));
  // Every bucket of a downsampled chart agrees with the samples (the block pyramid is whole).
  const DownsampledSeries ds = s.downsample("spill", "train/loss", 2);
  int64_t counted = 0;
  for (const Bucket& b : ds.buckets)
    counted += b.count;
  EXPECT_EQ(counted, 400);

  // Idempotent: a second repair inserts nothing and changes nothing.
  const size_t events = s.events("spill").size();
  const RepairReport again = repair_run(s, "spill");
  EXPECT_EQ(again.inserted, 0);
  EXPECT_EQ(again.status_after, RunStatus::finished);
  EXPECT_EQ(s.events("spill").size(), events);
  expect_whole_series(s, "spill", 400);
}

// Without a recovery file nothing may leave memory: past max_queued_rows the producer waits for
// the lock to go, and every sample still gets in.
TEST(WriterLock, WithoutARecoveryFileProducersWaitAndNothingIsLost) {
  StoreDir dir;
  WriterOptions o;
  o.commit_interval_ms = 10;
  o.max_queued_rows = 50;
  o.open.busy_timeout_ms = 50;
  RunWriter w(dir.db(), o);
  w.begin_run(info("bp"));
  const auto t0 = std::chrono::steady_clock::now();
  {
    Locker lock(dir.db(), 500ms);
    for (int64_t step = 0; step < 300; ++step)
      w.sample("train/loss", step, static_cast<double>(step), locked_value_of(step));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);  // held up by the full queue
  }
  EXPECT_EQ(w.finish(RunStatus::finished), RunStatus::finished);
  EXPECT_EQ(w.unstored_samples(), 0);
  Store s = Store::open(dir.db());
  expect_whole_series(s, "bp", 300);
}

// A lock outlasting even the final retry period: finish() cannot write the status, says so with
// the repair command; once the process is gone the run is reaped as interrupted and repair, seeing
// the trainer's "finished" line in the file, restores every sample and the status.
TEST(WriterLock, LockOutlastingTheFinalPeriodIsRepairedAfterTheProcessIsGone) {
  StoreDir dir;
  std::filesystem::create_directories(dir.file("gone"));
  const std::string jsonl = dir.file("gone/metrics.jsonl");  // <output.dir>/<id>/, as the trainer makes it
  WriterOptions o;
  o.commit_interval_ms = 10;
  o.final_retry_ms = 300;
  o.open.busy_timeout_ms = 50;
  {
    JsonlSink file(jsonl);
    RunWriter w(dir.db(), o);
    FanoutSink sinks;
    sinks.add(&file);
    sinks.add(&w);
    RunInfo ri = info("gone");
    ri.config["output"] = {{"dir", dir.path()}};
    w.begin_run(ri);
    sinks.event("started", {{"metrics_file", jsonl}});
    Locker lock(dir.db(), 1500ms);
    for (int64_t step = 0; step < 133; ++step)
      sinks.sample("train/loss", step, static_cast<double>(step), locked_value_of(step));
    sinks.event("finished", {{"steps", 133}});
    try {
      w.finish(RunStatus::finished);
      ADD_FAILURE() << "finish() must report that the status could not be stored";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("stayed locked"), std::string::npos) << msg;
      EXPECT_NE(msg.find("133 sample(s)"), std::string::npos) << msg;
      EXPECT_NE(msg.find("lathe-cli repair gone"), std::string::npos) << msg;
    }
  }
  {  // the writer process exits (simulated: its pid becomes one that is not alive)
    Store s = Store::open(dir.db(), {.reap_stale = false});
    s.db().exec("UPDATE runs SET pid = 2147483646 WHERE id = 'gone'");
  }
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.run("gone").status, RunStatus::interrupted);
  EXPECT_EQ(s.series("gone", "train/loss").size(), 0u);
  const RepairReport r = repair_run(s, "gone");  // the "started" event never got in: found from the config
  EXPECT_EQ(r.metrics_file, jsonl);
  EXPECT_EQ(r.inserted, 133);
  EXPECT_EQ(r.status_after, RunStatus::finished);
  expect_whole_series(s, "gone", 133);
}

// The trainer flushes before finish(): under a lock the two share one final period.
TEST(WriterLock, FlushAndFinishShareOneFinalPeriod) {
  StoreDir dir;
  WriterOptions o;
  o.commit_interval_ms = 10;
  o.final_retry_ms = 400;
  o.open.busy_timeout_ms = 50;
  RunWriter w(dir.db(), o);
  w.set_recovery_file(dir.file("metrics.jsonl"));
  w.begin_run(info("shared"));
  Locker lock(dir.db(), 1200ms);
  w.sample("train/loss", 0, 0.0, locked_value_of(0));
  const auto t0 = std::chrono::steady_clock::now();
  w.flush();                                           // gives up waiting after ~400 ms, the sample still queued
  EXPECT_THROW(w.finish(RunStatus::finished), Error);  // status not storable either
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(waited, 700ms + 400ms);  // not two whole periods plus tries (each try waits 50 ms)
  EXPECT_GE(waited, 400ms);
  EXPECT_EQ(w.unstored_samples(), 1);
}

// A killed run not yet reaped (the store was locked when it was next opened): repair marks it
// interrupted itself when its file has no final event.
TEST(WriterLock, RepairOfAnUnreapedKilledRunMarksItInterrupted) {
  StoreDir dir;
  const std::string jsonl = dir.file("metrics.jsonl");
  {
    JsonlSink file(jsonl);
    RunWriter w(dir.db());
    w.begin_run(info("killed"));
    file.sample("train/loss", 0, 0.0, locked_value_of(0));
    file.sample("train/loss", 1, 1.0, locked_value_of(1));
    w.event("started", {{"metrics_file", jsonl}});
    w.flush();
    Store raw = Store::open(dir.db(), {.reap_stale = false});
    raw.db().exec("UPDATE runs SET pid = 2147483646 WHERE id = 'killed'");  // as if kill -9 now
    try {
      w.finish(RunStatus::finished);  // no longer its run: the row is left as it is
    } catch (const Error&) {
    }
  }
  Store s = Store::open(dir.db(), {.reap_stale = false});
  ASSERT_EQ(s.run("killed").status, RunStatus::running);
  const RepairReport r = repair_run(s, "killed");
  EXPECT_EQ(r.inserted, 2);
  EXPECT_EQ(r.status_after, RunStatus::interrupted);
  EXPECT_EQ(s.run("killed").status, RunStatus::interrupted);
}

TEST(WriterLock, RepairRefusesALiveRunAndAnUnknownFile) {
  StoreDir dir;
  RunWriter w(dir.db());
  w.begin_run(info("live"));
  Store s = Store::open(dir.db());
  EXPECT_THROW(repair_run(s, "live"), DataError);  // still being written by this process
  w.finish(RunStatus::finished);
  try {
    repair_run(s, "live");
    ADD_FAILURE() << "no metrics file is recorded";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("--from"), std::string::npos) << e.what();
  }
  RepairOptions opt;
  opt.metrics_file = dir.file("missing.jsonl");
  EXPECT_THROW(repair_run(s, "live", opt), DataError);
}

}  // namespace
}  // namespace lathe

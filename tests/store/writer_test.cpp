// RunWriter: what a run leaves in the store (run row, params, samples, summaries, events,
// artifacts, telemetry), batching by time and by rows, heartbeats, resume without duplicates,
// takeover detection, and what happens when the writer is closed without finish().
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include "engine/core/error.h"
#include "engine/store/process_info.h"
#include "engine/store/run_writer.h"
#include "engine/store/sqlite_util.h"
#include "engine/store/store.h"
#include "store_test_util.h"

namespace lathe {
namespace {

using test::StoreDir;
using namespace std::chrono_literals;

RunInfo info(const std::string& id, const std::string& name = "exp") {
  RunInfo i;
  i.id = id;
  i.name = name;
  i.config = {{"name", name}, {"train", {{"lr", 0.02}, {"epochs", 5}}}, {"model", {{"zoo", "cnn"}}}};
  return i;
}

/// Polls `cond` for up to `limit`.
template <class F>
bool eventually(F cond, std::chrono::milliseconds limit = 5000ms) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond())
      return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

TEST(RunWriter, WritesARunEndToEnd) {
  StoreDir dir;
  const std::string model = dir.file("model.safetensors");
  std::ofstream(model, std::ios::binary) << "abc";
  {
    RunWriter w(dir.db());
    EXPECT_EQ(w.begin_run(info("r1", "cnn-base")), "r1");
    w.event("started", {{"backend", "cpu"}, {"device", "AMD EPYC (2 threads)"}});
    for (int step = 1; step <= 100; ++step) {
      w.sample("train/loss", step, step * 10.0, 2.0 / step + (step == 50 ? -1.5 : 0.0));
      w.sample("train/accuracy", step, step * 10.0, step / 100.0);
    }
    w.sample("test/accuracy", 100, 1000.0, 0.9);
    w.event("epoch", {{"epoch", 1}});
    w.artifact("model", model, 100);
    w.telemetry(0, "gpu/util", 500.0, 0.75);
    w.telemetry(-1, "cpu/util", 500.0, 0.5);
    w.finish(RunStatus::finished, {{"steps", 100}});
    EXPECT_EQ(w.committed_samples(), 201);
  }
  Store s = Store::open(dir.db());
  const RunRecord r = s.run("r1");
  EXPECT_EQ(r.name, "cnn-base");
  EXPECT_EQ(r.status, RunStatus::finished);
  EXPECT_TRUE(r.started_ms && r.finished_ms);
  EXPECT_GE(*r.finished_ms, *r.started_ms);
  EXPECT_EQ(r.host, store_detail::host_name());
  EXPECT_EQ(r.pid, store_detail::current_pid());
  EXPECT_EQ(r.backend, "cpu");  // from the "started" event
  EXPECT_EQ(r.devices, std::vector<std::string>{"AMD EPYC (2 threads)"});
  EXPECT_EQ(r.code_version, LATHE_VERSION);
  EXPECT_EQ(nlohmann::json::parse(r.config_json)["train"]["lr"], 0.02);

  const auto params = s.params("r1");
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params[0], std::make_pair(std::string("model.zoo"), std::string("cnn")));
  EXPECT_EQ(params[2], std::make_pair(std::string("train.epochs"), std::string("5")));

  const auto loss = s.summary("r1", "train/loss");
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss->count, 100);
  EXPECT_EQ(loss->first_step, 1);
  EXPECT_EQ(loss->last_step, 100);
  EXPECT_DOUBLE_EQ(loss->last, 0.02);
  EXPECT_DOUBLE_EQ(loss->max, 2.0);
  EXPECT_EQ(loss->max_step, 1);
  EXPECT_DOUBLE_EQ(loss->min, 2.0 / 50 - 1.5);
  EXPECT_EQ(loss->min_step, 50);
  EXPECT_EQ(loss->direction, Direction::minimize);
  EXPECT_EQ(loss->best_step(), 50);
  const auto acc = s.summary("r1", "train/accuracy");
  EXPECT_EQ(acc->direction, Direction::maximize);
  EXPECT_DOUBLE_EQ(acc->best(), 1.0);
  EXPECT_EQ(acc->best_step(), 100);
  const std::vector<MetricSummary> all = s.summaries("r1");
  EXPECT_EQ(all.size(), 3u);
  // The listing reads the run's packed copy of the summaries: it must say the same.
  const RunPage page = s.list_runs();
  ASSERT_EQ(page.runs.size(), 1u);
  ASSERT_EQ(page.runs[0].metrics.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const MetricSummary& a = all[i];
    const MetricSummary& b = page.runs[0].metrics[i];
    EXPECT_EQ(a.metric, b.metric);
    EXPECT_EQ(a.count, b.count);
    EXPECT_EQ(a.first_step, b.first_step);
    EXPECT_EQ(a.last_step, b.last_step);
    EXPECT_EQ(a.last, b.last);
    EXPECT_EQ(a.last_wall_ms, b.last_wall_ms);
    EXPECT_EQ(a.min, b.min);
    EXPECT_EQ(a.min_step, b.min_step);
    EXPECT_EQ(a.max, b.max);
    EXPECT_EQ(a.max_step, b.max_step);
    EXPECT_EQ(a.direction, b.direction);
  }

  const std::vector<Point> series = s.series("r1", "train/accuracy");
  ASSERT_EQ(series.size(), 100u);
  for (size_t i = 0; i < series.size(); ++i) {
    EXPECT_EQ(series[i].step, static_cast<int64_t>(i) + 1);
    EXPECT_DOUBLE_EQ(series[i].value, (i + 1) / 100.0);
    EXPECT_DOUBLE_EQ(series[i].wall_ms, (i + 1) * 10.0);
  }
  EXPECT_EQ(s.series("r1", "train/accuracy", 91).size(), 10u);  // the live tail
  EXPECT_EQ(s.series("r1", "train/accuracy", 91, 3).size(), 3u);
  EXPECT_TRUE(s.series("r1", "no/such/metric").empty());
  EXPECT_THROW(s.series("nope", "train/loss"), DataError);

  std::vector<std::string> kinds;
  for (const EventRecord& e : s.events("r1"))
    kinds.push_back(e.kind + (e.kind == "status" ? ":" + e.fields["to"].get<std::string>() : ""));
  EXPECT_EQ(kinds, (std::vector<std::string>{"status:running", "started", "epoch", "artifact", "status:finished"}));
  const auto events = s.events("r1");
  EXPECT_EQ(events.back().fields["steps"], 100);
  EXPECT_EQ(s.events("r1", events[2].id).size(), 2u);  // tail after an id

  const auto arts = s.artifacts("r1");
  ASSERT_EQ(arts.size(), 1u);
  EXPECT_EQ(arts[0].kind, "model");
  EXPECT_EQ(arts[0].path, model);
  EXPECT_EQ(arts[0].bytes, 3);
  EXPECT_EQ(arts[0].sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(arts[0].step, 100);

  const auto gpu = s.telemetry("r1", "gpu/util");
  ASSERT_EQ(gpu.size(), 1u);
  EXPECT_EQ(gpu[0].device, 0);
  EXPECT_DOUBLE_EQ(gpu[0].value, 0.75);
  EXPECT_TRUE(s.series("r1", "gpu/util").empty());  // telemetry is not a training metric
  EXPECT_FALSE(s.summary("r1", "cpu/util").has_value());
}

TEST(RunWriter, NonFiniteValuesAreKeptButNeverExtremes) {
  StoreDir dir;
  RunWriter w(dir.db());
  w.begin_run(info("nf"));
  w.sample("m", 0, 0, std::nan(""));
  w.sample("m", 1, 0, 5.0);
  w.sample("m", 2, 0, std::numeric_limits<double>::infinity());
  w.sample("m", 3, 0, std::nan(""));
  w.sample("only_nan", 0, 0, std::nan(""));
  w.finish(RunStatus::finished);
  Store s = Store::open(dir.db());
  const auto pts = s.series("nf", "m");
  ASSERT_EQ(pts.size(), 4u);
  EXPECT_TRUE(std::isnan(pts[0].value));
  EXPECT_TRUE(std::isinf(pts[2].value));
  const auto m = s.summary("nf", "m");
  EXPECT_EQ(m->count, 4);
  EXPECT_TRUE(std::isnan(m->last));
  EXPECT_DOUBLE_EQ(m->min, 5.0);
  EXPECT_TRUE(std::isinf(m->max));
  EXPECT_EQ(m->max_step, 2);
  const auto n = s.summary("nf", "only_nan");
  EXPECT_EQ(n->count, 1);
  EXPECT_TRUE(std::isnan(n->min) && std::isnan(n->max));
}

TEST(RunWriter, RepeatedStepKeepsTheFirstValue) {
  StoreDir dir;
  RunWriter w(dir.db());
  w.begin_run(info("dup"));
  w.sample("m", 1, 0, 1.0);
  w.flush();
  w.sample("m", 1, 0, 100.0);  // a later batch
  w.sample("m", 2, 0, 2.0);
  w.sample("m", 2, 0, 200.0);  // the same batch
  w.finish(RunStatus::finished);
  EXPECT_EQ(w.committed_samples(), 2);
  Store s = Store::open(dir.db());
  const auto pts = s.series("dup", "m");
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_DOUBLE_EQ(pts[0].value, 1.0);
  EXPECT_DOUBLE_EQ(pts[1].value, 2.0);
  EXPECT_EQ(s.summary("dup", "m")->count, 2);
  EXPECT_DOUBLE_EQ(s.summary("dup", "m")->max, 2.0);
}

TEST(RunWriter, RowsWrittenBehindItsBackAreNotDuplicated) {
  StoreDir dir;
  RunWriter w(dir.db());
  w.begin_run(info("behind"));
  w.sample("m", 0, 0, 0.0);
  w.flush();
  {  // another process writes step 70 of the same series (the fast path assumes it cannot)
    Store s = Store::open(dir.db());
    s.db().exec(
        "INSERT INTO samples SELECT r.rid, k.id, 70, 0, -5.0 FROM runs r, metric_keys k"
        " WHERE r.id = 'behind' AND k.name = 'm'");
  }
  for (int step = 1; step < 200; ++step)
    w.sample("m", step, 0, static_cast<double>(step));
  w.finish(RunStatus::finished);
  EXPECT_EQ(w.committed_samples(), 199);  // 0 and 1..199 except 70
  Store s = Store::open(dir.db());
  const auto pts = s.series("behind", "m");
  ASSERT_EQ(pts.size(), 200u);
  EXPECT_DOUBLE_EQ(pts[70].value, -5.0);  // the row already there stays
  EXPECT_DOUBLE_EQ(pts[71].value, 71.0);
  EXPECT_EQ(s.summary("behind", "m")->count, 199);  // the summary counts what this writer wrote
}

TEST(RunWriter, CommitsOnTheTimerAndOnTheRowCount) {
  StoreDir dir;
  Store reader = Store::open(dir.db());
  {
    WriterOptions o;
    o.commit_interval_ms = 30;
    RunWriter w(dir.db(), o);
    w.begin_run(info("timer"));
    w.sample("m", 1, 0, 1.0);
    EXPECT_TRUE(eventually([&] { return reader.series("timer", "m").size() == 1; }));  // no flush() needed
  }
  {
    WriterOptions o;
    o.commit_interval_ms = 600'000;  // the timer never fires during the test
    o.batch_rows = 100;
    RunWriter w(dir.db(), o);
    w.begin_run(info("rows"));
    for (int i = 0; i < 99; ++i)
      w.sample("m", i, 0, 1.0);
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(reader.series("rows", "m").size(), 0u);  // below the row threshold: still queued
    w.sample("m", 99, 0, 1.0);
    EXPECT_TRUE(eventually([&] { return reader.series("rows", "m").size() == 100; }));
    w.sample("m", 100, 0, 1.0);
    w.flush();  // flush commits without waiting for either
    EXPECT_EQ(reader.series("rows", "m").size(), 101u);
    w.finish(RunStatus::finished);
  }
}

// An event is committed at once, with the samples queued before it, not at the next tick: events
// are not in metrics.jsonl, so a kill -9 before the tick lost them for good (a resumed distillation
// run's store had no phase event of its teacher).
TEST(RunWriter, AnEventIsCommittedAtOnce) {
  StoreDir dir;
  Store reader = Store::open(dir.db());
  WriterOptions o;
  o.commit_interval_ms = 600'000;  // neither timer fires during the test
  o.heartbeat_interval_ms = 600'000;
  RunWriter w(dir.db(), o);
  w.begin_run(info("ev"));
  w.sample("m", 1, 0, 1.0);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(reader.series("ev", "m").size(), 0u);  // a sample waits for the tick
  w.event("phase", {{"phase", "teacher"}});
  const auto has_phase = [&] {
    for (const EventRecord& e : reader.events("ev"))
      if (e.kind == "phase")
        return true;
    return false;
  };
  EXPECT_TRUE(eventually(has_phase, 2000ms));
  EXPECT_EQ(reader.series("ev", "m").size(), 1u);  // committed with the event
  w.finish(RunStatus::finished);
}

TEST(RunWriter, HeartbeatsWhileIdle) {
  StoreDir dir;
  WriterOptions o;
  o.commit_interval_ms = 10;
  o.heartbeat_interval_ms = 40;
  RunWriter w(dir.db(), o);
  w.begin_run(info("hb"));
  Store s = Store::open(dir.db());
  const int64_t first = s.run("hb").heartbeat_ms.value_or(0);
  EXPECT_TRUE(eventually([&] { return s.run("hb").heartbeat_ms.value_or(0) > first; }));
  w.finish(RunStatus::cancelled);
  EXPECT_EQ(s.run("hb").status, RunStatus::cancelled);
}

TEST(RunWriter, ClosedWithoutFinishIsInterrupted) {
  StoreDir dir;
  {
    RunWriter w(dir.db());
    w.begin_run(info("abandoned"));
    w.sample("m", 1, 0, 1.0);
  }
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.run("abandoned").status, RunStatus::interrupted);
  EXPECT_EQ(s.series("abandoned", "m").size(), 1u);                      // flushed on the way out
  EXPECT_THROW(RunWriter(dir.db()).finish(RunStatus::finished), Error);  // nothing begun
}

TEST(RunWriter, ResumeContinuesNumberingAndWritesNothingTwice) {
  StoreDir dir;
  {
    RunWriter w(dir.db());
    w.begin_run(info("res"));
    for (int step = 0; step < 100; ++step)
      w.sample("loss", step, step, 100.0 - step);
    for (int step = 0; step < 50; ++step)
      w.sample("acc", step, step, step / 100.0);
    w.event("note", {{"text", "about to crash"}});
  }  // destroyed without finish: interrupted
  RunWriter w(dir.db());
  const ResumePoint rp = w.resume("res");
  EXPECT_EQ(rp.last_step.at("loss"), 99);
  EXPECT_EQ(rp.last_step.at("acc"), 49);
  EXPECT_EQ(rp.max_step, 99);
  EXPECT_DOUBLE_EQ(rp.max_wall_ms, 99.0);
  // The trainer restarts from an older checkpoint: steps 90..99 come again with other values.
  for (int step = 90; step < 150; ++step)
    w.sample("loss", step, 1000 + step, -1.0 * step);
  for (int step = 40; step < 60; ++step)
    w.sample("acc", step, 1000 + step, 0.5);
  w.sample("new/metric", 0, 0, 1.0);
  w.finish(RunStatus::finished);
  EXPECT_EQ(w.dropped_samples(), 10 + 10);

  Store s = Store::open(dir.db());
  const auto loss = s.series("res", "loss");
  ASSERT_EQ(loss.size(), 150u);
  for (int step = 0; step < 150; ++step) {
    EXPECT_EQ(loss[step].step, step);
    EXPECT_DOUBLE_EQ(loss[step].value, step < 100 ? 100.0 - step : -1.0 * step) << step;
  }
  EXPECT_EQ(s.summary("res", "loss")->count, 150);
  EXPECT_EQ(s.summary("res", "acc")->count, 60);
  EXPECT_EQ(s.db().query_int("SELECT count(*) FROM samples"), 150 + 60 + 1);
  EXPECT_EQ(s.run("res").status, RunStatus::finished);
  bool saw_resume = false;
  for (const EventRecord& e : s.events("res"))
    if (e.kind == "status" && e.fields.value("resumed", false))
      saw_resume = e.fields["from"] == "interrupted";
  EXPECT_TRUE(saw_resume);
}

TEST(RunWriter, QueuedRunStartsThroughResume) {
  StoreDir dir;
  {
    Store s = Store::open(dir.db());
    EXPECT_EQ(s.create_run(info("q1")), "q1");
    EXPECT_EQ(s.run("q1").status, RunStatus::queued);
    EXPECT_FALSE(s.run("q1").started_ms.has_value());
    EXPECT_THROW(s.create_run(info("q1")), DataError);  // ids are unique
  }
  RunWriter w(dir.db());
  EXPECT_TRUE(w.resume("q1").last_step.empty());
  w.finish(RunStatus::finished);
  Store s = Store::open(dir.db());
  EXPECT_TRUE(s.run("q1").started_ms.has_value());
}

TEST(RunWriter, RefusesToResumeARunWithALiveWriter) {
  StoreDir dir;
  RunWriter a(dir.db());
  a.begin_run(info("live"));
  RunWriter b(dir.db());
  EXPECT_THROW(b.resume("live"), DataError);
  EXPECT_THROW(b.resume("unknown"), DataError);
  a.finish(RunStatus::finished);
}

TEST(RunWriter, StopsWhenAnotherWriterTookTheRunOver) {
  StoreDir dir;
  RunWriter w(dir.db());
  w.begin_run(info("stolen"));
  {
    Store s = Store::open(dir.db());
    s.db().exec("UPDATE runs SET pid = 1 WHERE id = 'stolen'");  // pid 1 is always alive
  }
  w.sample("m", 1, 0, 1.0);
  try {
    w.flush();
    FAIL() << "a writer whose run was taken over must stop";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("taken over"), std::string::npos) << e.what();
  }
  Store s = Store::open(dir.db());
  EXPECT_TRUE(s.series("stolen", "m").empty());
  EXPECT_EQ(s.run("stolen").status, RunStatus::running);  // the new owner's business, not ours
}

TEST(RunWriter, ExplicitDirectionOverridesTheNameRule) {
  StoreDir dir;
  RunWriter w(dir.db());
  w.begin_run(info("dir"));
  w.set_direction("cost/usd", Direction::minimize);
  w.sample("cost/usd", 1, 0, 3.0);
  w.sample("cost/usd", 2, 0, 1.0);
  w.sample("val/loss_ratio_inverse", 1, 0, 1.0);
  w.finish(RunStatus::finished);
  Store s = Store::open(dir.db());
  EXPECT_EQ(s.summary("dir", "cost/usd")->direction, Direction::minimize);
  EXPECT_DOUBLE_EQ(s.summary("dir", "cost/usd")->best(), 1.0);
  EXPECT_EQ(default_direction("Train/LOSS"), Direction::minimize);
  EXPECT_EQ(default_direction("test/accuracy"), Direction::maximize);
  EXPECT_EQ(default_direction("dist/comm_fraction"), Direction::minimize);
  EXPECT_EQ(default_direction("dist/comm_s"), Direction::minimize);
  EXPECT_EQ(default_direction("dist/bytes_per_step"), Direction::minimize);
  EXPECT_EQ(default_direction("device/power_w"), Direction::minimize);  // watts drawn: a cost
  EXPECT_EQ(default_direction("device/sm_activity"), Direction::maximize);
  EXPECT_EQ(default_direction("dist/rank1/sm_activity"), Direction::maximize);
  EXPECT_EQ(default_direction("dist/rank1/samples_per_s"), Direction::maximize);
  EXPECT_EQ(default_direction("dist/rank0/util"), Direction::maximize);
  s.set_direction("test/accuracy", Direction::minimize);
  EXPECT_EQ(s.db().query_int("SELECT direction FROM metric_keys WHERE name = 'test/accuracy'"), -1);
}

}  // namespace
}  // namespace lathe

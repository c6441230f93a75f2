// Resume in the app (issue 14): the Runs tab offers Resume only for interrupted or cancelled runs
// with a checkpoint (a tooltip says why otherwise), the queue spawns `lathe-cli resume RUN`, a real
// stopped run resumed from the Runs tab finishes in the same store run with the Live tab following
// it (the step axis going on).
#include <gtest/gtest.h>

#include <QFile>
#include <QPushButton>

#include "app/gui/main_window.h"
#include "engine/run/config.h"
#include "engine/store/store.h"
#include "gui_test_util.h"
#include "widgets/ui/resume_check.h"
#include "widgets/ui/run_browser.h"
#include "widgets/ui/run_queue.h"

namespace lathe::ui {
namespace {

std::string write_ended_run(const std::string& db, const std::string& name, RunStatus status, bool checkpoint_event,
                            bool checkpoint_artifact, int devices = 1) {
  RunWriter writer(db);
  RunInfo info;
  info.name = name;
  info.config = nlohmann::json::object();
  if (devices > 1)
    info.config["compute"] = {{"devices", devices}};
  const std::string id = writer.begin_run(info);
  writer.sample("train/loss", 1, 10, 2.0);
  if (checkpoint_event)
    writer.event("checkpoint", {{"step", 1}, {"path", "/nowhere/ckpt/step-1"}, {"trigger", "steps"}});
  if (checkpoint_artifact)
    writer.artifact("checkpoint", "/nowhere/ckpt/step-1/tensors.safetensors", 1);
  writer.finish(status);
  return id;
}

}  // namespace

TEST(GuiResume, OfferedOnlyForInterruptedOrCancelledRunsWithACheckpoint) {
  test::GuiTempDir dir;
  const std::string interrupted = write_ended_run(dir.db(), "spot", RunStatus::interrupted, true, false);
  const std::string cancelled = write_ended_run(dir.db(), "stopped", RunStatus::cancelled, false, true);
  const std::string no_ckpt = write_ended_run(dir.db(), "early", RunStatus::cancelled, false, false);
  const std::string finished = write_ended_run(dir.db(), "done", RunStatus::finished, true, true);
  const QString db = dir.qdb();
  auto q = [](const std::string& s) { return QString::fromStdString(s); };

  EXPECT_TRUE(check_resumable(db, {q(interrupted)}).ok);
  EXPECT_TRUE(check_resumable(db, {q(cancelled)}).ok);
  EXPECT_FALSE(check_resumable(db, {q(interrupted)}).why.contains("ranks"));
  const std::string two_ranks = write_ended_run(dir.db(), "dp", RunStatus::interrupted, true, false, 2);
  const ResumeCheck dp = check_resumable(db, {q(two_ranks)});
  EXPECT_TRUE(dp.ok);
  EXPECT_TRUE(dp.why.contains("on its 2 ranks")) << dp.why.toStdString();
  const ResumeCheck none = check_resumable(db, {q(no_ckpt)});
  EXPECT_FALSE(none.ok);
  EXPECT_TRUE(none.why.contains("no checkpoint")) << none.why.toStdString();
  const ResumeCheck done = check_resumable(db, {q(finished)});
  EXPECT_FALSE(done.ok);
  EXPECT_TRUE(done.why.contains("is finished")) << done.why.toStdString();
  EXPECT_FALSE(check_resumable(db, {q(interrupted), q(cancelled)}).ok);
  EXPECT_FALSE(check_resumable(db, {}).ok);

  RunBrowser browser(db);
  ASSERT_TRUE(test::wait_until([&]() { return browser.model()->total() == 5 && !browser.model()->loading(); }, 10000));
  QStringList resumed;
  QObject::connect(&browser, &RunBrowser::resumeRun, [&](const QString& id) { resumed << id; });
  browser.selectRuns({q(finished)});
  EXPECT_FALSE(browser.resumeButton()->isEnabled());
  EXPECT_FALSE(browser.resumeAction()->isEnabled());
  EXPECT_TRUE(browser.resumeButton()->toolTip().contains("only interrupted or cancelled"));
  browser.selectRuns({q(no_ckpt)});
  EXPECT_FALSE(browser.resumeButton()->isEnabled());
  EXPECT_TRUE(browser.resumeButton()->toolTip().contains("no checkpoint"));
  browser.resumeButton()->click();  // disabled: nothing
  browser.selectRuns({q(interrupted)});
  EXPECT_TRUE(browser.resumeButton()->isEnabled());
  EXPECT_TRUE(browser.resumeAction()->isEnabled());
  browser.resumeButton()->click();
  browser.selectRuns({q(cancelled)});
  browser.resumeAction()->trigger();  // the context menu's action
  EXPECT_EQ(resumed, QStringList({q(interrupted), q(cancelled)}));
}

TEST(GuiResume, QueueSpawnsLatheCliResumeWithTheRunId) {
  test::GuiTempDir dir;
  // A stand-in lathe-cli that records its arguments.
  const QString fake = QString::fromStdString(dir.file("fake-cli.sh"));
  const std::string args_file = dir.file("args.txt");
  {
    QFile f(fake);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray("#!/bin/sh\nprintf '%s\\n' \"$@\" > '") + QByteArray::fromStdString(args_file) + "'\n");
    f.close();
    f.setPermissions(f.permissions() | QFileDevice::ExeOwner);
  }
  RunQueue queue(fake, dir.qdb());
  QStringList started;
  QObject::connect(&queue, &RunQueue::runStarted, [&](const QString& id, const QString&) { started << id; });
  queue.enqueueResume("abc123def");
  ASSERT_TRUE(queue.waitIdle(10000));
  ASSERT_EQ(queue.entries().size(), 1u);
  EXPECT_TRUE(queue.entries()[0].resume);
  EXPECT_EQ(queue.entries()[0].runId, "abc123def");
  EXPECT_EQ(queue.entries()[0].state, QueuedRun::State::finished);
  EXPECT_EQ(started, QStringList({"abc123def"}));
  QFile f(QString::fromStdString(args_file));
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  EXPECT_EQ(QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts),
            QStringList({"--db", dir.qdb(), "resume", "abc123def", "--json"}));
}

}  // namespace lathe::ui

namespace lathe::app {

TEST(GuiResume, StoppedRunResumedFromTheRunsTabFinishesInTheSameRun) {
  if (!test::fashion_mnist_present())
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  test::GuiTempDir dir;
  WindowOptions o;
  o.dbPath = dir.qdb();
  o.cliPath = QString::fromStdString(test::cli_path());
  o.measureCost = false;
  o.experimentsDir = QString::fromStdString(test::experiments_dir());
  MainWindow w(o);
  w.setInteractive(false);
  nlohmann::json cfg = load_config_file(test::experiments_dir() + "/mlp.json");
  cfg["name"] = "gui-resume";
  cfg["train"]["epochs"] = 4;
  cfg["train"]["batch_size"] = 32;
  cfg["data"]["train_subset"] = 4096;
  cfg["data"]["test_subset"] = 200;
  cfg["output"]["dir"] = dir.file("runs");
  cfg["checkpoint"]["every_steps"] = 10;
  w.designer()->form()->setConfig(cfg);
  ASSERT_TRUE(w.runCurrent(false));
  ui::LiveChart* loss = w.charts()->chartFor("train/loss");
  ASSERT_TRUE(test::wait_until([&]() { return loss->pointCount("train/loss") > 0; }, 120000));
  w.stop();
  ASSERT_TRUE(w.queue()->waitIdle(120000));
  ASSERT_EQ(w.queue()->entries().size(), 1u);
  const QString runId = w.queue()->entries()[0].runId;
  ASSERT_EQ(w.queue()->entries()[0].state, ui::QueuedRun::State::cancelled)
      << w.queue()->entries()[0].stderrTail.toStdString();

  // The Live tab watches another run until Resume.
  const QString other = QString::fromStdString(test::write_run(dir.db(), "other", {}, {{"train/loss", {1.0}}}));
  w.watch(other);
  ASSERT_EQ(w.feed()->watched(), other);
  ui::RunBrowser* browser = w.browser();
  browser->reload();
  ASSERT_TRUE(
      test::wait_until([&]() { return browser->model()->total() == 2 && !browser->model()->loading(); }, 10000));
  browser->selectRuns({runId});
  ASSERT_TRUE(browser->resumeButton()->isEnabled()) << browser->resumeButton()->toolTip().toStdString();
  browser->resumeButton()->click();
  ASSERT_TRUE(test::wait_until([&]() { return w.queue()->entries().size() == 2u; }, 5000));
  ASSERT_TRUE(w.queue()->waitIdle(180000));
  const ui::QueuedRun& resumed = w.queue()->entries()[1];
  EXPECT_TRUE(resumed.resume);
  EXPECT_EQ(resumed.runId, runId);
  EXPECT_EQ(resumed.state, ui::QueuedRun::State::finished) << resumed.stderrTail.toStdString();
  EXPECT_EQ(w.feed()->watched(), runId);  // the Live tab followed the resumed run

  Store store = Store::open(dir.db());
  EXPECT_EQ(store.run(runId.toStdString()).status, RunStatus::finished);
  RunQuery named;
  named.name_glob = "gui-resume";
  EXPECT_EQ(store.list_runs(named).total, 1);  // the same store run, no new one
  EXPECT_EQ(store.list_runs(RunQuery{}).total, 2);
  // The step axis continues: the live chart ends at the store's last step of the run, and the
  // store's steps go on from before the stop to the end without a repeat.
  const std::vector<Point> stored = store.series(runId.toStdString(), "train/loss");
  ASSERT_FALSE(stored.empty());
  for (size_t i = 1; i < stored.size(); ++i)
    ASSERT_LT(stored[i - 1].step, stored[i].step);
  EXPECT_GE(stored.back().step, 4 * 4096 / 32 - 32);  // the last epoch's steps are there
  const QCPGraph* raw = loss->rawGraph("train/loss");
  ASSERT_TRUE(test::wait_until(
      [&]() {
        return !raw->data()->isEmpty() && (raw->data()->end() - 1)->key == static_cast<double>(stored.back().step) &&
               loss->markerCount() >= 1;
      },
      10000));
  EXPECT_TRUE(loss->marker(0).second.startsWith("resumed from"));
}

}  // namespace lathe::app

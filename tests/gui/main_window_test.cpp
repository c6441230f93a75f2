// The main window: renders to a PNG; a short real run (a lathe-cli child on a tiny subset)
// appears live in the charts and matches the store; Stop ends a run as cancelled; a run that
// fails shows as failed with lathe-cli's stderr while the app carries on.
#include <gtest/gtest.h>

#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <set>

#include "app/gui/export_action.h"
#include "app/gui/main_window.h"
#include "app/gui/run_overview.h"
#include "engine/run/config.h"
#include "engine/store/store.h"
#include "engine/store/sweep_store.h"
#include "widgets/ui/sweep.h"
#include "gui_test_util.h"

namespace lathe::app {
namespace {

WindowOptions options(const test::GuiTempDir& dir) {
  WindowOptions o;
  o.dbPath = dir.qdb();
  o.cliPath = QString::fromStdString(test::cli_path());
  o.measureCost = false;  // no lathe-cli cost children in the window tests (cost_panel_test has its own)
  o.experimentsDir = QString::fromStdString(test::experiments_dir());
  return o;
}

nlohmann::json tiny_config(const test::GuiTempDir& dir, int epochs, int train_subset) {
  nlohmann::json cfg = load_config_file(test::experiments_dir() + "/mlp.json");
  cfg["name"] = "gui-live";
  cfg["train"]["epochs"] = epochs;
  cfg["train"]["batch_size"] = 32;
  cfg["data"]["train_subset"] = train_subset;
  cfg["data"]["test_subset"] = 200;
  cfg["output"]["dir"] = dir.file("runs");
  return cfg;
}

}  // namespace

TEST(GuiMainWindow, RendersToPng) {
  test::GuiTempDir dir;
  MainWindow w(options(dir));
  w.setInteractive(false);
  w.resize(1280, 800);
  w.show();
  test::wait_until([]() { return false; }, 300);
  const QString file = QString::fromStdString(dir.file("shot.png"));
  ASSERT_TRUE(w.grab().save(file, "PNG"));
  QImage img(file);
  ASSERT_FALSE(img.isNull());
  EXPECT_EQ(img.width(), 1280);
  EXPECT_EQ(img.height(), 800);
  std::set<QRgb> colours;
  for (int y = 0; y < img.height(); y += 7)
    for (int x = 0; x < img.width(); x += 7)
      colours.insert(img.pixel(x, y));
  EXPECT_GT(colours.size(), 20u) << "the screenshot looks blank";
  // The default experiment is loaded into the designer.
  EXPECT_EQ(w.designer()->form()->config()["name"], "default");
}

TEST(GuiMainWindow, ShortRealRunAppearsLive) {
  if (!test::fashion_mnist_present())
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  test::GuiTempDir dir;
  MainWindow w(options(dir));
  w.setInteractive(false);
  w.show();
  w.designer()->form()->setConfig(tiny_config(dir, 1, 1024));
  ASSERT_TRUE(w.runCurrent(false));
  ui::LiveChart* loss = w.charts()->chartFor("train/loss");
  ASSERT_NE(loss, nullptr);
  // Points arrive while the child runs (the store is the only channel).
  ASSERT_TRUE(test::wait_until([&]() { return loss->pointCount("train/loss") > 0; }, 120000))
      << (w.queue()->entries().empty() ? std::string() : w.queue()->entries().back().stderrTail.toStdString());
  ASSERT_TRUE(w.queue()->waitIdle(180000));
  const ui::QueuedRun& entry = w.queue()->entries().back();
  ASSERT_EQ(entry.state, ui::QueuedRun::State::finished) << entry.stderrTail.toStdString();
  ASSERT_FALSE(entry.runId.isEmpty());
  // After the end, every sample of the store is in the chart.
  Store store = Store::open(dir.db());
  const auto series = store.series(entry.runId.toStdString(), "train/loss");
  ASSERT_FALSE(series.empty());
  ASSERT_TRUE(
      test::wait_until([&]() { return loss->pointCount("train/loss") == static_cast<int>(series.size()); }, 5000));
  ui::LiveChart* acc = w.charts()->chartFor("test/accuracy");
  ASSERT_TRUE(test::wait_until([&]() { return acc->pointCount("test/accuracy") > 0; }, 5000));
  EXPECT_EQ(store.run(entry.runId.toStdString()).status, RunStatus::finished);
  EXPECT_EQ(w.progress()->step(), w.progress()->totalSteps());
  EXPECT_GT(w.progress()->totalSteps(), 0);
}

TEST(GuiMainWindow, PruneInt8RunEndsWithItsOverviewAndWholePipelineProgress) {
  if (!test::fashion_mnist_present())
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  test::GuiTempDir dir;
  MainWindow w(options(dir));
  w.setInteractive(false);
  w.show();
  nlohmann::json cfg = tiny_config(dir, 1, 1024);
  cfg["name"] = "gui-prune-int8";
  cfg["prune"]["method"] = "l1-unstructured";
  cfg["prune"]["finetune_epochs"] = 1;
  cfg["quant"]["mode"] = "ptq-static";
  w.designer()->form()->setConfig(cfg);
  ASSERT_NE(w.liveOverview(), nullptr);
  ASSERT_TRUE(w.runCurrent(false));
  ASSERT_TRUE(w.queue()->waitIdle(240000));
  const ui::QueuedRun& entry = w.queue()->entries().back();
  ASSERT_EQ(entry.state, ui::QueuedRun::State::finished) << entry.stderrTail.toStdString();
  // Progress counted every phase: 32 steps of training, 32 of fine-tuning, the INT8 step.
  ASSERT_TRUE(test::wait_until([&]() { return w.progress()->text().contains("finished"); }, 5000));
  EXPECT_EQ(w.progress()->totalSteps(), 65) << w.progress()->text().toStdString();
  EXPECT_EQ(w.progress()->step(), 65);
  EXPECT_TRUE(w.progress()->text().contains("step 65 of 65")) << w.progress()->text().toStdString();
  // The Live tab shows the run's overview: every stage's results side by side, with units.
  ASSERT_TRUE(test::wait_until([&]() { return w.liveOverview()->isVisible(); }, 5000));
  const QString html = w.liveOverview()->html();
  for (const char* s :
       {"Stage results", ">dense<", ">pruned ", ">INT8 ", " ms", "samples/s", "x<", "Config", "Events", "Artifacts"})
    EXPECT_TRUE(html.contains(s)) << s;
  EXPECT_TRUE(w.liveOverview()->openFolderButton()->isEnabled());
  EXPECT_TRUE(QFileInfo(w.liveOverview()->folder()).isDir());
  // Runs -> double-click shows the same overview in its own tab.
  emit w.browser()->showRun(entry.runId);
  EXPECT_EQ(w.tabs()->tabText(w.tabs()->currentIndex()), "Overview");
  EXPECT_EQ(w.overview()->runId(), entry.runId);
  EXPECT_TRUE(w.overview()->html().contains("Stage results"));
  if (qEnvironmentVariableIsSet("LATHE_KEEP_OVERVIEW")) {  // a screenshot to look at
    w.resize(1400, 900);
    test::wait_until([]() { return false; }, 300);
    w.grab().save(qEnvironmentVariable("LATHE_KEEP_OVERVIEW"), "PNG");
  }
}

// What the Sweep action does after its dialog: the runs stored as a sweep with planned ids, queued
// with --run-id; each member becomes the run with its planned id and the sweep reads 2/2 finished.
TEST(GuiMainWindow, StoredSweepRunsUnderItsPlannedIds) {
  if (!test::fashion_mnist_present())
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  test::GuiTempDir dir;
  MainWindow w(options(dir));
  w.setInteractive(false);
  const nlohmann::json base = tiny_config(dir, 1, 256);
  const std::vector<ui::SweepAxis> axes = {{"seed", {"1", "2"}}};
  std::vector<ui::SweepRun> runs = ui::plan_sweep(base, axes);
  const std::string sweep_id = ui::store_sweep(dir.db(), base, axes, runs);
  for (const ui::SweepRun& run : runs)
    w.queue()->enqueue(run.config, {QString::fromStdString(run.sets[0])}, QString::fromStdString(run.name),
                       QString::fromStdString(run.run_id));
  ASSERT_TRUE(w.queue()->waitIdle(240000));
  for (size_t i = 0; i < runs.size(); ++i) {
    const ui::QueuedRun& e = w.queue()->entries()[i];
    ASSERT_EQ(e.state, ui::QueuedRun::State::finished) << e.stderrTail.toStdString();
    EXPECT_EQ(e.runId.toStdString(), runs[i].run_id);
  }
  Store s = Store::open(dir.db());
  for (const SweepMemberRecord& m : sweep_members(s, sweep_id))
    EXPECT_EQ(m.state, MemberState::finished) << m.index;
  w.browser()->reload();
  ASSERT_TRUE(test::wait_until([&]() { return w.browser()->sweepFilter()->count() == 2; }, 5000));
  EXPECT_TRUE(w.browser()->sweepFilter()->itemText(1).endsWith("2/2  finished"))
      << w.browser()->sweepFilter()->itemText(1).toStdString();
}

TEST(GuiMainWindow, StopCancelsAndFailuresAreReported) {
  if (!test::fashion_mnist_present())
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  test::GuiTempDir dir;
  MainWindow w(options(dir));
  w.setInteractive(false);
  w.designer()->form()->setConfig(tiny_config(dir, 20, 4096));
  ASSERT_TRUE(w.runCurrent(false));
  // A second, broken run waits in the queue: its dataset folder does not exist.
  nlohmann::json broken = tiny_config(dir, 1, 512);
  broken["data"]["path"] = dir.file("no-such-dataset");
  w.queue()->enqueue(broken);
  ui::LiveChart* loss = w.charts()->chartFor("train/loss");
  ASSERT_TRUE(test::wait_until([&]() { return loss->pointCount("train/loss") > 0; }, 120000));
  w.stop();
  ASSERT_TRUE(w.queue()->waitIdle(120000));
  const auto& entries = w.queue()->entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].state, ui::QueuedRun::State::cancelled) << entries[0].stderrTail.toStdString();
  Store store = Store::open(dir.db());
  EXPECT_EQ(store.run(entries[0].runId.toStdString()).status, RunStatus::cancelled);
  EXPECT_EQ(entries[1].state, ui::QueuedRun::State::failed);
  EXPECT_NE(entries[1].exitCode, 0);
  EXPECT_TRUE(entries[1].stderrTail.contains("no-such-dataset")) << entries[1].stderrTail.toStdString();
  EXPECT_TRUE(w.isEnabled());  // the app carries on
}

}  // namespace lathe::app

namespace lathe::app {

TEST(GuiExport, ReportFileHoldsTheRunsNumbers) {
  test::GuiTempDir dir;
  const std::string id = test::write_run(dir.db(), "exported", {{"seed", 3}}, {{"test/accuracy", {0.25, 0.8125}}});
  const QString csv = QString::fromStdString(dir.file("report.csv"));
  const QString err = write_report_file(dir.qdb(), {QString::fromStdString(id)}, csv);
#ifdef LATHE_HAVE_REPORT
  ASSERT_TRUE(err.isEmpty()) << err.toStdString();
  QFile f(csv);
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  const QString text = QString::fromUtf8(f.readAll());
  EXPECT_TRUE(text.contains("0.8125")) << text.left(500).toStdString();
  EXPECT_TRUE(text.contains("test/accuracy"));
#else
  EXPECT_TRUE(err.contains("not part of this build")) << err.toStdString();
#endif
  EXPECT_FALSE(write_report_file(dir.qdb(), {}, csv).isEmpty());
}

}  // namespace lathe::app

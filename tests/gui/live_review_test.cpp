// The states a demanding user meets beyond the README's screenshots (GUI review): a failed run says
// why in the Live tab, on its progress bar and on its Status cell in Runs; the Cost chart of an
// unpriced instance says why it is flat at $0; a metric a finished run never logged is "not logged",
// not "no data yet"; spot markers at one step merge into one label inside the plot; a greyed-out
// knob's name says why it is greyed; the Runs table shows whole names and start times; Compare's
// Curves line up runs on 1 and 2 ranks by epoch; the designer's cost panel takes the design's spot
// scenario.
#include <gtest/gtest.h>

#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QTableView>

#include "engine/store/run_writer.h"
#include "gui_test_util.h"
#include "widgets/ui/chart_panel.h"
#include "widgets/ui/compare_view.h"
#include "widgets/ui/cost_panel.h"
#include "widgets/ui/designer_panel.h"
#include "widgets/ui/experiment_form.h"
#include "widgets/ui/run_browser.h"
#include "widgets/ui/run_progress.h"

namespace lathe::ui {
namespace {

EventRecord event(const std::string& kind, nlohmann::json fields) {
  EventRecord e;
  e.kind = kind;
  e.fields = std::move(fields);
  return e;
}

TailBatch runBatch(const char* id, RunStatus status, std::vector<EventRecord> events, int64_t steps = 100) {
  TailBatch b;
  b.runId = id;
  b.reset = true;
  RunRecord r;
  r.id = id;
  r.name = "mlp";
  r.status = status;
  b.run = r;
  std::vector<Point> loss, cost;
  for (int64_t s = 1; s <= steps; ++s) {
    loss.push_back({s, 10.0 * static_cast<double>(s), 1.0 / static_cast<double>(s)});
    cost.push_back({s, 10.0 * static_cast<double>(s), 0.0});
  }
  b.series = {{"train/loss", loss}, {"cost/usd", cost}};
  b.events = std::move(events);
  return b;
}

}  // namespace

TEST(GuiLiveReview, AFailedRunShowsItsErrorUntilItRunsAgain) {
  ChartPanel panel;
  panel.applyBatch(runBatch(
      "r1", RunStatus::failed,
      {event("status", {{"to", "running"}}),
       event("status",
             {{"from", "running"}, {"to", "failed"}, {"error", "rank 1 (pid 7) was killed by signal 9 (SIGKILL)"}})}));
  EXPECT_EQ(panel.errorText(), "Failed: rank 1 (pid 7) was killed by signal 9 (SIGKILL)");
  // Resumed: the run goes on, the old error goes.
  TailBatch resumed;
  resumed.runId = "r1";
  resumed.events = {event("status", {{"from", "failed"}, {"to", "running"}, {"resumed", true}})};
  panel.applyBatch(resumed);
  EXPECT_EQ(panel.errorText(), "");
  // Another run that failed with no error field, and a finished one: nothing shown.
  panel.applyBatch(runBatch("r2", RunStatus::failed, {event("status", {{"to", "failed"}})}));
  EXPECT_EQ(panel.errorText(), "");

  RunProgress progress;
  progress.applyBatch(runBatch("r3", RunStatus::failed, {event("started", {{"total_steps", 200}})}));
  EXPECT_EQ(progress.barText(), "failed at 50%");  // not "50%", which reads as a run going on
  progress.applyBatch(runBatch("r4", RunStatus::cancelled, {event("started", {{"total_steps", 400}})}));
  EXPECT_EQ(progress.barText(), "cancelled at 25%");
  progress.applyBatch(runBatch("r5", RunStatus::finished, {event("started", {{"total_steps", 100}})}));
  EXPECT_EQ(progress.barText(), "done");
}

TEST(GuiLiveReview, TheCostChartOfAnUnpricedInstanceSaysWhyItIsFlat) {
  ChartPanel panel;
  panel.applyBatch(runBatch(
      "local", RunStatus::finished,
      {event("started", {{"instance", "local"}, {"price_usd_per_hour", 0.0}, {"price_source", "your own machine"}})}));
  LiveChart* cost = panel.chartFor("cost/usd");
  ASSERT_NE(cost, nullptr);
  EXPECT_TRUE(cost->note().contains("cost.instance \"local\" (your own machine)")) << cost->note().toStdString();
  EXPECT_TRUE(cost->note().contains("$0")) << cost->note().toStdString();
  EXPECT_EQ(panel.chartFor("train/loss")->note(), "");  // only the cost chart
  panel.setXMode(XMapping::Mode::dollars);              // every point at $0: the axis says so
  EXPECT_EQ(cost->xAxis->label(), "$ spent (the instance has no price: all at $0)");
  panel.setXMode(XMapping::Mode::step);

  panel.applyBatch(runBatch("priced", RunStatus::finished,
                            {event("started", {{"instance", "g4dn.xlarge"}, {"price_usd_per_hour", 0.526}})}));
  EXPECT_EQ(cost->note(), "");
  panel.applyBatch(runBatch("unknown", RunStatus::running, {}));  // no started event yet: no claim
  EXPECT_EQ(cost->note(), "");
  // Priced at an instance the run did not train on: the dollars are said to be a projection.
  panel.applyBatch(runBatch("projected", RunStatus::finished,
                            {event("started", {{"instance", "g4dn.xlarge"},
                                               {"price_usd_per_hour", 0.526},
                                               {"device", "Intel(R) Xeon(R) Processor"},
                                               {"cost_projection", "timed on Intel(R) Xeon(R) Processor (CPU), ..."}})}));
  EXPECT_TRUE(cost->note().startsWith("Projected")) << cost->note().toStdString();
  EXPECT_TRUE(cost->note().contains("g4dn.xlarge")) << cost->note().toStdString();
  EXPECT_TRUE(cost->note().contains("Intel(R) Xeon(R) Processor")) << cost->note().toStdString();
}

TEST(GuiLiveReview, AMetricAFinishedRunNeverLoggedIsNotLoggedNotPending) {
  ChartPanel panel;
  panel.applyBatch(runBatch("cpu", RunStatus::running, {}));
  LiveChart* device = panel.chartFor("device/sm_activity");
  ASSERT_NE(device, nullptr);
  EXPECT_TRUE(device->legendText("device/sm_activity").endsWith("(no data yet)"));
  TailBatch end;
  end.runId = "cpu";
  RunRecord r;
  r.id = "cpu";
  r.status = RunStatus::finished;
  end.run = r;
  panel.applyBatch(end);
  EXPECT_TRUE(device->legendText("device/sm_activity").endsWith("(not logged by this run)"))
      << device->legendText("device/sm_activity").toStdString();
  panel.applyBatch(runBatch("next", RunStatus::running, {}));
  EXPECT_TRUE(device->legendText("device/sm_activity").endsWith("(no data yet)"));
}

TEST(GuiLiveReview, SpotMarkersAtOneStepMergeIntoOneLabelInsideThePlot) {
  // As a spot-simulated run logs them: a notice, the resume and the supervisor's interruption at
  // step 989, then three interruptions in a row at steps 1365-1367, over 1536 steps.
  std::vector<EventRecord> events;
  const auto interruption = [&](int step) {
    events.push_back(event("spot/notice", {{"step", step}, {"wall_ms", 10.0 * step}}));
    events.push_back(event("resumed", {{"from_step", step}}));
  };
  interruption(989);
  for (int s : {1365, 1366, 1367})
    interruption(s);
  for (int s : {989, 1365, 1366, 1367})
    events.push_back(event("spot/interruption", {{"at_s", s / 100.0}, {"killed", false}, {"step_reached", s}}));
  ChartPanel panel;
  panel.resize(1000, 600);  // charts about 320 px wide, as in a 1400 px window
  panel.show();
  panel.applyBatch(runBatch("spot", RunStatus::finished, events, 1536));
  LiveChart* chart = panel.chartFor("train/loss");
  ASSERT_NE(chart, nullptr);
  ASSERT_EQ(chart->markerCount(), 12);
  QCoreApplication::processEvents();
  panel.refreshNow();
  chart->replot(QCustomPlot::rpImmediateRefresh);
  ASSERT_LT(chart->width(), 400);
  const auto labels = chart->drawnMarkerLabels();
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels[0].first, "spot notice, resumed, interrupted");
  const QString times = QString(QChar(0x00d7)) + "3";
  EXPECT_EQ(labels[1].first, "spot notice " + times + ", resumed " + times + ", interrupted " + times);
  const QRectF area = chart->axisRect()->rect();
  for (const auto& [text, rect] : labels) {
    EXPECT_GE(rect.left(), area.left() - 1) << text.toStdString();
    EXPECT_LE(rect.right(), area.right() + 1) << text.toStdString();  // never cut at the plot's edge
  }
  EXPECT_FALSE(labels[0].second.intersects(labels[1].second));
  EXPECT_EQ(chart->marker(1).second, "resumed from 989");  // each marker keeps its own label
}

TEST(GuiLiveReview, AGreyedOutKnobsNameSaysWhyItIsGreyed) {
  ExperimentForm form;
  form.setConfig({{"data", {{"dataset", "fashion-mnist"}}}});
  ASSERT_FALSE(form.applies("data.image_size"));
  QLabel* label = nullptr;
  for (QLabel* l : form.findChildren<QLabel*>())
    if (l->text() == "image_size")
      label = l;
  ASSERT_NE(label, nullptr);
  EXPECT_FALSE(label->isEnabled());
  EXPECT_TRUE(label->toolTip().startsWith("Not used now: ")) << label->toolTip().toStdString();
  EXPECT_EQ(label->toolTip(), form.field("data.image_size")->widget()->toolTip());
}

TEST(GuiLiveReview, TheRunsTableNamesAFailedRunsErrorAndShowsWholeNames) {
  test::GuiTempDir dir;
  // A sweep's run ("knob=value" in its name): the knob gets a column before Status.
  const std::string longName = "mlp-fashion 2 ranks spot-simulated lr=0.1";
  const nlohmann::json config = {{"model", {{"zoo", "mlp"}}}, {"train", {{"optimizer", {{"lr", 0.1}}}}}};
  std::string failed;
  {
    RunWriter writer(dir.db());
    RunInfo info;
    info.name = longName;
    info.config = config;
    failed = writer.begin_run(info);
    writer.sample("train/loss", 1, 10, 0.5);
    writer.finish(RunStatus::failed, {{"error", "rank 1 (pid 7) was killed by signal 9 (SIGKILL)"}});
  }
  test::write_run(dir.db(), "mlp ok lr=0.2", config, {{"train/loss", {0.5}}});
  RunBrowser browser(dir.qdb());
  browser.resize(1200, 500);
  browser.show();
  RunTableModel* model = browser.model();
  ASSERT_TRUE(test::wait_until([&]() { return model->total() == 2 && !model->loading(); }, 10000));
  QCoreApplication::processEvents();
  const auto column = [&](const QString& header) {
    for (int c = 0; c < model->columnCount(); ++c)
      if (model->headerData(c, Qt::Horizontal, Qt::DisplayRole).toString() == header)
        return c;
    return -1;
  };
  const int statusColumn = column("Status"), startedColumn = column("Started");
  ASSERT_EQ(statusColumn, 2) << "the knob column train.optimizer.lr comes first";
  int failedRow = -1;
  for (int r = 0; r < model->rowCount(); ++r)
    if (model->runId(r).toStdString() == failed)
      failedRow = r;
  ASSERT_GE(failedRow, 0);
  const QModelIndex status = model->index(failedRow, statusColumn);
  EXPECT_EQ(model->data(status, Qt::DisplayRole).toString(), "failed");
  EXPECT_EQ(model->data(status, Qt::ToolTipRole).toString(), "failed: rank 1 (pid 7) was killed by signal 9 (SIGKILL)");
  EXPECT_TRUE(model->data(status, Qt::ForegroundRole).isValid());  // red, on the Status column
  EXPECT_FALSE(model->data(model->index(failedRow, 1), Qt::ForegroundRole).isValid());
  EXPECT_EQ(model->data(model->index(1 - failedRow, statusColumn), Qt::ToolTipRole).toString(), "finished");
  // Whole names and start times, not "mlp-fashion 2 ra..." and "2026-12-07 ...".
  QTableView* table = browser.table();
  const QFontMetrics fm(table->font());
  EXPECT_GE(table->columnWidth(0), fm.horizontalAdvance(QString::fromStdString(longName)));
  const QString started = model->data(model->index(0, startedColumn), Qt::DisplayRole).toString();
  EXPECT_GE(table->columnWidth(startedColumn), fm.horizontalAdvance(started));
}

TEST(GuiLiveReview, CompareCurvesByEpochLineUpOneAndTwoRanks) {
  test::GuiTempDir dir;
  // One epoch of 8192 samples at batch 64: 128 steps on one rank, 64 on two (each step is 2 x 64).
  const auto write = [&](const std::string& name, int stepsPerEpoch, bool started) {
    RunWriter writer(dir.db());
    RunInfo info;
    info.name = name;
    info.config = {{"model", {{"zoo", "mlp"}}}, {"train", {{"epochs", 2}}}, {"seed", stepsPerEpoch}};
    const std::string id = writer.begin_run(info);
    if (started)
      writer.event("started", {{"train_steps", 2 * stepsPerEpoch}, {"total_steps", 2 * stepsPerEpoch}});
    for (int s = stepsPerEpoch; s <= 2 * stepsPerEpoch; s += stepsPerEpoch)
      writer.sample("test/accuracy", s, 10.0 * s, 0.8 + s / 10000.0);
    writer.finish(RunStatus::finished);
    return QString::fromStdString(id);
  };
  const QString one = write("1 rank", 128, true), two = write("2 ranks", 64, true), old = write("old", 100, false);
  CompareView view(dir.qdb());
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({one, two, old});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  ASSERT_TRUE(error.isEmpty()) << error.toStdString();
  ASSERT_EQ(view.data().stepsPerEpoch, (std::vector<double>{128, 64, 0}));
  view.setCurveMetric("test/accuracy");
  QCustomPlot* plot = view.curvePlot();
  ASSERT_EQ(plot->graphCount(), 3);
  EXPECT_EQ((plot->graph(0)->data()->end() - 1)->key, 256);  // by step: the 2-rank run looks half done
  EXPECT_EQ((plot->graph(1)->data()->end() - 1)->key, 128);
  view.setCurveX("epoch");
  ASSERT_EQ(plot->graphCount(), 3);
  EXPECT_EQ(plot->xAxis->label(), "epoch");
  for (int g : {0, 1}) {
    EXPECT_EQ(plot->graph(g)->data()->begin()->key, 1.0) << g;
    EXPECT_EQ((plot->graph(g)->data()->end() - 1)->key, 2.0) << g;
  }
  EXPECT_TRUE(plot->graph(2)->name().endsWith("(by step: epoch length unknown)"))
      << plot->graph(2)->name().toStdString();
  EXPECT_EQ((plot->graph(2)->data()->end() - 1)->key, 200);
}

}  // namespace lathe::ui

namespace lathe::ui {

TEST(GuiLiveReview, TheCostPanelTakesTheDesignsSpotScenario) {
  // The design simulates 900 interruptions an hour with 30 s restarts: the estimate's spot
  // scenario is the same, not the panel's 0 / 300 s beside it.
  CostPanel panel("");
  EXPECT_EQ(panel.interruptionsPerHour(), 0);
  EXPECT_EQ(panel.restartSeconds(), 300);
  nlohmann::json design = {{"name", "spot"}, {"cost", {{"interruptions_per_hour", 900}, {"restart_s", 30}}}};
  panel.setConfig(design);
  EXPECT_EQ(panel.interruptionsPerHour(), 900);
  EXPECT_EQ(panel.restartSeconds(), 30);
  panel.setInterruptionsPerHour(2);  // the user explores; another edit of the design keeps it
  design["name"] = "spot 2";
  panel.setConfig(design);
  EXPECT_EQ(panel.interruptionsPerHour(), 2);
  design["cost"].erase("interruptions_per_hour");  // back to the schema's 0: no simulation
  panel.setConfig(design);
  EXPECT_EQ(panel.interruptionsPerHour(), 0);
}

}  // namespace lathe::ui

namespace lathe::ui {

TEST(GuiLiveReview, TwoRanksOnTwoCoresReadOneThreadEach) {
  DesignerPanel d(QString::fromStdString(test::experiments_dir()));
  d.setDevices({{"kind", "cpu"}, {"gpus", nlohmann::json::array()}, {"cpu", {{"cores", 2}}}, {"max_devices", 2}});
  EXPECT_TRUE(d.devicesText().endsWith("CPU ranks: 2 cores, 2 threads each")) << d.devicesText().toStdString();
  d.form()->field("compute.devices")->setValue(2);
  EXPECT_TRUE(d.devicesText().endsWith("CPU ranks: 2 cores, 1 thread each")) << d.devicesText().toStdString();
}

}  // namespace lathe::ui

namespace lathe::ui {

TEST(GuiLiveReview, WhereThePruneAndFineTuningStartIsMarked) {
  // A prune + fine-tune run: training to step 128, prune, fine-tuning from 128, benchmark at 192.
  // Memory and samples/s jump at 128; the charts say why. A resume that logs its stage again adds
  // no second marker.
  ChartPanel panel;
  panel.applyBatch(runBatch("prune", RunStatus::finished,
                            {event("phase", {{"phase", "train"}, {"first_step", 0}, {"steps", 128}}),
                             event("phase", {{"phase", "prune"}, {"first_step", 128}, {"steps", 0}}),
                             event("phase", {{"phase", "finetune"}, {"first_step", 128}, {"steps", 64}}),
                             event("phase", {{"phase", "finetune"}, {"first_step", 128}, {"steps", 64}}),
                             event("phase", {{"phase", "benchmark"}, {"first_step", 192}, {"steps", 0}})},
                            192));
  LiveChart* chart = panel.chartFor("mem/peak_bytes");
  ASSERT_NE(chart, nullptr);
  ASSERT_EQ(chart->markerCount(), 2);
  EXPECT_EQ(chart->marker(0), std::make_pair(128.0, QString("prune")));
  EXPECT_EQ(chart->marker(1), std::make_pair(128.0, QString("finetune")));
}

}  // namespace lathe::ui

namespace lathe::ui {

TEST(GuiLiveReview, AShortChartHasFewerTicksThanATallOne) {
  // With the run's overview open under the charts, a chart has about 80 px of plot: 7 y labels
  // (2, 1.75, ... 0.5) overlapped there. The tick count follows the plot's height.
  LiveChart chart("Loss", {"train/loss"});
  std::vector<Point> loss;
  for (int64_t s = 1; s <= 60; ++s)
    loss.push_back({s, 10.0 * static_cast<double>(s), 2.0 / static_cast<double>(s)});
  chart.append("train/loss", loss);
  chart.resize(320, 150);
  chart.show();
  chart.refresh();
  for (int i = 0; i < 2; ++i)  // the second frame draws with the fitted ticks
    chart.replot(QCustomPlot::rpImmediateRefresh);
  ASSERT_LT(chart.axisRect()->height(), 100);
  EXPECT_LE(chart.yAxis->ticker()->tickCount(), 2);
  EXPECT_LE(chart.yAxis->tickVector().size(), 4);
  chart.resize(320, 500);
  for (int i = 0; i < 2; ++i)
    chart.replot(QCustomPlot::rpImmediateRefresh);
  EXPECT_GE(chart.yAxis->ticker()->tickCount(), 5);
}

}  // namespace lathe::ui

// Charts that tell the truth: a one-point series is drawn, the memory axis has a sensible minimum
// span, cumulative $ is never smoothed, the wheel zooms x only, the crosshair snaps to real
// samples (and says where a curve's nearest sample is), numbers never come in scientific
// notation, scatter points have tooltips, and the epoch axis still uses the training's steps.
#include <gtest/gtest.h>

#include "gui_test_util.h"
#include "widgets/ui/chart_panel.h"
#include "widgets/ui/compare_view.h"
#include "widgets/ui/live_chart.h"

namespace lathe::ui {

TEST(GuiChartTruth, OnePointSeriesIsDrawn) {
  LiveChart chart("Loss", {"train/loss", "test/loss"});
  for (int64_t s = 1; s <= 100; ++s)
    chart.append("train/loss", {{s, s * 10.0, 1.0 / s}});
  chart.append("test/loss", {{100, 1000, 0.4}});
  chart.refresh();
  EXPECT_EQ(chart.rawGraph("test/loss")->scatterStyle().shape(), QCPScatterStyle::ssDisc);
  EXPECT_EQ(chart.rawGraph("train/loss")->scatterStyle().shape(), QCPScatterStyle::ssNone);
}

TEST(GuiChartTruth, MemoryCostWheelAndEpochs) {
  ChartPanel panel;
  TailBatch b;
  b.runId = "r";
  b.reset = true;
  EventRecord started;
  started.kind = "started";
  started.fields = {{"total_steps", 939}, {"train_steps", 469}, {"price_usd_per_hour", 3.6}};
  b.events.push_back(started);
  std::vector<Point> mem, usd;
  for (int64_t s = 1; s <= 50; ++s) {
    mem.push_back({s, s * 100.0, (328.25 + 1.5 * s / 50.0) * (1 << 20)});
    usd.push_back({s, s * 100.0, 0.001 * s});
  }
  b.series = {{"mem/peak_bytes", mem}, {"cost/usd", usd}};
  panel.applyBatch(b);
  panel.refreshNow();
  LiveChart* m = panel.chartFor("mem/peak_bytes");
  ASSERT_NE(m, nullptr);
  EXPECT_GE(m->yAxis->range().size(), 0.2 * 329.75) << m->yAxis->range().lower << " " << m->yAxis->range().upper;
  EXPECT_LE(m->yAxis->range().lower, 328.25);
  EXPECT_GE(m->yAxis->range().upper, 329.75);
  LiveChart* c = panel.chartFor("cost/usd");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->smoothGraph("cost/usd")->data()->size(), 0);  // the panel smooths at 0.6 by default
  EXPECT_EQ(c->rawGraph("cost/usd")->pen().color().alpha(), 255);
  EXPECT_EQ(c->axisRect()->rangeZoom(), Qt::Horizontal);
  // Epochs still come from the training's steps, not the whole pipeline's (train.epochs unknown here: 0).
  panel.setXMode(XMapping::Mode::epoch);
  EXPECT_EQ(m->xAxis->label(), "step (epoch length not known yet)");
}

TEST(GuiChartTruth, CrosshairSnapsToRealSamples) {
  LiveChart chart("Loss", {"train/loss", "test/loss"});
  for (int64_t s = 1; s <= 120; ++s)
    chart.append("train/loss", {{s, s * 10.0, 1.0 / s}});
  chart.append("test/loss", {{100, 1000, 0.4}});
  chart.refresh();
  const auto [key, text] = chart.crosshairAt(50.3);
  EXPECT_EQ(key, 50.0);
  EXPECT_TRUE(text.startsWith("step 50\n")) << text.toStdString();
  EXPECT_TRUE(text.contains("\ntrain/loss: 0.02")) << text.toStdString();
  EXPECT_TRUE(text.contains("test/loss: 0.4 (at step 100)")) << text.toStdString();
  EXPECT_FALSE(text.contains("120.3"));
  EXPECT_EQ(chart.crosshairAt(100.2).first, 100.0);
  EXPECT_TRUE(chart.crosshairAt(100.2).second.contains("test/loss: 0.4\n"))
      << chart.crosshairAt(100.2).second.toStdString();
}

TEST(GuiChartTruth, NoScientificNotation) {
  EXPECT_EQ(plain_number(46940), "46,940");
  EXPECT_EQ(plain_number(1234567.8), "1,234,568");
  EXPECT_EQ(plain_number(0.8125), "0.8125");
  EXPECT_EQ(plain_number(3e-5), "0.00003");
  EXPECT_EQ(plain_number(0.5), "0.5");
  EXPECT_EQ(plain_number(-2.5), "-2.5");
  EXPECT_EQ(plain_number(0), "0");
  LiveChart chart("Throughput", {"train/samples_per_s"});
  chart.append("train/samples_per_s", {{1, 10, 46940}, {2, 20, 51234.5}});
  chart.refresh();
  EXPECT_EQ(chart.legendText("train/samples_per_s"), "train/samples_per_s  last 51,235  min 46,940  max 51,235");
}

TEST(GuiChartTruth, ScatterPointsHaveTooltips) {
  test::GuiTempDir dir;
  const nlohmann::json cfg = {{"name", "t"}};
  const std::string a = test::write_run(dir.db(), "small", cfg, {{"test/accuracy", {0.80}}, {"model/bytes", {100}}});
  const std::string b = test::write_run(dir.db(), "big", cfg, {{"test/accuracy", {0.90}}, {"model/bytes", {50000}}});
  CompareView view(dir.qdb());
  view.resize(900, 600);
  QString error = "not loaded";
  QObject::connect(&view, &CompareView::loaded, [&](const QString& e) { error = e; });
  view.setRuns({QString::fromStdString(a), QString::fromStdString(b)});
  ASSERT_TRUE(test::wait_until([&]() { return error != "not loaded"; }, 10000));
  view.showPage("scatter");
  view.show();
  test::wait_until([]() { return false; }, 200);
  view.setScatterAxes("model/bytes", "test/accuracy");
  QCustomPlot* plot = view.scatterPlot();
  const QPointF at(plot->xAxis->coordToPixel(50000) + 3, plot->yAxis->coordToPixel(0.90) - 2);
  const QString tip = view.scatterTooltipAt(at);
  EXPECT_TRUE(tip.startsWith("big (")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("model/bytes: 50,000")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("test/accuracy: 0.9")) << tip.toStdString();
  EXPECT_TRUE(tip.contains("Pareto front")) << tip.toStdString();
  EXPECT_TRUE(
      view.scatterTooltipAt(QPointF(plot->xAxis->coordToPixel(25000), plot->yAxis->coordToPixel(0.85))).isEmpty());
}

}  // namespace lathe::ui

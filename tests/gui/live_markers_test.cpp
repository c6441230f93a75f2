// The live charts mark spot notices, interruptions and resumes (issue 14) at their steps, on the
// step and wall-time axes, on charts added later too, and forget them for the next run.
#include <gtest/gtest.h>

#include "widgets/ui/chart_panel.h"

namespace lathe::ui {

TEST(GuiLiveChartMarkers, SpotNoticesInterruptionsAndResumesAreMarkedAtTheirSteps) {
  ChartPanel panel;
  auto batch = std::make_shared<TailBatch>();
  batch->runId = "r1";
  batch->reset = true;
  std::vector<Point> loss, other;
  for (int64_t s = 1; s <= 100; ++s) {
    loss.push_back({s, 10.0 * static_cast<double>(s), 1.0 / static_cast<double>(s)});
    other.push_back({s, 10.0 * static_cast<double>(s), 0.5});
  }
  batch->series = {{"train/loss", loss}, {"custom/metric", other}};
  auto event = [](const std::string& kind, nlohmann::json fields) {
    EventRecord e;
    e.kind = kind;
    e.fields = std::move(fields);
    return e;
  };
  batch->events = {event("checkpoint", {{"step", 30}}),  // not marked
                   event("spot/notice", {{"step", 40}, {"wall_ms", 405.0}}),
                   event("spot/interruption", {{"at_s", 0.5}, {"killed", true}, {"step_reached", 42}}),
                   event("resumed", {{"from_step", 30}, {"checkpoint", "/x/ckpt/step-30"}})};
  panel.applyBatch(*batch);
  LiveChart* chart = panel.chartFor("train/loss");
  ASSERT_NE(chart, nullptr);
  ASSERT_EQ(chart->markerCount(), 3);
  EXPECT_EQ(chart->marker(0), std::make_pair(40.0, QString("spot notice")));
  EXPECT_EQ(chart->marker(1), std::make_pair(42.0, QString("machine lost")));
  EXPECT_EQ(chart->marker(2), std::make_pair(30.0, QString("resumed from 30")));
  for (LiveChart* c : panel.charts())
    EXPECT_EQ(c->markerCount(), 3);

  panel.setXMode(XMapping::Mode::wall);  // seconds on the run clock
  EXPECT_DOUBLE_EQ(chart->marker(0).first, 0.405);
  EXPECT_DOUBLE_EQ(chart->marker(1).first, 0.5);
  EXPECT_DOUBLE_EQ(chart->marker(2).first, 0.3);  // the resume has no time: its step's sample's
  panel.refreshNow();                             // placing the items does not throw or move them
  EXPECT_DOUBLE_EQ(chart->marker(2).first, 0.3);

  LiveChart* added = panel.addChart("custom/metric");  // a chart added later gets the markers too
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(added->markerCount(), 3);
  panel.removeChart("custom/metric");

  auto next = std::make_shared<TailBatch>();  // another run: its own markers only
  next->runId = "r2";
  next->reset = true;
  panel.applyBatch(*next);
  EXPECT_EQ(chart->markerCount(), 0);
}

}  // namespace lathe::ui

namespace lathe::ui {

// Issue 15 item 9: the run's device/warning (GPU-Util and SM activity disagree) is marked at its step
// with both figures, as engine/run/gpu_sampler.h logs it.
TEST(GuiLiveChartMarkers, AGpuUtilWarningIsMarkedWithBothFigures) {
  ChartPanel panel;
  TailBatch batch;
  batch.runId = "gpu";
  batch.reset = true;
  std::vector<Point> loss;
  for (int64_t s = 1; s <= 50; ++s)
    loss.push_back({s, 10.0 * static_cast<double>(s), 1.0 / static_cast<double>(s)});
  batch.series = {{"train/loss", loss}};
  EventRecord e;
  e.kind = "device/warning";
  e.fields = {{"step", 20}, {"wall_ms", 200.0}, {"text", "..."}, {"gpu_util", 0.97}, {"sm_activity", 0.12}};
  batch.events = {e};
  panel.applyBatch(batch);
  LiveChart* chart = panel.chartFor("train/loss");
  ASSERT_NE(chart, nullptr);
  ASSERT_EQ(chart->markerCount(), 1);
  EXPECT_EQ(chart->marker(0), std::make_pair(20.0, QString("GPU-Util 97% vs SM activity 12%")));
}

}  // namespace lathe::ui

// LiveChart: legend last/min/max, the EMA graph equals ema() of the raw data, x mappings, and
// appends that repeat steps are ignored.
#include <gtest/gtest.h>

#include "widgets/ui/live_chart.h"

namespace lathe::ui {

TEST(GuiLiveChart, LegendAndEmaFollowTheData) {
  LiveChart chart("Loss", {"train/loss", "test/loss"});
  chart.setSmoothing(0.5);
  chart.append("train/loss", {{1, 10, 2.0}, {2, 20, 0.5}, {3, 30, 1.0}});
  chart.append("train/loss", {{3, 30, 9.0}, {4, 40, 0.75}});  // step 3 again: ignored
  EXPECT_EQ(chart.pointCount("train/loss"), 4);
  chart.refresh();
  EXPECT_EQ(chart.legendText("train/loss"), "train/loss  last 0.75  min 0.5  max 2");
  EXPECT_EQ(chart.legendText("test/loss"), "test/loss  (no data yet)");
  const auto expected = ema({2.0, 0.5, 1.0, 0.75}, 0.5);
  QCPGraph* smooth = chart.smoothGraph("train/loss");
  ASSERT_EQ(smooth->data()->size(), 4);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(smooth->data()->at(i)->value, expected[i], 1e-12);
  EXPECT_EQ(chart.rawGraph("train/loss")->data()->size(), 4);
  chart.setSmoothing(0);
  EXPECT_EQ(chart.smoothGraph("train/loss")->data()->size(), 0);
}

TEST(GuiLiveChart, ValueScaleShowsBytesAsMiB) {
  LiveChart chart("Memory (peak)", {"mem/peak_bytes"});
  chart.setValueScale(1 << 20, "MiB");
  chart.append("mem/peak_bytes", {{1, 10, 3.0 * (1 << 20)}, {2, 20, 1.5 * (1 << 20)}});
  chart.refresh();
  EXPECT_EQ(chart.legendText("mem/peak_bytes"), "mem/peak_bytes (MiB)  last 1.5  min 1.5  max 3");
  EXPECT_DOUBLE_EQ(chart.rawGraph("mem/peak_bytes")->data()->at(0)->value, 3.0);
}

TEST(GuiLiveChart, XAxisByStepEpochWallAndDollars) {
  LiveChart chart("Accuracy", {"test/accuracy"});
  chart.append("test/accuracy", {{25, 9000, 0.5}, {50, 18000, 0.6}});
  XMapping map;
  map.stepsPerEpoch = 10;
  map.usdPerHour = 3.6;
  const auto key0 = [&]() { return chart.rawGraph("test/accuracy")->data()->at(0)->key; };
  map.mode = XMapping::Mode::step;
  chart.setXMapping(map);
  EXPECT_DOUBLE_EQ(key0(), 25);
  map.mode = XMapping::Mode::epoch;
  chart.setXMapping(map);
  EXPECT_DOUBLE_EQ(key0(), 2.5);
  map.mode = XMapping::Mode::wall;
  chart.setXMapping(map);
  EXPECT_DOUBLE_EQ(key0(), 9.0);
  map.mode = XMapping::Mode::dollars;  // 9 s at $3.6/h = $0.009
  chart.setXMapping(map);
  EXPECT_NEAR(key0(), 0.009, 1e-15);
}

}  // namespace lathe::ui

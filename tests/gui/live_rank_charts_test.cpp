// Live view of a data-parallel run: its first dist/rank<i>/samples_per_s points bring two charts
// (samples/s per rank; comm fraction and each rank's utilisation) with the points seen so far, the
// "Add chart" menu no longer offers what they show, added charts are not mistaken for them, and the
// next run (one process) drops them.
#include <gtest/gtest.h>

#include <QSettings>

#include "gui_test_util.h"
#include "widgets/ui/chart_panel.h"

namespace lathe::ui {
namespace {

TailBatch run_batch(const std::string& id, bool ranks) {
  TailBatch b;
  b.runId = QString::fromStdString(id);
  b.reset = true;
  RunRecord r;
  r.id = id;
  r.name = "cnn-fashion";
  r.status = RunStatus::running;
  b.run = r;
  b.series = {{"train/samples_per_s", {Point{10, 100, 3000}}}};
  if (ranks) {
    for (int rank = 0; rank < 3; ++rank) {
      const std::string p = "dist/rank" + std::to_string(rank);
      b.series.push_back({p + "/samples_per_s", {Point{10, 100, 1000.0 + rank}, Point{20, 200, 1010.0 + rank}}});
      b.series.push_back({p + "/util", {Point{10, 100, 0.9}}});
    }
    b.series.push_back({"dist/comm_fraction", {Point{10, 100, 0.12}}});
    b.series.push_back({"dist/bytes_per_step", {Point{10, 100, 1.7e6}}});
  }
  return b;
}

}  // namespace

TEST(GuiLiveRankCharts, ADataParallelRunGetsPerRankAndCommCharts) {
  test::GuiTempDir dir;
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, QString::fromStdString(dir.file("settings")));
  ChartPanel panel;
  panel.applyBatch(run_batch("one", false));
  EXPECT_TRUE(panel.rankCharts().empty());
  EXPECT_EQ(panel.charts().size(), 6u);

  panel.applyBatch(run_batch("dp", true));
  ASSERT_EQ(panel.rankCharts().size(), 2u);
  EXPECT_EQ(panel.charts().size(), 8u);
  LiveChart* rates = panel.chartFor("dist/rank2/samples_per_s");
  ASSERT_NE(rates, nullptr);
  EXPECT_EQ(rates->metrics(),
            (QStringList{"dist/rank0/samples_per_s", "dist/rank1/samples_per_s", "dist/rank2/samples_per_s"}));
  EXPECT_EQ(rates->pointCount("dist/rank0/samples_per_s"), 2);
  LiveChart* shares = panel.chartFor("dist/comm_fraction");
  ASSERT_NE(shares, nullptr);
  EXPECT_TRUE(shares->hasMetric("dist/rank1/util"));
  EXPECT_EQ(shares->pointCount("dist/comm_fraction"), 1);
  // What the charts show is no longer offered; the rest of dist/* is.
  EXPECT_EQ(panel.addableMetrics(), (QStringList{"dist/bytes_per_step"}));
  // The next batch of the same run adds points, no charts.
  TailBatch more;
  more.runId = "dp";
  more.series = {{"dist/rank1/samples_per_s", {Point{30, 300, 1020}}}};
  panel.applyBatch(more);
  EXPECT_EQ(panel.rankCharts().size(), 2u);
  EXPECT_EQ(rates->pointCount("dist/rank1/samples_per_s"), 3);
  // An added chart is one of the user's, remembered as such, and stays after the rank charts go.
  panel.addChart("dist/bytes_per_step");
  EXPECT_EQ(panel.addedMetrics(), (QStringList{"dist/bytes_per_step"}));
  panel.applyBatch(run_batch("one-again", false));
  EXPECT_TRUE(panel.rankCharts().empty());
  EXPECT_EQ(panel.chartFor("dist/rank0/samples_per_s"), nullptr);
  EXPECT_EQ(panel.addedMetrics(), (QStringList{"dist/bytes_per_step"}));
  EXPECT_EQ(panel.charts().size(), 7u);
}

}  // namespace lathe::ui

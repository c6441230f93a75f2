// Parallel coordinates (issue 17 item 3): the model's axes (numeric / categorical detection,
// normalisation worked out by hand, log scale, refusals), reordering, brushing and the runs it
// keeps; the plot's curves hold exactly the brushed runs; the run browser's panel over a real
// store selects the brushed runs in the table and draws the table's selection back, and follows the
// table's filter.
#include <gtest/gtest.h>

#include <QItemSelectionModel>
#include <algorithm>
#include <cmath>

#include "gui_test_util.h"
#include "tests/support/two_sweeps.h"
#include "widgets/ui/parallel_coords_data.h"
#include "widgets/ui/parallel_coords_model.h"
#include "widgets/ui/parallel_coords_panel.h"
#include "widgets/ui/run_browser.h"

namespace lathe::ui {
namespace {

ParallelCoordsModel four_runs() {
  ParallelCoordsModel m;
  m.setRuns({"a", "b", "c", "d"}, {"run a", "run b", "run c", "run d"});
  m.addAxis("lr", {"0.001", "0.01", "0.1", "1"});
  m.addAxis("opt", {"sgd", "adamw", "sgd", ""});  // d has no optimizer key
  m.addNumericAxis("last test/accuracy", {0.5, 0.9, 0.7, std::nan("")});
  return m;
}

}  // namespace

TEST(GuiParallelModel, AxesAreNumericOrCategoricalAndNormalised) {
  ParallelCoordsModel m = four_runs();
  ASSERT_EQ(m.axisCount(), 3u);
  const ParallelAxis& lr = m.axis(0);
  EXPECT_FALSE(lr.categorical);
  EXPECT_DOUBLE_EQ(lr.lo, 0.001);
  EXPECT_DOUBLE_EQ(lr.hi, 1.0);
  // Linear: (v - 0.001) / 0.999.
  EXPECT_NEAR(lr.normalized[1], (0.01 - 0.001) / 0.999, 1e-12);
  EXPECT_DOUBLE_EQ(lr.normalized[3], 1.0);
  const ParallelAxis& opt = m.axis(1);
  EXPECT_TRUE(opt.categorical);
  EXPECT_EQ(opt.categories, (std::vector<std::string>{"adamw", "sgd"}));
  EXPECT_DOUBLE_EQ(opt.normalized[0], 1.0);  // sgd: the second of two categories
  EXPECT_DOUBLE_EQ(opt.normalized[1], 0.0);
  EXPECT_TRUE(std::isnan(opt.normalized[3]));
  EXPECT_DOUBLE_EQ(m.axis(2).normalized[1], 1.0);
  EXPECT_DOUBLE_EQ(m.axis(2).normalized[2], 0.5);  // (0.7 - 0.5) / 0.4
  EXPECT_EQ(m.label(1, 0), "adamw");
  EXPECT_THROW(m.addAxis("short", {"1"}), std::invalid_argument);
}

TEST(GuiParallelModel, LogScaleMovesValuesAndRefusesWhatItCannotPlace) {
  ParallelCoordsModel m = four_runs();
  m.setLog(0, true);  // decades: 0.001, 0.01, 0.1, 1 -> 0, 1/3, 2/3, 1
  EXPECT_NEAR(m.axis(0).normalized[1], 1.0 / 3, 1e-12);
  EXPECT_NEAR(m.axis(0).normalized[2], 2.0 / 3, 1e-12);
  EXPECT_NEAR(m.valueAt(0, 0.5), std::sqrt(0.001), 1e-12);
  EXPECT_THROW(m.setLog(1, true), std::invalid_argument);  // categories
  ParallelCoordsModel z;
  z.setRuns({"a", "b"}, {"a", "b"});
  z.addNumericAxis("loss", {0.0, 2.0});
  try {
    z.setLog(0, true);
    FAIL() << "a log axis over 0 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("axis 'loss'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(z.axis(0).log);
}

TEST(GuiParallelModel, BrushesKeepRunsInsideEveryBand) {
  ParallelCoordsModel m = four_runs();
  EXPECT_EQ(m.selectedCount(), 4u);
  EXPECT_FALSE(m.anyBrush());
  m.setBrush(2, 0.4, 1.0);  // accuracy >= 0.66: b (0.9) and c (0.7); d has none
  EXPECT_EQ(m.selectedRuns(), (std::vector<size_t>{1, 2}));
  m.setBrush(1, 0.9, 1.1);  // and sgd: c
  EXPECT_EQ(m.selectedRuns(), (std::vector<size_t>{2}));
  // Moving an axis takes its brush along.
  m.moveAxis(1, 0);
  EXPECT_EQ(m.axis(0).name, "opt");
  EXPECT_TRUE(m.axis(0).brush.has_value());
  EXPECT_EQ(m.axis(1).name, "lr");
  EXPECT_EQ(m.selectedRuns(), (std::vector<size_t>{2}));
  // A brushed axis that turns log keeps the same values inside the band.
  m.clearBrushes();
  m.setBrush(1, (0.01 - 0.001) / 0.999 - 1e-9, 1.0);  // lr >= 0.01: b, c, d
  EXPECT_EQ(m.selectedCount(), 3u);
  m.setLog(1, true);
  EXPECT_EQ(m.selectedRuns(), (std::vector<size_t>{1, 2, 3}));
  m.clearBrush(1);
  EXPECT_EQ(m.selectedCount(), 4u);
  EXPECT_THROW(m.moveAxis(0, 9), std::out_of_range);
}

TEST(GuiParallelPlot, CurvesHoldTheBrushedRunsAndTheHighlight) {
  ParallelCoordsModel m = four_runs();
  ParallelCoordsPlot plot;
  plot.resize(600, 300);
  plot.setModel(&m);
  plot.rebuild();
  int inside = 0;
  for (int c = 1; c <= ParallelCoordsPlot::kBuckets; ++c)
    inside += plot.runsIn(c);
  EXPECT_EQ(inside, 4);
  EXPECT_EQ(plot.runsIn(0), 0);
  // Two segments per run with all three values; d lacks the middle axis, so it draws none.
  int segments = 0;
  for (int c = 0; c <= ParallelCoordsPlot::kBuckets; ++c)
    segments += plot.segmentsIn(c);
  EXPECT_EQ(segments, 3 * 2);
  plot.brushAxis(2, 0.4, 1.0);
  EXPECT_EQ(plot.runsIn(0), 2);  // a and d outside
  // b has accuracy 0.9 (the top bucket on the last axis), c 0.7: t = (0.7 - 0.5) / 0.4, a hair under
  // 0.5 in doubles, so bucket floor(6 t) = 2.
  EXPECT_EQ(plot.runsIn(ParallelCoordsPlot::kBuckets), 1);
  const int bucketC = static_cast<int>((0.7 - 0.5) / (0.9 - 0.5) * ParallelCoordsPlot::kBuckets);
  EXPECT_EQ(bucketC, 2);
  EXPECT_EQ(plot.runsIn(1 + bucketC), 1);
  plot.setHighlighted({0});
  EXPECT_EQ(plot.runsIn(ParallelCoordsPlot::kBuckets + 1), 1);
  plot.replot();
  // Pixel to axis: the middle axis sits at the middle of the plot.
  const double x1 = plot.xAxis->coordToPixel(1);
  EXPECT_EQ(plot.axisAtPixel(x1 + 2), 1);
  EXPECT_EQ(plot.axisAtPixel(plot.xAxis->coordToPixel(0.5)), -1);
}

TEST(GuiParallelPanel, BrushingSelectsRunsInTheTableAndTheTableHighlightsBack) {
  test::GuiTempDir dir;
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    const nlohmann::json cfg = {
        {"name", "pc"},
        {"seed", i},
        {"train", {{"optimizer", {{"name", i % 2 ? "sgd" : "adamw"}, {"lr", 0.001 * (i + 1)}}}}}};
    ids.push_back(test::write_run(
        dir.db(), "pc lr=" + std::to_string(i), cfg,
        {{"test/accuracy", {0.1, 0.5 + 0.05 * i}}, {"train/loss", {1.0 / (i + 1)}}, {"study/custom", {double(i)}}}));
  }
  RunBrowser browser(dir.qdb());
  ASSERT_TRUE(
      test::wait_until([&]() { return !browser.model()->loading() && browser.model()->rowCount() == 6; }, 10000));
  ParallelCoordsPanel* panel = browser.parallelPanel();
  ASSERT_EQ(test::open_parallel(browser), "");
  EXPECT_EQ(panel->model().runCount(), 6u);
  const std::vector<std::string> knobs = panel->runs().knobs;
  EXPECT_NE(std::find(knobs.begin(), knobs.end(), "train.optimizer.lr"), knobs.end());
  EXPECT_NE(std::find(knobs.begin(), knobs.end(), "train.optimizer.name"), knobs.end());
  EXPECT_EQ(std::find(knobs.begin(), knobs.end(), "name"), knobs.end());  // the same in every run
  // Every metric, not only the run table's columns (its query asks for those alone).
  const std::vector<std::string>& metrics = panel->runs().metrics;
  EXPECT_NE(std::find(metrics.begin(), metrics.end(), "study/custom"), metrics.end());
  panel->setAxes({"train.optimizer.lr", "train.optimizer.name", "last test/accuracy"});
  EXPECT_THROW(panel->setAxes({"no.such.key"}), std::invalid_argument);
  ASSERT_EQ(panel->axes().size(), 3u);
  EXPECT_TRUE(panel->model().axis(1).categorical);

  // Brush accuracy >= 0.7 (runs 4 and 5: 0.70, 0.75); accuracy spans 0.5 .. 0.75.
  panel->plot()->brushAxis(2, (0.7 - 0.5) / 0.25 - 1e-9, 1.0);
  QStringList expected{QString::fromStdString(ids[4]), QString::fromStdString(ids[5])};
  QStringList brushed = panel->brushedRunIds();
  brushed.sort();
  expected.sort();
  EXPECT_EQ(brushed, expected);
  QStringList selected = browser.selectedRunIds();
  selected.sort();
  EXPECT_EQ(selected, expected);
  // Brushed runs are the coloured lines, not also bold; rows picked in the table come back bold.
  EXPECT_EQ(panel->plot()->runsIn(ParallelCoordsPlot::kBuckets + 1), 0);
  browser.selectRuns({QString::fromStdString(ids[0])});
  EXPECT_EQ(panel->plot()->runsIn(ParallelCoordsPlot::kBuckets + 1), 1);

  // Reorder: the current axis (accuracy, brushed last) moves left with its brush.
  panel->plot()->setCurrentAxis(2);
  panel->moveCurrentAxis(-1);
  EXPECT_EQ(panel->axes()[1], "last test/accuracy");
  EXPECT_EQ(panel->plot()->currentAxis(), 1);
  EXPECT_EQ(panel->model().selectedCount(), 2u);
  // Log on the lr axis; refused on the category axis with the reason.
  panel->plot()->setCurrentAxis(0);
  EXPECT_TRUE(panel->setCurrentAxisLog(true).isEmpty());
  EXPECT_TRUE(panel->model().axis(0).log);
  panel->plot()->setCurrentAxis(2);
  EXPECT_FALSE(panel->setCurrentAxisLog(true).isEmpty());
  // Adding an axis keeps the brush.
  panel->setAxes({"train.optimizer.lr", "last test/accuracy", "train.optimizer.name", "last train/loss"});
  EXPECT_EQ(panel->model().selectedCount(), 2u);
  EXPECT_TRUE(panel->model().axis(0).log);
  panel->clearBrushes();
  EXPECT_TRUE(panel->brushedRunIds().isEmpty());
  EXPECT_TRUE(browser.selectedRunIds().isEmpty());
  // A sweep prefix that matches nothing reads no runs.
  panel->prefixBox()->setText("nothing-like-this");
  ASSERT_EQ(test::load_parallel(panel, [&]() { panel->load(browser.model()->query()); }), "");
  EXPECT_EQ(panel->model().runCount(), 0u);
}

// The parallel coordinates follow the run table's filter (they kept the runs they were opened
// with): choosing a sweep or searching reloads them with those runs, keeping the axes; a brush made
// before is dropped with the browser's brushed selection; a filter event that reads the same runs
// does not reload; hidden, they reload when opened again.
TEST(GuiParallelPanel, FollowsTheRunTablesFilter) {
  test::GuiTempDir dir;
  const test::TwoSweeps two = test::write_two_sweeps(dir.db());
  const std::string& a = two.a;
  std::vector<std::string> a_runs = two.a_runs;
  RunBrowser browser(dir.qdb());
  ASSERT_TRUE(test::wait_until([&]() { return !browser.model()->loading() && browser.model()->total() == 6; }, 10000));
  ParallelCoordsPanel* panel = browser.parallelPanel();
  ASSERT_EQ(test::open_parallel(browser), "");
  ASSERT_EQ(panel->model().runCount(), 6u);
  panel->setAxes({"seed", "last test/accuracy"});
  panel->plot()->brushAxis(1, 0.0, 1.0);  // every run
  ASSERT_EQ(browser.selectedRunIds().size(), 6);

  // The sweep filter: its three runs, the axes kept, the brush and the brushed selection gone.
  QComboBox* sweeps = browser.sweepFilter();
  ASSERT_EQ(test::load_parallel(panel, [&]() { sweeps->setCurrentIndex(sweeps->findData(QString::fromStdString(a))); }),
            "");
  std::vector<std::string> ids = panel->runs().ids;
  std::sort(ids.begin(), ids.end());
  std::sort(a_runs.begin(), a_runs.end());
  EXPECT_EQ(ids, a_runs);
  EXPECT_EQ(panel->axes(), (std::vector<std::string>{"seed", "last test/accuracy"}));
  EXPECT_FALSE(panel->model().anyBrush());
  EXPECT_TRUE(browser.selectedRunIds().isEmpty());

  // The search box: sweep and search together.
  browser.searchBox()->setText("seed=1");
  ASSERT_EQ(test::load_parallel(panel, [&]() { emit browser.searchBox()->editingFinished(); }), "");
  ASSERT_EQ(panel->runs().ids.size(), 1u);
  EXPECT_EQ(panel->runs().names[0], "study-a seed=1");
  // The same filter again (focus left the box unchanged): no reload.
  EXPECT_EQ(test::load_parallel(
                panel, [&]() { emit browser.searchBox()->editingFinished(); }, 600),
            "timed out");

  // Hidden, a filter change reads nothing; opening them reads the filter's runs (both sweeps' seed=1).
  browser.parallelButton()->setChecked(false);
  EXPECT_EQ(test::load_parallel(
                panel, [&]() { sweeps->setCurrentIndex(0); }, 600),
            "timed out");
  ASSERT_EQ(test::open_parallel(browser), "");
  EXPECT_EQ(panel->runs().ids.size(), 2u);
  // Opened again with the filter unchanged: no reload ("Load runs" still reads them anew).
  browser.parallelButton()->setChecked(false);
  EXPECT_EQ(test::load_parallel(
                panel, [&]() { browser.parallelButton()->setChecked(true); }, 600),
            "timed out");
  EXPECT_EQ(test::load_parallel(panel, [&]() { emit panel->loadRequested(); }), "");
}

}  // namespace lathe::ui
